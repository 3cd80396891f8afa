"""What only a pair of runs shows: fusions lost or gained, ops that became slower, a
step's working set that grew. Each measure returns its kind's evidence (a dataclass);
:mod:`tracebridge.analysis.findings` judges it. The test run is measured against the control run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.schema import Category, is_eager_name
from ...model.trace import Trace
from ..common.kernels import fusion_parts, plain_kernel
from ..common.shift import shift
from ..common.types import PerSide
from ..common.xla import xla_instructions, xla_ops
from ..compare.result import Comparison, Row
from ..run.intervals import distinct
from ..run.memory import MemoryUse
from .evidence import FusionEvidence, RegressionEvidence, WorkingSetEvidence, XlaFusionEvidence
from .run_measures import StepView


@dataclass(frozen=True)
class Regressions:
    """Every candidate group, and how much of the steps' slowdown the matched ops explain."""

    groups: list[RegressionEvidence]
    matched_delta_ns: float             # all matched ops' change in shared time
    step_slowdown_ns: float             # the test's median step less the control's
    step_ns: float                      # the test's median step (1 where it has none)


def fusion_rows(comparison: Comparison, lost: bool) -> FusionEvidence | None:
    """Fusion rows whose fused kernel ran in the control run (``lost``) or in the test run.
    Parts that ran eagerly are eager_ops' finding (eager execution fuses nothing)."""
    rows = []
    for row in comparison.rows:
        if row.rule != "fusion" or any(is_eager_name(n) for n in row.names.control + row.names.test):
            continue
        control_fused = len(row.names.control) == 1 and _fuses(comparison.control, row.names.control[0])
        if control_fused == lost:
            rows.append(row)
    if not rows:
        return None
    delta = sum(r.delta_ns for r in rows)
    share = max(delta if lost else -delta, 0.0) / (comparison.steps.test.median_ns or 1.0)
    return FusionEvidence(share, delta, [r.key for r in rows], [r.delta_ns for r in rows],
                          [list(r.names.control) for r in rows], [list(r.names.test) for r in rows])


def xla_fusions(comparison: Comparison, views: PerSide[StepView]) -> XlaFusionEvidence | None:
    """Rows of the ``xla`` rule where XLA computed several TF ops in its kernels and the
    other run ran two or more separate ops: what XLA fused, largest (by the other run's
    time) first."""
    found = PerSide.of(lambda side: xla_ops(getattr(comparison, side)))
    xla_side = "test" if found.test else "control"
    other_side = "control" if xla_side == "test" else "test"
    computed, xla_trace = getattr(found, xla_side), getattr(comparison, xla_side)
    rows = [row for row in comparison.rows if row.rule == "xla"
            and len(getattr(row.names, other_side)) >= 2
            and len({op for name in getattr(row.names, xla_side) for op in computed.get(name, ())}) >= 2]
    if not rows or found.test and found.control:
        return None
    view = getattr(views, other_side)
    ops = view.trace.ops
    separate = per_step_medians(view.trace, (ops["end_ns"] - ops["start_ns"]).astype(np.float64), view.step_positions)
    instructions = xla_instructions(xla_trace)

    def median(row: Row, side: str) -> float:
        return getattr(row.median_ns, side)
    rows.sort(key=lambda row: (-median(row, other_side), row.key))
    saved = sum(median(row, other_side) - median(row, xla_side) for row in rows)
    step = comparison.steps.test.median_ns or 1.0
    # saved: the other run's separate ops less XLA's kernels, per step: what the fusions save
    # the run that has them, whichever run that is (the test run's gain, or its cost)
    return XlaFusionEvidence(
        share=max(saved, 0.0) / step, saved_ns=saved, xla_run=xla_side,
        ops=[row.key for row in rows],
        instructions=[[i for name in getattr(row.names, xla_side) for i in instructions.get(name, ())]
                      for row in rows],
        tf_ops=[list(dict.fromkeys(op for name in getattr(row.names, xla_side) for op in computed.get(name, ())))
                for row in rows],
        xla_ns=[median(row, xla_side) for row in rows],
        separate_ops=[list(getattr(row.names, other_side)) for row in rows],
        separate_ns=[[separate.get(name, 0.0) for name in getattr(row.names, other_side)] for row in rows])


