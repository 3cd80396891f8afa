"""Findings one run shows by itself: eager ops, retracing, XLA compilations, host gaps,
input waits, framework overhead, device idle time, memory in use across steps.

Each detector measures, per traced step, the time a porting mistake leaves its mark on,
and returns that kind's evidence (a dataclass): the time's share of the step time, and
what it rests on. Deciding whether a share is a finding (thresholds, against a control run
or alone) is :mod:`tracebridge.analysis.findings`' job. Times are the union of intervals, so nested or
concurrent events count once. Rows are picked by their name's id in the trace's string
table (:meth:`~tracebridge.model.trace.Trace.string_id`), not by a string per row.

The kinds that rest on where a step's time goes take it from the step's parts
(:mod:`tracebridge.analysis.run.breakdown`), where every moment belongs to one part:
``host_gaps`` the ``idle`` part, ``input_wait`` the ``input`` part, ``framework_overhead``
the ``framework`` part, ``retracing`` and ``xla_compile`` the ``compile`` part (each its own
sections of it), so no two of them measure the same nanoseconds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...model.accelerator import busy_ns, device_rows
from ...model.schema import STEP_INPUTS, Category, is_eager_name, is_framework_eager_op
from ...model.trace import Trace
from .evidence import (DeviceIdleEvidence, EagerOpsEvidence, FrameworkEvidence, HostGapsEvidence, InputWaitEvidence,
                       RetracingEvidence, Sections, XlaCompileEvidence)
from ..run.breakdown import Breakdown, input_rows, step_breakdown
from ..run.calls import GRAPH_BUILDING, compilations, first_runs, function_calls, tracings
from ..run.memory import MemoryUse
from ..run.steady import StepSelection, select_steps


class StepView:
    """A trace's steps looked at (``steps``: a :class:`~.run.steady.StepSelection`, or the
    first N steps to leave out, or None for the steady state found from the trace), its rows
    inside them, and the breakdown of its steps into parts, for the detectors."""

    def __init__(self, trace: Trace, steps: "StepSelection | int | None" = 0):
        self.trace = trace
        self.selection = steps if isinstance(steps, StepSelection) else select_steps(trace, steps)
        every = list(trace.steps)
        # indices into trace.steps of the steps looked at
        self.step_positions = list(self.selection.positions)
        self.steps = [every[p] for p in self.step_positions]
        self.total_ns = sum(s.duration_ns for s in self.steps)
        ops = trace.ops
        self.in_step = np.isin(ops["step"], self.step_positions) if self.step_positions \
            else np.zeros(len(trace), bool)

    @cached_property
    def breakdown(self) -> Breakdown:
        """Every step split into parts (analysis/run/breakdown.py), the median over these steps."""
        return step_breakdown(self.trace, self.step_positions)

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

    def rows_per_step(self, mask: np.ndarray) -> list[np.ndarray]:
        """The rows of ``mask`` that overlap each step looked at, in order. The mask's rows
        are found once and each step picks among them: a step at a time over all rows made
        advise quadratic in the steps (2.5 min for 1,500 steps of 3M events)."""
        ops = self.trace.ops
        rows = np.flatnonzero(mask)
        starts, ends = ops["start_ns"][rows], ops["end_ns"][rows]
        return [rows[(ends > step.start_ns) & (starts < step.end_ns)] for step in self.steps]

    def step_of(self, time_ns: int) -> int | None:
        """The index (into :attr:`steps`) of the step looked at that holds ``time_ns``."""
        for k, step in enumerate(self.steps):
            if step.start_ns <= time_ns < step.end_ns:
                return k
        return None


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
    for step, rows in zip(view.steps, view.rows_per_step(eager)):
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
    """Tracings of a ``tf.function`` inside the steps looked at, and which of them are
    retracings (analysis/run/calls.py: a first call's tracings are a one-time cost, not
    counted). A retracing's time is from its start to the function run (``FunctionRun``)
    that follows it in the step: tracing, then instantiating the new concrete function;
    all of it is the step's ``compile`` part."""
    ops = view.trace.ops
    found = tracings(view.trace)
    building = view.named(GRAPH_BUILDING)
    counted_in: dict[int, int] = {}  # a tracing in two overlapping steps counts in the first
    for tracing in found:
        k = view.step_of(tracing.start_ns)
        if k is not None:
            counted_in[tracing.row] = k
    spans, tracing_events, retracings, functions = [], [], [], set()
    for k, (step, building_rows) in enumerate(zip(view.steps, view.rows_per_step(building))):
        tracing_events.append(len(building_rows))
        again = [t for t in found if counted_in.get(t.row) == k and t.retracing]
        retracings.append(len(again))
        for tracing in again:
            functions.add(tracing.function)
            end = tracing.end_ns if tracing.end_ns <= step.end_ns else int(ops["end_ns"][tracing.row])
            spans.append((tracing.start_ns, min(end, step.end_ns)))
    time = busy_ns(np.array([s for s, _ in spans], dtype=np.int64), np.array([e for _, e in spans], dtype=np.int64))
    versions: dict[str, list[str]] = {}
    for _, fn, name in first_runs(view.trace):
        versions.setdefault(fn, []).append(name)
    # python_tracer_level=1: the retracings' own frames (func_graph, autograph)
    python = _python_in(view, sorted(spans)) or None
    return RetracingEvidence(view.share(time), retracings_per_step=retracings,
                             functions={fn: versions.get(fn, []) for fn in sorted(f for f in functions if f)},
                             graph_buildings_per_step=tracing_events, steps=view.numbers(),
                             events=[GRAPH_BUILDING] if any(retracings) else [], sections=spans,
                             python_in_tracing_ns=python)


