"""Where each step's time goes, in parts that add up to the step: ``ops``, ``framework``,
``input``, ``compile`` and ``idle`` (:data:`PARTS`).

Every moment of a step belongs to exactly one part, the first of these whose events cover
it (events of every thread count, so overlapping work is counted once):

- ``compile``: a ``tf.function`` being traced and its concrete function instantiated,
  or XLA compiling (:mod:`.calls`);
- ``input``: the step blocked on its input: tf.data's ``IteratorGetNextOp::DoCompute``,
  an ``IteratorGetNext`` or TF1 dequeue op;
- ``ops``: a TF op's kernel on the host, or a kernel or copy on an accelerator (the input
  pipeline's own ops, on ``tf_data`` threads, are not the step's);
- ``framework``: the framework between ops: a ``tf.function`` call and its dispatch
  (``TFE_Py_Execute*``, ``EagerExecute``, ``FunctionRun``), the executor
  (``ExecutorState::Process``), Keras's step function and the eager ops TF and Keras run
  around it (``OptionalHasValue``), a PjRt or CUDA call: every host event other than a step
  marker, a tracing, an XLA compilation or an input wait;
- ``idle``: no event at all: the user's Python (a Python tracer's frames name it), or waiting.

A format that records no host events (a TF1 RunMetadata or ``timeline.py`` JSON: ops only)
cannot tell the executor's time between ops from idle time: there the time between ops
inside the step is ``framework``, and a note says so; the step is the executor's span, so
the ``session.run`` call's Python and feed conversion before its first op are in no step.

On an accelerator the device's busy time (its kernels and copies, once) is split out as
well: per step, ``device_busy_ns`` and ``device_idle_ns``, what the host did while the
device idled (``device_idle_by_part``), and which side bounds the step (``bound``:
``"device"`` when the device is busy at least as long as the host works, else ``"host"``).

A run's parts (``Breakdown.parts``) are those of its median step: each part's median over
the steps counted (the steady state, :mod:`.steady`), scaled so that they add up to the
median step's duration; ``summary --json``, ``compare --json`` and the pages print them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...model.accelerator import device_rows
from ...model.schema import Category
from ...model.trace import Trace
from .calls import compilations, function_calls, tracings
from .intervals import AtMoments, Measure, compiled, distinct, measure_with, merged, row_measures, start_runs, union
from .intervals import union_of_rows as _union_of
from .vocabulary import INPUT_EVENTS, INPUT_OP_TYPES, rows_among, rows_with

PARTS = ("ops", "framework", "input", "compile", "idle")
# Which part a moment covered by several belongs to: the first in this order.
_PRIORITY = ("compile", "input", "ops", "framework")
_INPUT_LANES = re.compile(r"(?:^|\s)tf_data")     # tf.data's own threads: the pipeline's ops run there
APIS = ("keras_fit", "tf_function", "eager", "session", "unknown")


@dataclass(frozen=True)
class StepParts:
    """One step: its number, duration and parts (ns, adding up to the duration); on an
    accelerator, the device's busy and idle time, what the host did while the device idled,
    and which side bounds the step."""

    number: int
    duration_ns: int
    parts: dict[str, int]
    device_busy_ns: int | None = None
    device_idle_by_part: dict[str, int] | None = None
    bound: str | None = None

    def to_dict(self) -> dict:
        out: dict = {"parts": dict(self.parts)}
        if self.device_busy_ns is not None:
            out["device"] = {"busy_ns": self.device_busy_ns, "idle_ns": self.duration_ns - self.device_busy_ns,
                             "idle_by_part": dict(self.device_idle_by_part or {}), "bound": self.bound}
        return out


@dataclass(frozen=True)
class Breakdown:
    """A run's steps split into :data:`PARTS` (every step, in order), and the median step
    of those counted: ``median_ns`` and ``parts`` (add up to it); on an accelerator
    ``device`` (the median step's busy and idle device time, and the side that bounds most
    counted steps). ``api``: what ran the steps (:data:`APIS`), which fixes fit;
    ``notes``: what the format cannot tell."""

    steps: list[StepParts]
    counted: tuple[int, ...]
    median_ns: float
    parts: dict[str, float]
    api: str = "unknown"
    device: dict | None = None
    notes: list[str] = field(default_factory=list)
    timeline: "PartTimeline | None" = field(default=None, repr=False, compare=False)

    def per_step(self, part: str) -> list[int]:
        """``part``'s time in each counted step."""
        return [self.steps[p].parts[part] for p in self.counted]

    def durations(self) -> list[int]:
        return [self.steps[p].duration_ns for p in self.counted]

    def share(self, part: str) -> float:
        return self.parts[part] / self.median_ns if self.median_ns else 0.0

    def to_dict(self) -> dict:
        return {"median_ns": self.median_ns, "parts": dict(self.parts), "api": self.api,
                "steps": [self.steps[p].number for p in self.counted], "device": self.device, "notes": list(self.notes)}



