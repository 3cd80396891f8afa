"""Perfetto's own trace format (``.pftrace``: ``Trace`` of ``TracePacket``/``TrackEvent``),
for the Perfetto UI and trace processor, written streaming with bounded memory.

Layout, as the Chrome writer's (:mod:`.chrome`): a process track per device (in device
order, its host as a label) with a thread track per lane in lane order, a sub-row track
for ops that partly overlap others on their lane (a track's slices must nest), derived
lines labelled ``(derived)``, a ``network`` track for transfers; a ``Steps`` process with
the step slices of each host, an ``Allocators`` process with a counter track per
allocator (bytes in use). Each op is a slice named as in the Chrome trace (its kernel or
op type), its category, and debug annotations: ``name`` (``tf_op`` for a kernel or a
copy: the TF op it ran for; left out where it is the slice name), ``op_type`` where it differs from the slice name, ``step``,
``input<k>``, ``shape<slot>`` and a transfer's ``bytes``/``rate_bps``/``src``/``dst``/``tensor``.
Flows link a host launch to its kernel or copy and a producer to its consumers on another
track (the Chrome trace's arrows). Tracks here nest by the exact nanoseconds, so an op that
starts as its producer ends stays on their lane; the Chrome trace, which must also nest as
viewers read its decimal microseconds, may put it on a sub-row and draw an arrow this
trace has no need of. The Chrome trace's ``TF ops`` threads above lanes of XLA
events are not written here: every slice here is an op row, and each XLA slice names its TF
op in its ``name`` annotation.

Encoding: every track is a packet sequence of its own. Its first packets clear the
sequence's incremental state, set the track and a sequence clock as packet defaults, and
intern every name, category, annotation name and string value the track uses; its events
follow in time order with timestamps as deltas of that clock (``is_incremental``). The
clock snapshot maps it to BOOTTIME and REALTIME at the same value, so the trace's time is
the profile's own (nanoseconds since the epoch: the UI's UTC time format shows the wall
clock of the capture). Why: a begin and an end packet per op are about 40 bytes, against
about 200 for a Chrome event, and the events of a chunk are encoded all at once by
:mod:`.protowire`, not as one message object each (measured in bench/bench_perfetto.py).

Streaming: a trace is written track by track, each in chunks of :data:`CHUNK_EVENTS`
events; several hosts are written host by host (:func:`write_perfetto_hosts`), one host's
trace in memory at a time, or one part file per host on Dask workers. Ids (track uuids,
sequence ids, pids, tids, flow ids) are scoped by host, so parts written apart concatenate
into one valid trace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence

import numpy as np

from .._files import atomic_output
from .._fork import ChildFailed, ForkedJob
from ..errors import OutputError
from ..model.lanes import by_group_start, nested_fit
from ..model.schema import NO_STEP, Category, OutputFlag
from ..model.trace import Trace
from ..options import choose_parallelism
from .chrome import NETWORK_SORT, _merged_counters, cross_lane_flows, device_threads
from .chrome_threads import NETWORK_TID, pids_and_tids
from . import protowire
from .protowire import (Piece, Ragged, assemble, assemble_into, concat, constant_piece, fixed64_field, matrix_piece,
                        message_bytes, message_field, ragged_piece, tag, total_length, varint_bytes, varint_field,
                        merged_order, varint_lengths, varint_piece)

CHUNK_EVENTS = 400_000  # events encoded at once: bounds the encoder's memory
PARALLEL_MIN_EVENTS = 600_000  # below this, a second process costs more than it saves
SHARED_ORDER_MAX_OPS = 2_000_000  # see _write_in_two

# Field numbers of Perfetto's trace schema (protos/perfetto/trace/...): facts of the format.
TRACE_PACKET = 1
P_TIMESTAMP, P_SEQUENCE, P_TRACK_EVENT, P_INTERNED, P_FLAGS = 8, 10, 11, 12, 13
P_CLOCK_SNAPSHOT, P_DEFAULTS, P_TRACK_DESCRIPTOR = 6, 59, 60
E_CATEGORY_IIDS, E_ANNOTATIONS, E_TYPE, E_NAME_IID, E_COUNTER_VALUE = 3, 4, 9, 10, 30
E_FLOW_IDS, E_TERMINATING_FLOW_IDS = 47, 48
TYPE_BEGIN, TYPE_END, TYPE_COUNTER = 1, 2, 4
A_NAME_IID, A_INT, A_DOUBLE, A_STRING_IID = 1, 4, 5, 17
I_CATEGORIES, I_NAMES, I_ANNOTATION_NAMES, I_STRING_VALUES = 1, 2, 3, 29
SEQ_INCREMENTAL_STATE_CLEARED = 1
CLOCK_REALTIME, CLOCK_BOOTTIME, SEQUENCE_CLOCK = 1, 6, 64
CHILD_ORDERING_EXPLICIT = 3
UNIT_SIZE_BYTES = 3

# Track uuids, sequence ids, pids, tids and flow ids of host h live in their own ranges.
STEPS_UUID, ALLOCATORS_UUID = 1, 2
STEPS_PID, ALLOCATORS_PID, FIRST_DEVICE_PID = 0, 1, 2
_PIDS_PER_HOST = 10_000
_TID_BASE, _TIDS_PER_HOST = 1_000_000, 65_536  # tids unique over the whole trace
_SEQUENCES_PER_HOST = 1 << 18

STEP_NUM = "step_num"
TRANSFER_KEYS = ("bytes", "rate_bps", "src", "dst", "tensor")
BASE_KEYS = ("name", "tf_op", "op_type", "step", STEP_NUM, *TRANSFER_KEYS)


def write_perfetto(trace: Trace, path: str | os.PathLike, *, dataflow: bool = True, memory: bool = True,
                   progress=None, workers: int | None = None) -> None:
    """Write ``trace`` to ``path`` as a Perfetto trace (``.pftrace``).

    ``dataflow``: flows between tracks (producer -> consumer, launch -> kernel);
    ``memory``: allocator counter tracks; ``progress(done, total)`` as ops are written;
    ``workers``: processes that encode events (see :mod:`tracebridge.options`; by default
    two for large traces where forking is safe: a forked child encodes the second half of
    the events into a part file beside ``path``, appended when it is done)."""
    with atomic_output(path, compress=False) as out:
        _HostWriter(out, 0, dataflow=dataflow, memory=memory, label_hosts=False,
                    workers=workers).write(trace, progress)


def write_perfetto_hosts(traces: Iterable[Trace], path: str | os.PathLike, *, dataflow: bool = True,
                         memory: bool = True, workers: int | None = None) -> int:
    """Write the traces of several hosts into one ``.pftrace``, one after the other: only
    the trace being written is needed in memory (pass a generator that loads each host
    when asked). A host may come as an iterator of its windows of time instead of a trace
    (:mod:`.perfetto_stream`). Returns the number of hosts written."""
    count = 0
    with atomic_output(path, compress=False) as out:
        for count, trace in enumerate(traces, start=1):
            _write_host(out, trace, count - 1, dataflow=dataflow, memory=memory, workers=workers)
    return count


def _write_host(out, trace, host_index: int, **options) -> None:
    """One host's trace, or its windows (an iterator of traces), as host ``host_index``."""
    if isinstance(trace, Trace):
        _HostWriter(out, host_index, label_hosts=True, **options).write(trace)
    else:
        from .perfetto_stream import _WindowWriter
        _WindowWriter(out, host_index, label_hosts=True, **options).write_windows(trace)


