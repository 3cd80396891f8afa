"""A vectorized protobuf wire-format decoder over numpy.

Why: walking a million parsed NodeExecStats through the protobuf Python API costs about
17 µs a node, because every nested message and repeated field becomes a wrapper object.
Here all messages of one nesting level are decoded in lockstep: one numpy pass per field
position, whatever the number of messages, with zero copies of the input buffer.

``decode(buf, starts, ends)`` returns every field of every message as columns:
``message`` (which message), ``field``, ``wire_type``, ``value`` (varint or fixed value)
and, for length-delimited fields, ``offset``/``length`` into ``buf``. Malformed input raises
:class:`~tracebridge.errors.TraceFormatError` naming the byte offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TraceFormatError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_MAX_VARINT = 10


@dataclass
class Fields:
    """All fields found in a set of messages, grouped by field number; within a field,
    the occurrences of each message are in wire order."""

    message: np.ndarray    # int64: index of the message in starts/ends
    field: np.ndarray      # int64 field number
    wire_type: np.ndarray  # int8
    value: np.ndarray      # uint64: varint / fixed value; the length for LENGTH fields
    offset: np.ndarray     # int64: where a LENGTH field's payload starts, else where the field starts
    groups: dict = None    # field number -> slice of the rows above

    def select(self, number: int, wire_type: int = VARINT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(message, value, offset)`` of one field, sorted by message; a field whose
        wire type is not the expected one is rejected."""
        rows = self.groups.get(number)
        if rows is None:
            empty = np.zeros(0, dtype=np.int64)
            return empty, np.zeros(0, dtype=np.uint64), empty
        types = self.wire_type[rows]
        if np.any(types != wire_type):
            wrong = np.flatnonzero(types != wire_type)[0]
            raise WireError(f"field {number} has wire type {int(types[wrong])}, expected {wire_type}",
                            int(self.offset[rows][wrong]))
        message, value, offset = self.message[rows], self.value[rows], self.offset[rows]
        if len(message) > 1 and np.any(message[1:] < message[:-1]):
            order = np.argsort(message, kind="stable")  # repeated fields: restore message order
            message, value, offset = message[order], value[order], offset[order]
        return message, value, offset

    def scalar(self, number: int, count: int, dtype=np.int64) -> np.ndarray:
        """A singular varint field as one value per message (0 where absent; last wins)."""
        messages, values, _ = self.select(number, VARINT)
        out = np.zeros(count, dtype=dtype)
        out[messages] = values.astype(dtype)
        return out

    def has(self, number: int, count: int) -> np.ndarray:
        present = np.zeros(count, dtype=bool)
        rows = self.groups.get(number)
        if rows is not None:
            present[self.message[rows]] = True
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


