"""XSpace (``.xplane.pb``, TF2 profiler and xprof) into the model, without TensorFlow.

Layout (TF_FACTS C.2): planes (``/host:CPU``, ``/device:GPU:N``, ``/device:TPU:N``, and a
``Task Environment`` plane whose stats hold ``profile_start_time``), each with lines
(threads or streams) of events; an event's name and display name live in its plane's
``event_metadata``, stat names in ``stat_metadata`` (a ``ref_value`` is a stat-metadata id
whose name is the string).

Mapping: every plane with events is a device, every line a lane. Absolute time is
``profile_start_time + line.timestamp_ns + offset_ps / 1000``; files without a Task
Environment plane keep times relative to the profile start. Host events named
``node:Type`` are TF ops (``Category.OP``); other host events are annotations (``HOST``),
Python tracer events (``PYTHON``, named ``$file.py:line func``) or tf.data iterator events
(``DATA``); device-plane events are kernels and copies (``DEVICE``/``MEMCPY``).
``MemoryAllocation``/``MemoryDeallocation`` become allocator counters and allocations of
the op running on that thread at the time. Steps come from step markers (events with a
``step_num`` stat) or, failing those, from tf.function call events.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import struct
import types

import numpy as np

from .._fork import in_halves
from ..errors import TraceFormatError
from ..model.accelerator import is_derived_line, op_of_annotation
from ..model.builder import TIME_LIMIT_NS, TraceBuilder
from ..model.hlo import LINK_STATS
from ..model.schema import CALL_STATS, METADATA_STATS, Category, OpFlag
from ..model.trace import Trace
from ..options import Parallelism
from .eager_ops import mark_eager_ops
from .sources import Source
from .xspace_steps import EVENT_CHUNK, add_steps
from .xspace_xla import (HLO_PROTO_STAT, METADATA_PLANE, XLA_STATS, integer, link_xla_events, module_name,
                         note_hlo_modules, spread_metadata_stats)
from . import wire
from .wire import (FIXED64, LENGTH, VARINT, Fields, WireError, as_signed, compiled, decode, numpy_column,
                   strings, strings_per_message, varints_at)

_OP_EVENT = re.compile(r"^([^:\s][^:]*):([A-Za-z_][A-Za-z0-9_]*)$")
_OP_TYPE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MemoryEvent(enum.IntEnum):
    """What an event's metadata makes it, for memory: TF's allocator writes
    ``MemoryAllocation`` and ``MemoryDeallocation`` events; every other event is NONE."""

    NONE = 0
    ALLOCATION = 1
    DEALLOCATION = 2


_MEMORY_EVENTS = {"MemoryAllocation": MemoryEvent.ALLOCATION, "MemoryDeallocation": MemoryEvent.DEALLOCATION}
_TASK_ENVIRONMENT = "Task Environment"
# The profiler's own planes (JAX's ``/host:__ScopeRangeCallStack__``): bookkeeping, no device.
_BOOKKEEPING_PLANE = re.compile(r"/host:__\w+__$")
# Field numbers of the schema (tracebridge.protos: xplane.proto and ProfileOptions), facts of
# the format written out, so that reading an XSpace imports no protobuf (its import and
# descriptor pool are a tenth of a summary's fixed cost); tests/test_xspace.py checks them
# against the schema's descriptors.
_SPACE = types.SimpleNamespace(planes=1, errors=2, warnings=3, hostnames=4)
_PLANE = types.SimpleNamespace(id=1, name=2, lines=3, event_metadata=4, stat_metadata=5, stats=6)
_LINE = types.SimpleNamespace(id=1, display_id=10, name=2, display_name=11, timestamp_ns=3, duration_ps=9, events=4)
_EVENT = types.SimpleNamespace(metadata_id=1, offset_ps=2, num_occurrences=5, duration_ps=3, stats=4)
_STAT = types.SimpleNamespace(metadata_id=1, double_value=2, uint64_value=3, int64_value=4, str_value=5,
                              bytes_value=6, ref_value=7)
_EVENT_METADATA = types.SimpleNamespace(id=1, name=2, display_name=4, metadata=3, stats=5, child_id=6)
_STAT_METADATA = types.SimpleNamespace(id=1, name=2, description=3)
_MAP_ENTRY = types.SimpleNamespace(key=1, value=2)  # every map's entry: key, value
_PROFILE_OPTIONS = types.SimpleNamespace(host_tracer_level=2, device_tracer_level=3, python_tracer_level=4,
                                         repository_path=10, session_id=14, override_hostname=15)
FIELD_NUMBERS = {"tensorflow.profiler.XSpace": _SPACE, "tensorflow.profiler.XPlane": _PLANE,
                 "tensorflow.profiler.XLine": _LINE, "tensorflow.profiler.XEvent": _EVENT,
                 "tensorflow.profiler.XStat": _STAT, "tensorflow.profiler.XEventMetadata": _EVENT_METADATA,
                 "tensorflow.profiler.XStatMetadata": _STAT_METADATA,
                 "tensorflow.profiler.XPlane.EventMetadataEntry": _MAP_ENTRY,
                 "tensorflow.ProfileOptions": _PROFILE_OPTIONS}
# XStat value fields: number -> kind
_STAT_VALUES = {_STAT.double_value: "double", _STAT.uint64_value: "uint64", _STAT.int64_value: "int64",
                _STAT.str_value: "str", _STAT.bytes_value: "bytes", _STAT.ref_value: "ref"}
_PS_LIMIT = 1 << 61  # event offsets and durations are clipped to this (see add_xspace)


def read(source: Source, parallelism: Parallelism) -> Trace:
    """An ``.xplane.pb`` file, or a profile run's files (one per host). The source's bytes
    are handed over (:meth:`~.sources.InputFile.take`): each file's are freed once its
    events are decoded into columns, before the rows are made of them."""
    return read_xspace_files([(file.path, file.take(), file.host) for file in source.files], dict(source.metadata),
                             threads=parallelism.threads())


def read_ops(source: Source, parallelism: Parallelism) -> Trace:
    """The op rows and steps of :func:`read`'s trace, without its stats, memory and links."""
    return read_xspace_files([(file.path, file.take(), file.host) for file in source.files], dict(source.metadata),
                             ops_only=True, threads=parallelism.threads())


def read_xspace_files(files: list[tuple[str, bytes, str | None]], metadata: dict | None = None,
                      ops_only: bool = False, threads: int = 1) -> Trace:
    """XSpace files ``(path, data, host)``, merged into one trace with a device per plane
    and host (``host`` None: the file's own hostname). ``ops_only``: op rows and steps
    only (see :func:`add_xspace`), enough for a summary. The list is emptied as the files
    are read: a file's bytes are dropped as soon as its events are decoded (the caller
    that keeps no other reference to them frees them then). ``threads``: how many threads
    decode the events (the C loop's second pass)."""
    builder = TraceBuilder({"source_format": "xspace", **(metadata or {})})
    errors, warnings = [], []
    first_path = files[0][0] if files else None
    files.reverse()  # popped from the end, in the given order
    while files:
        path, data, host = files.pop()
        try:
            decoded = decode_xspace(builder, data, host=host, ops_only=ops_only, threads=threads)
        except WireError as error:
            raise error.to_format_error(path, "XSpace") from None
        del data
        errors += decoded.errors
        warnings += decoded.warnings
        add_decoded(builder, decoded)
    if errors:
        builder.note(xspace_errors="; ".join(errors))
    if warnings:
        builder.note(xspace_warnings="; ".join(warnings))
    if not builder.device_list:
        raise TraceFormatError("XSpace holds no planes with events", path=first_path)
    return builder.build()


