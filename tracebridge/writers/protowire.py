"""A vectorized protobuf wire-format encoder over numpy: the writing side of
:mod:`tracebridge.readers.wire`.

Why: building one protobuf message object per event costs microseconds each, which is
tens of seconds for the 10M events of a large profile. Here every message of a batch is
encoded at once: a field is a :class:`Ragged` column (one byte string per record, maybe
empty), made by one numpy pass over its values, and a message is the record-wise
concatenation of its field columns. A nested message is a length-delimited field whose
payload is the inner message's column.

Where the optional C module ``_protowirec`` is built, its loops write the varints, assemble
records from their pieces (:func:`assemble_into`) and merge sorted events
(:func:`merged_order`), byte for byte what the numpy path makes;
``TRACEBRIDGE_PURE_WIRE=1`` picks numpy, for writing as for reading (:mod:`tracebridge.readers.wire`).
"""

from __future__ import annotations

import os

import numpy as np

from .._wire import varint_bytes  # noqa: F401 (the writers' name for it too)

try:
    from . import _protowirec
except ImportError:  # not built (no C compiler at install time): numpy does it all
    _protowirec = None

VARINT, FIXED64, LENGTH = 0, 1, 2


class Ragged:
    """One byte string per record: ``data`` holds them back to back, ``lengths`` their sizes."""

    __slots__ = ("data", "lengths", "_starts")

    def __init__(self, data: np.ndarray, lengths: np.ndarray):
        self.data, self.lengths = data, lengths
        self._starts = None

    @property
    def records(self) -> int:
        return len(self.lengths)

    def starts(self) -> np.ndarray:
        if self._starts is None:
            self._starts = np.cumsum(self.lengths) - self.lengths
        return self._starts

    def tobytes(self) -> bytes:
        return self.data.tobytes()

    @staticmethod
    def empty(records: int) -> "Ragged":
        return Ragged(np.zeros(0, dtype=np.uint8), np.zeros(records, dtype=np.int64))

    @staticmethod
    def constant(piece: bytes, records: int) -> "Ragged":
        """The same bytes for every record."""
        one = np.frombuffer(piece, dtype=np.uint8)
        return Ragged(np.tile(one, records), np.full(records, len(one), dtype=np.int64))

    @staticmethod
    def from_bytes(pieces: list[bytes]) -> "Ragged":
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        return Ragged(np.frombuffer(b"".join(pieces), dtype=np.uint8).copy(), lengths)

    def take(self, index: np.ndarray) -> "Ragged":
        """The records ``index`` (any order, repeats allowed): a table of byte strings
        looked up by id, e.g. a string's encoded field for every event that uses it."""
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths[index]
        total = int(lengths.sum())
        if total == 0:
            return Ragged(np.zeros(0, dtype=np.uint8), lengths)
        source = np.repeat(self.starts()[index] - (np.cumsum(lengths) - lengths), lengths)
        source += np.arange(total, dtype=np.int64)
        return Ragged(self.data[source], lengths)

    def where(self, present: np.ndarray) -> "Ragged":
        """Records where ``present`` is false become empty."""
        if present.all():
            return self
        keep = np.repeat(present, self.lengths)
        return Ragged(self.data[keep], np.where(present, self.lengths, 0))


def varint_lengths(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.uint64)
    lengths = np.ones(len(values), dtype=np.int64)
    for k in range(1, 10):
        above = values >= np.uint64(1 << (7 * k))
        if not above.any():
            break
        lengths += above
    return lengths


def varints(values) -> Ragged:
    """Each value as a varint (negative int64 values as their two's complement, 10 bytes,
    as protobuf encodes int64)."""
    values = np.asarray(values)
    if values.dtype != np.uint64:
        values = values.astype(np.int64).view(np.uint64)
    lengths = varint_lengths(values)
    width = int(lengths.max()) if len(lengths) else 1
    matrix = np.empty((len(values), width), dtype=np.uint8)
    for k in range(width):
        group = (values >> np.uint64(7 * k)) & np.uint64(0x7F)
        matrix[:, k] = group | np.where(lengths > k + 1, np.uint64(0x80), np.uint64(0))
    if width == 1:
        return Ragged(matrix.ravel(), lengths)
    return Ragged(matrix[np.arange(width) < lengths[:, None]], lengths)


