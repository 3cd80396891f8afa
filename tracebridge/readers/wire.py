"""A vectorized protobuf wire-format decoder over numpy.

Why: walking a million parsed NodeExecStats through the protobuf Python API costs about
17 µs a node, because every nested message and repeated field becomes a wrapper object.
Here all messages of one nesting level are decoded in lockstep: one numpy pass per field
position, whatever the number of messages, with zero copies of the input buffer.

``decode(buf, starts, ends)`` returns every field of every message, grouped by field
number: ``message`` (which message), ``wire_type``, ``value`` (varint or fixed value; the
length of a length-delimited field) and ``offset`` (where a length-delimited or fixed
payload starts, else where the field starts). Malformed input raises :class:`WireError`,
which readers turn into :class:`~tracebridge.errors.TraceFormatError` naming the byte offset.

Where the optional C module ``_wirec`` is built, ``decode`` runs it instead: the same
contract as one sequential loop (``_wirec.c`` says why), with this module's numpy decoder
(``decode_numpy``) as its reference and as the reader of malformed input.
"""

from __future__ import annotations

import os
from array import array
from itertools import repeat

import numpy as np

from ..errors import TraceFormatError

try:  # the same decoder as one C loop (setup.py builds it where a C compiler is found)
    from . import _wirec
except ImportError:
    _wirec = None

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_MAX_VARINT = 10
_MAX_FIELD = (1 << 29) - 1  # protobuf's largest field number
_COLUMNS = ("message", "wire_type", "value", "offset")
_DTYPES = {"message": np.int64, "wire_type": np.int8, "value": np.uint64, "offset": np.int64}