class _Plane:
    """One plane's metadata, decoded: event names and categories, stat names."""

    def __init__(self, name: str):
        self.name = name
        self.stat_names: dict[int, str] = {}
        self.events: dict[int, tuple[str, str]] = {}   # metadata id -> (name, display name)
        self.event_stats: dict[int, dict[str, str]] = {}  # metadata id -> stats on the metadata
        self.hlo_protos: dict[int, bytes] = {}  # metadata id -> its module's HLO (/host:metadata)
        self.stats: dict[str, object] = {}


# The event stats that decide an op row's name, type, time or step: all a summary needs.
# (A tf.function call's stats, CALL_STATS, say which steps hold a first call: the steady state.)
SUMMARY_STATS = frozenset({"tf_op", "annotation", "correlation_id", "device_duration_ps", "step_num",
                           *CALL_STATS}) | XLA_STATS


def add_xspace(builder: TraceBuilder, raw: bytes, *, host: str | None = None,
               ops_only: bool = False) -> tuple[list, list]:
    """Decode one serialized XSpace into ``builder``; returns its errors and warnings.

    ``ops_only``: only the op rows and steps, with the same values as a full read; event
    stats other than :data:`SUMMARY_STATS` are skipped undecoded, and no stats, memory or
    link rows are added (what a summary needs, at a fraction of the time and memory)."""
    decoded = decode_xspace(builder, raw, host=host, ops_only=ops_only)
    add_decoded(builder, decoded)
    return decoded.errors, decoded.warnings


@dataclasses.dataclass
class DecodedXSpace:
    """What :func:`decode_xspace` read from an XSpace's bytes (no reference to them is kept)."""
    errors: list
    warnings: list
    host: str | None
    ops_only: bool
    threads: int = 1  # threads that share the work on every event (loops that release the GIL)
    planes: list = dataclasses.field(default_factory=list)
    hlo_map: object = None
    base_ns: int = 0
    events: "_Events | None" = None  # None: no planes or no lines


def decode_xspace(builder: TraceBuilder, raw: bytes, *, host: str | None = None,
                  ops_only: bool = False, threads: int = 1) -> DecodedXSpace:
    """The first half of :func:`add_xspace`: everything read from the bytes (the planes'
    metadata, noted in ``builder``, and the events' columns and stats)."""
    top = decode(raw, [0], [len(raw)])
    _, plane_starts, plane_ends = top.spans(_SPACE.planes)
    errors = _all_strings(raw, top, _SPACE.errors)
    warnings = _all_strings(raw, top, _SPACE.warnings)
    hostnames = _all_strings(raw, top, _SPACE.hostnames)
    host = host if host is not None else (hostnames[0] if hostnames else None)
    decoded = DecodedXSpace(errors, warnings, host, ops_only, threads)
    if not len(plane_starts):
        return decoded
    planes_f = decode(raw, plane_starts, plane_ends)
    decoded.planes, decoded.hlo_map, decoded.base_ns = _read_planes(builder, raw, planes_f, len(plane_starts), host)
    line_owner, line_starts, line_ends = planes_f.spans(_PLANE.lines)
    if len(line_starts):
        decoded.events = _read_events(raw, decoded.planes, line_owner, line_starts, line_ends, ops_only, threads)
    return decoded


def add_decoded(builder: TraceBuilder, decoded: DecodedXSpace) -> None:
    """The second half of :func:`add_xspace`: the decoded events as lanes and rows
    (``decoded``'s columns are used up)."""
    events, planes = decoded.events, decoded.planes
    decoded.events = None
    if events is None:
        return
    lane_of_line, device_of_line = _add_lanes(builder, planes, decoded.host, events)
    start_ns, end_ns = _event_clocks(events, decoded.base_ns, decoded.threads)
    columns = _link_events(builder, planes, decoded.hlo_map, events, device_of_line, start_ns, end_ns,
                           decoded.threads)
    del start_ns, end_ns
    _add_rows(builder, planes, events, columns, lane_of_line, decoded.ops_only)


@dataclasses.dataclass
class _Events:
    """The lines (one entry per line) and every event's columns, in line order. The phases
    of :func:`add_xspace` set a column to None once it is used up (3M events: 24 MB each)."""
    line_owner: np.ndarray  # the plane of each line
    line_names: list[str]
    display: list[str]
    line_ids: np.ndarray
    line_ts: np.ndarray
    line: np.ndarray  # the line of each event (int32; events come line by line)
    metadata_id: np.ndarray | None
    offset_ps: np.ndarray | None
    duration_ps: np.ndarray | None
    aggregated: np.ndarray
    stats: dict[str, tuple[list, list]]
    _runs: list | None = None

    @property
    def n_lines(self) -> int:
        return len(self.line_owner)

    @property
    def count(self) -> int:
        return len(self.line)

    def runs(self) -> list[tuple[int, int, int]]:
        """``(line, first event, end)`` of each line's run of events (:func:`_line_runs`), once."""
        if self._runs is None:
            self._runs = _line_runs(self.line)
        return self._runs

    def plane_of_event(self) -> np.ndarray:
        """The plane of each event (a gather of 3M rows: only where XLA needs it)."""
        return self.line_owner.astype(np.int32)[self.line]


@dataclasses.dataclass
class _Columns:
    """The columns (one entry per event) that op rows are made of, known once events are linked."""
    known: np.ndarray  # the event's metadata was found
    name_id: np.ndarray
    type_id: np.ndarray
    category: np.ndarray
    memory_event: np.ndarray
    kernel_id: np.ndarray
    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray


def _read_planes(builder: TraceBuilder, raw: bytes, planes_f: Fields, n_planes: int,
                 host: str | None) -> tuple[list[_Plane], object, int]:
    """The planes' metadata and stats, and what they say about the run (notes, HLO modules);
    returns the planes, the HLO map and the profile start (0: unknown)."""
    planes = [_Plane(n) for n in strings_per_message(raw, planes_f, _PLANE.name, n_planes)]
    _read_stat_metadata(raw, planes_f, planes)
    _read_event_metadata(raw, planes_f, planes)
    _read_plane_stats(raw, planes_f, planes)
    # How many XLA modules brought their HLO (doctor: XLA ops whose TF ops cannot be named).
    hlo = sum(HLO_PROTO_STAT in stats for plane in planes if plane.name == METADATA_PLANE
              for stats in plane.event_stats.values())
    if hlo:
        builder.note(hlo_protos=builder.metadata_value("hlo_protos", 0) + hlo)
    hlo_map = note_hlo_modules(builder, _hlo_modules(planes))
    base_ns = 0
    for plane in planes:
        if plane.name == _TASK_ENVIRONMENT and isinstance(plane.stats.get("profile_start_time"), int):
            base_ns = plane.stats["profile_start_time"]
            for key, stat in METADATA_STATS.items():  # tracebridge's own XSpace writer
                if isinstance(plane.stats.get(stat), str):
                    builder.note_first(**{key: plane.stats[stat]})
            options = plane.stats.get("profile_options")
            if isinstance(options, bytes):
                builder.note(**_profile_options(options))
    if base_ns:
        builder.note_first(profile_start_ns=base_ns)
    else:
        builder.note_first(notes="no profile_start_time: times are relative to the profile start")
    if host:
        builder.note_first(host=host)
    return planes, hlo_map, base_ns


