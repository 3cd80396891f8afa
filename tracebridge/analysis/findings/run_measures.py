"""Findings one run shows by itself: eager ops, retracing, XLA compilations, host gaps,
input waits, device idle time, memory in use across steps.

Each detector measures, per traced step, the time a porting mistake leaves its mark on,
and returns that kind's evidence (a dataclass): the time's share of the step time, and
what it rests on. Deciding whether a share is a finding (thresholds, against a control run
or alone) is :mod:`tracebridge.analysis.findings`' job. Times are the union of intervals, so nested or
concurrent events count once. Rows are picked by their name's id in the trace's string
table (:meth:`~tracebridge.model.trace.Trace.string_id`), not by a string per row.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...model.accelerator import busy_ns, device_rows
from ...model.schema import STEP_INPUTS, Category, is_eager_name, is_framework_eager_op
from ...model.trace import Trace
from .evidence import (DeviceIdleEvidence, EagerOpsEvidence, HostGapsEvidence, InputWaitEvidence,
                       RetracingEvidence, Sections, XlaCompileEvidence)
from ..run.memory import MemoryUse

GRAPH_BUILDING = "tf.function-graph_building"   # TF 2.21's host event while a function is traced
_FUNCTION = re.compile(r"^(?:EagerLocalExecute: )?__inference_(?P<fn>.+)_(?P<n>\d+)$")
# One XLA compilation: the backend's compile (TF 2.21 on CPU: ``CpuCompiler::RunBackend``,
# after the HLO pass pipelines, inside the op that runs the compiled function), a PjRt
# client's compile (JAX), or TF's ``_XlaCompile`` op (autoclustering).
_COMPILE_EVENTS = re.compile(r"^(?:\w*Compiler::RunBackend|\w*Client::Compile(?:AndLoad)?|_?XlaCompile)$")
_INPUT_EVENTS = ("IteratorGetNextOp::DoCompute",)   # TF2: the time a step blocks on tf.data
_INPUT_OP_TYPES = re.compile(r"^(?:QueueDequeue(?:Many|UpTo)?(?:V2)?|IteratorGetNext(?:Sync)?)$")


class StepView:
    """A trace's steps (after ``warmup``) and its rows inside them, for the detectors."""

    def __init__(self, trace: Trace, warmup: int = 0):
        self.trace = trace
        steps = list(trace.steps)
        # indices into trace.steps of the steps looked at (all of them for a short run)
        self.step_positions = list(range(warmup, len(steps))) if len(steps) > warmup else list(range(len(steps)))
        self.steps = [steps[p] for p in self.step_positions]
        self.total_ns = sum(s.duration_ns for s in self.steps)
        ops = trace.ops
        self.in_step = np.isin(ops["step"], self.step_positions) if self.step_positions \
            else np.zeros(len(trace), bool)

    def numbers(self) -> list[int]:
        return [s.number for s in self.steps]

    def share(self, time_ns: float) -> float:
        return time_ns / self.total_ns if self.total_ns else 0.0

    def name_of(self, row: int) -> str:
        return self.trace.strings[int(self.trace.ops["name"][row])]

    def where(self, column: str, test: Callable[[str], bool]) -> np.ndarray:
        """Rows whose ``column`` string passes ``test``, tried once per string, not per row."""
        strings = self.trace.strings
        passes = np.fromiter((bool(test(text)) for text in strings), dtype=bool, count=len(strings))
        return passes[self.trace.ops[column]]

    def named(self, name: str) -> np.ndarray:
        return self.trace.ops["name"] == self.trace.string_id(name)

    def clipped(self, rows: np.ndarray, step) -> tuple[np.ndarray, np.ndarray]:
        ops = self.trace.ops
        return (np.maximum(ops["start_ns"][rows], step.start_ns), np.minimum(ops["end_ns"][rows], step.end_ns))

    def rows_in(self, mask: np.ndarray, step) -> np.ndarray:
        ops = self.trace.ops
        return np.flatnonzero(mask & (ops["end_ns"] > step.start_ns) & (ops["start_ns"] < step.end_ns))


@dataclass(frozen=True)
class StepMemory:
    """A run's memory use and the steps looked at."""

    use: MemoryUse
    view: StepView