def tag(number: int, wire_type: int) -> bytes:
    return varint_bytes((number << 3) | wire_type)


def concat(*pieces: Ragged) -> Ragged:
    """Record ``i`` of the result is record ``i`` of every piece, in order."""
    lengths = np.zeros(pieces[0].records, dtype=np.int64)
    for piece in pieces:
        lengths += piece.lengths
    out = np.empty(int(lengths.sum()), dtype=np.uint8)
    start = np.cumsum(lengths)
    start -= lengths  # where each record begins in the output
    for piece in pieces:
        if len(piece.data):
            filled = np.flatnonzero(piece.lengths) if len(piece.data) < piece.records else None
            if filled is not None and len(filled) < piece.records // 2:
                # a sparse piece (the flows of a few of 10M ops): only its records that hold
                # bytes, not a temporary of every record
                sizes = piece.lengths[filled]
                shift = np.repeat(start[filled] - (np.cumsum(sizes) - sizes), sizes)
            else:
                shift = np.repeat(start - piece.starts(), piece.lengths)
            shift += np.arange(len(piece.data), dtype=np.int64)
            out[shift] = piece.data
        start += piece.lengths
    return Ragged(out, lengths)


def varint_field(number: int, values, present: np.ndarray | None = None) -> Ragged:
    """Field ``number`` (varint) with one value per record; absent where ``present`` is false."""
    values = varints(values)
    field = concat(Ragged.constant(tag(number, VARINT), values.records), values)
    return field if present is None else field.where(present)


def fixed64_field(number: int, values, present: np.ndarray | None = None) -> Ragged:
    data = np.asarray(values).astype(np.uint64).astype("<u8").view(np.uint8)
    field = concat(Ragged.constant(tag(number, FIXED64), len(values)),
                   Ragged(data, np.full(len(values), 8, dtype=np.int64)))
    return field if present is None else field.where(present)


def message_field(number: int, payload: Ragged, present: np.ndarray | None = None) -> Ragged:
    """Field ``number`` (length-delimited) holding each record's ``payload``."""
    field = concat(Ragged.constant(tag(number, LENGTH), payload.records), varints(payload.lengths), payload)
    return field if present is None else field.where(present)


# --- one message at a time, for the few messages that are not per event ---------------

def field_bytes(number: int, value) -> bytes:
    """One field as bytes: an int is a varint, bytes or str length-delimited."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return tag(number, VARINT) + varint_bytes(value)
    if isinstance(value, str):
        value = value.encode("utf-8")
    return tag(number, LENGTH) + varint_bytes(len(value)) + bytes(value)


def message_bytes(*fields: tuple[int, object]) -> bytes:
    """A message from ``(number, value)`` pairs (a value None is left out)."""
    return b"".join(field_bytes(number, value) for number, value in fields if value is not None)


# --- records of many pieces, assembled at once -------------------------------------------
#
# A record (a packet, say) is a row of pieces: constant bytes, a varint, a slice of a
# Ragged. Each piece has a length per record (0: absent) and a matrix whose row holds the
# record's bytes (past its length: anything). Records whose pieces all have the same
# lengths have the same layout: they are built as one 2-D array, a block of columns per
# piece, and copied to their places in the output as fixed-size items. Real traces have a
# few dozen layouts per batch, so the work is a few column copies per piece, not a numpy
# operation per byte.


class Piece:
    """One field part of every record: ``lengths`` (n,) and ``block(rows, length)``, the
    bytes of ``rows`` (all of that length) as a (len(rows), length) array."""

    __slots__ = ("lengths", "matrix", "ragged", "index", "constant")

    def __init__(self, lengths: np.ndarray, matrix: np.ndarray | None = None, ragged: Ragged | None = None,
                 index: np.ndarray | None = None, constant: np.ndarray | None = None):
        self.lengths, self.matrix, self.ragged, self.index = lengths, matrix, ragged, index
        self.constant = constant  # the same bytes in every record: copied without a gather

    def block(self, rows: np.ndarray, length: int) -> np.ndarray:
        if self.constant is not None:
            return self.constant[:length]
        records = self.index[rows] if self.index is not None else rows
        if self.matrix is not None:
            return self.matrix[records, :length]
        starts = self.ragged.starts()[records]
        return self.ragged.data[starts[:, None] + np.arange(length, dtype=np.int64)]

    def source(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lengths, data, starts)``: record i is ``data[starts[i]:][:lengths[i]]`` (for the C loop)."""
        lengths = np.ascontiguousarray(self.lengths, dtype=np.int64)
        if self.constant is not None:
            return lengths, self.constant, np.zeros(n, dtype=np.int64)
        records = self.index if self.index is not None else np.arange(n, dtype=np.int64)
        if self.matrix is not None:
            matrix = np.ascontiguousarray(self.matrix)
            return lengths, matrix, records.astype(np.int64, copy=False) * matrix.shape[1]
        return lengths, self.ragged.data, self.ragged.starts()[records]

    def spread(self, at: np.ndarray, n: int) -> "Piece":
        """This piece's records placed at records ``at`` of ``n``; the others empty."""
        lengths = np.zeros(n, dtype=np.int64)
        lengths[at] = self.lengths
        index = np.zeros(n, dtype=np.int64)
        index[at] = self.index if self.index is not None else np.arange(len(at))
        return Piece(lengths, self.matrix, self.ragged, index, self.constant)


