"""Comparing two runs of the same model, TF1 or TF2 either side: which ops align, where
time moved, what appeared or vanished.

``compare(control, test)`` aligns the op names of both runs, stage by stage; every row
records the rule that matched it:

0. ``xla``: where one run is XLA-compiled, its thunk and kernel rows pair with the other
   run's ops through the HLO (:mod:`.rules.xla`): each with the op its instruction is
   named or made for, placed by the graphs' alignment (else by name); a fusion and every op
   it computes form one row, keyed by the fusion and its TF ops;
   ``structure`` and ``group``: where both runs recorded their graphs (captures do), the
   graphs align first (:mod:`.graphs.structure`): variables as anchors, then along dataflow;
   regions computed differently on each side (fused batch norm, a dropout's random
   numbers, a bias gradient) pair as groups. Without graphs (old files) the name rules
   below do all the work, and a note says so;
1. ``user``: the caller's regular expressions (``pattern=replacement``) rewrite names first;
2. ``exact``: the same name once function wrappers (``StatefulPartitionedCall/``,
   ``PartitionedCall/``, ``__inference_*``) and Keras 3 uniquifiers on scopes (``dense_1/``
   -> ``dense/``) are removed;
3. ``normalized``: the same name without leading model scopes (``mlp/dense/Relu`` and
   ``dense/Relu``), for ops of the same type;
4. ``gradient``: TF1's ``gradients/<scope>/<op>_grad/<Op>`` and TF2's
   ``gradient_tape/<scope>/<Op>`` describe the same gradient op;
5. ``fusion``: a fused kernel on one side (``_FusedMatMul``, oneDNN's
   ``_MklNativeFusedBatchNormEx``, ...) and the ops it fused, unfused on the other side in
   the same scope, form one group; the row's key names the fusion;
6. ``optimizer``: variable updates differ entirely between TF1 and TF2
   (``ResourceApplyAdam`` vs ``AssignAddVariableOp``s and their arithmetic), so they pair
   as groups: with graphs, one per trainable variable through the paired variables, and
   the shared rest as one (:mod:`.rules.optimizer`);
7. ``type+position``: what is left pairs up by kernel type and order within the step; with
   graphs only inside scopes the rules above matched to each other (a note says how many),
   so what is left elsewhere stays unmatched rather than paired across the model.

Then left-over ops join rows instead of making their own: a TF1 Session's lowered loop
control flow (``Enter``, ``Merge``, ``Switch``, ``NextIteration``, ``LoopCond``, ``Exit``,
which TF2's profiler never records) joins its loop condition's row (:mod:`.rules.loops`).

Kernel types are compared by their plain names (:mod:`.common.kernels`), so a oneDNN run
(``_MklMatMul``) aligns with a run without oneDNN (``MatMul``).

Statistics are per step: each row's per-step totals give a median, p90 and minimum after
``warmup`` steps, and the shift of the test run's totals against the control's with its
interval (:mod:`.common.shift`); ``change`` is ``+`` (test slower), ``-`` (faster) or ``=`` as the
interval clears the margin of :class:`~.common.thresholds.Thresholds` or not. ``coverage`` is the
share of each run's op time that was matched.

The work is split by concern: :mod:`.sides` prepares each run,
:mod:`.align` (with :mod:`.names`, :mod:`.rules.fusion`,
:mod:`.rules.optimizer` and :mod:`.rules.xla`) pairs ops,
:mod:`.stats` computes the rows' statistics, :mod:`.result` holds the result.
"""

from __future__ import annotations

import re

from ...model.trace import Trace
from .align import align_ops
from .layers import layer_rows, map_layers
from .names import RULE_CONFIDENCE, pair_key
from .result import SORTS, Comparison, Finder, Row
from .sides import chosen_time, prepare_side, self_times
from .stats import (add_both_times, coverage, groups, make_row, rule_shares, step_durations,
                            step_stats)
from ..common.types import PerSide, TimeBasis
from ..run.doctor import trace_notes
from ..common.kernels import trace_kernel_family
from ..run.memory import memory_in_use
from ..run.steady import select_steps
from ..common.shift import shift
from ..graphs.recorded_graph import SHAPE_ONLY_OPS, graph_node_name
from ..graphs.structure import align_graphs
from ..common.thresholds import DEFAULT, Thresholds