def eager_ops(view: StepView) -> EagerOpsEvidence:
    """Ops the user's code ran eagerly inside steps (not those TF and Keras run themselves
    around a tf.function step: model/schema.py, is_framework_eager_op). Their time is each
    step's eager section, from its first eager op to its last: between eager ops Python
    dispatches the next one, which is the cost of running without ``tf.function``."""
    trace, ops = view.trace, view.trace.ops
    eager = view.where("name", is_eager_name) & ~view.where("op_type", is_framework_eager_op) & \
        (ops["category"] == Category.OP)
    spans, per_step, types = [], [], Counter()
    for step in view.steps:
        rows = view.rows_in(eager, step)
        per_step.append(len(rows))
        if len(rows):
            start, end = view.clipped(rows, step)
            spans.append((int(start.min()), int(end.max())))
            types.update(trace.strings[t] for t in ops["op_type"][rows].tolist())
    time = sum(end - start for start, end in spans)
    examples = sorted({view.name_of(r) for r in np.flatnonzero(eager & view.in_step)})[:10]
    return EagerOpsEvidence(view.share(time), per_step, dict(types.most_common(10)), examples, view.numbers(),
                            spans)


def retracing(view: StepView) -> RetracingEvidence:
    """Tracings of a ``tf.function`` inside the traced steps, and which of them are
    retracings: tracings beyond a function's first. TF 2.21 records each tracing as a
    ``tf.function-graph_building`` host event (a function traced inside another's tracing:
    an event inside the outer one), inside the call's host event, and each trace runs as a
    new concrete function, ``__inference_<fn>_<n>`` with a new ``n``, one per input signature.

    Where the call's event carries its ``tracing_count`` stat (an XSpace read with its
    stats), that says it: the tf.function object's tracings so far, this one included, so a
    count of 2 or more is a retracing (also of a function first traced before the capture;
    and Keras's train and test functions, both ``multi_step_on_iterator``, count apart).
    Elsewhere (Chrome JSON keeps no stats) a tracing is a retracing when the first new
    concrete function after it (before the next tracing) belongs to a function that ran
    another concrete function earlier in the trace; the first version the trace shows counts
    as the function's first. Any other tracing is a first trace (a first call, a function
    traced inside another's tracing): no mistake, not counted. A retracing's time is from its
    start to the function run (``FunctionRun``) that follows it: tracing, then instantiating
    the new concrete function."""
    ops = view.trace.ops
    building = view.named(GRAPH_BUILDING)
    firsts = _first_runs(view)
    retraced_by = _retracings(view, building, firsts)
    run_starts = np.sort(ops["start_ns"][view.named("FunctionRun")])
    counted: set[int] = set()  # a tracing in two overlapping steps counts in the first
    spans, tracings, retracings, functions = [], [], [], set()
    for step in view.steps:
        rows = [row for row in view.rows_in(building, step).tolist() if row not in counted]
        counted.update(rows)
        again = [row for row in rows if row in retraced_by]
        tracings.append(len(rows))
        retracings.append(len(again))
        for row in again:
            functions.add(retraced_by[row])
            start = int(ops["start_ns"][row])
            later = run_starts[np.searchsorted(run_starts, int(ops["end_ns"][row])):]
            end = int(later[0]) if len(later) and later[0] <= step.end_ns else int(ops["end_ns"][row])
            spans.append((start, min(end, step.end_ns)))
    time = busy_ns(np.array([s for s, _ in spans], dtype=np.int64), np.array([e for _, e in spans], dtype=np.int64))
    versions: dict[str, list[str]] = defaultdict(list)
    for _, fn, name in firsts:
        versions[fn].append(name)
    # python_tracer_level=1: the retracings' own frames (func_graph, autograph)
    python = _python_in(view, sorted(spans)) or None
    return RetracingEvidence(view.share(time), retracings_per_step=retracings,
                             functions={fn: versions[fn] for fn in sorted(functions)},
                             graph_buildings_per_step=tracings, steps=view.numbers(),
                             events=[GRAPH_BUILDING] if any(retracings) else [], sections=spans,
                             python_in_tracing_ns=python)