def constant_piece(data: bytes, n: int, present: np.ndarray | None = None) -> Piece:
    row = np.frombuffer(data, dtype=np.uint8)
    lengths = np.full(n, len(row), dtype=np.int64) if present is None else np.where(present, len(row), 0)
    return Piece(lengths, np.broadcast_to(row, (n, len(row))), constant=row)


def matrix_piece(matrix: np.ndarray, lengths: np.ndarray | None = None) -> Piece:
    matrix = np.asarray(matrix, dtype=np.uint8)
    if lengths is None:
        lengths = np.full(len(matrix), matrix.shape[1], dtype=np.int64)
    return Piece(lengths, matrix)


def varint_piece(values, present: np.ndarray | None = None, prefix=None) -> Piece:
    """Each value as a varint, after ``prefix`` (bytes, e.g. the field's tag, or a matrix
    with a row per record): one piece where a tag and its value would be two."""
    values = np.asarray(values)
    if values.dtype != np.uint64:
        values = values.astype(np.int64).view(np.uint64)
    lengths = varint_lengths(values)
    width = int(lengths.max()) if len(lengths) else 1
    if prefix is None:
        head = 0
        matrix = np.empty((len(values), width), dtype=np.uint8)
    else:
        prefix = np.frombuffer(prefix, dtype=np.uint8) if isinstance(prefix, bytes) else prefix
        head = prefix.shape[-1]
        matrix = np.empty((len(values), head + width), dtype=np.uint8)
        matrix[:, :head] = prefix
        lengths = lengths + head
    if compiled():
        _protowirec.varints(np.ascontiguousarray(values), matrix, head)
    else:
        for k in range(width):
            group = (values >> np.uint64(7 * k)) & np.uint64(0x7F)
            matrix[:, head + k] = group | np.where(lengths - head > k + 1, np.uint64(0x80), np.uint64(0))
    if present is not None:
        lengths = np.where(present, lengths, 0)
    return Piece(lengths, matrix)


def ragged_piece(ragged: Ragged, index: np.ndarray | None = None, present: np.ndarray | None = None) -> Piece:
    """Record i is ``ragged``'s record ``index[i]`` (or i)."""
    lengths = ragged.lengths[index] if index is not None else ragged.lengths
    if present is not None:
        lengths = np.where(present, lengths, 0)
    return Piece(lengths, ragged=ragged, index=index)


def merged_order(first_key: np.ndarray, second_key: np.ndarray, second_order: np.ndarray) -> np.ndarray:
    """Two sequences of n records merged by key: ``first_key`` ascending, ``second_key``
    ascending in the order ``second_order``. Returns the 2n records in key order, record i
    of the first as i, record j of the second as n + j; on an equal key the first's come first."""
    n = len(first_key)
    order = np.empty(2 * n, dtype=np.int64)
    if compiled():  # one pass
        _protowirec.merge(np.ascontiguousarray(first_key, dtype=np.int64),
                          np.ascontiguousarray(second_key, dtype=np.int64),
                          np.ascontiguousarray(second_order, dtype=np.int64), order)
        return order
    # a first record's place is its rank plus the second's records before it; the second take the rest
    first_at = np.searchsorted(second_key[second_order], first_key)
    first_at += np.arange(n, dtype=np.int64)
    taken = np.zeros(2 * n, dtype=bool)
    taken[first_at] = True
    order[first_at] = np.arange(n, dtype=np.int64)
    order[~taken] = second_order + n
    return order


