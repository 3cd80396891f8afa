"""Perfetto traces (``.pftrace``) back into the model: what tracebridge's writer
(:mod:`tracebridge.writers.perfetto`) writes, so that its output round-trips like every
other format's.

Read: process tracks (a device each; ``host:`` labels), their thread tracks (lanes; a
sub-row track joins the lane of its name, ``(derived)`` dropped), slices from begin/end
TrackEvents with interned names, categories and debug annotations (``name``/``tf_op``,
``op_type``, ``step``, ``input<k>``, ``shape<slot>``, transfers), the ``Steps`` process's
step slices, counter tracks of the ``Allocators`` process, and flows that end on a kernel
or copy as launch links. Timestamps are absolute, or deltas of a sequence's incremental
clock from its clock snapshot. Other Perfetto traces (ftrace, a phone's system trace)
hold none of this and are refused with a clear error.

Decoding uses tracebridge's own vectorized wire decoder (:mod:`.wire`), not Perfetto's
Python package: field numbers are those of Perfetto's public schema.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import TraceFormatError
from ..model.builder import TraceBuilder
from ..model.schema import NO_STEP, Category, OpFlag, OutputFlag
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source
from .wire import FIXED64, LENGTH, VARINT, WireError, as_signed, decode, decode_submessages, strings

_TRACE_PACKET = 1
_DERIVED = " (derived)"
_CATEGORY_BY_NAME = {c.chrome: c for c in Category}
_STEPS_PROCESS, _ALLOCATORS_PROCESS = "Steps", "Allocators"


def read(source: Source, parallelism: Parallelism) -> Trace:
    builder = TraceBuilder({"source_format": "perfetto"})
    for file in source.files:
        try:
            _add_trace(builder, file.data, file.host)
        except WireError as error:
            raise error.to_format_error(file.path, "Perfetto trace") from None
        except _Unsupported as error:
            raise TraceFormatError(str(error), path=file.path) from None
    return builder.build()


class _Unsupported(Exception):
    pass


def _add_trace(builder: TraceBuilder, raw: bytes, host: str | None) -> None:
    top = decode(raw, [0], [len(raw)])
    _, starts, ends = top.spans(_TRACE_PACKET)
    n = len(starts)
    packets = decode(raw, starts, ends)
    sequence = packets.scalar(10, n)
    tracks = _tracks(raw, packets, n)
    state = _SequenceState(raw, packets, n, sequence)
    event_packet, event_start, event_end = packets.spans(11)
    if not len(event_packet):
        raise _Unsupported("a Perfetto trace without track events (tracebridge reads the traces it writes: "
                           "slices of TrackEvents)")
    events = decode(raw, event_start, event_end)
    m = len(event_packet)
    times = state.times(event_packet)
    track = np.where(events.has(11, m), events.scalar(11, m, np.uint64), state.default_track[event_packet])
    kind = events.scalar(9, m)
    name_iid = events.scalar(10, m)
    seq = sequence[event_packet]
    names = state.lookup("names", seq, name_iid)
    category = np.full(m, int(Category.OP), dtype=np.int64)
    cat_msg, cat_value, _ = events.select(3, VARINT)
    if len(cat_msg):
        texts = state.lookup("categories", seq[cat_msg], cat_value.astype(np.int64))
        category[cat_msg] = [int(_CATEGORY_BY_NAME.get(t, Category.OP)) for t in texts]
    annotations = _annotations(raw, events, m, state, seq)
    flows = _flows(events)
    _build(builder, tracks, host, _TrackEvents(track=track, kind=kind, times=times, names=names, category=category,
                                               annotations=annotations, flows=flows,
                                               counter_values=events.scalar(30, m, np.uint64).view(np.int64)))


# --- tracks ---------------------------------------------------------------------------

def _tracks(raw: bytes, packets, n: int) -> dict[int, dict]:
    """Every track descriptor: uuid -> {parent, name, process, thread, counter}."""
    where, d = decode_submessages(raw, packets, 60)
    found: dict[int, dict] = {}
    if d is None:
        return found
    k = len(where)
    uuid = d.scalar(1, k, np.uint64)
    parent = d.scalar(5, k, np.uint64)
    name = _texts(raw, d, 2, k)
    rank = as_signed(d.scalar(12, k, np.uint64))
    has_counter = d.has(8, k)
    process = _sub(raw, d, 3, k, {1: "pid", 6: "process_name", 8: "labels"})
    thread = _sub(raw, d, 4, k, {1: "pid", 2: "tid", 5: "thread_name"})
    for i in range(k):
        found[int(uuid[i])] = {"parent": int(parent[i]), "name": name[i], "process": process.get(i),
                               "thread": thread.get(i), "counter": bool(has_counter[i]), "rank": int(rank[i])}
    return found


def _texts(raw: bytes, fields, number: int, count: int) -> list[str]:
    out = [""] * count
    messages, starts, ends = fields.spans(number)
    for m, text in zip(messages.tolist(), strings(raw, starts, ends)):
        out[m] = text
    return out


def _sub(raw: bytes, fields, number: int, count: int, wanted: dict[int, str]) -> dict[int, dict]:
    """A nested message of some descriptors, as dicts of the ``wanted`` fields."""
    owner, starts, ends = fields.spans(number)
    out: dict[int, dict] = {}
    if not len(owner):
        return out
    inner = decode(raw, starts, ends)
    for number_, key in wanted.items():
        if number_ in inner.numbers():
            wire_type = int(inner.wire_type[inner.groups[number_]][0])
            if wire_type == LENGTH:
                messages, s, e = inner.spans(number_)
                for msg, text in zip(messages.tolist(), strings(raw, s, e)):
                    entry = out.setdefault(int(owner[msg]), {})
                    if key == "labels":
                        entry.setdefault(key, []).append(text)
                    else:
                        entry[key] = text
            else:
                messages, values, _ = inner.select(number_, VARINT)
                for msg, value in zip(messages.tolist(), as_signed(values).tolist()):
                    out.setdefault(int(owner[msg]), {})[key] = value
    for i in owner.tolist():
        out.setdefault(int(i), {})
    return out


# --- sequences: defaults, clocks, interned data ---------------------------------------

class _SequenceState:
    """Per packet sequence: its default track and clock, its clock snapshots, and its
    interned strings (names, categories, annotation names, string values)."""

    def __init__(self, raw: bytes, packets, n: int, sequence: np.ndarray):
        self.raw, self.packets, self.n, self.sequence = raw, packets, n, sequence
        self.default_track = np.zeros(n, dtype=np.uint64)
        self.default_clock = np.zeros(n, dtype=np.int64)
        self.tables: dict[str, dict[tuple[int, int], str]] = {"names": {}, "categories": {}, "annotation_names": {},
                                                                "values": {}}
        self._defaults()
        self._interned()

    def _defaults(self) -> None:
        where, starts, ends = self.packets.spans(59)
        if not len(where):
            return
        d = decode(self.raw, starts, ends)
        clock = d.scalar(58, len(where))
        event_defaults_owner, s, e = d.spans(11)
        track = np.zeros(len(where), dtype=np.uint64)
        if len(event_defaults_owner):
            inner = decode(self.raw, s, e)
            track[event_defaults_owner] = inner.scalar(11, len(event_defaults_owner), np.uint64)
        # A sequence's defaults (the last it sets; tracebridge sets them once, first) hold
        # for all its packets.
        distinct, inverse = np.unique(self.sequence, return_inverse=True)
        slot = np.searchsorted(distinct, self.sequence[where])
        clocks = np.zeros(len(distinct), dtype=np.int64)
        tracks = np.zeros(len(distinct), dtype=np.uint64)
        clocks[slot], tracks[slot] = clock, track
        self.default_clock, self.default_track = clocks[inverse.ravel()], tracks[inverse.ravel()]

    def _interned(self) -> None:
        where, starts, ends = self.packets.spans(12)
        if not len(where):
            return
        d = decode(self.raw, starts, ends)
        for number, table, text_field in ((2, "names", 2), (1, "categories", 2), (3, "annotation_names", 2),
                                          (29, "values", 2)):
            owner, s, e = d.spans(number)
            if not len(owner):
                continue
            entries = decode(self.raw, s, e)
            iids = entries.scalar(1, len(owner), np.uint64)
            texts = _texts(self.raw, entries, text_field, len(owner))
            target = self.tables[table]
            seqs = self.sequence[where[owner]]
            for seq, iid, text in zip(seqs.tolist(), iids.tolist(), texts):
                target[(seq, iid)] = text

    def lookup(self, table: str, seq: np.ndarray, iid: np.ndarray) -> list[str]:
        entries = self.tables[table]
        try:
            return [entries[(s, i)] if i else "" for s, i in zip(seq.tolist(), iid.tolist())]
        except KeyError as error:
            raise _Unsupported(f"interned {table} id {error.args[0][1]} of sequence {error.args[0][0]} is used "
                               "but never defined") from None

    def times(self, event_packets: np.ndarray) -> np.ndarray:
        """Absolute nanoseconds of the packets ``event_packets``: deltas of an incremental
        sequence clock are summed from the sequence's last clock snapshot."""
        n = self.n
        value = self.packets.scalar(8, n, np.uint64).view(np.int64).copy()
        explicit_clock = self.packets.scalar(58, n)
        clock = np.where(explicit_clock != 0, explicit_clock, self.default_clock)
        incremental = clock >= 64
        if incremental.any():
            base = np.zeros(n, dtype=np.int64)
            resets = np.zeros(n, dtype=bool)
            where, starts, ends = self.packets.spans(6)
            if len(where):
                snapshot = decode(self.raw, starts, ends)
                owner, s, e = snapshot.spans(1)
                clocks = decode(self.raw, s, e)
                k = len(owner)
                ids, stamps = clocks.scalar(1, k), clocks.scalar(2, k, np.uint64).view(np.int64)
                marked = clocks.scalar(3, k) != 0
                for o, clock_id, stamp, inc in zip(owner.tolist(), ids.tolist(), stamps.tolist(), marked.tolist()):
                    if clock_id >= 64 and inc:
                        packet = int(where[o])
                        resets[packet] = True
                        base[packet] = stamp
            # per sequence, in packet order: running sum of deltas since the last snapshot
            order = np.lexsort((np.arange(n), self.sequence))
            seq_sorted = self.sequence[order]
            delta = np.where(incremental, value, 0)[order]
            reset = resets[order] | np.r_[True, seq_sorted[1:] != seq_sorted[:-1]]
            group = np.cumsum(reset) - 1
            starts_at = np.flatnonzero(reset)
            running = np.cumsum(delta)
            before = np.r_[0, running][starts_at]
            absolute = base[order][starts_at][group] + running - before[group]
            result = np.empty(n, dtype=np.int64)
            result[order] = absolute
            value = np.where(incremental, result, value)
        return value[event_packets]