def _varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position; returns (values, byte lengths).

    Byte k is read only for the varints still unfinished after byte k-1, so the usual
    one- and two-byte varints (tags, lengths, small ints) cost one or two passes."""
    if np.any(pos >= limit):
        raise WireError("varint runs past the end of its message", int(pos[pos >= limit][0]))
    first = buf[pos]
    values = (first & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), dtype=np.int64)
    unfinished = np.flatnonzero(first >= 0x80)
    for k in range(1, _MAX_VARINT):
        if not len(unfinished):
            return values, length
        at = pos[unfinished] + k
        past = at >= limit[unfinished]
        if past.any():
            raise WireError("varint runs past the end of its message", int(pos[unfinished][past][0]))
        byte = buf[at]
        values[unfinished] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        length[unfinished] += 1
        unfinished = unfinished[byte >= 0x80]
    if len(unfinished):
        raise WireError("varint longer than 10 bytes", int(pos[unfinished[0]]))
    return values, length


# Below this many unfinished messages, numpy's per-call overhead loses to a plain loop.
_LOCKSTEP_MIN = 32


def decode(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Decode every field of the messages ``raw[starts[i]:ends[i]]``.

    Many messages are decoded in lockstep; the last few unfinished ones (one long
    DeviceStepStats, say, with 250k node_stats) are finished by a sequential scan.
    """
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if len(starts) and (ends.max(initial=0) > len(buf) or np.any(ends < starts)):
        raise WireError("message extends past the end of the data", int(len(buf)))
    pos, end, owner = starts.copy(), ends.copy(), np.arange(len(starts), dtype=np.int64)
    active = pos < end
    pos, end, owner = pos[active], end[active], owner[active]
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("message", "field", "wire_type", "value", "offset")}
    while len(pos):
        if len(pos) < _LOCKSTEP_MIN:
            for column, values in _scan(raw, pos, end, owner).items():
                out[column].append(values)
            break
        tags, tag_len = _varints(buf, pos, end)
        field_start = pos
        pos = pos + tag_len
        wire_type = (tags & np.uint64(7)).astype(np.int8)
        number = (tags >> np.uint64(3)).astype(np.int64)
        if np.any(number == 0):
            raise WireError("field number 0", int(field_start[number == 0][0]))
        value = np.zeros(len(pos), dtype=np.uint64)
        offset = np.full(len(pos), -1, dtype=np.int64)
        is_varint = wire_type == VARINT
        is_length = wire_type == LENGTH
        is_fixed64 = wire_type == FIXED64
        is_fixed32 = wire_type == FIXED32
        unknown = ~(is_varint | is_length | is_fixed64 | is_fixed32)
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise WireError(f"unsupported wire type {int(wire_type[i])} (field {int(number[i])})",
                            int(field_start[i]))
        needs_varint = is_varint | is_length
        if needs_varint.all():  # the usual pass: no fixed-width fields, no subset gathers
            value, v_len = _varints(buf, pos, end)
            pos = pos + v_len
        elif needs_varint.any():
            v, v_len = _varints(buf, pos[needs_varint], end[needs_varint])
            value[needs_varint] = v
            advance = np.zeros(len(pos), dtype=np.int64)
            advance[needs_varint] = v_len
            pos = pos + advance
        if is_length.any():
            lengths = value[is_length]
            room = (end[is_length] - pos[is_length]).astype(np.uint64)
            too_long = lengths > room
            if too_long.any():
                i = int(np.flatnonzero(too_long)[0])
                raise WireError(f"length field claims {int(lengths[i])} bytes, only "
                                f"{int(room[i])} remain", int(field_start[is_length][i]))
            offset[is_length] = pos[is_length]
            pos[is_length] += lengths.astype(np.int64)
        for mask, width in ((is_fixed64, 8), (is_fixed32, 4)):
            if mask.any():
                at = pos[mask]
                if np.any(at + width > end[mask]):
                    raise WireError("fixed-width field runs past the end", int(at[at + width > end[mask]][0]))
                gathered = buf[at[:, None] + np.arange(width)].astype(np.uint64)
                value[mask] = np.bitwise_or.reduce(gathered << (np.arange(width, dtype=np.uint64) * np.uint64(8)), axis=1)
                offset[mask] = at
                pos[mask] += width
        out["message"].append(owner)
        out["field"].append(number)
        out["wire_type"].append(wire_type)
        out["value"].append(value)
        out["offset"].append(np.where(is_length | is_fixed64 | is_fixed32, offset, field_start))
        if np.any(pos > end):
            raise WireError("field runs past the end of its message", int(field_start[pos > end][0]))
        more = pos < end
        pos, end, owner = pos[more], end[more], owner[more]
    if not out["message"]:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, np.zeros(0, np.int8), np.zeros(0, np.uint64), empty, {})
    columns = {k: np.concatenate(v) if len(v) > 1 else v[0] for k, v in out.items()}
    # Group rows by field number. Field numbers are small, so a stable sort on 16 bits
    # (numpy's radix sort) is cheap; rows of one field keep their emission order.
    numbers = columns["field"]
    key = numbers.astype(np.uint16) if numbers.max() < 65536 else numbers
    order = np.argsort(key, kind="stable")
    columns = {k: v[order] for k, v in columns.items()}
    sorted_numbers = columns["field"]
    edges = np.flatnonzero(np.r_[True, sorted_numbers[1:] != sorted_numbers[:-1], True])
    groups = {int(sorted_numbers[a]): slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])}
    return Fields(**columns, groups=groups)