def _fuses(trace: Trace, name: str) -> bool:
    ops = trace.ops
    rows = np.flatnonzero(ops["name"] == trace.string_id(name))
    return bool(len(rows)) and bool(fusion_parts(trace.strings[int(ops["kernel"][rows[0]])]))


def regressions(comparison: Comparison, views: PerSide[StepView]) -> Regressions | None:
    """Op types whose aligned ops are slower together with the interval's confidence: per
    op type, the shift of its rows' summed per-step time must clear the thresholds' margin
    of their summed control median (a kernel slower in every layer is one finding however
    many layers share its time, and the sum's spread is smaller than any one op's). None
    when the test steps are surely no slower (the upper bound of their shift at most the
    noise floor: ops that move while the step does not are concurrency, not a regression).
    A step that is only not *surely* slower does not veto: its total carries every op's
    noise, which can hide a regression the op type's own steps show plainly."""
    c, t = comparison.steps
    limits = comparison.thresholds
    moved = comparison.step_shift
    if moved is None or moved.high_ns <= limits.noise_ns:
        return None
    by_type: dict[str, list[Row]] = {}
    for row in comparison.rows:
        if not (row.names.control and row.names.test) or row.rule in ("optimizer", "fusion") \
                or (row.rule == "xla" and "/" in row.op_type) or any(is_eager_name(n) for n in row.names.test):
            # unmatched rows have no baseline; optimizer groups differ by design; a fusion,
            # Grappler's or XLA's (a row of several op types), is fusion's or xla_fusion's
            continue
        by_type.setdefault(plain_kernel(row.op_type.split("/")[0]), []).append(row)
    shared = views.map(lambda view: per_step_medians(view.trace, shared_times(view.trace), view.step_positions))

    def delta_of(rows: list[Row]) -> float:
        return sum(sum(shared.test.get(n, 0.0) for n in r.names.test) -
                   sum(shared.control.get(n, 0.0) for n in r.names.control) for r in rows)
    # Only an op type whose test time could make its share is tested (its growth in shared
    # time is at most its time), and each of those is a test of its own: their bounds hold
    # together at the confidence asked for (Bonferroni), so a model with many large op types
    # is no likelier to name one from noise.
    least = limits.regression_min_share * t.median_ns
    by_type = {op_type: rows for op_type, rows in by_type.items() if sum(r.median_ns.test for r in rows) >= least}
    level = 1.0 - (1.0 - limits.confidence) / max(len(by_type), 1)
    groups = []
    for op_type, rows in by_type.items():
        per_step = PerSide.of(lambda side: sum(getattr(comparison.row_steps[r.key], side) for r in rows))
        group_shift = shift(per_step.control, per_step.test, level)
        if not group_shift.above(limits.margin(sum(r.median_ns.control for r in rows))):
            continue
        slower = sorted((r for r in rows if r.delta_ns > 0), key=lambda r: -r.delta_ns)  # the ops that grew
        groups.append(RegressionEvidence(op_type, ", ".join(dict.fromkeys(_top_scope(r.names.test[0]) for r in slower)),
                                         [r.key for r in slower], sum(r.median_ns.control for r in rows),
                                         sum(r.median_ns.test for r in rows), delta_of(rows),
                                         _kernel_change(comparison, slower) or None, group_shift))
    matched = [r for r in comparison.rows if r.names.control and r.names.test]
    return Regressions(groups, delta_of(matched), t.median_ns - c.median_ns, t.median_ns or 1.0)


def _top_scope(name: str) -> str:
    return name.split("/")[0] if "/" in name else "top level"


def _kernel_change(comparison: Comparison, rows: list[Row]) -> str:
    """The likely cause when the trace shows one: other kernels for the same ops."""
    kernels = []
    for trace, side in ((comparison.control, "control"), (comparison.test, "test")):
        ids = [trace.string_id(n) for n in {n for r in rows for n in getattr(r.names, side)}]
        ops = trace.ops
        found = sorted({trace.strings[k] for k in np.unique(ops["kernel"][np.isin(ops["name"], ids)]).tolist()})
        kernels.append(found)
    if kernels[0] and kernels[1] and kernels[0] != kernels[1]:
        return f"different kernel: {', '.join(kernels[0])} -> {', '.join(kernels[1])}"
    return ""