# --- events ---------------------------------------------------------------------------

def _annotations(raw: bytes, events, m: int, state: _SequenceState, seq: np.ndarray) -> dict[str, tuple]:
    """Annotation name -> (event rows, values) of the begin events' debug annotations."""
    owner, a = decode_submessages(raw, events, 4)
    out: dict[str, tuple] = {}
    if a is None:
        return out
    k = len(owner)
    key = state.lookup("annotation_names", seq[owner], a.scalar(1, k, np.uint64))
    values: list = [None] * k
    for number in a.numbers():
        if number == 17:
            messages, iids, _ = a.select(17, VARINT)
            texts = state.lookup("values", seq[owner[messages]], iids.astype(np.int64))
            for i, text in zip(messages.tolist(), texts):
                values[i] = text
        elif number in (3, 4):
            messages, numbers_, _ = a.select(number, VARINT)
            for i, v in zip(messages.tolist(), (as_signed(numbers_) if number == 4 else numbers_).tolist()):
                values[i] = int(v)
        elif number == 5:
            messages, bits, _ = a.select(5, FIXED64)
            for i, v in zip(messages.tolist(), bits.view(np.float64).tolist()):
                values[i] = float(v)
        elif number == 6:
            messages, s, e = a.spans(6)
            for i, text in zip(messages.tolist(), strings(raw, s, e)):
                values[i] = text
    grouped: dict[str, list] = {}
    for row, name, value in zip(owner.tolist(), key, values):
        entry = grouped.setdefault(name, [[], []])
        entry[0].append(row)
        entry[1].append(value)
    for name, (rows, vals) in grouped.items():
        out[name] = (np.array(rows, dtype=np.int64), vals)
    return out