def _read_events(raw: bytes, planes: list[_Plane], line_owner: np.ndarray, line_starts: np.ndarray,
                 line_ends: np.ndarray, ops_only: bool, threads: int = 1) -> _Events:
    """Decode the lines and their events' columns and stats (all of them, or with
    ``ops_only`` those of :data:`SUMMARY_STATS`)."""
    n_lines = len(line_starts)
    found = event_columns_compiled(raw, line_starts, line_ends, threads)
    # With the events decoded apart, the lines' own fields are all that is left to decode
    # (their events' rows would be 25 bytes an event).
    lines_f = decode(raw, line_starts, line_ends, skip=(_LINE.events,) if found is not None else ())
    line_names = strings_per_message(raw, lines_f, _LINE.name, n_lines)
    display = strings_per_message(raw, lines_f, _LINE.display_name, n_lines)
    line_ids = as_signed(lines_f.scalar(_LINE.id, n_lines, np.uint64))
    line_ts = as_signed(lines_f.scalar(_LINE.timestamp_ns, n_lines, np.uint64))
    if found is None:
        found = event_columns_numpy(raw, lines_f)
    del lines_f
    plane_of_line = line_owner.astype(np.int32)
    stats: dict[str, tuple[list, list]] = {}
    wanted = SUMMARY_STATS if ops_only else None
    # Stats a chunk of events at a time, as the chunked decoder of wire.py reads them: the
    # order of a stat's values (which lookups by value keep) is the same whichever decoded.
    cuts = np.searchsorted(found.stat_event, np.arange(0, found.count + EVENT_CHUNK, EVENT_CHUNK))
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        if lo == hi:
            continue
        owner = found.stat_event[lo:hi]
        for key, (events, values) in _event_stats(raw, owner, found.stat_start[lo:hi], found.stat_end[lo:hi], planes,
                                                  plane_of_line[found.line[owner]], wanted).items():
            into = stats.setdefault(key, ([], []))
            into[0].extend(events)
            into[1].extend(values)
    return _Events(line_owner=line_owner, line_names=line_names, display=display, line_ids=line_ids,
                   line_ts=line_ts, line=found.line, metadata_id=found.metadata_id,
                   offset_ps=found.offset_ps, duration_ps=found.duration_ps, aggregated=found.aggregated,
                   stats=stats)


@dataclasses.dataclass
class EventColumns:
    """Every event of an XSpace's lines, decoded: its line (int32), metadata id, offset and
    duration (int64: 0 where absent, the last where repeated), whether it is an aggregate
    (``num_occurrences``), and the byte spans of its stats (``stat_event``: the event of
    each, in event order, then wire order)."""
    line: np.ndarray
    metadata_id: np.ndarray
    offset_ps: np.ndarray
    duration_ps: np.ndarray
    aggregated: np.ndarray
    stat_event: np.ndarray
    stat_start: np.ndarray
    stat_end: np.ndarray

    @property
    def count(self) -> int:
        return len(self.line)


_EVENT_NUMBERS = (_LINE.events, _EVENT.metadata_id, _EVENT.offset_ps, _EVENT.duration_ps, _EVENT.stats,
                  _EVENT.num_occurrences)


def event_columns_compiled(raw: bytes, line_starts: np.ndarray, line_ends: np.ndarray,
                           threads: int = 1, *, checkpoint_every: int = 0) -> EventColumns | None:
    """:class:`EventColumns` by the C loop (``_wirec.events``: a pass to count the events,
    one to decode them, shared by ``threads`` threads, each a run of events): None where it
    is not built, or the input is malformed (:func:`event_columns_numpy` then names the error).
    ``checkpoint_every``: for tests, the events between places where the threads may split
    (0: the C loop's own, 32768)."""
    if not compiled():
        return None
    found = wire._wirec.events(raw, np.ascontiguousarray(line_starts, dtype=np.int64),
                               np.ascontiguousarray(line_ends, dtype=np.int64), _EVENT_NUMBERS, numpy_column,
                               threads, checkpoint_every)
    if found is None:
        return None
    line, metadata_id, offset_ps, duration_ps, aggregated, stat_event, stat_start, stat_end = found
    return EventColumns(line=np.frombuffer(line, dtype=np.int32),
                        metadata_id=np.frombuffer(metadata_id, dtype=np.int64),
                        offset_ps=np.frombuffer(offset_ps, dtype=np.int64),
                        duration_ps=np.frombuffer(duration_ps, dtype=np.int64),
                        aggregated=np.frombuffer(aggregated, dtype=bool),
                        stat_event=np.frombuffer(stat_event, dtype=np.int64),
                        stat_start=np.frombuffer(stat_start, dtype=np.int64),
                        stat_end=np.frombuffer(stat_end, dtype=np.int64))


def event_columns_numpy(raw: bytes, lines_f: Fields) -> EventColumns:
    """:class:`EventColumns` from the lines' decoded fields, with :func:`~.wire.decode` (a
    chunk of events at a time: its rows for 3M events at once, 33 bytes a field, would be
    the largest allocation of the whole read)."""
    event_line, event_starts, event_ends = lines_f.spans(_LINE.events)
    n_events = len(event_starts)
    metadata_id = np.zeros(n_events, dtype=np.int64)
    offset_ps = np.zeros(n_events, dtype=np.int64)
    duration_ps = np.zeros(n_events, dtype=np.int64)
    aggregated = np.zeros(n_events, dtype=bool)  # num_occurrences: an aggregate, no time of its own
    stat_parts = []
    for lo in range(0, n_events, EVENT_CHUNK):
        hi = min(n_events, lo + EVENT_CHUNK)
        events_f = decode(raw, event_starts[lo:hi], event_ends[lo:hi],
                          dense=(_EVENT.metadata_id, _EVENT.offset_ps, _EVENT.duration_ps))
        count = hi - lo
        metadata_id[lo:hi] = as_signed(events_f.scalar(_EVENT.metadata_id, count, np.uint64))
        offset_ps[lo:hi] = as_signed(events_f.scalar(_EVENT.offset_ps, count, np.uint64))
        duration_ps[lo:hi] = as_signed(events_f.scalar(_EVENT.duration_ps, count, np.uint64))
        aggregated[lo:hi] = events_f.has(_EVENT.num_occurrences, count)
        owner, starts, ends = events_f.spans(_EVENT.stats)
        stat_parts.append((owner + lo, starts, ends))
    columns = [np.concatenate(part) if part else np.zeros(0, dtype=np.int64)
               for part in zip(*stat_parts)] if stat_parts else [np.zeros(0, dtype=np.int64)] * 3
    return EventColumns(line=event_line.astype(np.int32), metadata_id=metadata_id, offset_ps=offset_ps,
                        duration_ps=duration_ps, aggregated=aggregated, stat_event=columns[0].astype(np.int64),
                        stat_start=columns[1].astype(np.int64), stat_end=columns[2].astype(np.int64))