def _first_runs(view: StepView) -> list[tuple[int, str, str]]:
    """Each concrete function's first run in the trace, in time order: its start, its
    function and its name (``__inference_<fn>_<n>``). TF 2.21 names the function run by an
    ``EagerLocalExecute: __inference_...`` event (host_tracer_level 2 and up), and by the
    ``eager_op`` stat of the ``EagerExecute`` event around it (level 1 too)."""
    trace, ops = view.trace, view.trace.ops
    runs = [(int(row), view.name_of(row).removeprefix("EagerLocalExecute: "))
            for row in np.flatnonzero(view.where("name", _FUNCTION.match)).tolist()]
    rows, values = trace.event_stat("eager_op")
    runs += [(int(row), trace.strings[value]) for row, value in zip(rows.tolist(), values.tolist())
             if _FUNCTION.match(trace.strings[value])]
    firsts, seen = [], set()
    for row, name in sorted(runs, key=lambda run: int(ops["start_ns"][run[0]])):
        if name not in seen:
            seen.add(name)
            firsts.append((int(ops["start_ns"][row]), _FUNCTION.match(name).group("fn"), name))
    return firsts


def _retracings(view: StepView, building: np.ndarray, firsts: list[tuple[int, str, str]]) -> dict[int, str]:
    """The tracings (rows of ``building``, outermost ones, anywhere in the trace) that are
    retracings, each with its function (see :func:`retracing`): by the ``tracing_count`` of
    the call holding the tracing, else by the concrete functions that ran (``firsts``)."""
    ops = view.trace.ops
    tracings = _outermost(ops, np.flatnonzero(building))
    versions = _new_versions(ops, tracings, firsts)
    counts = _tracing_counts(view.trace)
    found = {}
    for row in tracings.tolist():
        fn, again = versions.get(row, (None, False))
        call = _innermost(ops, [h for h in _holders(ops, row).tolist() if h in counts]) if counts else None
        if call is not None:
            again = counts[call] >= 2
            fn = fn or view.name_of(call)
        if again:
            found[row] = fn
    return found


def _new_versions(ops, tracings: np.ndarray, firsts: list[tuple[int, str, str]]) -> dict[int, tuple[str, bool]]:
    """Per tracing, the first new concrete function (``firsts``) that runs after it starts and
    before the next tracing does: its function, and whether that function ran another
    concrete function before."""
    starts = np.array([start for start, _, _ in firsts], dtype=np.int64)
    earlier, again = set(), []
    for _, fn, _ in firsts:
        again.append(fn in earlier)
        earlier.add(fn)
    found = {}
    bounds = ops["start_ns"][tracings].tolist() + [np.iinfo(np.int64).max]
    for row, begin, until in zip(tracings.tolist(), bounds, bounds[1:]):
        first = int(np.searchsorted(starts, begin, side="left"))
        if first < len(firsts) and firsts[first][0] < until:
            found[row] = (firsts[first][1], again[first])
    return found


def _tracing_counts(trace: Trace) -> dict[int, int]:
    """The rows of tf.function calls with TF's ``tracing_count`` stat: the tf.function
    object's tracings (concrete functions) so far, after this call."""
    rows, values = trace.event_stat("tracing_count")
    counts = {}
    for row, value in zip(rows.tolist(), values.tolist()):
        text = trace.strings[value]
        if text.isdigit():
            counts[int(row)] = int(text)
    return counts


def _outermost(ops, rows: np.ndarray) -> np.ndarray:
    """``rows`` less those nested in another of them on the same lane, in time order."""
    rows = rows[np.lexsort((-ops["end_ns"][rows], ops["start_ns"][rows]))]
    reach: dict[tuple[int, int], int] = {}  # per lane: the end of the last outermost row
    kept = []
    for row in rows.tolist():
        lane = (int(ops["device"][row]), int(ops["lane"][row]))
        if int(ops["start_ns"][row]) < reach.get(lane, int(ops["start_ns"][row])):
            continue
        reach[lane] = int(ops["end_ns"][row])
        kept.append(row)
    return np.array(kept, dtype=np.int64)