def _flows(events) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(event rows, flow ids) of flows started and of flows ended."""
    out = []
    for number in (47, 48):
        messages, ids, _ = events.select(number, FIXED64) if number in events.numbers() else \
            (np.zeros(0, np.int64), np.zeros(0, np.uint64), None)
        out += [messages, ids]
    return tuple(out)


@dataclasses.dataclass
class _TrackEvents:
    """The track events, one entry per event (``kind``: 1 begin, 2 end, 4 counter)."""
    track: np.ndarray
    kind: np.ndarray
    times: np.ndarray
    names: list[str]
    category: np.ndarray
    annotations: dict[str, tuple]  # name -> (event rows, values)
    flows: tuple  # (started rows, started ids, ended rows, ended ids)
    counter_values: np.ndarray


@dataclasses.dataclass
class _Slices:
    """Paired slices: the event row of each begin, and the slice's start and end."""
    begins: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    def subset(self, which: np.ndarray) -> _Slices:
        return _Slices(self.begins[which], self.start_ns[which], self.end_ns[which])


def _build(builder: TraceBuilder, tracks: dict[int, dict], host: str | None, ev: _TrackEvents) -> None:
    """Add the devices, lanes, steps, ops (with their inputs, outputs and transfers), launch
    links and counters of the track events to ``builder``."""
    process_name, lane_of, lane_device = _add_lanes(builder, tracks, host)
    begins, ends = _pair_slices(ev.kind, ev.track, ev.times)
    slices = _Slices(begins, ev.times[begins], ev.times[ends])
    values = {name: _column(rows, vals, len(ev.track)) for name, (rows, vals) in ev.annotations.items()}
    on_steps, step_index = _add_steps(builder, tracks, process_name, ev, values, slices)
    op_of_event = _add_ops(builder, ev, values, (lane_of, lane_device), step_index, slices.subset(~on_steps))
    _add_op_details(builder, ev.annotations, values, op_of_event)
    _add_launch_links(builder, ev.flows, op_of_event, ev.category)
    _add_counters(builder, tracks, host, ev)