def _add_lanes(builder: TraceBuilder, planes: list[_Plane], host: str | None,
               ev: _Events) -> tuple[np.ndarray, np.ndarray]:
    """Devices and lanes: one device per plane (and host), one lane per line with events;
    returns the lane and the device of each line (-1: none)."""
    # Task Environment holds the run's settings, and /host:metadata (when it has no events, as
    # TF and JAX write it) the HLO of its XLA modules: facts about the run, not devices; nor is
    # a plane of the profiler's own bookkeeping without events.
    line_owner, n_lines = ev.line_owner, ev.n_lines
    has_events = np.zeros(n_lines, dtype=bool)
    has_events[[line for line, _, _ in ev.runs()]] = True
    facts = {p for p, plane in enumerate(planes) if plane.name == _TASK_ENVIRONMENT
             or ((plane.name == METADATA_PLANE or _BOOKKEEPING_PLANE.match(plane.name))
                 and not has_events[line_owner == p].any())}
    plane_device = {p: -1 for p in range(len(planes)) if p not in facts}
    lane_of_line = np.full(n_lines, -1, dtype=np.int64)
    device_of_line = np.full(n_lines, -1, dtype=np.int64)
    for p in plane_device:  # every plane is a device, even one that recorded nothing
        plane_device[p] = builder.device(planes[p].name, host)
    for line in range(n_lines):
        p = int(line_owner[line])
        if p not in plane_device or not has_events[line]:
            continue
        device_of_line[line] = plane_device[p]
        name = ev.line_names[line] or ev.display[line] or f"line {int(ev.line_ids[line])}"
        lane_of_line[line] = builder.lane(plane_device[p], name, int(ev.line_ids[line]))
    return lane_of_line, device_of_line


def _event_clocks(ev: _Events, base_ns: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Each event's start and end in ns (profile start + line start + offset); uses up
    the events' offsets and durations. By halves of the events in two threads where
    ``threads`` allows."""
    offset_ps, duration_ps = ev.offset_ps, ev.duration_ps
    ev.offset_ps = ev.duration_ps = None
    # Memory matters here (3M events make every temporary 24 MB): compute each column
    # once, in the narrowest type, and drop what is no longer needed as soon as possible.
    # start = base + line + offset_ps // 1000, the same as (offset_ps + 1000 * line) // 1000
    # without scaling the line's nanoseconds. Each part is clipped so that the sums cannot
    # wrap around int64 (a corrupt offset or duration of 2**63 ps would otherwise end
    # before it starts); real values are far inside (2**61 ps is 26 days).
    base_ns = min(max(base_ns, -TIME_LIMIT_NS), TIME_LIMIT_NS)
    line_start = base_ns + np.clip(ev.line_ts, -TIME_LIMIT_NS // 2, TIME_LIMIT_NS // 2)
    runs = ev.runs() if len(line_start) > 1 and line_start.any() else None  # None: one start for all
    shift = line_start[0] if len(line_start) and runs is None else 0

    def clocks(lo: int, hi: int) -> None:
        # In place: the decoded columns become the clocks (no 3M-row temporaries).
        offset, duration = offset_ps[lo:hi], duration_ps[lo:hi]
        np.clip(offset, -_PS_LIMIT, _PS_LIMIT, out=offset)
        np.clip(duration, 0, _PS_LIMIT, out=duration)
        duration += offset
        np.floor_divide(offset, 1000, out=offset)
        np.floor_divide(duration, 1000, out=duration)  # (offset + duration) // 1000
        if runs is None:
            offset += shift
            duration += shift
            return
        for line, first, end in _runs_within(runs, lo, hi):
            offset[first - lo:end - lo] += line_start[line]
            duration[first - lo:end - lo] += line_start[line]

    in_halves(len(offset_ps), clocks, threads)
    return offset_ps, duration_ps  # now the starts and ends


def _line_runs(event_line: np.ndarray) -> list[tuple[int, int, int]]:
    """``(line, first event, end)`` of each run of events of one line (events come line by
    line: a run per line, a few ifs instead of a gather of 3M rows)."""
    if not len(event_line):
        return []
    cuts = np.flatnonzero(event_line[1:] != event_line[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(event_line)]
    lines = event_line[bounds[:-1]].tolist()
    return [(line, lo, hi) for line, lo, hi in zip(lines, bounds[:-1], bounds[1:])]


def _runs_within(runs: list[tuple[int, int, int]], lo: int, hi: int):
    """The parts of the line runs ``(line, first event, end)`` that lie in events ``[lo, hi)``."""
    for line, first, end in runs:
        if first < hi and end > lo:
            yield line, max(first, lo), min(end, hi)


def _per_event(per_line: np.ndarray, runs: list[tuple[int, int, int]], dtype) -> np.ndarray:
    """``per_line[line]`` of each event as ``dtype``, filled a line's run of events at a time."""
    out = np.empty(runs[-1][2] if runs else 0, dtype=dtype)
    for line, lo, hi in runs:
        out[lo:hi] = per_line[line]
    return out


def _events_of(lines: np.ndarray, runs: list[tuple[int, int, int]]) -> np.ndarray:
    """The events of the lines where ``lines`` is True, in order."""
    chosen = [np.arange(lo, hi) for line, lo, hi in runs if lines[line]]
    return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)


def _ops_of(rows: np.ndarray | None, first_op: int):
    """A function giving the op rows of events (-1: none) where ``rows`` (None: every
    event) became the rows from ``first_op`` on: for a few events' stats, no column for
    every event (3M events: 12 MB)."""
    def ops_of(events: np.ndarray) -> np.ndarray:
        if rows is None:
            return events + first_op
        place = np.searchsorted(rows, events)
        found = place < len(rows)
        found[found] = rows[place[found]] == events[found]
        return np.where(found, place + first_op, -1)
    return ops_of


def _op_of_event(rows: np.ndarray | None, count: int, first_op: int) -> np.ndarray:
    """The op row of each event (-1: none) where ``rows`` (None: every event) became the
    rows from ``first_op`` on."""
    dtype = np.int32 if first_op + count < (1 << 31) else np.int64
    if rows is None:
        return np.arange(first_op, first_op + count, dtype=dtype)
    op_of_event = np.full(count, -1, dtype=dtype)
    op_of_event[rows] = np.arange(first_op, first_op + len(rows), dtype=dtype)
    return op_of_event


def _link_events(builder: TraceBuilder, planes: list[_Plane], hlo_map, ev: _Events, device_of_line: np.ndarray,
                 start_ns: np.ndarray, end_ns: np.ndarray, threads: int = 1) -> _Columns:
    """Classify the events by their metadata and link them (eager ops, device events,
    XLA, correlation ids); uses up the events' metadata ids."""
    stats, event_line = ev.stats, ev.line
    metadata_id = ev.metadata_id
    ev.metadata_id = None
    kinds = _classify(builder, planes)
    pairs = sorted(kinds)
    if hlo_map is not None:  # (a profile without XLA pays nothing for it)
        spread_metadata_stats([plane.event_stats for plane in planes], stats, ev.plane_of_event(), metadata_id,
                              [{} if plane.name.startswith("/host:") else
                               {i: shown or name for i, (name, shown) in plane.events.items()} for plane in planes])
    known, (name_id, type_id, category, memory_event, kernel_id) = _event_kinds(
        ev.line_owner, ev.runs(), metadata_id, pairs,
        np.array([kinds[k] for k in pairs], dtype=np.int64).reshape(len(pairs), 5), threads)
    del metadata_id
    device_of_event = _per_event(device_of_line, ev.runs(), np.int32)
    mark_eager_ops(builder.strings, stats, category, name_id, type_id, kernel_id, start_ns)
    _link_device_events(builder, stats, category, name_id, type_id)
    if hlo_map is not None:
        link_xla_events(builder, hlo_map, stats, category, name_id, type_id, kernel_id, device_of_event,
                        start_ns, end_ns)
    _link_by_correlation(stats, category, name_id, type_id, kernel_id, event_line, start_ns, end_ns)
    _device_clock_durations(stats, category, start_ns, end_ns)
    derived = _derived_lines(planes, ev.line_owner, ev.line_names)
    for line, lo, hi in ev.runs() if derived.any() else ():
        if derived[line]:
            category[lo:hi] = Category.DERIVED
    if np.array_equal(kernel_id, type_id):  # host ops: their kernel is their type (one column, not two)
        kernel_id = type_id
    return _Columns(known=known, name_id=name_id, type_id=type_id, category=category, memory_event=memory_event,
                    kernel_id=kernel_id, device=device_of_event, start_ns=start_ns, end_ns=end_ns)