def xla_compile(view: StepView) -> XlaCompileEvidence:
    """XLA compilations inside the steps (:data:`_COMPILE_EVENTS`, the outermost of nested
    ones). A ``jit_compile`` function compiles once per new input shape, also when
    ``reduce_retracing=True`` traced it once. A compilation's time is from the start of the
    op that compiles and runs the function (TF's lowering to HLO and the HLO passes come
    first, the backend's compile last) to the end of the backend's compile; without such
    an op, the compile event's own time. The input shapes are those the capture recorded
    for the step's call (metadata ``step_inputs``), where it did."""
    trace, ops = view.trace, view.trace.ops
    compiling = view.where("name", _COMPILE_EVENTS.match)
    is_op = ops["category"] == Category.OP
    shapes = _step_inputs(trace.metadata)
    per_step, steps, functions, times, inputs, events, spans = [], [], [], [], [], set(), []
    for step in view.steps:
        rows = view.rows_in(compiling, step)
        rows = rows[np.lexsort((-ops["end_ns"][rows], ops["start_ns"][rows]))]
        reach: dict[tuple[int, int], int] = {}  # per lane: the end of the last compilation kept
        found = 0
        for row in rows.tolist():
            lane = (int(ops["device"][row]), int(ops["lane"][row]))
            start, end = int(ops["start_ns"][row]), int(ops["end_ns"][row])
            if start < reach.get(lane, start):
                continue  # nested in a compilation already counted
            reach[lane] = end
            # the function call that compiles and runs it (an op, or an annotation where the
            # XSpace reader credits its time to the XLA thunks inside), else the TF op around it
            holders = _holders(ops, row)
            owner = _innermost(ops, [h for h in holders.tolist() if _FUNCTION.match(view.name_of(h))])
            if owner is None:
                owner = row if is_op[row] else _innermost(ops, holders[is_op[holders]])
            begin = int(ops["start_ns"][owner]) if owner is not None else start
            begin, end = max(begin, step.start_ns), min(end, step.end_ns)
            found += 1
            steps.append(step.number)
            functions.append(_function_name(view.name_of(owner)) if owner is not None else view.name_of(row))
            times.append(end - begin)
            inputs.append(shapes.get(str(step.number)))
            events.add(view.name_of(row))
            spans.append((begin, end))
        per_step.append(found)
    time = busy_ns(np.array([s for s, _ in spans], dtype=np.int64), np.array([e for _, e in spans], dtype=np.int64))
    return XlaCompileEvidence(view.share(time), per_step, steps, functions, times, inputs, sorted(events), spans)


def _holders(ops, row: int) -> np.ndarray:
    """The other rows on ``row``'s lane whose time holds it."""
    start, end = ops["start_ns"][row], ops["end_ns"][row]
    holders = np.flatnonzero((ops["lane"] == ops["lane"][row]) & (ops["device"] == ops["device"][row])
                             & (ops["start_ns"] <= start) & (ops["end_ns"] >= end))
    return holders[holders != row]


def _innermost(ops, rows) -> int | None:
    """The one of ``rows`` that starts last: the innermost of nested rows."""
    rows = np.asarray(rows, dtype=np.int64)
    return int(rows[np.argmax(ops["start_ns"][rows])]) if len(rows) else None


def _function_name(name: str) -> str:
    """``step`` for ``__inference_step_39``; other names as they are."""
    match = _FUNCTION.match(name)
    return match.group("fn") if match else name