def _add_lanes(builder: TraceBuilder, tracks: dict[int, dict],
               host: str | None) -> tuple[dict[int, str], dict[int, int], dict[int, int]]:
    """A device per process track, a lane per thread track; returns the process names and,
    per thread track, its lane, and per lane its device."""
    processes = {uuid: t for uuid, t in tracks.items() if t["process"] is not None}
    process_name = {uuid: (t["process"].get("process_name") or t["name"]) for uuid, t in processes.items()}
    # devices in the order of their process tracks (the Chrome order: sibling rank)
    device_of: dict[int, int] = {}
    for uuid in sorted(processes, key=lambda u: (processes[u]["rank"], u)):
        label = process_name[uuid]
        if label in (_STEPS_PROCESS, _ALLOCATORS_PROCESS):
            continue
        labels = processes[uuid]["process"].get("labels", [])
        device_host = next((x[5:] for x in labels if x.startswith("host:")), host)
        device_of[uuid] = builder.device(label, device_host)
    lane_of: dict[int, int] = {}
    lane_device: dict[int, int] = {}
    thread_tracks = [u for u, t in tracks.items() if t["thread"] is not None and t["parent"] in device_of]
    for uuid in sorted(thread_tracks, key=lambda u: (tracks[u]["parent"], tracks[u]["rank"], u)):
        name = tracks[uuid]["thread"].get("thread_name") or tracks[uuid]["name"]
        name = name[:-len(_DERIVED)] if name.endswith(_DERIVED) else name
        lane_of[uuid] = builder.lane(device_of[tracks[uuid]["parent"]], name)
        lane_device[lane_of[uuid]] = device_of[tracks[uuid]["parent"]]
    return process_name, lane_of, lane_device