def _add_rows(builder: TraceBuilder, planes: list[_Plane], ev: _Events, c: _Columns, lane_of_line: np.ndarray,
              ops_only: bool) -> None:
    """Add the op rows (with their steps), then, unless ``ops_only``, their stats, memory
    and link rows."""
    stats, event_line, category, start_ns, end_ns = ev.stats, ev.line, c.category, c.start_ns, c.end_ns
    known, memory_event, device_of_event = c.known, c.memory_event, c.device
    keep = known & ~ev.aggregated & (device_of_event >= 0) & (memory_event == MemoryEvent.NONE)

    first_op = builder.op_count
    every = bool(keep.all())  # the usual case: no fancy-indexed copies needed
    rows = None if every else np.flatnonzero(keep)

    def kept(column: np.ndarray) -> np.ndarray:
        return column if every else column[rows]

    nanos, canonical = int(OpFlag.HAS_NANOS), int(OpFlag.LABEL_CANONICAL)
    flags = np.where(kept(category) == Category.OP, np.uint8(nanos | canonical), np.uint8(nanos))
    device_column, type_column = kept(device_of_event), kept(c.type_id)
    start_column, end_column = kept(start_ns), kept(end_ns)
    # Steps are known before the rows are added: the step column goes in with them
    # (int32, one per event), not as a later update of 3M rows and their temporaries.
    step_of_event = add_steps(builder, stats, keep, start_ns, end_ns, c.name_id, device_of_event,
                               _events_of(_step_lines(planes, ev.line_owner, ev.line_names), ev.runs()))
    builder.extend("ops", name=kept(c.name_id), op_type=type_column,
                   kernel=type_column if c.kernel_id is c.type_id else kept(c.kernel_id),
                   start_ns=start_column, end_ns=end_column, op_start_ns=start_column,
                   op_end_ns=end_column, device=device_column,
                   lane=_per_event(lane_of_line, ev.runs(), np.int32) if every else
                   lane_of_line.astype(np.int32)[event_line[rows]],
                   step=kept(step_of_event), block=device_column, flags=flags,
                   category=kept(category))
    del flags, device_column, type_column, start_column, end_column, step_of_event
    if ops_only:  # the HLO instruction of XLA rows is kept (a summary groups by it), and a call's stats
        kept_stats = {k: v for k, v in stats.items() if k in LINK_STATS or k in CALL_STATS}
        if kept_stats:
            _add_event_stats(builder, kept_stats, _ops_of(rows, first_op))
        return
    op_of_event = _op_of_event(rows, ev.count, first_op)
    _add_event_stats(builder, stats, op_of_event.__getitem__)
    memory_events = np.flatnonzero(known & (memory_event != MemoryEvent.NONE) & (device_of_event >= 0))
    _add_memory(builder, memory_events, memory_event[memory_events] == MemoryEvent.DEALLOCATION, stats,
                start_ns, end_ns,
                event_line, op_of_event, category)
    _add_links(builder, stats, op_of_event, category)


# --- metadata -----------------------------------------------------------------------------
def _map_entries(raw: bytes, planes_f: Fields, number: int):
    """A ``map<int64, Message>`` field of the planes: ``(plane of entry, key of entry,
    entry of value, decoded values)``, or None when no plane has one."""
    owner, starts, ends = planes_f.spans(number)
    if not len(owner):
        return None
    entries = decode(raw, starts, ends)
    keys = as_signed(entries.scalar(_MAP_ENTRY.key, len(owner), np.uint64))
    value_owner, value_starts, value_ends = entries.spans(_MAP_ENTRY.value)
    return owner, keys, value_owner, decode(raw, value_starts, value_ends)


def _read_stat_metadata(raw: bytes, planes_f: Fields, planes: list[_Plane]) -> None:
    found = _map_entries(raw, planes_f, _PLANE.stat_metadata)
    if found is None:
        return
    owner, keys, value_owner, values = found
    names = strings_per_message(raw, values, _STAT_METADATA.name, len(value_owner))
    for entry, name in zip(value_owner.tolist(), names):
        planes[int(owner[entry])].stat_names[int(keys[entry])] = name


def _read_event_metadata(raw: bytes, planes_f: Fields, planes: list[_Plane]) -> None:
    found = _map_entries(raw, planes_f, _PLANE.event_metadata)
    if found is None:
        return
    owner, keys, value_owner, values = found
    count = len(value_owner)
    names = strings_per_message(raw, values, _EVENT_METADATA.name, count)
    displays = strings_per_message(raw, values, _EVENT_METADATA.display_name, count)
    stat_owner, stat_starts, stat_ends = values.spans(_EVENT_METADATA.stats)
    for entry, name, shown in zip(value_owner.tolist(), names, displays):
        planes[int(owner[entry])].events[int(keys[entry])] = (name, shown)
    if len(stat_owner):
        stats_f = decode(raw, stat_starts, stat_ends)
        plane_of_stat = owner[value_owner[stat_owner]]
        for index, key, value in _stat_values(raw, stats_f, len(stat_owner), planes, plane_of_stat):
            entry = int(value_owner[stat_owner[index]])
            plane = planes[int(owner[entry])]
            plane.event_stats.setdefault(int(keys[entry]), {})[key] = _text(value)
            if key == HLO_PROTO_STAT and isinstance(value, bytes):
                plane.hlo_protos[int(keys[entry])] = value


def _hlo_modules(planes: list[_Plane]) -> list[tuple[str, int | None, bytes]]:
    """``(module name, program id, HLO proto)`` of each module on ``/host:metadata``."""
    found = []
    for plane in planes:
        if plane.name != METADATA_PLANE:
            continue
        for metadata_id, data in plane.hlo_protos.items():
            name, named_id = module_name(plane.events.get(metadata_id, ("", ""))[0])
            program_id = integer(plane.event_stats.get(metadata_id, {}).get("program_id"))  # uint64
            found.append((name, program_id if program_id is not None else named_id, data))
    return found


def _read_plane_stats(raw: bytes, planes_f: Fields, planes: list[_Plane]) -> None:
    owner, starts, ends = planes_f.spans(_PLANE.stats)
    if not len(owner):
        return
    stats_f = decode(raw, starts, ends)
    for index, key, value in _stat_values(raw, stats_f, len(owner), planes, owner):
        planes[int(owner[index])].stats[key] = value