def write_perfetto_host_part(trace: Trace, path: str | os.PathLike, host_index: int, *, dataflow: bool = True,
                             memory: bool = True) -> str:
    """One host's packets, as host ``host_index`` of a multi-host ``.pftrace``, into the
    part file ``path`` (for a worker of :func:`tracebridge.formats.save_hosts_perfetto`;
    the parts, appended in host order, make the whole trace). Returns ``path``."""
    with open(path, "wb") as out:
        _write_host(out, trace, host_index, dataflow=dataflow, memory=memory, workers=1)
    return os.fspath(path)


class _HostWriter:
    """Writes one host's trace: its id ranges, its tracks and their sequences."""

    def __init__(self, out, host_index: int, *, dataflow: bool, memory: bool, label_hosts: bool,
                 workers: int | None = None):
        self.out, self.host_index = out, host_index
        self.parallelism = choose_parallelism(workers)
        self.dataflow, self.memory, self.label_hosts = dataflow, memory, label_hosts
        self._uuid = (host_index + 1) << 32
        self._sequence = host_index * _SEQUENCES_PER_HOST + 1  # 1 holds the descriptors
        self.descriptor_sequence = host_index * _SEQUENCES_PER_HOST + 1
        self._tid = _TID_BASE + host_index * _TIDS_PER_HOST
        self._flows_written = 0
        self._allocator_tracks: dict[str, int] = {}  # allocator (and host) -> its counter track

    def _next_uuid(self) -> int:
        self._uuid += 1
        return self._uuid

    def _next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence

    def _next_tid(self) -> int:
        self._tid += 1
        return self._tid

    def _pid(self, chrome_pid: int) -> int:
        return chrome_pid + self.host_index * _PIDS_PER_HOST

    def _packet(self, *fields: tuple[int, object]) -> None:
        body = message_bytes((P_SEQUENCE, self.descriptor_sequence), *fields)
        self.out.write(tag(TRACE_PACKET, 2) + varint_bytes(len(body)) + body)

    # --- the trace --------------------------------------------------------------------
    def write(self, trace: Trace, progress=None) -> None:
        if len(trace) and int(trace.ops["start_ns"].min()) < 0:
            raise OutputError("Perfetto timestamps are unsigned: this trace has ops before 1970 "
                              "(shift it, or write Chrome JSON)")
        host = next((d.host for d in trace.devices if d.host), None) or trace.metadata.get("host")
        strings = _StringTable(trace.strings)
        self._write_steps(trace, host)
        self._write_ops(trace, strings, host, progress)
        if self.memory and trace.counters.rows:
            self._write_counters(trace, strings, host)

    def _write_ops(self, trace: Trace, strings: "_StringTable", host: str | None, progress) -> None:
        pid, tid, extra = pids_and_tids(trace, decimal_times=False)  # exact ns here: no viewer rounds them
        threads, network = device_threads(trace, extra)
        # The tracks in the Chrome trace's order, and each op's track.
        keys, names, parents, ranks = [], [], [], []
        for device_index, process in enumerate(self._describe_devices(trace)):
            lanes = threads.get(device_index, [])
            if device_index in network:
                lanes = lanes + [(NETWORK_TID, "network", NETWORK_SORT)]
            lanes = sorted(lanes, key=lambda lane: lane[2])  # the network thread's sub-rows follow it
            for chrome_tid, name, sort_index in lanes:
                keys.append((FIRST_DEVICE_PID + device_index, chrome_tid))
                names.append(name)
                parents.append(process)
                ranks.append(sort_index)
        uuids = [self._describe_thread(parent, name, rank) for parent, name, rank in zip(parents, names, ranks)]
        if not len(trace):
            return
        # each op's track by a lookup table of (pid, tid) (tids are small; the network
        # thread's is renumbered after them): no sort of the ops
        top_tid = max([t for _, t in keys if t != NETWORK_TID], default=0) + 1
        local = np.where(tid == NETWORK_TID, top_tid, tid).astype(np.int64)
        top_pid = max(int(pid.max()), max(p for p, _ in keys))
        table = np.full((top_pid + 1) * (top_tid + 1), -1, dtype=np.int64)
        for index, (p, t) in enumerate(keys):
            table[p * (top_tid + 1) + (top_tid if t == NETWORK_TID else t)] = index
        local += pid.astype(np.int64) * (top_tid + 1)
        track_of = table.astype(np.int32)[local]
        del local
        flows = self._flows(trace, pid, tid)
        del pid, tid  # 10M ops: 160 MB that the events' order below would add to
        handed = {"track_of": track_of, "flows": flows}  # handed over: freed there once used
        del track_of, flows
        self._write_tracks(trace, strings, handed, uuids, progress)

    def _describe_devices(self, trace: Trace) -> list[tuple[int, int]]:
        """A process track per device (in device order); returns each one's uuid and pid."""
        processes = []
        for device_index, device in enumerate(trace.devices):
            process = self._next_uuid()
            labels = [f"host:{device.host}"] if device.host else []
            self._packet((P_TRACK_DESCRIPTOR, message_bytes(
                (1, process), (3, message_bytes((1, self._pid(FIRST_DEVICE_PID + device_index)), (6, device.name),
                                                *[(8, label) for label in labels])),
                (11, CHILD_ORDERING_EXPLICIT), (12, device_index + self.host_index * _PIDS_PER_HOST))))
            processes.append((process, self._pid(FIRST_DEVICE_PID + device_index)))
        return processes

    def _describe_thread(self, parent: tuple[int, int], name: str, rank: int) -> int:
        """A thread track of process ``parent`` (uuid, pid); returns its uuid."""
        process, process_pid = parent
        uuid = self._next_uuid()
        self._packet((P_TRACK_DESCRIPTOR, message_bytes(
            (1, uuid), (5, process), (4, message_bytes((1, process_pid), (2, self._next_tid()), (5, name))),
            (12, rank))))
        return uuid

    def _write_tracks(self, trace: Trace, strings: "_StringTable", handed: dict, uuids: list[int], progress) -> None:
        """The ops of ``trace`` on their tracks, a sequence per track, in chunks; two
        processes where that pays. ``handed``: ``track_of`` (each op's index in ``uuids``)
        and ``flows`` (:meth:`_flows`), taken out of it (the caller keeps no reference)."""
        ops = trace.ops
        track_of, flows = handed.pop("track_of"), handed.pop("flows")
        fields = _OpFields(trace, flows)
        del flows  # in fields.extras now
        start, end = ops["start_ns"], ops["end_ns"]
        order = by_group_start(track_of, start, end)  # None: the rows are in that order
        cuts = np.searchsorted(track_of if order is None else track_of[order], np.arange(len(uuids) + 1))
        del track_of
        # The work as units of at most CHUNK_EVENTS events of one track; each track has its
        # sequence from the start, so that two processes can write a half each.
        tracks, units = [], []
        for track in range(len(uuids)):
            rows = np.arange(cuts[track], cuts[track + 1]) if order is None else order[cuts[track]:cuts[track + 1]]
            if len(rows):
                tracks.append(_Track(uuids[track], self._next_sequence(), rows, contiguous=order is None))
                units += [(len(tracks) - 1, lo, min(lo + CHUNK_EVENTS, 2 * len(rows)))
                          for lo in range(0, 2 * len(rows), CHUNK_EVENTS)]
        context = (trace, strings, fields)
        split = _half(units) if self.parallelism.splits(2 * len(trace), PARALLEL_MIN_EVENTS) else len(units)
        if split < len(units):
            self._write_in_two(context, tracks, units, split, progress)
        else:
            self._write_units(context, tracks, units, progress)

    def _write_units(self, context, tracks: list["_Track"], units: list[tuple[int, int, int]], progress=None) -> None:
        trace, strings, fields = context
        ops = trace.ops
        for index, lo, hi in units:
            track = tracks[index]
            rows = track.rows
            track.prepare(ops)
            if lo == 0:
                interned = _interned(strings, event_names=(track.names, track.name_iids),
                                     values=fields.value_ids(rows), annotation_names=fields.vocabulary)
                self._start_sequence(track.sequence, track.uuid, int(track.times[track.order[0]]), interned)
            if protowire.compiled():  # one C pass from the op columns
                self.out.write(fields.encoded_events(track, lo, hi))
            else:
                self._write_events(track.sequence, track.times, track.order, lo, hi,
                                   lambda chunk, track=track: fields.pieces(track.rows[chunk], track.names,
                                                                            track.name_iids))
            if hi == 2 * len(rows):
                track.release()  # its event order (10M ops: hundreds of MB) is written
                if progress:
                    progress(min(len(trace), sum(len(t.rows) for t in tracks[:index + 1])), len(trace))

    def _write_in_two(self, context, tracks, units, split: int, progress) -> None:
        """Units ``[:split]`` here while a forked child writes the rest into a part file
        beside the output, appended afterwards (as the Chrome writer does)."""
        name = getattr(self.out, "name", None)
        folder = os.path.dirname(os.path.abspath(name)) if isinstance(name, str) else None
        fd, part = tempfile.mkstemp(prefix=".tracebridge-", suffix=".part", dir=folder)
        os.close(fd)
        track, lo, _ = units[split]
        if lo and len(tracks[track].rows) <= SHARED_ORDER_MAX_OPS:
            # the track both processes write: its event order is made once, before the fork
            # (above SHARED_ORDER_MAX_OPS each makes it when it gets there: the parent would
            # hold it, 24 bytes an op, while it orders its other tracks)
            tracks[track].prepare(context[0].ops)
        try:
            def child() -> bytes:
                with open(part, "wb") as target:
                    _HostWriter(target, self.host_index, dataflow=self.dataflow, memory=self.memory,
                                label_hosts=self.label_hosts, workers=1)._write_units(context, tracks, units[split:])
                return b""
            job = ForkedJob.start(child)
            if job is None:
                self._write_units(context, tracks, units, progress)
                return
            with job:
                self._write_units(context, tracks, units[:split], progress)
                try:
                    job.wait()
                except ChildFailed as failure:
                    raise OutputError(f"the second writer process failed: {failure}") from None
            self.out.flush()
            with open(part, "rb") as source:
                shutil.copyfileobj(source, self.out, 1 << 22)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(part)

    def _flows(self, trace: Trace, pid: np.ndarray, tid: np.ndarray) -> tuple[Ragged, Ragged]:
        """Per op: the flow ids it starts (field 47) and the ones it ends (field 48)."""
        n = len(trace)
        if not self.dataflow:
            return Ragged.empty(n), Ragged.empty(n)
        producer, consumer = cross_lane_flows(trace, pid, tid)
        first = self._flows_written + 1  # (ids go on across the windows of a streamed trace)
        ids = (np.uint64(self.host_index) << np.uint64(40)) + np.arange(first, first + len(producer), dtype=np.uint64)
        self._flows_written += len(producer)
        pieces = []
        for number, ends in ((E_FLOW_IDS, producer), (E_TERMINATING_FLOW_IDS, consumer)):
            by_op = np.argsort(ends, kind="stable")
            field = fixed64_field(number, ids[by_op])
            counts = np.bincount(ends, minlength=n).astype(np.int64, copy=False)
            counts *= len(tag(number, 1)) + 8  # in place: 10M ops make each temporary 80 MB
            pieces.append(Ragged(field.data, counts))
        return pieces[0], pieces[1]

    def _write_steps(self, trace: Trace, host: str | None) -> None:
        if not trace.steps:
            return
        self._packet((P_TRACK_DESCRIPTOR, message_bytes(
            (1, STEPS_UUID), (3, message_bytes((1, STEPS_PID), (6, "Steps"))), (12, -2))))
        start = np.array([s.start_ns for s in trace.steps], dtype=np.int64)
        end = np.array([s.end_ns for s in trace.steps], dtype=np.int64)
        order = np.lexsort((-end, start))
        rows = nested_fit(start[order], end[order])
        labels = [s.name or f"step {s.number}" for s in trace.steps]
        names = sorted(set(labels))
        name_iid = {name: i + 1 for i, name in enumerate(names)}
        steps_key = 1 + BASE_KEYS.index(STEP_NUM)
        bodies = Ragged.from_bytes([
            message_bytes((E_NAME_IID, name_iid[label])) + tag(E_ANNOTATIONS, 2) +
            varint_bytes(len(annotation := message_bytes((A_NAME_IID, steps_key), (A_INT, s.number)))) + annotation
            for s, label in zip(trace.steps, labels)])
        bodies.data = bodies.data.copy()
        suffix = f" {host}" if self.label_hosts and host else ""
        interned = message_bytes(
            *[(I_NAMES, message_bytes((1, iid), (2, name))) for name, iid in name_iid.items()],
            (I_ANNOTATION_NAMES, message_bytes((1, steps_key), (2, STEP_NUM))))
        for row in range(int(rows.max()) + 1 if len(rows) else 0):
            members = order[rows == row]
            uuid = self._next_uuid()
            name = "steps" + suffix + (f" ({row})" if row else "")
            self._packet((P_TRACK_DESCRIPTOR, message_bytes(
                (1, uuid), (5, STEPS_UUID),
                (4, message_bytes((1, STEPS_PID), (2, self._next_tid()), (5, name))),
                (12, self.host_index * 1024 + row))))
            self._write_slices(uuid, start[members], end[members], interned,
                               lambda chunk, members=members: [ragged_piece(bodies, members[chunk])])

    def _write_counters(self, trace: Trace, strings: "_StringTable", host: str | None) -> None:
        allocator, time_ns, in_use = _merged_counters(trace.counters)
        if not self._allocator_tracks:  # (a streamed trace's windows share the process and tracks)
            self._packet((P_TRACK_DESCRIPTOR, message_bytes(
                (1, ALLOCATORS_UUID), (3, message_bytes((1, ALLOCATORS_PID), (6, "Allocators"))), (12, -1))))
        order = np.lexsort((time_ns, allocator))
        allocator, time_ns, in_use = allocator[order], time_ns[order], in_use[order]
        cuts = np.flatnonzero(np.r_[True, allocator[1:] != allocator[:-1], True])
        suffix = f" ({host})" if self.label_hosts and host else ""
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            name = strings.text(int(allocator[lo])) + suffix
            uuid = self._allocator_tracks.get(name)
            if uuid is None:
                uuid = self._allocator_tracks[name] = self._next_uuid()
                self._packet((P_TRACK_DESCRIPTOR, message_bytes(
                    (1, uuid), (5, ALLOCATORS_UUID), (2, name), (8, message_bytes((3, UNIT_SIZE_BYTES))))))
            sequence = self._start_sequence(self._next_sequence(), uuid, int(time_ns[lo]), b"")
            for at in range(lo, hi, CHUNK_EVENTS):
                values = in_use[at:min(hi, at + CHUNK_EVENTS)]
                head = message_bytes((E_TYPE, TYPE_COUNTER)) + tag(E_COUNTER_VALUE, 0)
                self._events(sequence, time_ns[at:at + len(values)], int(time_ns[max(lo, at - 1)]),
                             [constant_piece(head, len(values)), varint_piece(values)])

    # --- sequences --------------------------------------------------------------------
    def _start_sequence(self, sequence: int, uuid: int, first_ns: int, interned: bytes) -> int:
        """Start packet sequence ``sequence`` for track ``uuid``: cleared state, defaults (the
        track, the sequence clock), the clock snapshot at ``first_ns`` and the interned data."""
        defaults = message_bytes((58, SEQUENCE_CLOCK), (11, message_bytes((11, uuid))))
        clocks = message_bytes(
            (1, message_bytes((1, CLOCK_BOOTTIME), (2, first_ns))),
            (1, message_bytes((1, CLOCK_REALTIME), (2, first_ns))),
            (1, message_bytes((1, SEQUENCE_CLOCK), (2, first_ns), (3, 1))))
        for fields in (((P_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED), (P_DEFAULTS, defaults)),
                       ((P_CLOCK_SNAPSHOT, clocks),),
                       ((P_INTERNED, interned if interned else None),)):
            if any(value is not None for _, value in fields):
                body = message_bytes((P_SEQUENCE, sequence), *fields)
                self.out.write(tag(TRACE_PACKET, 2) + varint_bytes(len(body)) + body)
        return sequence

    def _write_slices(self, uuid: int, start: np.ndarray, end: np.ndarray, interned: bytes, begin_pieces) -> None:
        """The slices ``start``/``end`` (sorted by start, longest first; they nest) as begin
        and end events of a new sequence, in time order; ``begin_pieces(index)`` gives the
        begin events' TrackEvent fields after the type."""
        times, order = _event_order(start, end)
        sequence = self._next_sequence()
        self._start_sequence(sequence, uuid, int(times[order[0]]), interned)
        for lo in range(0, len(order), CHUNK_EVENTS):
            self._write_events(sequence, times, order, lo, min(len(order), lo + CHUNK_EVENTS), begin_pieces)

    def _write_events(self, sequence: int, times: np.ndarray, order: np.ndarray, lo: int, hi: int,
                      begin_pieces) -> None:
        """Events ``order[lo:hi]`` of a sequence (an event below n begins slice i, else ends
        slice i - n). Begin and end packets are assembled apart, into one output."""
        n = len(times) // 2
        events = order[lo:hi]
        previous = int(times[order[lo - 1]]) if lo else int(times[order[0]])
        delta = np.diff(times[events], prepend=previous)
        begins = events < n
        totals = np.empty(len(events), dtype=np.int64)
        kinds = []
        for where, head in ((np.flatnonzero(begins), _BEGIN_TYPE), (np.flatnonzero(~begins), _END_TYPE)):
            if not len(where):
                continue
            event_pieces = [constant_piece(head.tobytes(), len(where))]
            if head is _BEGIN_TYPE:
                event_pieces += begin_pieces(events[where])
            pieces = self._packet_pieces(sequence, delta[where], event_pieces)
            totals[where] = total_length(pieces)
            kinds.append((where, pieces))
        out = np.empty(int(totals.sum()), dtype=np.uint8)
        position = np.cumsum(totals) - totals
        for where, pieces in kinds:
            assemble_into(pieces, out, position[where])
        self.out.write(out.data)

    def _events(self, sequence: int, times: np.ndarray, previous: int, event_pieces: list[Piece]) -> None:
        """Packets of one sequence at ``times`` (deltas from ``previous``), each holding a
        TrackEvent made of ``event_pieces``."""
        pieces = self._packet_pieces(sequence, np.diff(times, prepend=previous), event_pieces)
        self.out.write(assemble(pieces).data)

    @staticmethod
    def _packet_pieces(sequence: int, delta: np.ndarray, event_pieces: list[Piece]) -> list[Piece]:
        """A Trace.packet field per event: its length, the time delta, the sequence, the
        TrackEvent of ``event_pieces``."""
        event_length = total_length(event_pieces)
        time = varint_piece(delta, prefix=tag(P_TIMESTAMP, 0))
        # the sequence id and the TrackEvent's tag, then its length
        event_head = varint_piece(event_length, prefix=message_bytes((P_SEQUENCE, sequence)) + tag(P_TRACK_EVENT, 2))
        packet_length = time.lengths + event_head.lengths + event_length
        return [varint_piece(packet_length, prefix=tag(TRACE_PACKET, 2)), time, event_head, *event_pieces]