def _pair_slices(kind: np.ndarray, track: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair each slice begin with its end, per track by nesting depth; returns the event
    rows of the begins and of their ends (raises :class:`_Unsupported` if they do not nest)."""
    slice_rows = np.flatnonzero((kind == 1) | (kind == 2))
    order = _stable_by_track(slice_rows, track, times)
    begin = kind[order] == 1
    step = np.where(begin, 1, -1)
    tr = track[order]
    new_track = np.r_[True, tr[1:] != tr[:-1]]
    depth = np.cumsum(step)
    depth -= np.repeat(np.r_[0, depth][np.flatnonzero(new_track)], np.diff(np.r_[np.flatnonzero(new_track), len(tr)]))
    level = np.where(begin, depth, depth + 1)
    pair_order = np.lexsort((np.arange(len(order)), level, tr))
    paired = order[pair_order]
    if len(paired) % 2 or np.any(kind[paired[0::2]] != 1) or np.any(kind[paired[1::2]] != 2):
        raise _Unsupported("slices do not nest on their tracks (a begin without its end)")
    return paired[0::2], paired[1::2]


def _value(values: dict[str, list], key: str, rows: np.ndarray) -> list:
    """The annotation ``key`` of the events ``rows`` (None where absent)."""
    column = values.get(key)
    return [None] * len(rows) if column is None else [column[r] for r in rows.tolist()]


def _add_steps(builder: TraceBuilder, tracks: dict[int, dict], process_name: dict[int, str], ev: _TrackEvents,
               values: dict[str, list], slices: _Slices) -> tuple[np.ndarray, dict[int, int]]:
    """The slices on the Steps process's tracks are steps; returns which slices are, and
    the step index of each step number."""
    begins, start_ns, end_ns = slices.begins, slices.start_ns, slices.end_ns
    steps_process = next((u for u, n in process_name.items() if n == _STEPS_PROCESS), None)
    on_steps = np.array([tracks.get(int(t), {}).get("parent") == steps_process for t in ev.track[begins].tolist()]) \
        if steps_process is not None and len(begins) else np.zeros(len(begins), dtype=bool)
    step_index: dict[int, int] = {}
    for b, e_ns, s_ns, number in zip(begins[on_steps].tolist(), end_ns[on_steps].tolist(),
                                     start_ns[on_steps].tolist(), _value(values, "step_num", begins[on_steps])):
        number = int(number) if number is not None else len(step_index)
        label = ev.names[b]
        index = builder.step(number, label, s_ns, e_ns)
        step_index.setdefault(number, index)
    return on_steps, step_index


def _add_ops(builder: TraceBuilder, ev: _TrackEvents, values: dict[str, list], lanes_of: tuple[dict, dict],
             step_index: dict[int, int], slices: _Slices) -> np.ndarray:
    """An op row per slice (not a step) on a known lane; returns the op of each event (-1: none)."""
    s = builder.strings
    lane_of, lane_device = lanes_of  # the lane of each thread track, the device of each lane
    begins, start_ns, end_ns = slices.begins, slices.start_ns, slices.end_ns
    op_track = ev.track[begins]
    known = np.array([int(t) in lane_of for t in op_track.tolist()], dtype=bool) if len(begins) else np.zeros(0, bool)
    b, start_ns, end_ns = begins[known], start_ns[known], end_ns[known]
    kernel = [ev.names[i] for i in b.tolist()]
    op_name = [n if n is not None else t if t is not None else k
               for n, t, k in zip(_value(values, "name", b), _value(values, "tf_op", b), kernel)]
    op_type = [t if t is not None else k for t, k in zip(_value(values, "op_type", b), kernel)]
    step_numbers = _value(values, "step", b)
    lanes = np.array([lane_of[int(t)] for t in ev.track[b].tolist()], dtype=np.int64)
    devices = np.array([lane_device[lane] for lane in lanes.tolist()], dtype=np.int64)
    first_op = builder.op_count
    count = len(b)
    if count:
        builder.extend("ops", name=[s[x] for x in op_name], op_type=[s[x] for x in op_type],
                       kernel=[s[x] for x in kernel], label=np.full(count, s[""]),
                       start_ns=start_ns, end_ns=end_ns, op_start_ns=start_ns,
                       op_end_ns=end_ns, device=devices, lane=lanes, block=devices,
                       step=[step_index.get(int(x), NO_STEP) if x is not None else NO_STEP for x in step_numbers],
                       flags=np.full(count, int(OpFlag.HAS_NANOS)), category=ev.category[b])
    op_of_event = np.full(len(ev.track), -1, dtype=np.int64)
    op_of_event[b] = first_op + np.arange(count)
    return op_of_event


def _add_op_details(builder: TraceBuilder, annotations: dict[str, tuple], values: dict[str, list],
                    op_of_event: np.ndarray) -> None:
    """The ops' inputs, output shapes and transfers, from their slices' annotations."""
    s = builder.strings
    input_keys = sorted((k for k in values if k.startswith("input") and k[5:].isdigit()), key=lambda k: int(k[5:]))
    rows_op, rows_name = [], []
    for key in input_keys:
        rows, vals = annotations[key]
        for r, v in zip(rows.tolist(), vals):
            if op_of_event[r] >= 0:
                rows_op.append(op_of_event[r])
                rows_name.append(s[str(v)])
    if rows_op:
        order_in = np.argsort(np.array(rows_op), kind="stable")
        builder.extend("inputs", op=np.array(rows_op)[order_in], name=np.array(rows_name)[order_in])
    for key in (k for k in values if k.startswith("shape") and k[5:].isdigit()):
        rows, vals = annotations[key]
        for r, v in zip(rows.tolist(), vals):
            if op_of_event[r] >= 0:
                builder.add_row("outputs", op=int(op_of_event[r]), slot=int(key[5:]), shape=str(v),
                                flags=int(OutputFlag.HAS_SHAPE))
    if "tensor" in annotations:
        rows, _ = annotations["tensor"]
        for r in rows.tolist():
            if op_of_event[r] >= 0:
                builder.add_row("transfers", op=int(op_of_event[r]), bytes=int(values["bytes"][r] or 0),
                                rate_bps=float(values["rate_bps"][r] or 0.0), src=str(values["src"][r]),
                                dst=str(values["dst"][r]), tensor=str(values["tensor"][r]))


def _add_launch_links(builder: TraceBuilder, flows: tuple, op_of_event: np.ndarray, category: np.ndarray) -> None:
    """Flows that end on a kernel or copy: launch links."""
    started_rows, started_ids, ended_rows, ended_ids = flows
    if len(started_rows) and len(ended_rows):
        by_id = dict(zip(started_ids.tolist(), started_rows.tolist()))
        kind_id = builder.strings["launch"]
        for row, flow in zip(ended_rows.tolist(), ended_ids.tolist()):
            producer = by_id.get(flow)
            if producer is None or op_of_event[row] < 0 or op_of_event[producer] < 0:
                continue
            if category[row] in (int(Category.DEVICE), int(Category.MEMCPY)):
                builder.add_row("links", producer=int(op_of_event[producer]), consumer=int(op_of_event[row]),
                                kind=kind_id)


def _add_counters(builder: TraceBuilder, tracks: dict[int, dict], host: str | None, ev: _TrackEvents) -> None:
    """A counter row per counter event (its track's name, less `` (host)``)."""
    counter_rows = np.flatnonzero(ev.kind == 4)
    if len(counter_rows):
        for t, time_ns, v in zip(ev.track[counter_rows].tolist(), ev.times[counter_rows].tolist(),
                                 ev.counter_values[counter_rows].tolist()):
            name = tracks.get(int(t), {}).get("name", "")
            if host and name.endswith(f" ({host})"):
                name = name[:-len(host) - 3]
            builder.add_row("counters", allocator=name, time_ns=int(time_ns), bytes_in_use=int(v))


def _stable_by_track(rows: np.ndarray, track: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``rows`` grouped by track, in packet order within a track (the writer's order: time
    order with its tie rules)."""
    return rows[np.argsort(track[rows], kind="stable")]


def _column(rows: np.ndarray, vals: list, n: int) -> list:
    column = [None] * n
    for r, v in zip(rows.tolist(), vals):
        column[r] = v
    return column