def xla_compile(view: StepView) -> XlaCompileEvidence:
    """XLA compilations inside the steps looked at (analysis/run/calls.py: the outermost
    backend compile events, each timed from the start of the call that compiles and runs
    the function; ``first_call`` marks a function's first call's, a one-time cost). A
    ``jit_compile`` function compiles once per new input shape, also when
    ``reduce_retracing=True`` traced it once. The input shapes are those the capture
    recorded for the step's call (metadata ``step_inputs``), where it did."""
    trace = view.trace
    shapes = _step_inputs(trace.metadata)
    per_step = [0] * len(view.steps)
    steps, functions, times, inputs, events, spans, first = [], [], [], [], set(), [], []
    for compilation in compilations(trace):
        k = view.step_of(int(trace.ops["start_ns"][compilation.row]))
        if k is None:
            continue
        step = view.steps[k]
        begin, end = max(compilation.start_ns, step.start_ns), min(compilation.end_ns, step.end_ns)
        per_step[k] += 1
        steps.append(step.number)
        functions.append(compilation.function)
        times.append(end - begin)
        inputs.append(shapes.get(str(step.number)))
        events.add(compilation.event)
        spans.append((begin, end))
        first.append(compilation.first_call)
    time = busy_ns(np.array([s for s, _ in spans], dtype=np.int64), np.array([e for _, e in spans], dtype=np.int64))
    return XlaCompileEvidence(view.share(time), per_step, steps, functions, times, inputs, sorted(events), spans,
                              first_call=first)