def _stat_values(raw: bytes, stats_f: Fields, count: int, planes: list[_Plane], plane_of_stat):
    """``(stat index, name, value)`` for decoded XStat messages; refs resolved to names."""
    ids = as_signed(stats_f.scalar(_STAT.metadata_id, count, np.uint64))
    for number, kind in _STAT_VALUES.items():
        wire_type = LENGTH if kind in ("str", "bytes") else FIXED64 if kind == "double" else VARINT
        owner, values, offsets = stats_f.select(number, wire_type)
        if kind in ("str", "bytes"):
            ends = offsets + values.astype(np.int64)
            payloads = strings(raw, offsets, ends) if kind == "str" else \
                [raw[a:b] for a, b in zip(offsets.tolist(), ends.tolist())]
        elif kind == "double":
            payloads = [struct.unpack("<d", struct.pack("<Q", v))[0] for v in values.tolist()]
        elif kind == "int64":
            payloads = as_signed(values).tolist()
        else:
            payloads = values.tolist()
        for index, payload in zip(owner.tolist(), payloads):
            plane = planes[int(plane_of_stat[index])]
            if kind == "ref":
                payload = plane.stat_names.get(int(payload), str(payload))
            yield index, plane.stat_names.get(int(ids[index]), f"stat {int(ids[index])}"), payload


def _event_stats(raw: bytes, owner: np.ndarray, starts: np.ndarray, ends: np.ndarray, planes,
                 plane_of_stat: np.ndarray, wanted: frozenset | None = None) -> dict:
    """Stats of events: ``{stat name: (event indices, values)}`` for the XStat messages at
    ``starts``/``ends`` of events ``owner`` (on planes ``plane_of_stat``). ``wanted``: only
    stats of these names (others are not decoded)."""
    if wanted is not None and len(owner):
        keep = _stats_named(raw, starts, ends, planes, plane_of_stat, wanted)
        owner, starts, ends, plane_of_stat = owner[keep], starts[keep], ends[keep], plane_of_stat[keep]
    if not len(owner):
        return {}
    stats_f = decode(raw, starts, ends)
    grouped: dict[str, tuple[list, list]] = {}
    for index, key, value in _stat_values(raw, stats_f, len(owner), planes, plane_of_stat):
        events, values = grouped.setdefault(key, ([], []))
        events.append(int(owner[index]))
        values.append(value)
    return grouped


def _stats_named(raw: bytes, starts, ends, planes, plane_of_stat, wanted: frozenset) -> np.ndarray:
    """Which XStat messages may have a name in ``wanted``, read from their first field
    alone: the metadata id, which serializers write first. A stat that starts otherwise
    is kept (decoded in full) rather than guessed at."""
    wanted_keys = np.array(sorted((p << 40) + stat_id for p, plane in enumerate(planes)
                                  for stat_id, name in plane.stat_names.items()
                                  if name in wanted and 0 <= stat_id < 1 << 40), dtype=np.int64)
    first_tag = np.frombuffer(raw, dtype=np.uint8)[np.minimum(starts, len(raw) - 1)]
    id_first = (first_tag == (_STAT.metadata_id << 3 | VARINT)) & (starts + 1 < ends)
    keep = ~id_first
    rows = np.flatnonzero(id_first)
    ids = as_signed(varints_at(raw, starts[rows] + 1, ends[rows]))
    keys = plane_of_stat[rows].astype(np.int64) * (1 << 40) + np.clip(ids, 0, (1 << 40) - 1)
    keep[rows] = np.isin(keys, wanted_keys) & (ids >= 0) & (ids < 1 << 40)
    return keep


# The columns of an event's kind: name id, type id, category, MemoryEvent, kernel id.
_KIND_DTYPES = (np.int32, np.int32, np.uint8, np.uint8, np.int32)
# Places in the table of planes x metadata ids up to which each kind column gets a table of
# its own (14 bytes a place): one gather per column from the events' places, no rows between.
_COMPOSED_MAX = 1 << 20


def _event_kinds(line_owner: np.ndarray, runs: list[tuple[int, int, int]], metadata_id: np.ndarray,
                 pairs: list[tuple[int, int]], table: np.ndarray, threads: int) -> tuple[np.ndarray, list]:
    """Each event's kind: whether its metadata is among ``pairs`` (sorted ``(plane,
    metadata id)``), and the pair's row of ``table`` (name id, type id, category,
    MemoryEvent, kernel id; zeros where not found) as five columns of their own narrow
    types; ``metadata_id`` is used up (overwritten).

    TF numbers metadata from 1 in each plane, so a table of planes x ids answers with a
    gather: where it is small (the usual case), each column has a table of its values and
    is one gather from the events' places; else the table gives each event's row, and each
    column is a gather from the rows. Ids beyond such a table (negative, or sparse and huge)
    are searched for among the pairs. By halves of the events in two threads where
    ``threads`` allows."""
    values = [np.append(table[:, k], 0).astype(dtype) for k, dtype in enumerate(_KIND_DTYPES)]  # last: not found
    n = len(metadata_id)
    known, columns = np.empty(n, dtype=bool), [np.empty(n, dtype=dtype) for dtype in _KIND_DTYPES]
    lookup, width = _kind_lookup(line_owner, pairs, n)
    if lookup is not None and len(lookup) <= _COMPOSED_MAX:
        found, by_place = lookup >= 0, [column_values[lookup] for column_values in values]  # -1: the last

        def look_up(lo: int, hi: int) -> None:
            places = _table_places(metadata_id[lo:hi], line_owner, runs, width, lo, hi)
            np.take(found, places, out=known[lo:hi], mode="clip")  # "clip": unbuffered (places are in range)
            for column_values, column in zip(by_place, columns):
                np.take(column_values, places, out=column[lo:hi], mode="clip")

        in_halves(n, look_up, threads)
        return known, columns
    if lookup is not None:
        rows = np.empty(n, dtype=np.int32)

        def look_up_rows(lo: int, hi: int) -> None:
            np.take(lookup, _table_places(metadata_id[lo:hi], line_owner, runs, width, lo, hi), out=rows[lo:hi],
                    mode="clip")

        in_halves(n, look_up_rows, threads)
    else:
        rows = _searched_rows(line_owner, runs, metadata_id, pairs)
    np.greater_equal(rows, 0, out=known)

    def gather(lo: int, hi: int) -> None:
        indices = rows[lo:hi].astype(np.intp)  # converted once, not once per column
        for column_values, column in zip(values, columns):
            np.take(column_values, indices, out=column[lo:hi], mode="wrap")  # "wrap": -1 is the last, unbuffered

    in_halves(n, gather, threads)
    return known, columns


def _kind_lookup(line_owner: np.ndarray, pairs: list[tuple[int, int]], events: int) -> tuple[np.ndarray | None, int]:
    """The table of planes x metadata ids (place ``plane * width + id + 1``; place 0 of each
    plane stands for ids out of range) holding each pair's row, -1 elsewhere, and its
    width; None where the ids do not fit a table of a size near the events'."""
    kind_planes = np.array([p for p, _ in pairs], dtype=np.int64)
    kind_ids = np.array([m for _, m in pairs], dtype=np.int64)
    planes = max(int(line_owner.max(initial=0)), int(kind_planes.max(initial=0))) + 1
    width = int(kind_ids.max(initial=0)) + 2
    if len(pairs) and (kind_ids.min() < 0 or planes * width > 4 * events + (1 << 20)):
        return None, width
    lookup = np.full(planes * width, -1, dtype=np.int32)
    lookup[kind_planes * width + kind_ids + 1] = np.arange(len(pairs), dtype=np.int32)
    return lookup, width