def _event_order(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The begin and end events of slices sorted by (start, longest first), as ``times``
    (begins, then ends) and their time ``order``: at one time, ends of slices with a
    duration first, then begins (outer first), then ends of zero-length slices; ends
    innermost first. Begins are in order already: only the ends are sorted (a stable sort,
    nearly sorted input), then the two are merged by a key of time and kind (4 t + 1 for a
    begin, 4 t for an end, 4 t + 2 for a zero-length slice's end)."""
    n = len(start)
    times = np.concatenate([start, end])
    if not n:
        return times, np.zeros(0, dtype=np.int64)
    low = int(times.min())
    if int(times.max()) - low >= (1 << 60):  # 36 years: no room for the kind in the key
        rank = np.arange(n, dtype=np.int64)
        kind = np.where(end > start, 0, 2)
        order = np.lexsort((np.concatenate([rank, -rank]), np.concatenate([np.ones(n, dtype=np.int64), kind]), times))
        return times, order
    # Keys made in place, a block of rows at a time: no temporaries of n int64 beside them.
    end_key = end - low
    end_key <<= 2
    for lo in range(0, n, _KEY_BLOCK):
        hi = min(n, lo + _KEY_BLOCK)
        end_key[lo:hi] += np.where(end[lo:hi] > start[lo:hi], 0, 2)
    # Ends of one key innermost (last) first: a stable sort of the ends read backwards.
    end_order = np.argsort(end_key[::-1], kind="stable")
    np.subtract(n - 1, end_order, out=end_order)
    if protowire.compiled():  # the C loop makes the keys from the times as it merges
        del end_key
        return times, protowire.merged_times(times, low, end_order)
    begin_key = start - low
    begin_key <<= 2
    begin_key += 1
    return times, merged_order(begin_key, end_key, end_order)


_KEY_BLOCK = 1 << 20


_BEGIN_TYPE = np.frombuffer(message_bytes((E_TYPE, TYPE_BEGIN)), dtype=np.uint8)
_END_TYPE = np.frombuffer(message_bytes((E_TYPE, TYPE_END)), dtype=np.uint8)


class _Track:
    """One track's ops (rows, in start order) and what its sequence needs, made when first used."""

    def __init__(self, uuid: int, sequence: int, rows: np.ndarray, contiguous: bool = False):
        self.uuid, self.sequence, self.rows = uuid, sequence, rows
        self.contiguous = contiguous  # rows are rows[0], rows[0] + 1, ...: the columns' views, not copies
        self.times = self.order = self.names = self.name_iids = self.iids = None

    def prepare(self, ops) -> None:
        """The events' time order and the event names' iids, once."""
        if self.times is not None:
            return
        at = slice(int(self.rows[0]), int(self.rows[0]) + len(self.rows)) if self.contiguous else self.rows
        self.times, order = _event_order(ops["start_ns"][at], ops["end_ns"][at])
        self.order = order.astype(np.int32) if len(order) < (1 << 31) else order  # kept while written
        del order
        # Event names numbered by use on this track, most used first: most names then fit
        # a one-byte iid.
        uses = np.bincount(ops["kernel"][self.rows])
        self.names = np.flatnonzero(uses)
        self.name_iids = np.empty(len(self.names), dtype=np.int64)
        self.name_iids[np.argsort(-uses[self.names], kind="stable")] = np.arange(1, len(self.names) + 1)

    def release(self) -> None:
        """Drop the event order once the track is written (its rows stay)."""
        self.times = self.order = None


def _half(units: list[tuple[int, int, int]]) -> int:
    """The index of the first unit of the second half, by events."""
    total = sum(hi - lo for _, lo, hi in units)
    done = 0
    for index, (_, lo, hi) in enumerate(units):
        if done >= total / 2:
            return index
        done += hi - lo
    return len(units)


class _StringTable:
    """The trace's strings, UTF-8 encoded once, for interned data of any sequence."""

    def __init__(self, strings: tuple[str, ...]):
        self.strings = strings
        self._encoded: Ragged | None = None

    def text(self, string_id: int) -> str:
        return self.strings[string_id]

    def encoded(self) -> Ragged:
        if self._encoded is None:
            self._encoded = Ragged.from_bytes([s.encode("utf-8", "surrogatepass") for s in self.strings])
        return self._encoded


def _interned(strings: _StringTable, *, event_names: tuple[np.ndarray, np.ndarray], values: np.ndarray,
              annotation_names: Sequence[str]) -> bytes:
    """InternedData of one sequence: every category, the annotation names, the event names
    it uses (string ids and their iids) and its annotation string values (iid = string id + 1)."""
    parts = [message_bytes(*[(I_CATEGORIES, message_bytes((1, int(c) + 1), (2, c.chrome))) for c in Category]),
             message_bytes(*[(I_ANNOTATION_NAMES, message_bytes((1, i + 1), (2, name)))
                             for i, name in enumerate(annotation_names)])]
    encoded = strings.encoded()
    for number, (ids, iids) in ((I_NAMES, event_names), (I_STRING_VALUES, (values, values.astype(np.int64) + 1))):
        if not len(ids):
            continue
        texts = encoded.take(ids)
        entries = concat(varint_field(1, iids), message_field(2, texts))
        parts.append(message_field(number, entries).data.tobytes())
    return b"".join(parts)


class _OpFields:
    """The begin-event fields of every op, as pieces for any subset of ops: the name and
    category ids and the name, op type and step annotations from the op columns, and the
    rest (inputs, shapes, transfers, flows: variable in number) prepared once as one Ragged."""

    def __init__(self, trace: Trace, flows: tuple[Ragged, Ragged]):
        ops, n = trace.ops, len(trace)
        self.trace, self.n = trace, n
        self.vocabulary = list(BASE_KEYS)
        self.key = {name: i + 1 for i, name in enumerate(self.vocabulary)}
        category = ops["category"]  # uint8: widened a chunk of rows at a time (pieces)
        self.category = category
        kernel_like = np.isin(category, (int(Category.DEVICE), int(Category.MEMCPY)))
        self.name_key = np.where(kernel_like, self.key["tf_op"], self.key["name"]).astype(np.uint8)
        self.shows_type = ops["op_type"] != ops["kernel"]
        self.shows_name = ops["name"] != ops["kernel"]
        self.step_numbers = np.array([s.number for s in trace.steps] + [0], dtype=np.int64)
        pieces = []
        inputs = trace.inputs
        if inputs.rows:
            position = np.arange(inputs.rows, dtype=np.int64) - trace.input_offsets()[inputs["op"]]
            keys = np.array([self._add_key(f"input{k}") for k in range(int(position.max()) + 1)], dtype=np.int64)
            pieces.append(_per_op(self._annotations(keys[position], inputs["name"].astype(np.int64) + 1,
                                                    A_STRING_IID), inputs["op"], n))
        outputs = trace.outputs
        shaped = np.flatnonzero((outputs["flags"] & int(OutputFlag.HAS_SHAPE)) != 0) if outputs.rows \
            else np.zeros(0, dtype=np.int64)
        if len(shaped):
            slots = outputs["slot"][shaped]
            slot_keys = {int(s): self._add_key(f"shape{int(s)}") for s in np.unique(slots).tolist()}
            keys = np.array([slot_keys[int(s)] for s in slots.tolist()], dtype=np.int64)
            pieces.append(_per_op(self._annotations(keys, outputs["shape"][shaped].astype(np.int64) + 1,
                                                    A_STRING_IID), outputs["op"][shaped], n))
        transfers = trace.transfers
        if transfers.rows:
            rows = transfers.rows
            parts = [self._annotations(np.full(rows, self.key["bytes"]), transfers["bytes"], A_INT),
                     self._annotations(np.full(rows, self.key["rate_bps"]), transfers["rate_bps"], A_DOUBLE)]
            parts += [self._annotations(np.full(rows, self.key[name]), transfers[name].astype(np.int64) + 1,
                                        A_STRING_IID) for name in ("src", "dst", "tensor")]
            pieces.append(_per_op(concat(*parts), transfers["op"], n))
        pieces += [flow for flow in flows if len(flow.data)]
        extras = concat(*pieces) if pieces else None
        # Kept as the ops that have any (few: the flows of 10M ops are thousands) with their
        # bytes' spans, not as a length per op and its running sum (10M ops: 160 MB).
        self.extra_data = extras.data if extras is not None and len(extras.data) else None
        if self.extra_data is not None:
            self.extra_rows = np.flatnonzero(extras.lengths)
            self.extra_sizes = extras.lengths[self.extra_rows].astype(np.int64)
            self.extra_starts = np.cumsum(self.extra_sizes) - self.extra_sizes  # records lie in op order
        del extras
        self._extras_per_op: Ragged | None = None
        self._inputs, self._shaped = inputs, shaped
        self._columns = self._extras = None  # for encoded_events, made on first use

    def _add_key(self, name: str) -> int:
        if name not in self.key:
            self.vocabulary.append(name)
            self.key[name] = len(self.vocabulary)
        return self.key[name]

    @staticmethod
    def _annotations(keys: np.ndarray, values, value_field: int) -> Ragged:
        """One DebugAnnotation field per row (key iid, value), for the few child rows."""
        if value_field == A_DOUBLE:
            content = fixed64_field(A_DOUBLE, np.asarray(values, dtype=np.float64).view(np.uint64))
        else:
            content = varint_field(value_field, values)
        return message_field(E_ANNOTATIONS, concat(varint_field(A_NAME_IID, keys), content))

    def pieces(self, rows: np.ndarray, names: np.ndarray, name_iids: np.ndarray) -> list[Piece]:
        """The begin-event fields of ops ``rows`` (after the type); ``names``: the sorted
        kernel string ids of their sequence, ``name_iids`` their iids there."""
        ops, m = self.trace.ops, len(rows)
        pieces = [varint_piece(name_iids[np.searchsorted(names, ops["kernel"][rows])], prefix=tag(E_NAME_IID, 0))]
        # TF ops (the category of most rows) carry no category: 2 of about 40 bytes an op.
        # Every other row names its category; the reader takes none as an op.
        category = self.category[rows].astype(np.int64)
        if category.any():
            head = np.empty((m, 2), dtype=np.uint8)
            head[:, 0] = tag(E_CATEGORY_IIDS, 0)[0]
            head[:, 1] = category + 1
            pieces.append(matrix_piece(head, np.where(category != int(Category.OP), 2, 0)))
        # The name only where it differs from the slice name (a host annotation's is the same).
        named = self.shows_name[rows]
        if named.any():
            pieces += _string_annotation(self.name_key[rows], ops["name"][rows], None if named.all() else named)
        shown = self.shows_type[rows]
        if shown.any():
            pieces += _string_annotation(np.full(m, self.key["op_type"], dtype=np.uint8), ops["op_type"][rows], shown)
        step = ops["step"][rows]
        has_step = step != NO_STEP
        if has_step.any():
            numbers = self.step_numbers[step]
            head = np.empty((m, 5), dtype=np.uint8)
            head[:, :] = [tag(E_ANNOTATIONS, 2)[0], 0, tag(A_NAME_IID, 0)[0], self.key["step"], tag(A_INT, 0)[0]]
            head[:, 1] = 3 + varint_lengths(numbers.view(np.uint64))
            pieces.append(varint_piece(numbers, has_step, prefix=head))
        if self.extra_data is not None:
            pieces.append(ragged_piece(self._extras_ragged(), rows))
        return pieces

    def _extras_ragged(self) -> Ragged:
        """The extra fields as a record per op (for the numpy pieces), made once."""
        if self._extras_per_op is None:
            lengths = np.zeros(self.n, dtype=np.int64)
            lengths[self.extra_rows] = self.extra_sizes
            self._extras_per_op = Ragged(self.extra_data, lengths)
        return self._extras_per_op

    def encoded_events(self, track: "_Track", lo: int, hi: int) -> bytes:
        """The packets of events ``lo:hi`` of ``track``'s time order, encoded by the C loop
        (``_protowirec.track_events``) straight from the op columns: the same bytes as
        :meth:`pieces` assembled by ``_write_events``."""
        ops, order = self.trace.ops, track.order
        if track.iids is None:  # each string id's name iid on this track (-1: none)
            track.iids = np.full(max(len(self.trace.strings), 1), -1, dtype=np.int32)
            track.iids[track.names] = track.name_iids
        if self._columns is None:
            self._columns = (ops["kernel"], ops["name"], ops["op_type"], ops["category"], self.name_key,
                             self.shows_name, self.shows_type, ops["step"], self.step_numbers)
            self._extras = None if self.extra_data is None else (self.extra_data, self.extra_rows.astype(np.int64),
                                                                  self.extra_sizes, self.extra_starts)
        previous = int(track.times[order[lo - 1]]) if lo else int(track.times[order[0]])
        return protowire.track_events(track.times, np.ascontiguousarray(order[lo:hi], dtype=np.int64), previous,
                                      np.ascontiguousarray(track.rows, dtype=np.int64), track.sequence,
                                      (track.iids, *self._columns), self.key["op_type"], self.key["step"],
                                      self._extras)

    def value_ids(self, rows: np.ndarray) -> np.ndarray:
        """The string ids the annotations of ops ``rows`` use."""
        trace, ops = self.trace, self.trace.ops
        used = [ops["name"][rows][self.shows_name[rows]], ops["op_type"][rows][self.shows_type[rows]]]
        if self._inputs.rows or len(self._shaped) or trace.transfers.rows:
            mine = np.zeros(self.n, dtype=bool)
            mine[rows] = True
            if self._inputs.rows:
                used.append(self._inputs["name"][mine[self._inputs["op"]]])
            if len(self._shaped):
                outputs = trace.outputs
                used.append(outputs["shape"][self._shaped][mine[outputs["op"][self._shaped]]])
            if trace.transfers.rows:
                at = mine[trace.transfers["op"]]
                used += [trace.transfers[name][at] for name in ("src", "dst", "tensor")]
        # string ids are below len(strings): a count finds the distinct ones without a sort
        return np.flatnonzero(np.bincount(np.concatenate(used).astype(np.int64), minlength=1))


def _string_annotation(keys: np.ndarray, string_ids: np.ndarray, present: np.ndarray | None = None) -> list[Piece]:
    """A DebugAnnotation {name_iid: key, string_value_iid: id + 1} per record: a 6-byte head
    (field tag, length, key field, value tag) and the value's varint."""
    values = string_ids.astype(np.int64) + 1
    head = np.empty((len(keys), 6), dtype=np.uint8)
    head[:, :] = [tag(E_ANNOTATIONS, 2)[0], 0, tag(A_NAME_IID, 0)[0], 0, *tag(A_STRING_IID, 0)]
    head[:, 1] = 4 + varint_lengths(values.view(np.uint64))
    head[:, 3] = keys
    return [varint_piece(values, present, prefix=head)]


def _per_op(rows: Ragged, owner: np.ndarray, n: int) -> Ragged:
    """Child-row fields (sorted by their op ``owner``) as one record per op."""
    lengths = np.bincount(owner, weights=rows.lengths, minlength=n).astype(np.int64)
    return Ragged(rows.data, lengths)
