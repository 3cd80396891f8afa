"""One large XSpace read a window of whole steps at a time, so that a writer that streams
(:mod:`tracebridge.writers.perfetto_stream`) never holds the whole trace.

A TF 2 profile of 10M events holds nearly all of them on one host line, so reading line by
line bounds nothing: the windows cut time instead. Window k holds every event, on every
line, whose start lies in ``[T_k, T_k+1)``, each ``T`` the start of a step (step markers:
events with a ``step_num`` stat, :mod:`.xspace_steps`), chosen so that a window holds about
:data:`WINDOW_EVENTS` events. Each window is a sub-XSpace (every plane with its metadata,
every line with its own fields, and only the window's events, their bytes copied) read by
the reader itself (:func:`~.xspace.decode_xspace`, :func:`~.xspace.add_decoded`): names,
categories, XLA attribution and steps need no second implementation. Every window's
trace has the whole file's devices and lanes, in the whole read's order (lanes that have
no events in a window are empty there).

What a window cannot see: an event linked to one in another window. A device event that
no annotation names takes its TF op from the host launch with its ``correlation_id``
(:func:`~.xspace._link_by_correlation`), and links (flows) join two events; where the two
fall in different windows, the link is lost, and such a device event keeps its kernel's
name. Steps cut where a step starts, and a launch and its kernels lie in one step, so
this is rare; the op rows, their times and steps are the whole read's.

Only a file the plan can cut is windowed (:func:`plan_windows` returns None otherwise, and
the caller reads it whole): the C walker (:mod:`._wirec`) is built, the file holds step
markers and at least :data:`MIN_WINDOWS` windows' worth of events, every line's events are in time order
and lie side by side in its bytes, and no step's markers are split by a cut.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator

import numpy as np

from .._wire import varint_bytes
from ..errors import TraceFormatError
from ..model.builder import TIME_LIMIT_NS, TraceBuilder
from ..model.trace import Trace
from . import wire
from .wire import WireError, as_signed, decode, strings_per_message
from .xspace import (_LINE, _PLANE, _EVENT, _PS_LIMIT, _SPACE, _STAT, _TASK_ENVIRONMENT, _Plane, _add_lanes,
                     _read_event_metadata, _read_plane_stats, _read_stat_metadata, add_decoded, decode_xspace,
                     read_xspace_files)

WINDOW_EVENTS = 1_000_000  # events a window holds, about: bounds the memory of one window's trace
CHECKPOINT_EVERY = 256  # a line's events are counted to this precision (at most a 16th of a
# window) when windows are chosen
MIN_WINDOWS = 4  # files of fewer windows' worth of events are read whole: below that, the whole
# conversion's peak is far from the goal (3M events: 310 MiB) and windows only cost time
MIN_EVENT_BYTES = 16  # about the bytes of a TF host event (16.3 in bench/gen_xspace.py's): files
# below MIN_WINDOWS windows of these are not planned (the plan's walk costs 0.2 s on 48 MB)
STEP_STAT = "step_num"
_NUMBERS = (_LINE.events, _EVENT.offset_ps, _EVENT.stats, _STAT.metadata_id, _STAT.uint64_value, _STAT.int64_value)


@dataclasses.dataclass
class _Line:
    """One XLine: where it is (its payload, and its field with the tag in its plane), its
    clock (ns) and where its events lie."""
    plane: int
    field_start: int
    start: int
    end: int
    clock_ns: int
    count: int = 0
    first: int = 0
    last: int = 0
    checkpoints: np.ndarray | None = None  # (where, offset_ps) of every CHECKPOINT_EVERY-th event
    cuts: list[int] = dataclasses.field(default_factory=list)  # where each window's events begin, then `last`


@dataclasses.dataclass
class XSpaceWindows:
    """The plan of one XSpace's windows; :meth:`traces` reads them one at a time."""
    path: str
    raw: bytes
    host: str | None
    metadata: dict
    planes: list[tuple[int, int]]  # each plane's payload span
    lines: list[_Line]
    lanes: types.SimpleNamespace  # the whole file's lines with events, for the lanes of every window
    head: bytes  # the XSpace's other fields (errors, warnings, hostnames), in every window
    cuts_ns: list[int]  # T_1 ... T_k: where windows 2 ... k + 1 begin
    events: int  # in the whole file
    steps: int
    threads: int = 1  # threads that share a window's per-event work (xspace.decode_xspace)

    @property
    def windows(self) -> int:
        return len(self.cuts_ns) + 1

    def window_bytes(self, index: int) -> bytes:
        """The sub-XSpace of window ``index``: every plane, every line, the window's events."""
        raw = memoryview(self.raw)
        parts = []
        lines_of = {}
        for line in self.lines:
            lines_of.setdefault(line.plane, []).append(line)
        for plane, (start, end) in enumerate(self.planes):
            pieces, at = [], start
            for line in lines_of.get(plane, ()):
                pieces.append(raw[at:line.field_start])
                payload = b"".join((raw[line.start:line.first], raw[line.cuts[index]:line.cuts[index + 1]],
                                    raw[line.last:line.end]))
                pieces.append(_length_field(_PLANE.lines, payload))
                at = line.end
            pieces.append(raw[at:end])
            parts.append(_length_field(_SPACE.planes, b"".join(pieces)))
        parts.append(self.head)
        return b"".join(parts)

    def traces(self) -> Iterator[Trace]:
        """Each window's trace, in time order; only one is made at a time."""
        for index in range(self.windows):
            yield self.read_window(index)

    def read_window(self, index: int) -> Trace:
        data = self.window_bytes(index)
        builder = TraceBuilder({"source_format": "xspace", **self.metadata})
        try:
            decoded = decode_xspace(builder, data, host=self.host, threads=self.threads)
        except WireError:
            # a byte offset in the window's bytes names no place in the file: the whole
            # read names the error where it is
            read_xspace_files([(self.path, self.raw, self.host)], dict(self.metadata))
            raise TraceFormatError("corrupt XSpace", path=self.path) from None
        del data
        # The whole file's devices and lanes, in its order, before the window's own.
        _add_lanes(builder, decoded.planes, decoded.host, self.lanes)
        add_decoded(builder, decoded)
        if decoded.errors:
            builder.note(xspace_errors="; ".join(decoded.errors))
        if decoded.warnings:
            builder.note(xspace_warnings="; ".join(decoded.warnings))
        return builder.build()