def _step_inputs(metadata) -> dict[str, str]:
    try:
        recorded = json.loads(metadata.get(STEP_INPUTS) or "{}")
    except (TypeError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def input_wait(view: StepView) -> InputWaitEvidence:
    """Time a step blocks on its input: its ``input`` part (analysis/run/breakdown.py):
    tf.data's ``IteratorGetNextOp::DoCompute`` (TF2), or a dequeue or iterator op (TF1
    queue runners, ``IteratorGetNext``)."""
    waiting = input_rows(view.trace)
    timeline = view.breakdown.timeline
    per_step, spans, found = [], [], Counter()
    for step, rows in zip(view.steps, view.rows_per_step(waiting)):
        stretches = timeline.stretches("input", step.start_ns, step.end_ns)
        per_step.append(sum(e - s for s, e in stretches))
        spans += stretches
        found.update(view.name_of(r) for r in rows.tolist())
    return InputWaitEvidence(view.share(sum(per_step)), per_step, dict(found), view.numbers(), spans)


def host_gaps(view: StepView, explained: Sections) -> HostGapsEvidence:
    """Step time when nothing runs: the step's ``idle`` part (analysis/run/breakdown.py: no
    TF op, kernel, input wait, tracing, compilation or framework event on any lane), less
    what another finding explains (``explained``: eager sections). With the Python tracer on
    (``python_tracer_level=1``), the Python functions running in those gaps are evidence too.

    Inside a ``tf.function`` call, the time between its ops is TF's own: binding the
    arguments, starting the executor, returning the results (1 to 2 ms a call for the
    performance examples' small CNN in TF 2.21, a fifth to a quarter of its step). None of
    the user's Python runs there, so it is no gap that moving Python work would close: it is
    the step's ``framework`` part (``framework_overhead``'s), reported here as
    ``call_overhead_ns_per_step``."""
    timeline = view.breakdown.timeline
    gaps, longest, holes = [], [], []
    overhead = _step_times(view, "framework")
    for step in view.steps:
        inside = [(max(s, step.start_ns), min(e, step.end_ns)) for s, e in explained
                  if e > step.start_ns and s < step.end_ns]
        step_holes = _less(timeline.stretches("idle", step.start_ns, step.end_ns), inside)
        gaps.append(sum(e - s for s, e in step_holes))
        longest.append(max((e - s for s, e in step_holes), default=0))
        holes += step_holes
    return HostGapsEvidence(view.share(sum(gaps)), gaps, longest, overhead, view.numbers(),
                            _python_in(view, holes) or None)


def framework_overhead(view: StepView, explained: Sections) -> FrameworkEvidence:
    """The framework's time between ops in each step: the step's ``framework`` part
    (analysis/run/breakdown.py: ``tf.function`` calls and their dispatch, the executor,
    Keras's step function, a TF1 session's executor between ops), less what another finding
    explains (``explained``: eager sections, where eager dispatch is eager_ops' time). Beside
    it, the step's ``ops`` part (the framework bounds the step when it takes longer than the
    ops), the ``tf.function`` calls per step, and the API that ran the steps, which decides
    the fix."""
    timeline = view.breakdown.timeline
    calls = function_calls(view.trace)
    framework = []
    ops_time = _step_times(view, "ops")
    per_call = [len(rows) for rows in view.rows_per_step(calls)]
    for step in view.steps:
        own = timeline.stretches("framework", step.start_ns, step.end_ns)
        inside = [(max(s, step.start_ns), min(e, step.end_ns)) for s, e in explained
                  if e > step.start_ns and s < step.end_ns]
        framework.append(sum(e - s for s, e in _less(own, inside)))
    return FrameworkEvidence(view.share(sum(framework)), framework, ops_time, per_call, view.breakdown.api,
                             view.numbers())


def _step_times(view: StepView, part: str) -> list[int]:
    """``part``'s time in each step looked at, in one query of the timeline."""
    starts = np.array([step.start_ns for step in view.steps], dtype=np.int64)
    ends = np.array([step.end_ns for step in view.steps], dtype=np.int64)
    return view.breakdown.timeline.time(part, starts, ends).tolist()


def _less(stretches: list[tuple[int, int]], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``stretches`` (in order, disjoint) less the intervals ``taken``."""
    if not taken:
        return stretches
    taken = sorted(taken)
    out = []
    for start, end in stretches:
        at = start
        for lo, hi in taken:
            if hi <= at or lo >= end:
                continue
            if lo > at:
                out.append((at, lo))
            at = max(at, hi)
        if at < end:
            out.append((at, end))
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


__all__ = ["GRAPH_BUILDING", "StepMemory", "StepView", "device_idle", "eager_ops", "framework_overhead",
           "function_calls", "host_gaps", "input_wait", "retracing", "xla_compile"]