def _scan(data: bytes, pos: np.ndarray, end: np.ndarray, owner: np.ndarray) -> dict[str, np.ndarray]:
    """The sequential twin of the lockstep loop, for a few messages with many fields."""
    rows: dict[str, list] = {k: [] for k in ("message", "field", "wire_type", "value", "offset")}
    message_col, field_col, type_col, value_col, offset_col = rows.values()
    for p, e, m in zip(pos.tolist(), end.tolist(), owner.tolist()):
        while p < e:
            field_start = p
            tag = data[p]
            if tag < 0x80:
                p += 1
            else:
                tag, p = _read_varint(data, p, e)
            wire_type, number = tag & 7, tag >> 3
            if number == 0:
                raise WireError("field number 0", field_start )
            if wire_type == VARINT:
                value = data[p] if p < e else 0x80
                if value < 0x80:
                    p += 1
                else:
                    value, p = _read_varint(data, p, e)
                offset = field_start
            elif wire_type == LENGTH:
                value = data[p] if p < e else 0x80
                if value < 0x80:
                    p += 1
                elif p + 1 < e and data[p + 1] < 0x80:  # two-byte lengths: most node_stats
                    value = (value & 0x7F) | (data[p + 1] << 7)
                    p += 2
                else:
                    value, p = _read_varint(data, p, e)
                if value > e - p:
                    raise WireError(f"length field claims {value} bytes, only {e - p} remain",
                                    field_start )
                offset = p
                p += value
            elif wire_type in (FIXED64, FIXED32):
                width = 8 if wire_type == FIXED64 else 4
                if p + width > e:
                    raise WireError("fixed-width field runs past the end", p )
                value = int.from_bytes(data[p:p + width], "little")
                offset = p
                p += width
            else:
                raise WireError(f"unsupported wire type {wire_type} (field {number})", field_start )
            message_col.append(m)
            field_col.append(number)
            type_col.append(wire_type)
            value_col.append(value)
            offset_col.append(offset )
    return {
        "message": np.array(message_col, dtype=np.int64), "field": np.array(field_col, dtype=np.int64),
        "wire_type": np.array(type_col, dtype=np.int8), "value": np.array(value_col, dtype=np.uint64),
        "offset": np.array(offset_col, dtype=np.int64),
    }


def _read_varint(data, p: int, end: int) -> tuple[int, int]:
    byte = data[p] if p < end else 0x80
    if byte < 0x80:
        return byte, p + 1
    result, shift = 0, 0
    for i in range(_MAX_VARINT):
        if p + i >= end:
            break
        byte = data[p + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, p + i + 1
        shift += 7
    raise WireError("varint runs past the end of its message", p)


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


def intern_strings(raw: bytes, starts: np.ndarray, ends: np.ndarray, table: dict,
                   convert=None) -> np.ndarray:
    """Ids in ``table`` (a :class:`~tracebridge.model.builder.Strings`) of the payloads,
    for fields with few distinct values (allocator names, shapes): only distinct payloads
    are converted, found by ``np.unique`` over fixed-width byte rows. ``convert`` turns a
    payload into its text (default: UTF-8)."""
    convert = convert or (lambda payload: payload.decode("utf-8", "replace"))
    lengths = (ends - starts).astype(np.int64)
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    width = int(lengths.max())
    if width > 64:
        return np.array([table[convert(raw[a:b])] for a, b in zip(starts.tolist(), ends.tolist())],
                        dtype=np.int64)
    buf = np.frombuffer(raw, dtype=np.uint8)
    width = max(width, 1)
    index = starts[:, None] + np.arange(width)
    inside = np.arange(width) < lengths[:, None]
    rows = np.where(inside, buf[np.minimum(index, len(buf) - 1)], 0).astype(np.uint8)
    keys = np.concatenate([rows, lengths.astype("<u2").view(np.uint8).reshape(-1, 2)], axis=1)
    keys = np.ascontiguousarray(keys).view(f"V{width + 2}").ravel()
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    ids = np.array([table[convert(raw[a:b])]
                    for a, b in zip(starts[first].tolist(), ends[first].tolist())], dtype=np.int64)
    return ids[inverse.ravel()]