class Fields:
    """All fields found in a set of messages, grouped by field number; within a field,
    the occurrences of each message are in wire order.

    ``select``/``scalar``/``has``/``spans`` read one field. The flat columns ``message``,
    ``field``, ``wire_type``, ``value`` and ``offset`` (rows ordered by field number,
    ``groups[number]`` the slice of one field) are built on first use."""

    def __init__(self, parts: dict[int, dict[str, np.ndarray]], dense: dict[int, np.ndarray] | None = None):
        self._parts = dict(sorted(parts.items()))
        self._dense = dense or {}  # number -> a value per message (decoded by the C loop)
        self.groups: dict[int, slice] = {}
        row = 0
        for number, columns in self._parts.items():
            count = len(columns["message"])
            self.groups[number] = slice(row, row + count)
            row += count
        self._flat: dict[str, np.ndarray] | None = None

    def _column(self, name: str) -> np.ndarray:
        if self._flat is None:
            flat = {k: [p[k] for p in self._parts.values()] for k in _COLUMNS}
            self._flat = {k: np.concatenate(v) if v else np.zeros(0, _DTYPES[k]) for k, v in flat.items()}
            self._flat["field"] = np.repeat(np.array(list(self._parts), dtype=np.int64),
                                            [len(p["message"]) for p in self._parts.values()])
        return self._flat[name]

    message = property(lambda self: self._column("message"))
    field = property(lambda self: self._column("field"))
    wire_type = property(lambda self: self._column("wire_type"))
    value = property(lambda self: self._column("value"))
    offset = property(lambda self: self._column("offset"))

    def numbers(self) -> list[int]:
        """The field numbers present, ascending."""
        return list(self._parts)

    def select(self, number: int, wire_type: int = VARINT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(message, value, offset)`` of one field, sorted by message; a field whose
        wire type is not the expected one is rejected."""
        if number in self._dense:
            raise ValueError(f"field {number} was decoded dense: read it with scalar()")
        part = self._parts.get(number)
        if part is None:
            empty = np.zeros(0, dtype=np.int64)
            return empty, np.zeros(0, dtype=np.uint64), empty
        types = part["wire_type"]
        wrong = types != wire_type
        if wrong.any():
            first = int(np.flatnonzero(wrong)[0])
            raise WireError(f"field {number} has wire type {int(types[first])}, expected {wire_type}",
                            int(part["offset"][first]))
        message, value, offset = part["message"], part["value"], part["offset"]
        if len(message) > 1 and np.any(message[1:] < message[:-1]):
            order = np.argsort(message, kind="stable")  # repeated fields: restore message order
            message, value, offset = message[order], value[order], offset[order]
        return message, value, offset

    def scalar(self, number: int, count: int, dtype=np.int64) -> np.ndarray:
        """A singular varint field as one value per message (0 where absent; last wins)."""
        if number in self._dense:
            values = self._dense[number]
            return values if values.dtype == dtype else values.astype(dtype)
        messages, values, _ = self.select(number, VARINT)
        out = np.zeros(count, dtype=dtype)
        out[messages] = values.astype(dtype)
        return out

    def has(self, number: int, count: int) -> np.ndarray:
        if number in self._dense:
            raise ValueError(f"field {number} was decoded dense: its presence is not kept")
        present = np.zeros(count, dtype=bool)
        part = self._parts.get(number)
        if part is not None:
            present[part["message"]] = True
        return present

    def spans(self, number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(message, start, end)`` of a length-delimited field, every occurrence."""
        messages, lengths, offsets = self.select(number, LENGTH)
        return messages, offsets, offsets + lengths.astype(np.int64)


class WireError(Exception):
    """Internal: a decoding failure at a byte offset; readers turn it into TraceFormatError."""

    def __init__(self, reason: str, offset: int):
        super().__init__(reason)
        self.reason, self.offset = reason, offset

    def to_format_error(self, path=None, what: str = "protobuf") -> TraceFormatError:
        return TraceFormatError(f"corrupt {what}: {self.reason}", path=path, where=f"byte {self.offset}")

    def __reduce__(self):  # picklable (it may be raised in a worker process)
        return WireError, (self.reason, self.offset)


_CONTINUATION = np.uint64(0x8080_8080_8080_8080)
_LOW7 = np.uint64(0x7F7F_7F7F_7F7F_7F7F)
# (mask of the low half, mask of the high half after shifting, shift): three steps pack the
# 7-bit groups of eight bytes into 56 contiguous bits.
_PACK = [(np.uint64(0x007F_007F_007F_007F), np.uint64(0x3F80_3F80_3F80_3F80), np.uint64(1)),
         (np.uint64(0x0000_3FFF_0000_3FFF), np.uint64(0x0FFF_C000_0FFF_C000), np.uint64(2)),
         (np.uint64(0x0000_0000_0FFF_FFFF), np.uint64(0x00FF_FFFF_F000_0000), np.uint64(4))]


class Buffer:
    """The input as bytes (``.bytes``) and as the little-endian 64-bit word starting at
    every offset (``.words``, an unaligned strided view: one gather reads 8 bytes)."""

    def __init__(self, raw):
        self.bytes = np.frombuffer(raw, dtype=np.uint8)
        size = len(self.bytes)
        self.words = (np.ndarray((size - 7,), dtype="<u8", buffer=self.bytes, strides=(1,))
                      if size >= 8 else np.zeros(0, dtype=np.uint64))


def _varints(buf: Buffer, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position; returns (values, byte lengths).

    One-byte varints (tags, small lengths and ints) cost one byte gather. Longer ones
    (timestamps take 8 or 9 bytes) are decoded from one 64-bit word each with bit
    tricks: the first byte without a continuation bit ends the varint, and three
    shift-and-mask steps pack the 7-bit groups."""
    if np.any(pos >= limit):
        raise WireError("varint runs past the end of its message", int(pos[pos >= limit][0]))
    first = buf.bytes[pos]
    long_ = np.flatnonzero(first >= 0x80)
    if not len(long_):
        return first.astype(np.uint64), np.ones(len(pos), dtype=np.int64)
    values = first.astype(np.uint64)
    length = np.ones(len(pos), dtype=np.int64)
    at, lim = pos[long_], limit[long_]
    near_end = at >= len(buf.words)  # fewer than 8 bytes left in the buffer
    if near_end.any():
        v, n = _varints_bytewise(buf.bytes, at[near_end], lim[near_end])
        values[long_[near_end]], length[long_[near_end]] = v, n
        far = ~near_end
        long_, at, lim = long_[far], at[far], lim[far]
    word = buf.words[at]
    stops = ~word & _CONTINUATION          # the high bit of every byte that ends a varint
    lowest = stops & (~stops + np.uint64(1))  # the first such bit; 0: the varint is 9+ bytes
    count = np.frexp(lowest.astype(np.float64))[1] >> 3  # bit 8k+7 -> k+1 bytes (0 when none)
    x = word & ((lowest << np.uint64(1)) - np.uint64(1)) & _LOW7  # bytes of this varint, 7 bits each
    for low, high, shift in _PACK:
        x = (x & low) | ((x >> shift) & high)
    long_tail = np.flatnonzero(count == 0)
    if len(long_tail):  # bytes 9 and 10
        count[long_tail] = 9
        tail_at, tail_lim = at[long_tail], lim[long_tail]
        ninth = buf.bytes[np.minimum(tail_at + 8, len(buf.bytes) - 1)]
        tenth_needed = ninth >= 0x80
        tenth = buf.bytes[np.minimum(tail_at + 9, len(buf.bytes) - 1)]
        count[long_tail[tenth_needed]] = 10
        past = tail_at + count[long_tail] > tail_lim
        too_long = tenth_needed & (tenth >= 0x80) & ~past
        _check_varints(tail_at, past, too_long)
        x[long_tail] |= (ninth & 0x7F).astype(np.uint64) << np.uint64(56)
        x[long_tail] |= np.where(tenth_needed, tenth & 1, 0).astype(np.uint64) << np.uint64(63)
    _check_varints(at, at + count > lim, None)
    values[long_] = x
    length[long_] = count
    return values, length


def _check_varints(at: np.ndarray, past: np.ndarray, too_long: np.ndarray | None) -> None:
    bad = past if too_long is None else past | too_long
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        reason = "varint runs past the end of its message" if past[i] else "varint longer than 10 bytes"
        raise WireError(reason, int(at[i]))


def _varints_bytewise(data: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints read one byte position per pass (for the few near the end of the buffer)."""
    values = np.zeros(len(pos), dtype=np.uint64)
    length = np.zeros(len(pos), dtype=np.int64)
    unfinished = np.arange(len(pos))
    for k in range(_MAX_VARINT):
        if not len(unfinished):
            return values, length
        at = pos[unfinished] + k
        past = at >= limit[unfinished]
        if past.any():
            raise WireError("varint runs past the end of its message", int(pos[unfinished][past][0]))
        byte = data[at]
        values[unfinished] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        length[unfinished] += 1
        unfinished = unfinished[byte >= 0x80]
    if len(unfinished):
        raise WireError("varint longer than 10 bytes", int(pos[unfinished[0]]))
    return values, length


# Below this many unfinished messages, numpy's per-call overhead loses to a plain loop.
_LOCKSTEP_MIN = 32


def compiled() -> bool:
    """True when :func:`decode` runs the C loop: it is built, and ``TRACEBRIDGE_PURE_WIRE``
    is not set to 1. The tests of this module and of the protobuf readers set it to run
    each with the numpy decoder too, which must agree (tests/conftest.py: ``wire_decoder``)."""
    return _wirec is not None and os.environ.get("TRACEBRIDGE_PURE_WIRE") != "1"


def decode(raw: bytes, starts, ends, dense: tuple[int, ...] = (), skip: tuple[int, ...] = ()) -> Fields:
    """Decode every field of the messages ``raw[starts[i]:ends[i]]``.

    ``dense``: singular varint fields (at most 8) that the caller reads only with
    :meth:`Fields.scalar`; the C loop writes them straight into a column per field
    instead of a row per occurrence (3M events' offsets and durations, say).
    ``skip``: fields (at most 8) the caller does not read; the C loop checks them and
    keeps no rows of them (the numpy decoder may keep them).

    With the C module, one sequential loop does it all. Malformed input sends it back
    here, where the numpy decoder names the error and its offset: the numpy decoder
    is the one that owns the error messages, so both report the same.
    """
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    if compiled() and len(starts) == len(ends):
        found = _wirec.decode(raw, starts, ends, dense, numpy_column, skip)
        if found is not None:
            groups, columns = found
            return Fields({number: {name: np.frombuffer(column, dtype=_DTYPES[name])
                                    for name, column in zip(_COLUMNS, parts)}
                           for number, *parts in groups},
                          {number: np.frombuffer(values, dtype=np.uint64) for number, values in columns.items()})
    return decode_numpy(raw, starts, ends)


def decode_submessages(raw: bytes, fields: Fields, number: int) -> tuple[np.ndarray, Fields | None]:
    """The messages in field ``number`` of ``fields``: the message each is in, and their
    fields decoded (None where there are none)."""
    owner, starts, ends = fields.spans(number)
    return owner, (decode(raw, starts, ends) if len(owner) else None)


def numpy_column(size: int) -> np.ndarray:
    # The C loop's columns as numpy memory: numpy asks the kernel for huge pages for large
    # blocks, so the 75 MB of rows of a big XSpace's lines fault in 2 MB at a time.
    return np.empty(size, dtype=np.uint8)


def decode_numpy(raw: bytes, starts, ends) -> Fields:
    """:func:`decode` with numpy alone.

    Many messages are decoded in lockstep, one field of each per pass; the last few
    unfinished ones (one long DeviceStepStats, say, with 250k node_stats) are finished
    by a sequential scan. Each pass's rows go straight to their field's group (a pass
    usually reads the same field of every message), so nothing is sorted afterwards.
    """
    buf = Buffer(raw)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if len(starts) and (ends.max(initial=0) > len(buf.bytes) or np.any(ends < starts) or starts.min() < 0):
        raise WireError("message extends past the end of the data", int(len(buf.bytes)))
    active = starts < ends
    pos, end, owner = starts[active], ends[active], np.flatnonzero(active)
    pieces: dict[int, list[dict[str, np.ndarray]]] = {}
    while len(pos):
        if len(pos) < _LOCKSTEP_MIN:
            for rows in _scan(raw, pos, end, owner):
                _group(pieces, rows)
            break
        tags, tag_len = _varints(buf, pos, end)
        if tag_len.max() > 5:  # a tag is a 32-bit varint
            i = int(np.flatnonzero(tag_len > 5)[0])
            raise WireError("tag longer than 5 bytes", int(pos[i]))
        field_start = pos
        pos = pos + tag_len
        wire_type = (tags & np.uint64(7)).astype(np.int8)
        number = (tags >> np.uint64(3)).astype(np.int64)
        bad = (number == 0) | (number > _MAX_FIELD)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise WireError(f"field number {int(number[i])} out of range", int(field_start[i]))
        kind = int(wire_type[0])
        if (wire_type == kind).all():  # the usual pass: one wire type, no subset gathers
            pos, value, offset = _payloads(buf, kind, pos, end, field_start, number)
        else:
            value = np.zeros(len(pos), dtype=np.uint64)
            offset = np.zeros(len(pos), dtype=np.int64)
            new_pos = np.zeros(len(pos), dtype=np.int64)
            for kind in np.unique(wire_type).tolist():
                rows = np.flatnonzero(wire_type == kind)
                new_pos[rows], value[rows], offset[rows] = _payloads(
                    buf, kind, pos[rows], end[rows], field_start[rows], number[rows])
            pos = new_pos
        _group(pieces, {"number": number, "message": owner, "wire_type": wire_type,
                        "value": value, "offset": offset})
        more = pos < end
        if not more.all():
            pos, end, owner = pos[more], end[more], owner[more]
    parts = {}
    for number in list(pieces):
        chunks = pieces.pop(number)
        # A column at a time, each piece's column dropped once joined: a field of 3M rows
        # is never held twice over.
        parts[number] = {k: np.concatenate([chunk.pop(k) for chunk in chunks]) if len(chunks) > 1 else chunks[0][k]
                         for k in _COLUMNS}
    return Fields(parts)


def _payloads(buf: Buffer, kind: int, pos, end, field_start, number):
    """Values of fields of one wire type whose payloads start at ``pos``: returns
    ``(position after the field, value, offset)``."""
    if kind == VARINT:
        value, length = _varints(buf, pos, end)
        return pos + length, value, field_start
    if kind == LENGTH:
        value, length = _varints(buf, pos, end)
        pos = pos + length
        room = (end - pos).astype(np.uint64)
        too_long = value > room
        if too_long.any():
            i = int(np.flatnonzero(too_long)[0])
            raise WireError(f"length field claims {int(value[i])} bytes, only {int(room[i])} remain (truncated, or corrupt)",
                            int(field_start[i]))
        return pos + value.astype(np.int64), value, pos
    if kind in (FIXED64, FIXED32):
        width = 8 if kind == FIXED64 else 4
        past = pos + width > end
        if past.any():
            raise WireError("fixed-width field runs past the end", int(pos[past][0]))
        gathered = buf.bytes[pos[:, None] + np.arange(width)].astype(np.uint64)
        value = np.bitwise_or.reduce(gathered << (np.arange(width, dtype=np.uint64) * np.uint64(8)), axis=1)
        return pos + width, value, pos
    raise WireError(f"unsupported wire type {kind} (field {int(number[0])})", int(field_start[0]))


def _group(pieces: dict[int, list], rows: dict[str, np.ndarray]) -> None:
    """Append decoded rows to their field's list of pieces, keeping row order per field."""
    number = rows.pop("number")
    if not len(number):
        return
    first = int(number[0])
    if (number == first).all():
        pieces.setdefault(first, []).append(rows)
        return
    if number.max() < 4096:  # a few small field numbers: one mask each, no sort
        present = np.flatnonzero(np.bincount(number))
        if len(present) <= 8:
            for value in present.tolist():
                take = np.flatnonzero(number == value)
                pieces.setdefault(value, []).append({k: v[take] for k, v in rows.items()})
            return
    order = np.argsort(number, kind="stable")
    sorted_numbers = number[order]
    edges = np.flatnonzero(np.r_[True, sorted_numbers[1:] != sorted_numbers[:-1], True])
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        take = order[a:b]
        pieces.setdefault(int(sorted_numbers[a]), []).append({k: v[take] for k, v in rows.items()})


def _scan(data: bytes, pos: np.ndarray, end: np.ndarray, owner: np.ndarray) -> list[dict[str, np.ndarray]]:
    """The sequential twin of the lockstep loop, for a few messages with many fields;
    returns the rows found as pieces, in wire order.

    The loop body is kept to the bone (it runs once per field: a million times for the
    node_stats of a big DeviceStepStats): one-byte tags and lengths of up to two bytes
    are read inline, everything else through ``_read_varint``."""
    # array.array, not lists: 8 bytes a field instead of a pointer plus an int object
    # (3M fields of a big XSpace line are ~25 MB a column this way, ~110 MB as a list).
    tags = array("Q")
    values = array("Q")
    offsets = array("q")
    counts: list[int] = []
    add_tag, add_value, add_offset = tags.append, values.append, offsets.append
    array_view = None
    bulk: list[tuple[int, dict]] = []  # (row of the arrays above it goes before, its rows)
    for message, p, e in zip(owner.tolist(), pos.tolist(), end.tolist()):
        before = len(tags)
        while p < e:
            field_start = p
            tag = data[p]
            if 8 <= tag < 0x80 and tag & 7 == LENGTH:
                # A run of one length-delimited field (the node_stats of a device, say):
                # the tightest loop, tags are added after the run.
                run = len(values)
                if e - p >= _VECTOR_RUN_MIN:  # a long run (an XSpace line's events): in bulk
                    if array_view is None:
                        array_view = np.frombuffer(data, dtype=np.uint8)
                    found_offsets, found_lengths, p = _run_of(array_view, p, e, tag)
                    found = len(found_offsets)
                    bulk.append((len(tags), {
                        "number": np.full(found, tag >> 3, dtype=np.int64),
                        "message": np.full(found, message, dtype=np.int64),
                        "wire_type": np.full(found, LENGTH, dtype=np.int8),
                        "value": found_lengths.astype(np.uint64), "offset": found_offsets.astype(np.int64)}))
                    if p >= e or data[p] != tag:
                        continue
                    # What is left (a malformed field) goes through the loop below.
                while True:
                    q = p + 1
                    if q >= e:
                        raise WireError("varint runs past the end of its message", q)
                    value = data[q]
                    q += 1
                    if value >= 0x80:
                        if q < e and data[q] < 0x80:
                            value = (value & 0x7F) | (data[q] << 7)
                            q += 1
                        else:
                            value, q = _read_varint(data, q - 1, e)
                    if value > e - q:
                        raise WireError(f"length field claims {value} bytes, only {e - q} remain (truncated, or corrupt)", p)
                    add_offset(q)
                    add_value(value)
                    p = q + value
                    if p >= e or data[p] != tag:
                        break
                tags.extend(repeat(tag, len(values) - run))
                continue
            p += 1
            if tag >= 0x80:
                tag, p = _read_varint(data, field_start, e)
                if p - field_start > 5:
                    raise WireError("tag longer than 5 bytes", field_start)
            if tag < 8 or tag >> 3 > _MAX_FIELD:
                raise WireError(f"field number {tag >> 3} out of range", field_start)
            kind = tag & 7
            if kind == LENGTH:
                if p >= e:
                    raise WireError("varint runs past the end of its message", p)
                value = data[p]
                p += 1
                if value >= 0x80:
                    if p < e and data[p] < 0x80:  # two-byte lengths: most node_stats
                        value = (value & 0x7F) | (data[p] << 7)
                        p += 1
                    else:
                        value, p = _read_varint(data, p - 1, e)
                if value > e - p:
                    raise WireError(f"length field claims {value} bytes, only {e - p} remain (truncated, or corrupt)", field_start)
                add_offset(p)
                p += value
            elif kind == VARINT:
                value, p = _read_varint(data, p, e)
                add_offset(field_start)
            elif kind == FIXED64 or kind == FIXED32:
                width = 8 if kind == FIXED64 else 4
                if p + width > e:
                    raise WireError("fixed-width field runs past the end", p)
                value = int.from_bytes(data[p:p + width], "little")
                add_offset(p)
                p += width
            else:
                raise WireError(f"unsupported wire type {kind} (field {tag >> 3})", field_start)
            add_tag(tag)
            add_value(value)
        counts.append(len(tags) - before)
    tag_array = np.frombuffer(tags, dtype=np.uint64) if len(tags) else np.zeros(0, np.uint64)
    rows = {
        "number": (tag_array >> np.uint64(3)).astype(np.int64),
        "message": np.repeat(owner, counts),
        "wire_type": (tag_array & np.uint64(7)).astype(np.int8),
        "value": np.frombuffer(values, dtype=np.uint64) if len(values) else np.zeros(0, np.uint64),
        "offset": np.frombuffer(offsets, dtype=np.int64) if len(offsets) else np.zeros(0, np.int64),
    }
    # Runs split in bulk go between the rows read one by one, in wire order (no copies).
    pieces, done = [], 0
    for at, run_rows in bulk:
        pieces.append({k: v[done:at] for k, v in rows.items()})
        pieces.append(run_rows)
        done = at
    pieces.append({k: v[done:] for k, v in rows.items()})
    return pieces


# Runs of one field longer than this many bytes are split into fields in bulk (_run_of),
# a block of _RUN_BLOCK bytes at a time (the block's candidates cost ~30 bytes each).
_VECTOR_RUN_MIN = 1 << 16
_RUN_BLOCK = 4 << 20
_JUMP_LEVELS = 6  # the serial walk takes 2**6 fields a step


def _run_of(data: np.ndarray, p: int, e: int, tag: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The payloads ``(offsets, lengths)`` of the run of length-delimited fields with
    one-byte ``tag`` that starts at ``p``, and the position after the run.

    Why not a loop: a line of 3M events is one run, and a Python loop over it costs a
    microsecond a field. Every byte equal to ``tag`` in a block is a candidate field
    start; each candidate's length prefix gives the candidate after it, and the run is
    the chain of successors from ``p``, found by pointer doubling (a serial walk over
    every 64th field, then six gathers fill in the fields between). Candidates inside
    payloads form chains of their own that the walk never enters. The run stops early,
    at the field's start, where a length is malformed or longer than three bytes: the
    caller's loop reads (or rejects) what is left."""
    found_offsets, found_lengths = [], []
    last = e - 1
    while p < e and data[p] == tag:
        hi = min(e, p + _RUN_BLOCK)
        cand = np.flatnonzero(data[p:hi] == tag) + p
        bytes_ = [data[np.minimum(cand + k, last)].astype(np.int64) for k in (1, 2, 3)]
        one = bytes_[0] < 0x80
        two = ~one & (bytes_[1] < 0x80)
        three = ~one & ~two & (bytes_[2] < 0x80)
        header = np.where(one, 2, np.where(two, 3, 4))
        length = np.where(one, bytes_[0], (bytes_[0] & 0x7F) | ((bytes_[1] & 0x7F) << 7))
        length = np.where(three, length | (bytes_[2] << 14), length)
        del bytes_
        after = cand + header + length
        valid = (one | two | three) & (cand + header <= e) & (after <= e)
        n = len(cand)
        # Candidate number of every byte position of the block (n where none starts).
        index_of = np.full(hi - p + 1, n, dtype=np.int32)
        index_of[cand - p] = np.arange(n)
        successor = np.full(n + 1, n, dtype=np.int64)  # n: the chain leaves the block (or ends)
        inside = np.flatnonzero(valid & (after < hi))
        successor[inside] = index_of[after[inside] - p]
        del index_of
        jumps = [successor]
        for _ in range(_JUMP_LEVELS):
            jumps.append(jumps[-1][jumps[-1]])
        far = jumps[-1].tolist()
        hops, x = [], 0
        while x != n:
            hops.append(x)
            x = far[x]
        on_run = np.zeros(n + 1, dtype=bool)
        on_run[hops] = True
        for level in reversed(jumps[:-1]):
            on_run[level[np.flatnonzero(on_run)]] = True
        del jumps, far
        on_run[n] = False
        path = np.flatnonzero(on_run)
        end_node = int(path[-1])
        if not valid[end_node]:  # malformed: the caller's loop reports it
            path = path[:-1]
            found_offsets.append(cand[path] + header[path])
            found_lengths.append(length[path])
            p = int(cand[end_node])
            break
        found_offsets.append(cand[path] + header[path])
        found_lengths.append(length[path])
        p = int(after[end_node])
    if not found_offsets:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), p
    return np.concatenate(found_offsets), np.concatenate(found_lengths), p


def _read_varint(data, p: int, end: int) -> tuple[int, int]:
    """The varint at ``p`` as an unsigned 64-bit value and the position after it."""
    result, shift = 0, 0
    for i in range(_MAX_VARINT):
        if p + i >= end:
            raise WireError("varint runs past the end of its message", p)
        byte = data[p + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, p + i + 1
        shift += 7
    raise WireError("varint longer than 10 bytes", p)


def varints_at(raw: bytes, pos: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """The varint at each position of ``raw`` (each ending before its ``limit``)."""
    return _varints(Buffer(raw), np.asarray(pos, dtype=np.int64), np.asarray(limit, dtype=np.int64))[0]


def as_signed(values: np.ndarray) -> np.ndarray:
    """Varints of int64 fields: negative numbers arrive as their two's complement."""
    return values.view(np.int64) if values.dtype == np.uint64 else values.astype(np.int64)


def strings(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    """UTF-8 payloads ``raw[starts[i]:ends[i]]`` as str (invalid bytes replaced).

    The payloads are joined and decoded once: a million ``bytes.decode`` calls cost
    more than one join and one split."""
    pieces = [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    joined = b"\x00".join(pieces)
    if joined.count(b"\x00") != len(pieces) - 1:  # a payload holds NUL: decode one by one
        return [piece.decode("utf-8", "replace") for piece in pieces]
    return joined.decode("utf-8", "replace").split("\x00") if pieces else []


def strings_per_message(raw: bytes, fields: Fields, number: int, count: int) -> list[str]:
    """A singular string field as one text per message: ``""`` where absent, the last
    occurrence where repeated (as protobuf's parser keeps it)."""
    messages, starts, ends = fields.spans(number)
    texts = strings(raw, starts, ends)
    if len(messages) == count and (count == 0 or messages[-1] == count - 1) and \
            np.all(messages[1:] > messages[:-1]):
        return texts  # the usual case: the field once in every message
    out = [""] * count
    for m, text in zip(messages.tolist(), texts):
        out[m] = text
    return out


def intern_strings(raw: bytes, starts: np.ndarray, ends: np.ndarray, table: dict,
                   convert=None) -> np.ndarray:
    """Ids in ``table`` (a :class:`~tracebridge.model.builder.Strings`) of the payloads,
    for fields with few distinct values (allocator names, shapes, kernel types): only
    distinct payloads are converted. ``convert(raw, start, end)`` turns a payload into
    its text (default: UTF-8). New distinct payloads enter ``table`` in byte order.

    Payloads of up to 64 bytes are told apart in bulk: their bytes are read as 64-bit
    words, hashed to one key each and grouped with ``np.unique``; a group is checked
    word by word, so a hash collision only costs the exact (slower) grouping."""
    convert = convert or _utf8
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(ends, dtype=np.int64) - starts
    ids = np.zeros(len(starts), dtype=np.int64)
    if not len(starts):
        return ids
    buf = Buffer(raw)
    width = int(lengths.max())
    count = max(1, -(-width // 8))
    bulk = starts + 8 * count <= len(buf.bytes)
    if width > 64:
        bulk[:] = False
    for i in np.flatnonzero(~bulk).tolist():  # long payloads, or too near the end for word reads
        ids[i] = table[convert(raw, int(starts[i]), int(starts[i] + lengths[i]))]
    rows = np.flatnonzero(bulk)
    if not len(rows):
        return ids
    at, size = starts[rows], lengths[rows]
    words = []
    for k in range(count):
        left = np.clip(size - 8 * k, 0, 8).astype(np.uint64)
        mask = np.where(left == 8, _ALL_BITS, (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))
        words.append(buf.words[at + 8 * k] & mask)
    if width <= 7:  # the length fits in the top byte: the word itself is the key
        key = words[0] | (size.astype(np.uint64) << np.uint64(56))
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:
        key = size.astype(np.uint64)
        for word in words:
            key = (key ^ word) * _MIX
            key ^= key >> np.uint64(29)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        if any(np.any(word != word[first][inverse]) for word in words + [size]):  # a collision
            keys = np.ascontiguousarray(np.stack(words + [size.astype(np.uint64)], axis=1))
            _, first, inverse = np.unique(keys.view(f"V{8 * (count + 1)}").ravel(),
                                          return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    spans = list(zip(at[first].tolist(), (at[first] + size[first]).tolist()))
    payloads = [raw[a:b] for a, b in spans]
    distinct = np.zeros(len(payloads), dtype=np.int64)
    # zero-padded bytes, then length: the order earlier versions interned them in
    for j in sorted(range(len(payloads)), key=lambda j: (payloads[j].ljust(width, b"\0"), len(payloads[j]))):
        distinct[j] = table[convert(raw, *spans[j])]
    ids[rows] = distinct[inverse]
    return ids


def _utf8(raw: bytes, start: int, end: int) -> str:
    return raw[start:end].decode("utf-8", "replace")


_ALL_BITS = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_MIX = np.uint64(0x9E37_79B9_7F4A_7C15)


def intern_all(table: dict, texts: list[str]) -> np.ndarray:
    """Ids in ``table`` (a :class:`~tracebridge.model.builder.Strings`, which adds a text
    it has not seen) of many texts at once."""
    return np.fromiter(map(table.__getitem__, texts), dtype=np.int64, count=len(texts))
