"""Comparing two runs of the same model, TF1 or TF2 either side: which ops align, where
time moved, what appeared or vanished.

``compare(control, test)`` aligns the op names of both runs, stage by stage; every row
records the rule that matched it:

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
   (``ResourceApplyGradientDescent`` vs ``AssignSubVariableOp`` and its ``mul``), so each
   side's updates are compared as one group;
7. ``type+position``: what is left pairs up by kernel type and order within the step.

Kernel types are compared by their plain names (:mod:`.kernels`), so a oneDNN run
(``_MklMatMul``) aligns with a run without oneDNN (``MatMul``).

Statistics are per step: each row's per-step totals give a median, p90 and minimum after
``warmup`` steps; ``change`` is ``+`` (test slower), ``-`` (faster) or ``=`` (within the
noise threshold). ``coverage`` is the share of each run's op time that was matched.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from ..model.trace import Trace
from .eager_align import group_fusions_by_position
from .kernels import fusion_parts, plain_kernel, trace_kernel_family
from ..errors import OptionError
from ..model.accelerator import device_rows
from ..model.accelerator import self_times as accelerator_self_times
from .structure import Alignment, align_graphs, decode_graph
from .summary import counted_rows, summarize

_WRAPPER = re.compile(r"^(?:StatefulPartitionedCall(?:_\d+)?|PartitionedCall(?:_\d+)?|__inference_[^/]*|"
                      r"__forward_[^/]*|__backward_[^/]*)/")
_UNIQUIFIED_SCOPE = re.compile(r"^([a-z][a-z0-9_]*?)_\d+$")
_TF1_GRADIENT = re.compile(r"^(?:.*/)?gradients(?:_\d+)?/(?:gradients/)?(?P<rest>.+)$")
_TF2_GRADIENT = re.compile(r"^(?:.*/)?gradient_tape/(?P<rest>.+)$")
_UPDATE_TYPES = {"ResourceApplyGradientDescent", "ApplyGradientDescent", "AssignSubVariableOp",
                 "AssignAddVariableOp", "ResourceApplyAdam", "ApplyAdam", "ResourceApplyMomentum",
                 "ResourceApplyKerasMomentum", "AssignVariableOp"}
_OPTIMIZER_SCOPES = re.compile(r"(?:^|/)(?:GradientDescent|SGD|sgd(?:_\d+)?|Adam|adam(?:_\d+)?|"
                               r"Momentum|optimizer|training)(?:/|$)")


@dataclass
class Row:
    """One aligned op (or group of ops) of both runs; times in nanoseconds."""

    key: str
    rule: str
    op_type: str
    control_names: tuple[str, ...]
    test_names: tuple[str, ...]
    control_count: int = 0
    test_count: int = 0
    control_total_ns: int = 0
    test_total_ns: int = 0
    control_self_ns: int = 0
    test_self_ns: int = 0
    control_median_ns: float = 0.0
    test_median_ns: float = 0.0
    control_p90_ns: float = 0.0
    test_p90_ns: float = 0.0
    control_min_ns: float = 0.0
    test_min_ns: float = 0.0
    delta_ns: float = 0.0
    ratio: float | None = None
    change: str = "="
    # Both kinds of time of the row's ops (totals), whichever the comparison aligned on.
    control_device_ns: int = 0
    test_device_ns: int = 0
    control_host_ns: int = 0
    test_host_ns: int = 0
    confidence: float = 0.0  # how sure the pairing is, 0..1 (0 for unmatched rows): RULE_CONFIDENCE


@dataclass
class Comparison:
    """``control`` against ``test``: aligned rows, coverage, steps, groupings, memory."""

    control: Trace
    test: Trace
    rows: list[Row]
    coverage: dict[str, float]
    step_pairs: list[tuple[int, int]]
    steps: dict[str, dict]
    groups: dict[str, list[dict]] = field(default_factory=dict)
    memory: dict[str, dict[str, int]] = field(default_factory=dict)
    threshold: float = 0.1
    kernels: dict[str, str] = field(default_factory=dict)  # side -> "oneDNN", "plain", "unknown"
    time: str = "host"  # the time compared: "device" (kernels per TF op) or "host" (TF ops)
    rule_shares: dict[str, dict[str, float]] = field(default_factory=dict)  # rule -> side -> share of op time
    notes: list[str] = field(default_factory=list)

    @property
    def unmatched(self) -> dict[str, list[Row]]:
        return {"control": [r for r in self.rows if not r.test_names],
                "test": [r for r in self.rows if not r.control_names]}

    def to_dict(self) -> dict:
        return {"coverage": self.coverage, "steps": self.steps, "step_pairs": self.step_pairs,
                "threshold": self.threshold, "rows": [asdict(r) for r in self.rows],
                "unmatched": {side: [r.key for r in rows] for side, rows in self.unmatched.items()},
                "groups": self.groups, "memory": self.memory, "kernels": self.kernels, "time": self.time,
                "rule_shares": self.rule_shares, "notes": self.notes}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        out = io.StringIO()
        columns = [f for f in Row.__dataclass_fields__]
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in self.rows:
            values = asdict(row)
            values["control_names"] = ";".join(row.control_names)
            values["test_names"] = ";".join(row.test_names)
            writer.writerow([values[c] for c in columns])
        return out.getvalue()

    def to_text(self, top: int = 25) -> str:
        c, t = self.steps["control"], self.steps["test"]
        lines = [
            f"control: {self.control.source_format}, {c['count']} steps, median step {_ms(c['median_ns'])}",
            f"test:    {self.test.source_format}, {t['count']} steps, median step {_ms(t['median_ns'])}",
            f"coverage: control {self.coverage['control']:.1%}, test {self.coverage['test']:.1%} "
            f"of {'device' if self.time == 'device' else 'op'} time matched",
        ]
        if self.kernels and self.kernels["control"] != self.kernels["test"] and "unknown" not in self.kernels.values():
            lines.append(f"kernels: control {self.kernels['control']}, test {self.kernels['test']}: "
                         "kernels are compared by their plain names (_MklMatMul as MatMul)")
        if self.rule_shares:
            shares = ", ".join(f"{rule} {share['control']:.1%}/{share['test']:.1%}"
                               for rule, share in self.rule_shares.items())
            lines.append(f"matched by rule (control/test op time): {shares}")
        lines += [f"note: {note}" for note in self.notes]
        lines += [
            "",
            f"{'':2}{'control':>11}{'test':>11}{'delta':>11}{'ratio':>8}{'conf':>6}  {'rule':13} op",
        ]
        for row in self.rows[:top]:
            ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
            lines.append(f"{row.change:2}{_ms(row.control_median_ns):>11}{_ms(row.test_median_ns):>11}"
                         f"{_ms(row.delta_ns, signed=True):>11}{ratio:>8}{row.confidence:>6.2f}  "
                         f"{row.rule:13} {row.key}")
        if len(self.rows) > top:
            lines.append(f"  ... {len(self.rows) - top} more rows")
        for side, rows in self.unmatched.items():
            if rows:
                shown = ", ".join(f"{r.key} ({_ms(getattr(r, side + '_total_ns'))})" for r in rows[:10])
                lines.append(f"unmatched in {side}: {shown}{' ...' if len(rows) > 10 else ''}")
        return "\n".join(lines)

    __str__ = to_text


def compare(control: Trace, test: Trace, *, rules: list[str] | None = None, warmup: int = 0,
            threshold: float = 0.1, noise_ns: int = 2_000, time: str = "auto") -> Comparison:
    """Align ``test`` against ``control``. ``rules``: ``"pattern=replacement"`` regular
    expressions applied to op names of both runs first; ``warmup``: steps of each run left
    out of the statistics; a row changes (``+``/``-``) when its per-step median moves by
    more than ``threshold`` (a share) and more than ``noise_ns``. ``time``: ``"device"``
    compares the device time credited to each TF op (kernels and copies, counted once),
    ``"host"`` the TF ops' own time, ``"auto"`` device time when both runs have some."""
    time = _chosen_time(control, test, time)
    compiled = [_rule(text) for text in rules or []]
    notes = []
    skipped = {}
    for name, trace in (("control", control), ("test", test)):
        # The same warm-up on both sides; a side too short for it keeps all its steps, said aloud.
        skipped[name] = warmup if len(trace.steps) > warmup else 0
        if warmup and not skipped[name]:
            notes.append(f"warmup {warmup}: {name} has only {len(trace.steps)} step(s); all of them are kept "
                         f"(a multi-step run saved as one RunMetadata is one step: keep steps with .json "
                         f"or .xplane.pb)")
    sides = {name: _side(trace, compiled, skipped[name], time)
             for name, trace in (("control", control), ("test", test))}
    alignment = None
    if sides["control"].graph and sides["test"].graph:
        alignment = align_graphs(sides["control"].graph, sides["test"].graph)
    else:
        missing = " and ".join(name for name, side in sides.items() if not side.graph)
        notes.append(f"no graph recorded in {missing}: aligned by names and position only "
                     "(captures record the graph that ran; old files have none)")
    pairs = _align(sides["control"], sides["test"], bool(compiled), alignment)
    rows = [_row(pair, sides, threshold, noise_ns) for pair in pairs]
    _add_both_times(rows, control, test)
    rows.sort(key=lambda r: (-(r.delta_ns if r.control_names and r.test_names else
                               max(r.control_median_ns, r.test_median_ns)), r.key))
    coverage = {}
    for name, side in sides.items():
        matched = sum(side.total[n] for pair in pairs if pair.control and pair.test
                      for n in (pair.control if name == "control" else pair.test))
        coverage[name] = matched / side.all_time if side.all_time else 1.0
    step_pairs = list(zip([s.number for s in control.steps][skipped["control"]:],
                          [s.number for s in test.steps][skipped["test"]:]))
    groups = _groups(rows)
    groups["device"] = _device_groups(sides)
    return Comparison(control=control, test=test, rows=rows, coverage=coverage, step_pairs=step_pairs,
                      steps={name: _step_stats(side.trace, skipped[name]) for name, side in sides.items()},
                      groups=groups, memory={name: _peaks(side.trace) for name, side in sides.items()},
                      threshold=threshold,
                      kernels={name: trace_kernel_family(side.trace) for name, side in sides.items()},
                      time=time, rule_shares=_rule_shares(pairs, sides), notes=notes)