class PartTimeline:
    """The trace's time cut into segments, each of one part (and, on an accelerator, with the
    device busy or not, and the host working or not): how much of a part any window holds,
    from cumulative sums made the first time a part is asked for."""

    def __init__(self, bounds: np.ndarray, part: np.ndarray, device: np.ndarray | None, host: np.ndarray | None):
        self.bounds = bounds                  # segment k is [bounds[k], bounds[k + 1])
        self.part, self.device, self.host = part, device, host
        self._cumulative: dict[str, np.ndarray] = {}
        self._flagged: dict[str, np.ndarray] = {}  # kept: the findings ask a step at a time

    def _flags(self, what: str) -> np.ndarray:
        """Per segment, whether it is ``what``: a part, ``device_busy``, ``device_idle:<part>``
        or ``host_busy`` (the last three on an accelerator only)."""
        if what == "device_busy":
            return self.device
        if what == "host_busy":
            return self.host
        if what not in self._flagged:
            if what.startswith("device_idle:"):
                self._flagged[what] = (self.part == PARTS.index(what.split(":", 1)[1])) & ~self.device
            else:
                self._flagged[what] = self.part == PARTS.index(what)
        return self._flagged[what]

    def _sums(self, what: str) -> np.ndarray:
        if what not in self._cumulative:
            self._cumulative[what] = _cumsum(np.diff(self.bounds).astype(np.int64) * self._flags(what))
        return self._cumulative[what]

    def time(self, what: str, start, end) -> np.ndarray:
        """The time ``what`` (a part, ``device_busy``, ``device_idle:<part>``, ``host_busy``)
        takes in each window ``[start, end)`` (arrays of ns)."""
        return self._at(what, np.asarray(end, dtype=np.int64)) - self._at(what, np.asarray(start, dtype=np.int64))

    def stretches(self, what: str, lo: int, hi: int) -> list[tuple[int, int]]:
        """The stretches of ``[lo, hi)`` that ``what`` covers, in order."""
        bounds = self.bounds
        if len(bounds) < 2 or hi <= lo:
            return []
        flags = self._flags(what)
        first = max(int(np.searchsorted(bounds, lo, side="right")) - 1, 0)
        last = min(int(np.searchsorted(bounds, hi, side="left")), len(bounds) - 1)
        found: list[tuple[int, int]] = []
        for k in np.flatnonzero(flags[first:last]).tolist():
            start, end = max(int(bounds[first + k]), lo), min(int(bounds[first + k + 1]), hi)
            if end <= start:
                continue
            if found and found[-1][1] == start:
                found[-1] = (found[-1][0], end)
            else:
                found.append((start, end))
        return found

    def _at(self, what: str, t: np.ndarray) -> np.ndarray:
        """``what``'s time from the first bound to ``t``."""
        bounds = self.bounds
        if len(bounds) < 2:
            return np.zeros(t.shape, dtype=np.int64)
        flags = self._flags(what)
        k = np.clip(np.searchsorted(bounds, t, side="right") - 1, 0, len(bounds) - 2)
        inside = np.clip(t - bounds[k], 0, bounds[k + 1] - bounds[k])
        if what in self._cumulative or len(t) * 64 > len(bounds):
            return self._sums(what)[k] + inside * flags[k]
        # A few moments (the steps' bounds) in millions of segments (a 3M-event trace's): the
        # sums up to them alone, from one pass over the segments, not a cumulative sum kept
        # for every part (48 MB each).
        at = np.unique(np.r_[0, k.ravel()])
        partial = np.add.reduceat(np.diff(bounds).astype(np.int64) * flags, at)
        before = np.r_[0, np.cumsum(partial[:-1], dtype=np.int64)]
        return before[np.searchsorted(at, k)] + inside * flags[k]