def merged_times(times: np.ndarray, low: int, end_order: np.ndarray) -> np.ndarray:
    """:func:`merged_order` of a track's begins and ends by their keys of time and kind, made
    from ``times`` by the C loop (``compiled()`` only): no key columns."""
    order = np.empty(len(times), dtype=np.int64)
    _protowirec.merge_times(np.ascontiguousarray(times, dtype=np.int64), low,
                            np.ascontiguousarray(end_order, dtype=np.int64), order)
    return order


def track_events(times, events, previous: int, rows, sequence: int, columns: tuple, type_key: int, step_key: int,
                 extras) -> bytes:
    """The packets of a chunk of a .pftrace track's events, by the C loop (``compiled()``
    only): see ``_protowirec.c``, track_events."""
    return _protowirec.track_events(times, events, previous, rows, sequence, columns, type_key, step_key, extras)


def compiled() -> bool:
    """True when :func:`assemble_into` runs the C loop: it is built, and
    ``TRACEBRIDGE_PURE_WIRE`` is not set to 1 (the tests write with each path)."""
    return _protowirec is not None and os.environ.get("TRACEBRIDGE_PURE_WIRE") != "1"


def total_length(pieces: list[Piece]) -> np.ndarray:
    total = pieces[0].lengths.astype(np.int64).copy()
    for piece in pieces[1:]:
        total += piece.lengths
    return total


def assemble(pieces: list[Piece]) -> np.ndarray:
    """The records, each the concatenation of its pieces, back to back (uint8 array)."""
    total = total_length(pieces)
    out = np.empty(int(total.sum()), dtype=np.uint8)
    assemble_into(pieces, out, np.cumsum(total) - total)
    return out


def assemble_into(pieces: list[Piece], out: np.ndarray, position: np.ndarray) -> None:
    """Write record i (the concatenation of its pieces) at ``out[position[i]:]``: records
    of several kinds (begin and end events, say) can share one output."""
    n = len(pieces[0].lengths)
    if not n or not len(out):
        return
    if compiled():
        _protowirec.gather(out, np.ascontiguousarray(position, dtype=np.int64), [piece.source(n) for piece in pieces])
        return
    layout = _layouts(pieces)
    order = np.argsort(layout, kind="stable")
    cuts = np.flatnonzero(np.r_[True, layout[order][1:] != layout[order][:-1], True])
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        rows = order[lo:hi]
        first = rows[0]
        widths = [int(piece.lengths[first]) for piece in pieces]
        width = sum(widths)
        if not width:
            continue
        block = np.empty((len(rows), width), dtype=np.uint8)
        at = 0
        for piece, w in zip(pieces, widths):
            if w:
                block[:, at:at + w] = piece.block(rows, w)
                at += w
        item = np.dtype((np.void, width))
        # Every byte offset of the output as the start of a width-byte item: one fancy
        # assignment copies each record to its place.
        places = np.ndarray((len(out) - width + 1,), dtype=item, buffer=out, strides=(1,))
        places[position[rows]] = block.view(item).ravel()


def _layouts(pieces: list[Piece]) -> np.ndarray:
    """A number per record that is equal for records whose pieces have equal lengths."""
    key = np.zeros(len(pieces[0].lengths), dtype=np.int64)
    scale = 1
    for piece in pieces:
        column = piece.lengths
        low, top = int(column.min()), int(column.max()) + 1
        if top - low == 1:
            continue
        if scale * (top - low) >= 1 << 62:  # too many varying pieces for one integer: rank rows instead
            lengths = np.stack([p.lengths for p in pieces], axis=1)
            return np.unique(lengths, axis=0, return_inverse=True)[1].ravel()
        key += (column - low) * scale
        scale *= top - low
    return key