def working_set_growth(memory: PerSide[MemoryUse], views: PerSide[StepView]) -> WorkingSetEvidence | None:
    """The test steps' working sets against the control's, where both runs have them."""
    if not (memory.control.allocator and memory.test.allocator and
            views.control.step_positions and views.test.step_positions):
        return None
    base = float(np.median([memory.control.working_set_per_step[p] for p in views.control.step_positions]))
    least = min(memory.test.working_set_per_step[p] for p in views.test.step_positions)
    return WorkingSetEvidence(memory.control, memory.test, base, least, views.test.numbers())


def shared_times(trace: Trace) -> np.ndarray:
    """Each TF op's time with the device shared out among the ops running with it: every
    moment counts 1/k for each of the k ops running then on the op's device. A TF2 executor
    runs independent gradient ops side by side where a TF1 session ran them one after the
    other (measured: a weight gradient overlapped 99% of its time against 0-100%), so on a few
    cores an op's wall time grows with what runs beside it; its shared time much less."""
    ops = trace.ops
    out = np.zeros(len(trace), dtype=np.float64)
    counted = ops["category"] == Category.OP
    for device in np.unique(ops["device"][counted]).tolist():
        rows = np.flatnonzero(counted & (ops["device"] == device))
        start, end = ops["start_ns"][rows], ops["end_ns"][rows]
        edges = distinct(np.concatenate([start, end]))  # (np.unique's hashing: 3.5 s on 6M)
        # ops running in each segment [edges[i], edges[i+1]): starts so far less ends so far
        running = (np.searchsorted(np.sort(start), edges[:-1], side="right")
                   - np.searchsorted(np.sort(end), edges[:-1], side="right"))
        weight = np.where(running > 0, np.diff(edges) / np.maximum(running, 1), 0.0)
        cumulative = np.concatenate([[0.0], np.cumsum(weight)])
        out[rows] = cumulative[np.searchsorted(edges, end)] - cumulative[np.searchsorted(edges, start)]
    return out


_CELLS = 1 << 22  # op names x steps summed at a time (32 MB of float64)


def per_step_medians(trace: Trace, values: np.ndarray, step_positions: list[int]) -> dict[str, float]:
    """Per op name: the median over ``step_positions`` (indices into ``trace.steps``) of the
    per-step sum of ``values``, the rows added in their order. The names' steps are summed
    in a table a block of names at a time (a row at a time in Python took 12 s on 3M rows)."""
    ops = trace.ops
    rows = np.flatnonzero(np.isin(ops["step"], step_positions) & (ops["category"] == Category.OP))
    if not len(rows):
        return {}
    width = max(len(step_positions), 1)
    slot_of = np.full(int(max(step_positions)) + 1, -1, dtype=np.int64)
    slot_of[np.asarray(step_positions, dtype=np.int64)] = np.arange(len(step_positions))
    names, which = np.unique(ops["name"][rows], return_inverse=True)
    order = np.argsort(which, kind="stable")  # by name, each name's rows in their order
    rows, which = rows[order], which[order]
    cells = which * width + slot_of[ops["step"][rows]]
    ends = np.searchsorted(which, np.arange(len(names) + 1))  # each name's rows: ends[k]:ends[k + 1]
    block = max(_CELLS // width, 1)
    found: dict[str, float] = {}
    for first in range(0, len(names), block):
        last = min(first + block, len(names))
        lo, hi = ends[first], ends[last]
        sums = np.bincount(cells[lo:hi] - first * width, weights=values[rows[lo:hi]],
                           minlength=(last - first) * width).reshape(last - first, width)
        for name, median in zip(names[first:last].tolist(), np.median(sums, axis=1).tolist()):
            found[trace.strings[name]] = float(median)
    return found


__all__ = ["Regressions",
           "fusion_rows", "xla_fusions", "per_step_medians", "regressions", "shared_times", "working_set_growth"]