def _cumsum(values: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(values, dtype=np.int64)])


def _covers(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each moment ``t`` lies in the union ``(starts, ends)``."""
    if not len(starts):
        return np.zeros(len(t), dtype=bool)
    k = np.searchsorted(starts, t, side="right") - 1
    return (k >= 0) & (ends[np.maximum(k, 0)] > t)


def step_breakdown(trace: Trace, counted=None) -> Breakdown:
    """Every step of ``trace`` split into :data:`PARTS`; the median over the steps at
    ``counted`` (positions in ``trace.steps``; default all)."""
    steps = trace.steps
    counted = tuple(range(len(steps))) if counted is None else tuple(counted)
    found = part_rows(trace)
    on_device, notes = found.device is not None, found.notes
    starts = np.array([s.start_ns for s in steps], dtype=np.int64)
    ends = np.array([s.end_ns for s in steps], dtype=np.int64)
    times = {what: values.tolist() for what, values in step_times(trace, found, starts, ends).items()}
    del found  # its row masks (3M rows: 3 MB each)
    rows = []
    for k, step in enumerate(steps):
        parts = {name: int(times[name][k]) for name in PARTS}
        if not on_device:
            rows.append(StepParts(step.number, step.duration_ns, parts))
        else:
            busy = int(times["device_busy"][k])
            rows.append(StepParts(step.number, step.duration_ns, parts, busy,
                                  {name: int(times[f"device_idle:{name}"][k]) for name in PARTS},
                                  "device" if busy >= times["host_busy"][k] else "host"))
    median_ns, parts = _median_parts(rows, counted)
    # The segmentation the findings read is made if they ask (a summary never does), from the
    # parts' unions made then: none is kept until then (3M ops: 48 MB).
    timeline = _LazyTimeline(lambda: _part_timeline(*part_spans(trace)[:3], steps))
    return Breakdown(rows, counted, median_ns, parts, api_of(trace), _device_summary(rows, counted, median_ns),
                     notes, timeline)


# What a step's time is split into on an accelerator, besides its parts (PartTimeline's names).
DEVICE_TIMES = ("device_busy", "host_busy", *(f"device_idle:{name}" for name in PARTS))


def step_times(trace: Trace, found: "PartRows", starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """Each part's time in each window ``[start, end)`` (int64 arrays by :data:`PARTS`), and on
    an accelerator (``found.device`` not None) the :data:`DEVICE_TIMES` too: what
    :func:`_part_timeline`'s segments give, with no segmentation made. Where the trace's rows
    are a few runs in start order (an XSpace's lines), one C walk over them measures every
    union needed (:func:`_step_times_compiled`); else numpy makes the unions
    (:func:`_step_times_numpy`)."""
    if not len(starts):
        kinds = PARTS + (DEVICE_TIMES if found.device is not None else ())
        return {what: np.zeros(0, dtype=np.int64) for what in kinds}
    if compiled():
        runs = start_runs(trace.ops["start_ns"])
        if runs is not None:
            return _step_times_compiled(trace, found, runs, starts, ends)
    return _step_times_numpy(trace, found, starts, ends)


def _step_times_numpy(trace: Trace, found: "PartRows", starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`step_times` from the parts' unions: what each adds to the union of those before
    it (:func:`_part_times`); on an accelerator, from the segments themselves."""
    spans, device, host = _spans_of(trace, found)
    if device is None:
        return _part_times(spans, starts, ends)
    timeline = _part_timeline(spans, device, host, trace.steps)
    return {what: timeline.time(what, starts, ends) for what in PARTS + DEVICE_TIMES}


# The bits of _step_times_compiled's part byte per row: which parts' unions a row is in.
_ROW_BITS = {"input": 1, "ops": 2, "framework": 4, "device": 8, "host": 16}


def _step_times_compiled(trace: Trace, found: "PartRows", runs: np.ndarray, starts: np.ndarray,
                         ends: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`step_times` from one C walk of the rows (:func:`~.intervals.row_measures`): a
    byte per row says which parts it is in, and each union needed is measured at the steps'
    bounds as the walk makes it, none kept. A part's time is what the union of the parts up
    to it in :data:`_PRIORITY` adds to the union of those before (as :func:`_part_times`). On
    an accelerator, the device's busy time in a part is that part's time less what it adds to
    the same unions with the device's rows, and the host's work is one union more.

    The parts that are no rows (compilations, a TF1 session's steps as its framework) are few
    stretches: measured by :func:`~.intervals.measure_with` over the walk's unions, looked up
    at their bounds too."""
    ops = trace.ops
    bits = np.zeros(len(trace), dtype=np.uint8)
    for name, rows in (("input", found.input), ("ops", found.ops), ("framework", found.framework),
                       ("device", found.device), ("host", found.host)):
        if rows is not None:
            np.bitwise_or(bits, _ROW_BITS[name], out=bits, where=rows)
    # The unions asked for: those of the parts up to each in _PRIORITY, each a mask of row
    # bits and the stretches that are no rows.
    levels, mask, extra = [], 0, []
    for name in _PRIORITY:
        mask |= _ROW_BITS.get(name, 0)
        if name == "compile":
            extra.append(found.compile)
        elif name == "framework" and found.framework_spans is not None:
            extra.append(found.framework_spans)
        levels.append((mask, _stretches(extra)))
    covered = len(levels)
    if found.device is not None:
        levels += [(_ROW_BITS["device"], _stretches([])), (_ROW_BITS["host"], found.compile)]
        levels += [(mask | _ROW_BITS["device"], extra) for mask, extra in levels[:covered]]
    moments = distinct(np.concatenate([starts, ends] + [bound for _, extra in levels for bound in extra]))
    measured = row_measures(ops["start_ns"], ops["end_ns"], runs, bits, [mask for mask, _ in levels], moments)
    del bits

    def within(level: int) -> np.ndarray:  # how much of the level's union lies in each window
        at, extra = AtMoments(moments, measured[level]), levels[level][1]
        return measure_with(at, extra, ends) - measure_with(at, extra, starts)

    up_to = [within(k) for k in range(covered)]
    times = {name: up_to[k] - (up_to[k - 1] if k else 0) for k, name in enumerate(_PRIORITY)}
    times["idle"] = (ends - starts) - up_to[-1]
    if found.device is None:
        return {name: times[name] for name in PARTS}
    busy = within(covered)
    # The device's busy time inside the union of the parts up to each: the union's time and
    # the device's, less the time of the two together.
    busy_up_to = [up_to[k] + busy - within(covered + 2 + k) for k in range(covered)]
    idle_by = {name: times[name] - (busy_up_to[k] - (busy_up_to[k - 1] if k else 0))
               for k, name in enumerate(_PRIORITY)}
    idle_by["idle"] = times["idle"] - (busy - busy_up_to[-1])
    times.update({"device_busy": busy, "host_busy": within(covered + 1)})
    times.update({f"device_idle:{name}": idle_by[name] for name in PARTS})
    return {what: times[what] for what in PARTS + DEVICE_TIMES}


def _stretches(unions: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of a few unions (sorted, disjoint stretches)."""
    if not unions:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if len(unions) == 1:
        return unions[0]
    return union(np.concatenate([u[0] for u in unions]), np.concatenate([u[1] for u in unions]))


def _part_timeline(spans: dict, device, host, steps) -> PartTimeline:
    """The trace's time cut at every bound of every part's union, each segment given the
    first part in :data:`_PRIORITY` that covers it (else idle)."""
    cuts = [np.asarray(s, dtype=np.int64) for pair in spans.values() for s in pair]
    cuts += [np.asarray(s, dtype=np.int64) for s in (device + host if device is not None else ())]
    cuts.append(np.array([s.start_ns for s in steps] + [s.end_ns for s in steps], dtype=np.int64))
    bounds = distinct(np.concatenate(cuts)) if cuts else np.zeros(0, dtype=np.int64)
    left = bounds[:-1]
    part = np.full(len(left), PARTS.index("idle"), dtype=np.int8)
    for name in reversed(_PRIORITY):  # the first in priority is written last, over the others
        part[_covers(*spans[name], left)] = PARTS.index(name)
    busy = _covers(*device, left) if device is not None else None
    host_busy = _covers(*host, left) if device is not None else None  # which side bounds a device step
    return PartTimeline(bounds, part, busy, host_busy)


def _part_times(spans: dict, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """What :func:`_part_timeline`'s segments give each window ``[start, end)``, from the
    parts' unions alone: a part's time is what it adds to the union of the parts before it
    in :data:`_PRIORITY` (the segments that are its own), idle the window less all of them."""
    times = {}
    covered = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    measure = Measure(covered)
    before_start = before_end = np.zeros(len(starts), dtype=np.int64)
    for index, name in enumerate(_PRIORITY):
        if index < len(_PRIORITY) - 1:
            covered = merged(covered, spans[name])
            measure = Measure(covered)
            at_start, at_end = measure(starts), measure(ends)
        else:  # the last part's union with the others is only measured, not made (3M ops: 96 MB)
            at_start, at_end = measure_with(measure, spans[name], starts), measure_with(measure, spans[name], ends)
        times[name] = (at_end - at_start) - (before_end - before_start)
        before_start, before_end = at_start, at_end
    times["idle"] = (ends - starts) - (before_end - before_start)
    return {name: times[name] for name in PARTS}


class _LazyTimeline:
    """A :class:`PartTimeline` made the first time it is asked anything (a summary of a
    trace without an accelerator never asks; the findings do)."""

    def __init__(self, make):
        self._make, self._made = make, None

    def __getattr__(self, name: str):
        if self._made is None:
            self._made = self._make()
        return getattr(self._made, name)


@dataclass(frozen=True)
class PartRows:
    """The rows of each part (masks, before the priority is applied), and the parts that are
    no rows, as unions: compilations (:mod:`.calls`), and a TF1 session's steps where they
    are its framework (``framework`` None then). On an accelerator (``device`` not None) the
    device's rows, and the host's work (``host``, with the compilations), where a device's
    step may be bound by it. ``notes``: what the format cannot tell."""

    input: np.ndarray
    ops: np.ndarray
    framework: np.ndarray | None
    compile: tuple[np.ndarray, np.ndarray]
    framework_spans: tuple[np.ndarray, np.ndarray] | None
    device: np.ndarray | None
    host: np.ndarray | None
    notes: list[str]


def part_rows(trace: Trace) -> PartRows:
    """The rows of each part of ``trace`` (:class:`PartRows`)."""
    ops = trace.ops
    category = ops["category"]
    notes = []
    is_op = category == Category.OP
    waiting = input_rows(trace)
    framework_eager = rows_with(trace, "name", "eager") & rows_with(trace, "op_type", "framework_eager_op") & is_op
    on_input_lanes = _lane_mask(trace, _INPUT_LANES.search)
    host_ops = is_op & ~waiting & ~framework_eager & ~on_input_lanes
    del on_input_lanes
    on_device = device_rows(category, ops["flags"])
    compile_start, compile_end = [], []
    for found in tracings(trace) + compilations(trace):
        compile_start.append(found.start_ns)
        compile_end.append(found.end_ns)
    compiling = union(np.array(compile_start, dtype=np.int64), np.array(compile_end, dtype=np.int64))
    host_events = (category == Category.HOST) & ~_step_markers(trace)
    framework = host_events | framework_eager | function_calls(trace)
    del framework_eager
    framework_rows, framework_spans = framework, None
    if not host_events.any() and is_op.any() and is_session_record(trace):
        # ops only (TF1 step stats, timeline.py): the time between ops is the executor's
        framework_rows = None
        framework_spans = union(np.array([s.start_ns for s in trace.steps], dtype=np.int64),
                                np.array([s.end_ns for s in trace.steps], dtype=np.int64))
        notes.append("ops only, no host events (a TF1 RunMetadata or timeline): the time between ops inside a "
                     "step is counted as framework (the executor), which the format cannot tell from idle time; "
                     "the session.run call's Python and feed conversion before the first op are in no step")
    elif not is_op.any() and not on_device.any():
        notes.append("no op events (host_tracer_level 1?): op time cannot be told from framework time")
    del host_events, is_op
    device = host = None
    if on_device.any():
        device = on_device
        notes.append("an accelerator run: ops are its kernels and copies (and host ops); the device's idle time "
                     "is split by what the host did meanwhile")
        host = (host_ops | waiting | framework) & ~on_device  # the host's work (the compilations too)
    return PartRows(waiting, host_ops | on_device, framework_rows, compiling, framework_spans, device, host, notes)


def part_spans(trace: Trace):
    """The events of each part as ``(starts, ends)`` (before the priority is applied), the
    device's busy rows and the host's work (None: no accelerator), and the notes on what the
    format cannot tell."""
    found = part_rows(trace)
    return (*_spans_of(trace, found), found.notes)


def _spans_of(trace: Trace, found: PartRows):
    """The unions of :func:`part_spans` from the parts' rows."""
    start, end = trace.ops["start_ns"], trace.ops["end_ns"]
    spans = {
        "compile": found.compile,
        "input": _union_of(start, end, found.input),
        "ops": _union_of(start, end, found.ops),
        "framework": _union_of(start, end, found.framework) if found.framework is not None else found.framework_spans,
    }
    if found.device is None:
        return spans, None, None
    host = union(np.concatenate([start[found.host], found.compile[0]]),
                 np.concatenate([end[found.host], found.compile[1]]))
    return spans, _union_of(start, end, found.device), host


# The formats that hold a TF1 session's step stats (readers/stepstats.py and its kin).
_STEPSTATS_FORMATS = ("runmetadata", "pbtxt", "events", "pickle", "session", "tfvis")


def is_session_record(trace: Trace) -> bool:
    """A TF1 session's record of its executor: step stats, ``timeline.py``'s JSON of them, or
    a conversion of either (every step stats holds the executor's ``_SOURCE`` node)."""
    source = trace.string_id("_SOURCE")
    return (trace.source_format in _STEPSTATS_FORMATS or trace.metadata.get("chrome_writer") == "timeline.py"
            or (source >= 0 and bool((trace.ops["name"] == source).any())))


def input_rows(trace: Trace) -> np.ndarray:
    """Rows of a step blocked on its input: tf.data's ``IteratorGetNextOp::DoCompute``, a
    dequeue or ``IteratorGetNext`` op."""
    return rows_with(trace, "name", "input_event") | \
        (rows_with(trace, "op_type", "input_op") & (trace.ops["category"] == Category.OP))


def _lane_mask(trace: Trace, test) -> np.ndarray:
    """Rows on the lanes whose name passes ``test``."""
    if not len(trace) or not trace.lanes:
        return np.zeros(len(trace), dtype=bool)
    return rows_among(trace.ops["lane"], [k for k, lane in enumerate(trace.lanes) if test(lane.name)])


def _step_markers(trace: Trace) -> np.ndarray:
    """Host rows that mark steps (``train`` around a step, with ``step_num``): named as a
    step is, less its number (by name, not by the ``step_num`` stat, which a read of the
    ops alone leaves out); a tf.function call a step was made from is no marker."""
    names = {step.name.rsplit(" ", 1)[0] for step in trace.steps if step.name}
    marked_ids = [trace.string_id(name) for name in names if trace.string_id(name) >= 0]
    markers = rows_among(trace.ops["name"], marked_ids)
    return markers & ~function_calls(trace)


def api_of(trace: Trace) -> str:
    """What ran the steps (:data:`APIS`): Keras ``fit`` (its step functions), a
    ``tf.function`` loop, eager ops, a TF1 session (ops with no host events), or unknown."""
    ops = trace.ops
    if rows_with(trace, "name", "keras").any():  # event names, not stats' values
        return "keras_fit"
    if function_calls(trace).any() or rows_with(trace, "name", "function").any():
        return "tf_function"
    is_op = ops["category"] == Category.OP
    if (rows_with(trace, "name", "eager") & is_op).any():
        return "eager"
    if is_session_record(trace):
        return "session"
    return "unknown"


def _median_parts(rows: list[StepParts], counted: tuple[int, ...]) -> tuple[float, dict[str, float]]:
    """The median step's duration, and each part's median over the counted steps scaled to
    add up to it (all of it idle where no part has time)."""
    if not counted:
        return 0.0, {name: 0.0 for name in PARTS}
    median = float(np.median([rows[p].duration_ns for p in counted]))
    raw = {name: float(np.median([rows[p].parts[name] for p in counted])) for name in PARTS}
    total = sum(raw.values())
    if total <= 0:
        return median, {name: (median if name == "idle" else 0.0) for name in PARTS}
    if total == median:  # the medians add up already (one step, or steps alike): as they are
        return median, raw
    return median, {name: value * median / total for name, value in raw.items()}


def _device_summary(rows: list[StepParts], counted: tuple[int, ...], median_ns: float) -> dict | None:
    """The median step's device time: busy and idle (busy's median share of the median
    step), idle by the host's part, and which side bounds most counted steps."""
    chosen = [rows[p] for p in counted if rows[p].device_busy_ns is not None]
    if not chosen:
        return None
    busy_share = float(np.median([r.device_busy_ns / r.duration_ns if r.duration_ns else 0.0 for r in chosen]))
    busy = busy_share * median_ns
    idle_by = {name: float(np.median([r.device_idle_by_part[name] for r in chosen])) for name in PARTS}
    scale = (median_ns - busy) / sum(idle_by.values()) if sum(idle_by.values()) > 0 else 0.0
    bound = sum(1 for r in chosen if r.bound == "device")
    return {"busy_ns": round(busy), "idle_ns": round(median_ns - busy),
            "idle_by_part": {name: round(value * scale) for name, value in idle_by.items()},
            "bound": "device" if 2 * bound >= len(chosen) else "host"}


__all__ = ["APIS", "Breakdown", "DEVICE_TIMES", "INPUT_EVENTS", "INPUT_OP_TYPES", "PARTS", "PartRows", "PartTimeline",
           "StepParts", "api_of", "input_rows", "is_session_record", "part_rows", "part_spans", "step_breakdown",
           "step_times", "union"]