def _table_places(ids: np.ndarray, line_owner: np.ndarray, runs: list[tuple[int, int, int]], width: int,
                  lo: int, hi: int) -> np.ndarray:
    """The lookup table's place of events ``[lo, hi)``, made in place of their ``ids``: id +
    1 (0 out of range) + plane * width, the plane added a line's run of events at a time."""
    np.putmask(ids, (ids < 0) | (ids >= width - 1), -1)
    ids += 1
    for line, first, end in _runs_within(runs, lo, hi):
        if line_owner[line]:
            ids[first - lo:end - lo] += int(line_owner[line]) * width
    return ids


def _searched_rows(line_owner: np.ndarray, runs: list[tuple[int, int, int]], metadata_id: np.ndarray,
                   pairs: list[tuple[int, int]]) -> np.ndarray:
    """Each event's index in ``pairs``, or -1, where the ids fit no table: searched for
    among the pairs as keys sorted like them (ranks keep keys within int64 whatever the ids)."""
    rows = np.arange(len(pairs), dtype=np.int32)
    kind_planes = np.array([p for p, _ in pairs], dtype=np.int64)
    kind_ids = np.array([m for _, m in pairs], dtype=np.int64)
    event_plane = np.empty(len(metadata_id), dtype=np.int64)
    for line, lo, hi in runs:
        event_plane[lo:hi] = line_owner[line]
    distinct, rank = np.unique(np.concatenate([metadata_id, kind_ids]), return_inverse=True)
    rank = rank.ravel()
    keys = event_plane * len(distinct) + rank[:len(metadata_id)]
    kind_keys = kind_planes * len(distinct) + rank[len(metadata_id):]
    position = np.minimum(np.searchsorted(kind_keys, keys), len(pairs) - 1)
    return np.where(kind_keys[position] == keys, rows[position], -1).astype(np.int32)


def _classify(builder: TraceBuilder, planes: list[_Plane]) -> dict[tuple[int, int], tuple[int, int, int, int, int]]:
    """Per (plane, event metadata): (name id, type id, category, MemoryEvent, kernel id)."""
    s = builder.strings
    # Plain ints in the hundreds of thousands of tuples below (model/schema.py says why).
    op, device, memcpy, host, python, data = map(int, (Category.OP, Category.DEVICE, Category.MEMCPY,
                                                      Category.HOST, Category.PYTHON, Category.DATA))
    no_memory = int(MemoryEvent.NONE)
    kinds = {}
    for p, plane in enumerate(planes):
        device_plane = not plane.name.startswith("/host:")
        for metadata_id, (name, shown) in plane.events.items():
            key = (p, metadata_id)
            if name in _MEMORY_EVENTS:
                kinds[key] = (s[name], s[name], host, int(_MEMORY_EVENTS[name]), s[name])
                continue
            stats = plane.event_stats.get(metadata_id, {})
            if device_plane:
                # The TF op it ran for: an XLA op's framework op (``tf_op``), else the
                # kernel itself until an event's own annotation names one (_link_device_events).
                category = memcpy if "memcpy" in name.lower() or "copy" in shown.lower() else device
                kernel = shown or name
                tf_op = op_of_annotation(stats["tf_op"]) if stats.get("tf_op") else None
                op_name, op_type = tf_op or (kernel, stats.get("hlo_category") or kernel)
                kinds[key] = (s[op_name], s[op_type], category, no_memory, s[kernel])
                continue
            match = _OP_EVENT.match(name)
            if match and shown and shown != match.group(2):
                # tracebridge's writer: an op whose own name has a colon is written whole, its
                # type in the display name (TF leaves host ops' display names empty).
                kinds[key] = (s[name], s[shown], op, no_memory, s[shown])
            elif match:
                kinds[key] = (s[match.group(1)], s[match.group(2)], op, no_memory, s[match.group(2)])
            elif ":" in name and shown and shown != "python" and _OP_TYPE.match(shown):
                # tracebridge's writer again: a colon in the name that no type follows ("$:",
                # "x:1"); TF's own host events and Python frames carry no such display name
                kinds[key] = (s[name], s[shown], op, no_memory, s[shown])
            elif name.startswith("$"):
                kinds[key] = (s[name], s["python"], python, no_memory, s["python"])
            elif name.startswith(("Iterator::", "IteratorGetNext", "MakeIterator")) or \
                    name.endswith(("Produce", "Consume")):
                type_name = shown or name.split("::")[-1]
                kinds[key] = (s[name], s[type_name], data, no_memory, s[type_name])
            else:
                kinds[key] = (s[name], s[shown or name], host, no_memory, s[shown or name])
    return kinds


def _link_device_events(builder: TraceBuilder, stats: dict, category, name_id, type_id) -> None:
    """A GPU kernel's or copy's own ``annotation`` (or ``tf_op``) stat names the TF op that
    launched it: that op becomes the row's name and type (its kernel stays in ``kernel``)."""
    device_work = (int(Category.DEVICE), int(Category.MEMCPY))
    s = builder.strings
    for key in ("tf_op", "annotation"):  # annotation last: it wins where both are there
        if key not in stats:
            continue
        for event, value in zip(*stats[key]):
            if category[event] not in device_work or not isinstance(value, str):
                continue
            op = op_of_annotation(value)
            if op is not None:
                name_id[event], type_id[event] = s[op[0]], s[op[1]]


def _link_by_correlation(stats: dict, category, name_id, type_id, kernel_id, event_line,
                         start_ns, end_ns) -> None:
    """A device event that no annotation names (a plain ``MemcpyH2D``) shares its
    ``correlation_id`` with the host event that launched it; the TF op running on that
    host thread around the launch is the op it ran for."""
    if "correlation_id" not in stats:
        return
    device_work, host, op = (int(Category.DEVICE), int(Category.MEMCPY)), int(Category.HOST), int(Category.OP)
    launches, unlinked = {}, []
    for event, value in zip(*stats["correlation_id"]):
        if category[event] == host:
            launches[value] = event
        elif category[event] in device_work and name_id[event] == kernel_id[event]:
            unlinked.append((event, value))
    pending = [(event, launches[value]) for event, value in unlinked if value in launches]
    if not pending:
        return
    ops_by_line: dict[int, np.ndarray] = {}
    for event, launch in pending:
        line = int(event_line[launch])
        if line not in ops_by_line:
            mine = np.flatnonzero((event_line == line) & (category == op))
            ops_by_line[line] = mine[np.argsort(start_ns[mine], kind="stable")]
        candidates = ops_by_line[line]
        at = int(np.searchsorted(start_ns[candidates], start_ns[launch], side="right")) - 1
        # Ops on one thread nest (a function call's ops inside it): walk out to one that
        # still encloses the launch.
        while at >= 0 and end_ns[candidates[at]] < end_ns[launch]:
            at -= 1
        if at >= 0:
            name_id[event], type_id[event] = name_id[candidates[at]], type_id[candidates[at]]


def _device_clock_durations(stats: dict, category, start_ns, end_ns) -> None:
    """A TPU op's ``device_duration_ps`` is its time by the device's own clock: xprof's op
    statistics count that, not the event's span on the host-aligned timeline, so the row
    ends that long after it starts (its start stays where the timeline has it)."""
    if "device_duration_ps" not in stats:
        return
    events, values = stats["device_duration_ps"]
    events = np.asarray(events, dtype=np.int64)
    durations = np.array([v if isinstance(v, int) else -1 for v in values], dtype=np.int64)
    usable = np.isin(category[events], (Category.DEVICE, Category.MEMCPY)) & (durations >= 0) & \
        (durations < _PS_LIMIT)
    events = events[usable]
    end_ns[events] = start_ns[events] + durations[usable] // 1000