def compare(control: Trace, test: Trace, *, rules: list[str] | None = None, warmup: int | None = None,
            thresholds: Thresholds = DEFAULT, threshold: float | None = None, noise_ns: int | None = None,
            time: TimeBasis | str = TimeBasis.AUTO, find: Finder | None = None) -> Comparison:
    """Align ``test`` against ``control``. ``rules``: ``"pattern=replacement"`` regular
    expressions applied to op names of both runs first; ``warmup``: steps of each run left
    out of the statistics (None, the default: the steps that hold one-time work, found from
    each trace and named in a note, :mod:`..run.steady`; 0 keeps every step);
    ``thresholds``: every threshold the rows and findings are decided on (``threshold`` and
    ``noise_ns`` set its ``change`` and ``noise_ns``): a row changes (``+``/``-``) when the
    interval of its per-step shift clears ``change`` (a share of its control median) and
    ``noise_ns``. ``time`` (a :class:`TimeBasis` or its
    value): ``"device"`` compares the device time credited to each TF op (kernels and
    copies, counted once), ``"host"`` the TF ops' own time, ``"auto"`` device time when
    both runs have some. ``find``: how the comparison's findings are found
    (:data:`tracebridge.analysis.findings.comparison_findings`, which ``tracebridge.compare``
    and the CLI hand in); without it the comparison has rows and no findings."""
    limits = thresholds.with_options(change=threshold, noise_ns=noise_ns)
    time = chosen_time(control, test, time)
    compiled = [user_rule(text) for text in rules or []]
    traces = PerSide(control, test)
    notes = [f"{name}: {note}" for name, trace in traces.items()
             for note in trace_notes(trace)]  # what the doctor finds in each run
    # The steady state of each run, or the same warm-up on both sides; a side too short for the
    # warm-up keeps all its steps, said aloud.
    steady = traces.map(lambda trace: select_steps(trace, warmup))
    skipped = steady.map(lambda selection: selection.left_out)
    for (name, trace), selection in zip(traces.items(), steady):
        if warmup and not selection.left_out:
            notes.append(f"warmup {warmup}: {name} has only {len(trace.steps)} step(s); all of them are kept "
                         f"(a multi-step run saved as one RunMetadata is one step: keep steps with .json "
                         f"or .xplane.pb)")
        if selection.note():
            notes.append(f"{name}: {selection.note()}")
    kept = steady.map(lambda selection: selection.positions)
    sides = PerSide(prepare_side(control, compiled, kept.control, time),
                    prepare_side(test, compiled, kept.test, time))
    alignment = None
    if sides.control.graph and sides.test.graph:
        alignment = align_graphs(sides.control.graph, sides.test.graph)
    else:
        missing = " and ".join(name for name, side in sides.items() if not side.graph)
        notes.append(f"no graph recorded in {missing}: aligned by names and position only "
                     "(captures record the graph that ran; old files have none)")
    layer_map = map_layers(sides.control, sides.test, alignment)
    pairs = align_ops(sides.control, sides.test, bool(compiled), alignment, notes, layer_map)
    made = [make_row(pair, sides, limits) for pair in pairs]
    rows = [row for row, _ in made]
    if alignment is not None:
        share = _structure_share(alignment, sides.control)
        if share < _STRUCTURE_LOW:
            notes.append(f"the graphs' structure paired {'no' if not share else f'only {share:.0%} of the'} op "
                         f"time that does work (the port computes the model another way): rows pair by names, "
                         f"types and position within each layer and phase")
    add_both_times(rows, control, test)
    rows.sort(key=SORTS["change"])  # largest changes first, then the rows of one run only
    step_pairs = list(zip([control.steps[p].number for p in kept.control], [test.steps[p].number for p in kept.test]))
    steps = PerSide(step_stats(control, kept.control), step_stats(test, kept.test))
    note = find.withheld(steps.map(lambda s: s.count), limits) if find is not None else None
    if note:
        notes.append(note)
    return Comparison(control=control, test=test, rows=rows, coverage=coverage(pairs, sides), step_pairs=step_pairs,
                      steps=steps, step_shift=shift(step_durations(control, kept.control),
                                                    step_durations(test, kept.test), limits.confidence),
                      row_steps={row.key: per_step for row, per_step in made},
                      groups=groups(rows, sides), memory=traces.map(memory_in_use),
                      kernels=traces.map(trace_kernel_family), time=time, rule_shares=rule_shares(pairs, sides),
                      warmup=skipped, thresholds=limits, notes=notes,
                      layers=layer_rows(layer_map, sides, rows) if layer_map is not None else [],
                      layer_map=layer_map, find=find, steady=steady)


# Kernels that move, reshape or name data, or only run the graph: an op of these does no work
# a user would compare. (Where the structure pairs only these, the port is shaped otherwise.)
_NO_WORK = frozenset({*SHAPE_ONLY_OPS, "Const", "NoOp", "ReadVariableOp", "VarHandleOp", "Shape", "Fill",
                      "Placeholder", "_Arg", "_Retval", "Pack", "ConcatOffset", "BroadcastGradientArgs"})


_STRUCTURE_LOW = 0.1  # below this share of the control's op time, the note says the structure did not carry


def _structure_share(alignment, side) -> float:
    """The share of the control run's op time in ops that do work (not shape or bookkeeping
    ops) that the graphs' structure paired, node to node."""
    paired = {c for c, _ in alignment.pairs}
    working = [n for n in side.names if side.plain_type[n] not in _NO_WORK]
    total = sum(side.total[n] for n in working)
    return sum(side.total[n] for n in working if graph_node_name(n) in paired) / total if total else 1.0


def user_rule(text: str):
    pattern, sep, replacement = text.partition("=")
    if not sep:
        raise ValueError(f"a rule is PATTERN=REPLACEMENT, not {text!r}")
    return re.compile(pattern), replacement


__all__ = ["RULE_CONFIDENCE", "Comparison", "Finder", "PerSide", "Row", "Thresholds", "TimeBasis", "compare", "pair_key", "self_times"]