def _step_inputs(metadata) -> dict[str, str]:
    try:
        recorded = json.loads(metadata.get(STEP_INPUTS) or "{}")
    except (TypeError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def input_wait(view: StepView) -> InputWaitEvidence:
    """Time a step blocks on its input: tf.data's ``IteratorGetNextOp::DoCompute`` (TF2),
    or a dequeue or iterator op (TF1 queue runners, ``IteratorGetNext``)."""
    ops = view.trace.ops
    waiting = view.where("name", lambda name: name in _INPUT_EVENTS) | \
        (view.where("op_type", _INPUT_OP_TYPES.match) & (ops["category"] == Category.OP))
    per_step, spans, found = [], [], Counter()
    for step in view.steps:
        rows = view.rows_in(waiting, step)
        start, end = view.clipped(rows, step)
        per_step.append(busy_ns(start, end))
        spans += list(zip(start.tolist(), end.tolist()))
        found.update(view.name_of(r) for r in rows.tolist())
    return InputWaitEvidence(view.share(sum(per_step)), per_step, dict(found), view.numbers(), spans)


def host_gaps(view: StepView, explained: Sections) -> HostGapsEvidence:
    """Step time when no TF op, kernel or input event runs on any lane, no ``tf.function``
    call is under way, and that no other finding explains (``explained``: eager sections,
    retracing). With the Python tracer on (``python_tracer_level=1``), the Python functions
    running in those gaps are evidence too.

    Inside a ``tf.function`` call, the time between its ops is TF's own: binding the
    arguments, starting the executor, returning the results (1 to 2 ms a call for the
    performance examples' small CNN in TF 2.21, a fifth to a quarter of its step). None of
    the user's Python runs there, so it is no gap that moving Python work would close; it
    is reported as ``call_overhead_ns_per_step``."""
    ops = view.trace.ops
    working = np.isin(ops["category"], (Category.OP, Category.DEVICE, Category.MEMCPY, Category.DATA))
    calls = function_calls(view.trace)
    gaps, longest, holes, overhead = [], [], [], []
    for step in view.steps:
        start, end = view.clipped(view.rows_in(working, step), step)
        inside = [(s, e) for s, e in explained if e > step.start_ns and s < step.end_ns]
        start = np.concatenate([start, np.array([max(s, step.start_ns) for s, _ in inside], dtype=np.int64)])
        end = np.concatenate([end, np.array([min(e, step.end_ns) for _, e in inside], dtype=np.int64)])
        call_start, call_end = view.clipped(view.rows_in(calls, step), step)
        busy = busy_ns(start, end)
        start, end = np.concatenate([start, call_start]), np.concatenate([end, call_end])
        busy_or_calling = busy_ns(start, end)
        overhead.append(busy_or_calling - busy)
        gaps.append(step.duration_ns - busy_or_calling)
        step_holes = _holes(start, end, step)
        longest.append(max((e - s for s, e in step_holes), default=0))
        holes += step_holes
    return HostGapsEvidence(view.share(sum(gaps)), gaps, longest, overhead, view.numbers(),
                            _python_in(view, holes) or None)


def function_calls(trace: Trace) -> np.ndarray:
    """Rows that are ``tf.function`` calls: TF 2.21 records a call as a host event named
    after the Python function (``train_step``; Keras: ``multi_step_on_iterator``) around
    ``EagerLocalExecute: __inference_<function>_<n>`` on the same lane. Found by those
    names, not by the call's ``tf_function_call`` stat, so that a trace read back from
    Chrome JSON (which keeps no event stats) gives the same answer."""
    ops, strings = trace.ops, trace.strings
    calls = np.zeros(len(trace), dtype=bool)
    function_of = {i: m.group("fn") for i, m in enumerate(map(_FUNCTION.match, strings)) if m}
    if not function_of:
        return calls
    called = set(function_of.values())
    caller_ids = [i for i, text in enumerate(strings) if text in called]
    runs = np.flatnonzero(np.isin(ops["name"], list(function_of)))
    callers = np.flatnonzero(np.isin(ops["name"], caller_ids) & (ops["category"] == Category.HOST))

    def place(row: int) -> tuple[str, int, int]:  # the function, device and lane of a row
        name = int(ops["name"][row])
        return function_of.get(name) or strings[name], int(ops["device"][row]), int(ops["lane"][row])

    runs_at: dict[tuple, list[int]] = defaultdict(list)
    for row in runs.tolist():
        runs_at[place(row)].append(row)
    callers_at: dict[tuple, list[int]] = defaultdict(list)
    for row in callers.tolist():
        callers_at[place(row)].append(row)
    start, end = ops["start_ns"], ops["end_ns"]
    for where, rows in callers_at.items():
        if where not in runs_at:
            continue
        inside = np.array(runs_at[where], dtype=np.int64)
        inside = inside[np.argsort(start[inside], kind="stable")]
        rows = np.array(rows, dtype=np.int64)
        # Calls on a lane do not overlap: the first run that starts in a call is its own.
        first = np.searchsorted(start[inside], start[rows], side="left")
        found = first < len(inside)
        rows, first = rows[found], inside[first[found]]
        calls[rows[end[first] <= end[rows]]] = True
    return calls


def _holes(start: np.ndarray, end: np.ndarray, step) -> list[tuple[int, int]]:
    """The stretches of ``step`` that no interval covers."""
    order = np.argsort(start, kind="stable")
    reach = step.start_ns
    out = []
    for s, e in zip(start[order].tolist(), end[order].tolist()):
        if s > reach:
            out.append((reach, s))
        reach = max(reach, e)
    if reach < step.end_ns:
        out.append((reach, step.end_ns))
    return out


def _python_in(view: StepView, holes: list[tuple[int, int]], top: int = 8) -> dict[str, int]:
    """Python tracer frames (``$file.py:line function``) by the gap time they overlap, the
    largest first. Frames nest, and each counts the time it spans: the caller and the
    numpy call inside it both show."""
    ops = view.trace.ops
    rows = np.flatnonzero((ops["category"] == Category.PYTHON) & view.in_step)
    if not len(rows) or not holes:
        return {}
    lo = np.array([s for s, _ in holes], dtype=np.int64)
    hi = np.array([e for _, e in holes], dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(hi - lo)])  # gap time before each hole

    def covered(t: np.ndarray) -> np.ndarray:  # gap time before each moment t
        k = np.searchsorted(lo, t, side="right") - 1
        inside = np.where(k >= 0, np.minimum(t, hi[np.maximum(k, 0)]) - lo[np.maximum(k, 0)], 0)
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)
    overlap = covered(ops["end_ns"][rows]) - covered(ops["start_ns"][rows])
    totals: dict[str, int] = {}
    for row, time in zip(rows.tolist(), overlap.tolist()):
        if time > 0:
            name = view.name_of(row)
            totals[name] = totals.get(name, 0) + int(time)
    return dict(sorted(totals.items(), key=lambda item: -item[1])[:top])