def plan_windows(path: str, raw: bytes, host: str | None = None, metadata: dict | None = None, *,
                 window_events: int | None = None, threads: int = 1) -> XSpaceWindows | None:
    """The windows of the XSpace ``raw`` (read from ``path``), or None where it is read
    whole (see the module's doc). ``window_events``: about how many events a window holds
    (default :data:`WINDOW_EVENTS`); ``threads``: as :func:`~.xspace.decode_xspace`'s, for
    each window. Malformed bytes give None too: the whole read then names the error."""
    window_events = window_events or WINDOW_EVENTS
    if not wire.compiled() or len(raw) < MIN_WINDOWS * window_events * MIN_EVENT_BYTES:
        return None
    try:
        windows = _plan(path, raw, host, dict(metadata or {}), window_events)
    except WireError:
        return None
    if windows is not None:
        windows.threads = threads
    return windows


def _plan(path: str, raw: bytes, host: str | None, metadata: dict, window_events: int) -> XSpaceWindows | None:
    top = decode(raw, [0], [len(raw)])
    _, plane_starts, plane_ends = top.spans(_SPACE.planes)
    if not len(plane_starts):
        return None
    n_planes = len(plane_starts)
    planes_f = decode(raw, plane_starts, plane_ends)
    planes = [_Plane(name) for name in strings_per_message(raw, planes_f, _PLANE.name, n_planes)]
    _read_stat_metadata(raw, planes_f, planes)
    _read_event_metadata(raw, planes_f, planes)
    _read_plane_stats(raw, planes_f, planes)
    if any(STEP_STAT in stats for plane in planes for stats in plane.event_stats.values()):
        return None  # markers that XLA's metadata spreads to events: not found by the walk
    base_ns = 0
    for plane in planes:  # as xspace._read_planes finds it
        if plane.name == _TASK_ENVIRONMENT and isinstance(plane.stats.get("profile_start_time"), int):
            base_ns = plane.stats["profile_start_time"]
    base_ns = min(max(base_ns, -TIME_LIMIT_NS), TIME_LIMIT_NS)
    line_owner, line_starts, line_ends = planes_f.spans(_PLANE.lines)
    n_lines = len(line_starts)
    if not n_lines:
        return None
    lines_f = decode(raw, line_starts, line_ends, skip=(_LINE.events,))
    line_ts = as_signed(lines_f.scalar(_LINE.timestamp_ns, n_lines, np.uint64))
    lines = []
    for index, (plane, start, end) in enumerate(zip(line_owner.tolist(), line_starts.tolist(), line_ends.tolist())):
        field_start = _field_start(raw, start, end, _PLANE.lines)
        if field_start is None:
            return None
        clock = base_ns + min(max(int(line_ts[index]), -TIME_LIMIT_NS // 2), TIME_LIMIT_NS // 2)
        lines.append(_Line(plane, field_start, start, end, clock))
    step_ids = [np.array(sorted(i for i, name in plane.stat_names.items() if name == STEP_STAT), dtype=np.int64)
                for plane in planes]
    no_cuts = np.zeros(0, dtype=np.int64)
    markers: dict[int, list[int]] = {}  # step number -> its markers' starts
    every = max(1, min(CHECKPOINT_EVERY, window_events // 16))
    for line in lines:
        walked = wire._wirec.line_plan(raw, line.start, line.end, _NUMBERS, every, step_ids[line.plane],
                                       no_cuts)
        if walked is None:
            return None
        line.count, ordered, contiguous, line.first, line.last, checkpoints, found, _ = walked
        if line.count and not (ordered and contiguous):
            return None
        line.checkpoints = np.frombuffer(checkpoints or b"", dtype=np.int64).reshape(-1, 2)
        for _, offset, value, field in np.frombuffer(found or b"", dtype=np.int64).reshape(-1, 4).tolist():
            number = value if field == _STAT.int64_value else value & ((1 << 64) - 1)  # as _stat_values reads them
            start_ns = min(max(offset, -_PS_LIMIT), _PS_LIMIT) // 1000 + line.clock_ns
            markers.setdefault(number, []).append(start_ns)
    events = sum(line.count for line in lines)
    if not markers or events < MIN_WINDOWS * window_events:
        return None
    cuts_ns = _choose_cuts(lines, markers, window_events, every)
    if not cuts_ns:
        return None
    for line in lines:
        thresholds = [(t - line.clock_ns) * 1000 for t in cuts_ns]
        if not all(-_PS_LIMIT < t < _PS_LIMIT for t in thresholds):
            return None  # a cut beyond the clipped offsets: not where the reader puts events
        places = _cut_places(raw, line, thresholds)
        if places is None:
            return None
        line.cuts = [line.first, *places, line.last]
        line.checkpoints = None
    with_events = [index for index, line in enumerate(lines) if line.count]
    names = types.SimpleNamespace(
        line_owner=line_owner, n_lines=n_lines, runs=lambda: [(line, 0, 0) for line in with_events],
        line_names=strings_per_message(raw, lines_f, _LINE.name, n_lines),
        display=strings_per_message(raw, lines_f, _LINE.display_name, n_lines),
        line_ids=as_signed(lines_f.scalar(_LINE.id, n_lines, np.uint64)))
    head = b"".join(_length_field(number, raw[start:end])
                    for number in (_SPACE.errors, _SPACE.warnings, _SPACE.hostnames)
                    for _, start, end in zip(*top.spans(number)))
    return XSpaceWindows(path=path, raw=raw, host=host, metadata=metadata,
                         planes=list(zip(plane_starts.tolist(), plane_ends.tolist())), lines=lines, lanes=names,
                         head=head, cuts_ns=cuts_ns, events=events, steps=len(markers))


def _cut_places(raw: bytes, line: _Line, thresholds: list[int]) -> list[int] | None:
    """Where in ``line``'s bytes the first event at or after each threshold (an offset, ps)
    begins. Its events are in time order, so it lies between the two checkpoints of the
    first walk around the threshold: only the events between them are walked again, not the
    line (10M events: 0.4 s). None where those bytes are malformed."""
    where, offset = line.checkpoints[:, 0], line.checkpoints[:, 1]
    places = []
    for threshold in thresholds:
        after = int(np.searchsorted(offset, threshold, side="left"))  # the first checkpoint not before it
        if after == 0:  # (the first checkpoint is the first event)
            places.append(line.first)
            continue
        lo, hi = int(where[after - 1]), int(where[after]) if after < len(where) else line.last
        walked = wire._wirec.line_plan(raw, lo, hi, _NUMBERS, hi - lo + 1, np.zeros(0, dtype=np.int64),
                                       np.array([threshold], dtype=np.int64))
        if walked is None:
            return None
        places.append(int(np.frombuffer(walked[7], dtype=np.int64)[0]))
    return places


def _choose_cuts(lines: list[_Line], markers: dict[int, list[int]], window_events: int, every: int) -> list[int]:
    """Step starts where windows begin: each window about ``window_events`` events (from
    the lines' checkpoints), and no step's markers on both sides of a cut."""
    steps = sorted((min(starts), max(starts)) for starts in markers.values())
    begins = np.array([first for first, _ in steps], dtype=np.int64)
    latest = np.maximum.accumulate(np.array([last for _, last in steps], dtype=np.int64))
    # a cut at step j's start: every marker of the steps before starts before it
    candidates = [begins[j] for j in range(1, len(steps)) if latest[j - 1] < begins[j]]
    if not candidates:
        return []
    candidates = np.array(candidates, dtype=np.int64)
    before = np.zeros(len(candidates), dtype=np.int64)  # events that start before each candidate, about
    for line in lines:
        if line.count:
            offsets = line.checkpoints[:, 1]
            found = np.searchsorted(offsets, (candidates - line.clock_ns) * 1000, side="left")
            before += np.minimum(found * every, line.count)
    total = sum(line.count for line in lines)
    cuts, done = [], 0
    while total - done > window_events:
        later = np.flatnonzero(before > done)
        if not len(later):
            break
        # the remaining events in as few windows as the size allows, as even as steps do
        target = done + -(-(total - done) // -(-(total - done) // window_events))
        pick = int(later[np.argmin(np.abs(before[later] - target))])
        if before[pick] >= total:
            break
        cuts.append(int(candidates[pick]))
        done = int(before[pick])
    return cuts


def _field_start(raw: bytes, start: int, end: int, number: int) -> int | None:
    """Where the length-delimited field ``number`` whose payload is ``raw[start:end]`` begins
    (its tag), where it was written as protobuf writes it (the shortest length); else None."""
    head = varint_bytes(number << 3 | 2)
    length = varint_bytes(end - start)
    at = start - len(length) - len(head)
    return at if at >= 0 and raw[at:start] == head + length else None


def _length_field(number: int, payload) -> bytes:
    """A length-delimited field: its tag, its length, ``payload``."""
    return b"".join((varint_bytes(number << 3 | 2), varint_bytes(len(payload)), payload))