def _derived_lines(planes: list[_Plane], line_owner, line_names: list[str]) -> np.ndarray:
    """Per line: True for lines of a device plane that xprof derived from its other lines."""
    with_streams = {int(p) for p, name in zip(line_owner.tolist(), line_names) if name.startswith("Stream")}
    return np.array([not planes[p].name.startswith("/host:") and is_derived_line(name, p in with_streams)
                     for p, name in zip(line_owner.tolist(), line_names)], dtype=bool)


def _step_lines(planes: list[_Plane], line_owner, line_names: list[str]) -> np.ndarray:
    """Per line: True for a device plane's ``Steps`` line (xprof's own step detection)."""
    return np.array([name == "Steps" and not planes[p].name.startswith("/host:")
                     for p, name in zip(line_owner.tolist(), line_names)], dtype=bool)


# --- rows -----------------------------------------------------------------------------------
def _add_event_stats(builder: TraceBuilder, stats: dict, ops_of) -> None:
    """The event stats as rows of their ops; ``ops_of(events)``: the events' op rows (-1: none)."""
    s = builder.strings
    ops, keys, values = [], [], []
    for key, (events, event_values) in stats.items():
        key_id = s[key]  # interned before its values, as the values in order: string ids stay as they were
        op = ops_of(np.asarray(events, dtype=np.int64))
        kept = op >= 0
        texts = [_text(value) for value, keep in zip(event_values, kept.tolist()) if keep]
        ops.append(op[kept])
        keys.append(np.full(len(texts), key_id, dtype=np.int64))
        values.append(np.fromiter(map(s.__getitem__, texts), dtype=np.int64, count=len(texts)))
    ops = np.concatenate(ops) if ops else np.zeros(0, dtype=np.int64)
    if len(ops):
        order = np.argsort(ops, kind="stable")
        builder.extend("event_stats", op=ops[order], key=np.concatenate(keys)[order],
                       value=np.concatenate(values)[order])


def _add_memory(builder: TraceBuilder, events: np.ndarray, frees: np.ndarray, stats: dict,
                start_ns, end_ns, event_line, op_of_event, category) -> None:
    """Allocator counters from ``bytes_allocated``; each allocation or free also becomes a
    record of the TF op running on the same thread at that moment, when there is one."""
    if not len(events):
        return
    lookup = {key: dict(zip(*stats[key])) for key in
              ("allocator_name", "bytes_allocated", "allocation_bytes", "peak_bytes_in_use")
              if key in stats}
    op_events = np.flatnonzero(op_of_event >= 0)
    op_events = op_events[category[op_events] == Category.OP]
    ops_by_line = {}
    for line in np.unique(event_line[op_events]).tolist():
        mine = op_events[event_line[op_events] == line]
        ops_by_line[line] = mine[np.argsort(start_ns[mine], kind="stable")]
    for event, is_free in zip(events.tolist(), frees.tolist()):
        allocator = str(lookup.get("allocator_name", {}).get(event, "unknown"))
        in_use = _int64(lookup.get("bytes_allocated", {}).get(event))
        time = int(start_ns[event])
        if in_use is not None:
            builder.add_row("counters", allocator=allocator, time_ns=time, bytes_in_use=in_use)
        size = _int64(lookup.get("allocation_bytes", {}).get(event))
        candidates = ops_by_line.get(int(event_line[event]))
        if size is None or size == -(1 << 63) or candidates is None:
            continue
        at = int(np.searchsorted(start_ns[candidates], time, side="right")) - 1
        if at < 0 or end_ns[candidates[at]] < time:
            continue  # no op was running on this thread then
        peak = _int64(lookup.get("peak_bytes_in_use", {}).get(event, 0))
        row = builder.add_row("memory", op=int(op_of_event[candidates[at]]), allocator=allocator,
                              total_bytes=size, peak_bytes=peak or 0, allocator_bytes_in_use=in_use or 0)
        builder.add_row("allocations", memory=row, time_ns=time, bytes=-size if is_free else size)


def _add_links(builder: TraceBuilder, stats: dict, op_of_event, category) -> None:
    """Producer/consumer pairs: ``_p``/``_pt`` on a producer match ``_c``/``_ct`` on consumers
    (cross-thread work), tf.data ``*Produce``/``*Consume`` share an ``element_id``, and a
    host launch shares its ``correlation_id`` with the kernel or copy it started."""
    links = []
    if "correlation_id" in stats:
        host, device_work = int(Category.HOST), (int(Category.DEVICE), int(Category.MEMCPY))
        launches = {value: event for event, value in zip(*stats["correlation_id"]) if category[event] == host}
        for event, value in zip(*stats["correlation_id"]):
            if category[event] in device_work and value in launches:
                links.append((launches[value], event, "launch"))
    if "_p" in stats and "_c" in stats:
        types = {e: t for e, t in zip(*stats["_pt"])} if "_pt" in stats else {}
        producers = {(types.get(e), v): e for e, v in zip(*stats["_p"])}
        consumer_types = {e: t for e, t in zip(*stats["_ct"])} if "_ct" in stats else {}
        for event, value in zip(*stats["_c"]):
            producer = producers.get((consumer_types.get(event), value))
            if producer is not None:
                links.append((producer, event, "context"))
    if "element_id" in stats:
        by_element: dict = {}
        for event, value in zip(*stats["element_id"]):
            by_element.setdefault(value, []).append(event)
        for events in by_element.values():
            if len(events) == 2:
                links.append((events[0], events[1], "element"))
    if not links:
        return
    producer, consumer = (op_of_event[np.array(ends, dtype=np.int64)] for ends in list(zip(*links))[:2])
    kept = (producer >= 0) & (consumer >= 0)
    # each kind interned where its first kept link is, as row by row: string ids stay as they were
    kind = [builder.strings[k] for k, keep in zip(list(zip(*links))[2], kept.tolist()) if keep]
    if kind:
        builder.extend("links", producer=producer[kept], consumer=consumer[kept], kind=np.array(kind, dtype=np.int64))


# --- helpers ----------------------------------------------------------------------------------
def _all_strings(raw: bytes, fields: Fields, number: int) -> list[str]:
    _, starts, ends = fields.spans(number)
    return strings(raw, starts, ends)


def _int64(value) -> int | None:
    """An integer stat that fits the model's int64 columns (uint64 stats may not), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < (1 << 63):
        return value
    return None


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.hex() if len(value) <= 64 else f"<{len(value)} bytes>"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _profile_options(data: bytes) -> dict:
    """The levels the profiler really applied (ProfileOptions on the Task Environment plane),
    read as protobuf's parser reads them (uint32 levels, the last of a repeated field; UTF-8
    strings, or the message is refused)."""
    try:
        fields = decode(data, [0], [len(data)])
        for number in (_PROFILE_OPTIONS.repository_path, _PROFILE_OPTIONS.session_id,
                       _PROFILE_OPTIONS.override_hostname):
            _, starts, ends = fields.spans(number)
            for start, end in zip(starts.tolist(), ends.tolist()):
                data[start:end].decode("utf-8")
        levels = {key: int(fields.scalar(getattr(_PROFILE_OPTIONS, key), 1, np.uint64)[0]) & 0xFFFF_FFFF
                  for key in ("host_tracer_level", "python_tracer_level", "device_tracer_level")}
    except (WireError, UnicodeDecodeError):  # a damaged options blob must not sink the whole trace
        return {"profile_options": "unreadable"}
    return levels