def device_idle(view: StepView) -> DeviceIdleEvidence | None:
    """Accelerators only: the share of the profiled time the busiest device runs nothing
    (busy: the union of its kernels and copies) while the host works (any host row: TF ops
    dispatched or run on the host, launches, annotations): the device waiting on the host.
    Windows: the steps when the trace has them, else its span."""
    trace, ops = view.trace, view.trace.ops
    rows = device_rows(ops["category"], ops["flags"])
    if not rows.any():
        return None
    host = np.isin(ops["category"], (Category.OP, Category.HOST, Category.DATA)) & ~rows
    windows = [(s.start_ns, s.end_ns) for s in view.steps] or [(trace.start_ns, trace.end_ns)]
    total = sum(e - s for s, e in windows)
    idle_by_device, waiting_by_device, per_window = {}, {}, {}
    for device in np.unique(ops["device"][rows]).tolist():
        mine = rows & (ops["device"] == device)
        busy = waiting = 0
        shares = []
        for lo, hi in windows:
            starts, ends = _window(ops, mine, lo, hi)
            host_starts, host_ends = _window(ops, host, lo, hi)
            own = busy_ns(starts, ends)
            # host busy while the device is not: |host or device| - |device|
            waits = busy_ns(np.concatenate([starts, host_starts]), np.concatenate([ends, host_ends])) - own
            shares.append(waits / (hi - lo) if hi > lo else 0.0)
            waiting += waits
            busy += own
        name = trace.devices[device].name
        idle_by_device[name] = 1.0 - busy / total if total else 0.0
        waiting_by_device[name] = waiting / total if total else 0.0
        per_window[name] = shares
    device = min(idle_by_device, key=idle_by_device.get)  # the busiest device
    return DeviceIdleEvidence(waiting_by_device[device], device, idle_by_device[device], waiting_by_device,
                              len(windows), view.numbers(), per_window[device])


def _window(ops, mask: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    inside = mask & (ops["end_ns"] > lo) & (ops["start_ns"] < hi)
    return np.maximum(ops["start_ns"][inside], lo), np.minimum(ops["end_ns"][inside], hi)


__all__ = ["GRAPH_BUILDING", "StepMemory", "StepView", "device_idle", "eager_ops", "function_calls", "host_gaps",
           "input_wait", "retracing", "xla_compile"]