# --- the time compared: a layer over the rows, so the alignment stays what it is ----------
def _chosen_time(control: Trace, test: Trace, time: str) -> str:
    if time not in ("auto", "device", "host"):
        raise OptionError(f"time={time!r}: choose 'device', 'host' or 'auto'")
    has_device = [bool(device_rows(t.ops["category"], t.ops["flags"]).any()) for t in (control, test)]
    if time == "device" and not all(has_device):
        side = "control" if not has_device[0] else "test"
        raise OptionError(f"time='device': the {side} run has no device activity (kernels or copies)")
    if time == "auto":
        return "device" if all(has_device) else "host"
    return time


def _timed_rows(trace: Trace, time: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows compared and each one's time: device rows and their self time, or the
    counted host rows and their durations."""
    ops = trace.ops
    if time == "device":
        mask = device_rows(ops["category"], ops["flags"])
        durations = np.zeros(len(trace), dtype=np.int64)
        durations[mask] = accelerator_self_times(ops["start_ns"], ops["end_ns"], ops["lane"], np.flatnonzero(mask))
        return mask, durations
    mask, _ = counted_rows(trace)
    return mask, (ops["end_ns"] - ops["start_ns"]).astype(np.int64)


def _add_both_times(rows: list[Row], control: Trace, test: Trace) -> None:
    """Every row shows its ops' device and host time, whichever was compared."""
    for side, trace in (("control", control), ("test", test)):
        per_name = {row["key"]: row for row in summarize(trace).by_op}
        for row in rows:
            names = getattr(row, f"{side}_names")
            setattr(row, f"{side}_device_ns", sum(per_name[n]["device_ns"] for n in names if n in per_name))
            setattr(row, f"{side}_host_ns", sum(per_name[n]["host_ns"] for n in names if n in per_name))



def _rule_shares(pairs: list["_Pair"], sides: dict[str, "_Side"]) -> dict[str, dict[str, float]]:
    """Per rule, the share of each side's op time its rows matched (together: the coverage)."""
    shares: dict[str, dict[str, float]] = {}
    for pair in pairs:
        if not (pair.control and pair.test):
            continue
        share = shares.setdefault(pair.rule, {"control": 0.0, "test": 0.0})
        for name, names in (("control", pair.control), ("test", pair.test)):
            side = sides[name]
            share[name] += sum(side.total[n] for n in names) / side.all_time if side.all_time else 0.0
    return dict(sorted(shares.items(), key=lambda item: -item[1]["control"] - item[1]["test"]))


def self_times(trace: Trace) -> np.ndarray:
    """Each row's duration less the rows nested in it on the same lane (an XSpace host
    annotation encloses the work it starts; TF op kernels on one lane do not nest)."""
    ops = trace.ops
    return accelerator_self_times(ops["start_ns"], ops["end_ns"], ops["lane"], np.arange(len(trace)))


def _device_groups(sides: dict[str, "_Side"]) -> list[dict]:
    """Op time per device per step (median over steps), both runs."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for position, side in enumerate((sides["control"], sides["test"])):
        trace = side.trace
        mask, _ = counted_rows(trace)
        steps = max(len(trace.steps), 1)
        durations = (trace.ops["end_ns"] - trace.ops["start_ns"])[mask]
        for device, total in zip(trace.ops["device"][mask].tolist(), durations.tolist()):
            out[trace.devices[device].name][position] += total / steps
    return sorted(({"key": k, "control_mean_ns": v[0], "test_mean_ns": v[1], "delta_ns": v[1] - v[0]}
                   for k, v in out.items()), key=lambda g: -abs(g["delta_ns"]))


# --- one side -----------------------------------------------------------------------------
class _Side:
    def __init__(self, trace: Trace):
        self.trace = trace
        self.names: list[str] = []          # distinct op names, in first-seen order
        self.type: dict[str, str] = {}      # the kernel as recorded
        self.plain_type: dict[str, str] = {}  # the kernel by its name without oneDNN
        self.total: dict[str, int] = {}
        self.self_time: dict[str, int] = {}
        self.per_step: dict[str, np.ndarray] = {}
        self.count: dict[str, int] = {}
        self.order: dict[str, int] = {}     # position of first occurrence within its step
        self.rewritten: dict[str, str] = {}
        self.producers: dict[str, tuple[str, ...]] = {}  # data inputs, where the trace has them
        self.consumers: dict[str, list[str]] = defaultdict(list)
        self.all_time = 0
        self.graph = decode_graph(trace.metadata)


def _side(trace: Trace, rules, warmup: int, time: str = "host") -> _Side:
    side = _Side(trace)
    mask, timed = _timed_rows(trace, time)
    ops = trace.ops
    kept_steps = range(warmup, len(trace.steps)) if len(trace.steps) > warmup else range(len(trace.steps))
    step_positions = set(kept_steps)
    if step_positions:
        mask = mask & np.isin(ops["step"], sorted(step_positions))
    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((ops["start_ns"][rows], ops["step"][rows]))]
    durations = timed[rows]
    own = durations if time == "device" else self_times(trace)[rows]
    names = [trace.strings[i] for i in ops["name"][rows].tolist()]
    kernels = [trace.strings[i] for i in ops["kernel"][rows].tolist()]
    step_index = ops["step"][rows]
    step_slots = {p: k for k, p in enumerate(sorted(step_positions))} if step_positions else {}
    n_steps = max(len(step_slots), 1)
    position_in_step: dict[int, int] = defaultdict(int)
    for name, kernel, duration, self_ns, step in zip(names, kernels, durations.tolist(), own.tolist(),
                                                     step_index.tolist()):
        if name not in side.total:
            side.names.append(name)
            side.type[name] = kernel
            side.plain_type[name] = plain_kernel(kernel)
            side.total[name] = 0
            side.self_time[name] = 0
            side.count[name] = 0
            side.per_step[name] = np.zeros(n_steps)
            side.order[name] = position_in_step[step]
            rewritten = name
            for pattern, replacement in rules:
                rewritten = pattern.sub(replacement, rewritten)
            side.rewritten[name] = rewritten
        position_in_step[step] += 1
        side.total[name] += duration
        side.self_time[name] += self_ns
        side.count[name] += 1
        side.per_step[name][step_slots.get(step, 0)] += duration
        side.all_time += duration
    _dataflow(side, rows, names)
    if side.graph:  # positions by the graph, not by timing: the same graphs, the same pairs
        last = len(side.graph.order)
        side.order = {name: side.graph.order.get(name, last + side.order[name]) for name in side.names}
    if not side.producers and side.graph:  # XSpace records no inputs: the graph has them
        for name in side.names:
            side.producers[name] = side.graph.producers.get(name, ())
            for producer in side.producers[name]:
                side.consumers[producer].append(name)
    return side


def _dataflow(side: _Side, rows: np.ndarray, names: list[str]) -> None:
    """Each op's data inputs (``name:1`` as ``name``; control inputs left out) and consumers,
    from its first run. XSpace traces record none."""
    trace = side.trace
    if not trace.inputs.rows:
        return
    first = {}
    for row, name in zip(rows.tolist(), names):
        first.setdefault(name, row)
    op_of_input, input_name = trace.inputs["op"], trace.inputs["name"]
    for name, row in first.items():
        lo, hi = np.searchsorted(op_of_input, [row, row + 1])
        inputs = tuple(dict.fromkeys(
            text.split(":")[0] for text in (trace.strings[i] for i in input_name[lo:hi].tolist())
            if not text.startswith("^")))
        side.producers[name] = inputs
        for producer in inputs:
            side.consumers[producer].append(name)


# --- alignment -----------------------------------------------------------------------------
# How sure each rule is that its pair is the same computation: names that agree are sure,
# names that agree only in their tails less so, groups less again; a type+position pair
# is a guess whose odds fall with the number of same-typed candidates it chose from.
RULE_CONFIDENCE = {"user": 1.0, "exact": 1.0, "structure": 0.95, "normalized": 0.9, "gradient": 0.85,
                   "group": 0.8, "fusion": 0.75,
                   "optimizer": 0.6, "type+position": 0.5, "unmatched": 0.0}


@dataclass
class _Pair:
    key: str
    rule: str
    control: tuple[str, ...]
    test: tuple[str, ...]
    confidence: float = -1.0  # below 0: the rule's own (RULE_CONFIDENCE)

    def __post_init__(self):
        if self.confidence < 0:
            self.confidence = RULE_CONFIDENCE.get(self.rule, 0.5)


def pair_key(control_name: str, test_name: str) -> str:
    """A row's key from the real names: one name when both sides agree, else
    ``control ~ test``. Normalised names only decide matches; they are never shown."""
    return control_name if control_name == test_name else f"{control_name} ~ {test_name}"


def _strip(name: str) -> str:
    """Without function wrappers, and with Keras uniquifiers removed from scope parts."""
    previous = None
    while previous != name:
        previous, name = name, _WRAPPER.sub("", name)
    parts = name.split("/")
    scopes = [(_UNIQUIFIED_SCOPE.match(p).group(1) if _UNIQUIFIED_SCOPE.match(p) else p) for p in parts[:-1]]
    return "/".join(scopes + parts[-1:])


def _gradient_key(name: str) -> tuple[str, ...] | None:
    """A gradient op as (scope parts..., op) without the ``_grad`` marker, or None."""
    match = _TF1_GRADIENT.match(name)
    if match:
        parts = [p[:-len("_grad")] if p.endswith("_grad") else p for p in match.group("rest").split("/")]
        return tuple(parts)
    match = _TF2_GRADIENT.match(name)
    if match:
        return tuple(match.group("rest").split("/"))
    return None


def _is_update(side: _Side, name: str) -> bool:
    return side.plain_type[name] in _UPDATE_TYPES or (
        bool(_OPTIMIZER_SCOPES.search(name)) and _gradient_key(name) is None) or \
        (side.plain_type[name] == "Mul" and re.fullmatch(r"mul(_\d+)?", name) is not None)


def _align(control: _Side, test: _Side, user_rules: bool, alignment: Alignment | None = None) -> list[_Pair]:
    pairs: list[_Pair] = []
    def ordered(side):  # with graphs, graph order: the same graphs give the same pairs
        return sorted(side.names, key=side.order.__getitem__) if alignment is not None else side.names
    left = {n: control.rewritten[n] for n in ordered(control)}
    right = {n: test.rewritten[n] for n in ordered(test)}

    def take(c_names, t_names, key, rule, confidence=-1.0):
        for n in c_names:
            left.pop(n, None)
        for n in t_names:
            right.pop(n, None)
        pairs.append(_Pair(key, rule, tuple(c_names), tuple(t_names), confidence))

    def match_by(key_of, rule, same_type=True):
        index: dict = defaultdict(list)
        for name, text in right.items():
            key = key_of(text)
            if key is not None:
                index[(key, test.plain_type[name] if same_type else "")].append(name)
        for name, text in list(left.items()):
            key = key_of(text)
            if key is None:
                continue
            candidates = index.get((key, control.plain_type[name] if same_type else ""))
            while candidates and candidates[0] not in right:
                candidates.pop(0)
            if candidates:
                other = candidates.pop(0)
                take([name], [other], pair_key(name, other), rule)

    rule_name = "user" if user_rules else "exact"
    if alignment is not None:
        # The structure first: it knows which op is which where names only look alike.
        # Ops Grappler rewrote after the graph was recorded run under new names; the trace
        # name for a graph node is its own, or its rewritten one.
        run_as = {"control": _rewritten_by_grappler(control), "test": _rewritten_by_grappler(test)}

        def in_trace(side_name, node, pool):
            node = node if node in pool else run_as[side_name].get(node, node)
            return node if node in pool else None
        joined: dict[tuple[str, str], list[str]] = defaultdict(list)  # shape ops joined to a pair
        for side_name, nodes in alignment.attached.items():
            for node, control_node in nodes.items():
                joined[side_name, control_node].append(node)
        for node_c, node_t in alignment.pairs:
            c, t = in_trace("control", node_c, left), in_trace("test", node_t, right)
            if c and t:
                extra_c = [n for n in (in_trace("control", m, left) for m in joined["control", node_c]) if n]
                extra_t = [n for n in (in_trace("test", m, right) for m in joined["test", node_c]) if n]
                take([c, *extra_c], [t, *extra_t], pair_key(c, t),
                     "exact" if _strip(c) == _strip(t) and not (extra_c or extra_t) else "structure")
        for members_c, members_t in alignment.groups:
            names_c = [n for n in (in_trace("control", m, left) for m in members_c) if n]
            names_t = [n for n in (in_trace("test", m, right) for m in members_t) if n]
            if names_c and names_t:
                take(names_c, names_t, f"{pair_key(names_c[0], names_t[0])} "
                     f"[group of {len(names_c)} ~ {len(names_t)} ops]", "group")
    match_by(lambda text: text, rule_name, same_type=False)
    match_by(_strip, rule_name, same_type=False)
    # Model scopes: the longest common tail of scope parts, same op type.
    for depth in (4, 3, 2):
        match_by(lambda text, d=depth: tuple(_strip(text).split("/")[-d:])
                 if len(_strip(text).split("/")) >= d else None, "normalized")
    # Gradients: compare the gradient paths' tails.
    for depth in (3, 2):
        match_by(lambda text, d=depth: (_gradient_key(_strip(text)) or ())[-d:] or None
                 if _gradient_key(_strip(text)) and len(_gradient_key(_strip(text))) >= d else None, "gradient")
    _group_fusions(pairs, control, test, left, right)
    # Optimizer updates: one group per side.
    updates_c = [n for n in left if _is_update(control, n)]
    updates_t = [n for n in right if _is_update(test, n)]
    if updates_c and updates_t:
        take(updates_c, updates_t, "optimizer updates", "optimizer")
    group_fusions_by_position(control, test, left, right, take)  # eager ops: no scopes, no inputs
    # What is left: same kernel type, in order of first occurrence within the step.
    by_type_t: dict[str, list[str]] = defaultdict(list)
    for name in sorted(right, key=lambda n: test.order[n]):
        by_type_t[test.plain_type[name]].append(name)
    for name in sorted(left, key=lambda n: control.order[n]):
        candidates = by_type_t.get(control.plain_type[name])
        if candidates:
            choices = len(candidates)
            other = candidates.pop(0)
            take([name], [other], pair_key(name, other), "type+position",
                 RULE_CONFIDENCE["type+position"] / choices)
    for name in left:
        pairs.append(_Pair(name, "unmatched", (name,), ()))
    for name in right:
        pairs.append(_Pair(name, "unmatched", (), (name,)))
    return pairs


_GRAPPLER_RENAMED = re.compile(r"^(?P<scope>.*)/ArithmeticOptimizer/[A-Za-z]+_(?P<base>[^/]+)$")


def _rewritten_by_grappler(side: _Side) -> dict[str, str]:
    """Graph node -> the trace's name for it, where Grappler's arithmetic optimizer replaced
    the node by one named ``<scope>/ArithmeticOptimizer/<Rule>_<node>`` (as
    ``FoldTransposeIntoMatMul`` does to a transpose-fed MatMul)."""
    out = {}
    for name in side.names:
        match = _GRAPPLER_RENAMED.match(name)
        if match and side.graph and name not in side.graph.order:
            original = f"{match.group('scope')}/{match.group('base')}"
            if original in side.graph.order and original not in side.total:
                out.setdefault(original, name)
    return out


def _group_fusions(pairs: list[_Pair], control: _Side, test: _Side, left: dict, right: dict) -> None:
    """A fused kernel on one side against its parts, unfused, on the other: one group.

    The parts are the other side's still unmatched ops of a type the kernel fuses, found
    along the dataflow from the op the fused one matched by name (it keeps the name of one
    of its parts), or else in the same layer scope. A fused op that matched takes its parts
    into its row; an unmatched one makes a new row."""
    position = {}
    for index, pair in enumerate(pairs):
        for name in pair.control:
            position["control", name] = index
        for name in pair.test:
            position["test", name] = index
    for side_name, side, other, others_left, own_left in (("control", control, test, right, left),
                                                           ("test", test, control, left, right)):
        for name in side.names:
            parts = fusion_parts(side.type[name])
            if not parts:
                continue
            index = position.get((side_name, name))
            if index is None and name not in own_left:
                continue
            pair = pairs[index] if index is not None else None
            counterparts = (pair.test if side_name == "control" else pair.control) if pair else ()
            if any(other.plain_type[n] == side.plain_type[name] for n in counterparts):
                continue  # fused on both sides
            found = _fused_by_dataflow(counterparts, other, parts, others_left) or \
                _fused_by_scope(side.rewritten[name], other, parts, others_left)
            if not found:
                continue
            for n in found:
                others_left.pop(n)
            own_left.pop(name, None)
            group = tuple(counterparts) + tuple(found)
            kinds = "+".join(sorted({other.plain_type[n] for n in group},
                                    key=lambda kind: parts.index(kind) if kind in parts else -1))
            key = f"{name} [{side.type[name]} = {kinds}]"
            fused, unfused = (name,), group
            pair = _Pair(key, "fusion", *((fused, unfused) if side_name == "control" else (unfused, fused)))
            if index is None:
                pairs.append(pair)
                index = len(pairs) - 1
            else:
                pairs[index] = pair
            for n in found:
                position["test" if side_name == "control" else "control", n] = index


def _fused_by_dataflow(counterparts, other: _Side, parts: tuple[str, ...], others_left) -> list[str]:
    """The unfused ops around a fused op's counterpart, along the other side's dataflow: a
    fused kernel keeps the name of its last part (``dense/Relu`` for MatMul+BiasAdd+Relu),
    so walk up to producers, or of its first (``bn1/FusedBatchNormV3`` for BN+ReLU), so walk
    down to consumers. Each part type is taken once: a fusion holds one MatMul, one ReLU."""
    if len(counterparts) != 1 or not other.producers:
        return []
    start = counterparts[0]
    downstream = other.plain_type[start] == parts[0]
    taken_types = {other.plain_type[start]}
    found, frontier = [], [start]
    while frontier:
        name = frontier.pop(0)
        for near in (other.consumers.get(name, ()) if downstream else other.producers.get(name, ())):
            kind = other.plain_type.get(near)
            if near in others_left and kind in parts and kind not in taken_types and near not in found:
                taken_types.add(kind)
                found.append(near)
                frontier.append(near)
    return found


def _fused_by_scope(fused_name: str, other: _Side, parts: tuple[str, ...], others_left) -> list[str]:
    """The other side's unmatched ops of the fused kind in the fused op's layer scope;
    forward and gradient ops never group."""
    scope, gradient = _scope(fused_name)
    return [n for n in others_left if other.plain_type[n] in parts and _scope(other.rewritten[n])[1] == gradient
            and _same_scope(scope, _scope(other.rewritten[n])[0])]


def _scope(name: str) -> tuple[tuple[str, ...], bool]:
    """An op's scope parts (without function wrappers) and whether it is a gradient op. A
    TF1 gradient's scope is its forward op's (``conv1`` for ``conv1/Conv2D_grad/...``); TF2
    names a gradient by the layer, sometimes with the forward op (``conv1/BiasAdd``)."""
    stripped = _strip(name)
    gradient = _gradient_key(stripped)
    if gradient is None:
        return tuple(stripped.split("/")[:-1]), False
    tf1_style = _TF1_GRADIENT.match(stripped) is not None
    return gradient[:-2] if tf1_style else gradient[:-1], True


def _same_scope(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same layer when the shorter scope runs inside the longer one (``dense`` in
    ``mlp/dense``, ``conv1`` in ``conv1/BiasAdd``); top-level ops only with top-level ops."""
    shorter, longer = sorted((a, b), key=len)
    if not shorter:
        return not longer
    return any(longer[i:i + len(shorter)] == shorter for i in range(len(longer) - len(shorter) + 1))


# --- statistics ----------------------------------------------------------------------------
def _row(pair: _Pair, sides: dict[str, _Side], threshold: float, noise_ns: int) -> Row:
    values = {}
    for name, names in (("control", pair.control), ("test", pair.test)):
        side = sides[name]
        per_step = sum((side.per_step[n] for n in names), np.zeros(1)) if names else np.zeros(1)
        values[name] = {
            "count": sum(side.count[n] for n in names), "total": sum(side.total[n] for n in names),
            "self": sum(side.self_time[n] for n in names),
            "median": float(np.median(per_step)), "p90": float(np.percentile(per_step, 90)),
            "min": float(per_step.min()),
        }
    types = {sides["control"].type[n] for n in pair.control} | {sides["test"].type[n] for n in pair.test}
    c, t = values["control"], values["test"]
    delta = t["median"] - c["median"]
    ratio = t["median"] / c["median"] if c["median"] > 0 and pair.test else None
    if not pair.test:
        change = "-"
    elif not pair.control:
        change = "+"
    elif abs(delta) > max(threshold * c["median"], noise_ns):
        change = "+" if delta > 0 else "-"
    else:
        change = "="
    return Row(key=pair.key, rule=pair.rule, op_type="/".join(sorted(types)),
               control_names=pair.control, test_names=pair.test,
               control_count=c["count"], test_count=t["count"],
               control_total_ns=int(c["total"]), test_total_ns=int(t["total"]),
               control_self_ns=int(c["self"]), test_self_ns=int(t["self"]),
               control_median_ns=c["median"], test_median_ns=t["median"],
               control_p90_ns=c["p90"], test_p90_ns=t["p90"], control_min_ns=c["min"], test_min_ns=t["min"],
               delta_ns=delta, ratio=ratio, change=change,
               confidence=round(pair.confidence, 3) if pair.control and pair.test else 0.0)


def _groups(rows: list[Row]) -> dict[str, list[dict]]:
    """Totals per op type and per top-level name scope, for both runs."""
    out = {}
    for label, key_of in (("op_type", lambda r: r.op_type), ("scope", lambda r: r.key.split("/")[0])):
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in rows:
            totals[key_of(row)][0] += row.control_median_ns
            totals[key_of(row)][1] += row.test_median_ns
        out[label] = sorted(({"key": k, "control_median_ns": v[0], "test_median_ns": v[1],
                              "delta_ns": v[1] - v[0]} for k, v in totals.items()),
                            key=lambda g: -abs(g["delta_ns"]))
    return out


def _step_stats(trace: Trace, warmup: int) -> dict:
    durations = [s.duration_ns for s in trace.steps][warmup:] or [s.duration_ns for s in trace.steps]
    if not durations:
        return {"count": 0, "median_ns": 0.0, "p90_ns": 0.0, "min_ns": 0.0}
    return {"count": len(durations), "median_ns": float(np.median(durations)),
            "p90_ns": float(np.percentile(durations, 90)), "min_ns": float(min(durations))}


def _peaks(trace: Trace) -> dict[str, int]:
    counters = trace.counters
    return {trace.strings[a]: int(counters["bytes_in_use"][counters["allocator"] == a].max())
            for a in np.unique(counters["allocator"]).tolist()}


def _rule(text: str):
    pattern, sep, replacement = text.partition("=")
    if not sep:
        raise ValueError(f"a rule is PATTERN=REPLACEMENT, not {text!r}")
    return re.compile(pattern), replacement


def _ms(ns: float, signed: bool = False) -> str:
    text = f"{ns / 1e6:+.3f}" if signed else f"{ns / 1e6:.3f}"
    return text + "ms"


__all__ = ["RULE_CONFIDENCE", "Comparison", "Row", "compare", "pair_key", "self_times"]
