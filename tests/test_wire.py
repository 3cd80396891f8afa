"""The vectorized wire decoder (``tracebridge.readers.wire``) against protobuf's parser.

Messages are encoded with ``tracebridge.protos`` (or by hand, for fields no schema has)
and decoded with ``wire.decode`` many at a time (the lockstep path), a few at a time
(the sequential path) and mixed; protobuf's own parser is the reference. Malformed bytes
must raise ``WireError``, never another exception, and never hang.

The last sections test what is built on the decoder: the StepStats reader and the
Chrome writer give the same results with one process and with two.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import tempfile

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CHECK_TIER
from tests.helpers.malformed import time_limit
import tracebridge
from tracebridge import protos
from tracebridge.errors import TraceFormatError
from tracebridge.model.builder import Strings
from tracebridge.readers import split_read, stepstats, wire
from tracebridge.readers.wire import FIXED32, FIXED64, LENGTH, VARINT, WireError, decode
from tracebridge.writers.chrome import write_chrome

# `decoder` below is function-scoped but fixed for a whole test: every example of a
# hypothesis test runs the same decoder. `make check` (the minute-long tier) draws 50
# examples a test, `make test` 150 (`make fuzz` many more through tests/fuzz.py).
common = settings(max_examples=50 if CHECK_TIER else 150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
U64 = (1 << 64) - 1


@pytest.fixture(autouse=True)
def decoder(wire_decoder):
    """Every test runs with each decoder: the C loop (where it is built) and numpy alone
    (tests/conftest.py: wire_decoder)."""
    return wire_decoder


# Tests of the C loop itself (or of both decoders at once) run once, with the C loop.
c_loop_only = pytest.mark.parametrize("wire_decoder", ["compiled"], indirect=True)


# --- encoding by hand and the reference parse ------------------------------------------

def varint(value: int) -> bytes:
    value &= U64
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_field(number: int, wire_type: int, value) -> bytes:
    head = varint(number << 3 | wire_type)
    if wire_type == VARINT:
        return head + varint(value)
    if wire_type == FIXED64:
        return head + (value & U64).to_bytes(8, "little")
    if wire_type == FIXED32:
        return head + (value & 0xFFFF_FFFF).to_bytes(4, "little")
    return head + varint(len(value)) + value


def _empty_message_class():
    """A message type without fields: protobuf keeps every field as an unknown field,
    which is the wire-level parse to compare with."""
    proto = descriptor_pb2.FileDescriptorProto(name="tracebridge_test_empty.proto", package="tbtest")
    proto.message_type.add(name="Empty")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tbtest.Empty"))


Empty = _empty_message_class()


def reference_fields(data: bytes) -> dict[int, list]:
    """``{number: [(wire_type, value or payload), ...]}`` as protobuf parses ``data``."""
    out: dict[int, list] = {}
    for unknown in UnknownFieldSet(Empty.FromString(data)):
        out.setdefault(unknown.field_number, []).append((unknown.wire_type, unknown.data))
    return out


def decoded_messages(data: bytes, fields: wire.Fields) -> dict[int, dict[int, list]]:
    """The same shape from ``wire.decode`` output, for every message: ``{message: {...}}``.
    Read from the flat columns, which keep fields of mixed wire types and, within a field
    number, each message's occurrences in wire order."""
    out: dict[int, dict[int, list]] = {}
    for m, number, wire_type, value, offset in zip(fields.message.tolist(), fields.field.tolist(),
                                                   fields.wire_type.tolist(), fields.value.tolist(),
                                                   fields.offset.tolist()):
        payload = data[offset:offset + value] if wire_type == LENGTH else value
        out.setdefault(m, {}).setdefault(number, []).append((wire_type, payload))
    return out


def decoded_fields(data: bytes, fields: wire.Fields, message: int = 0) -> dict[int, list]:
    return decoded_messages(data, fields).get(message, {})


# --- strategies -----------------------------------------------------------------------

numbers = st.one_of(st.integers(1, 20), st.integers(1, (1 << 29) - 1))
varint_values = st.one_of(st.integers(0, 300), st.integers(0, U64), st.integers(-(1 << 63), -1),
                          st.sampled_from([127, 128, 16383, 16384, 1 << 56, (1 << 63) - 1, 1 << 63, U64]))
raw_fields = st.one_of(
    st.tuples(numbers, st.just(VARINT), varint_values),
    st.tuples(numbers, st.just(FIXED64), st.integers(0, U64)),
    st.tuples(numbers, st.just(FIXED32), st.integers(0, 0xFFFF_FFFF)),
    st.tuples(numbers, st.just(LENGTH), st.binary(max_size=300)),
)
raw_messages = st.lists(raw_fields, max_size=25).map(lambda fs: b"".join(encode_field(*f) for f in fs))

text = st.text(max_size=30)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)


@st.composite
def node_exec_stats(draw):
    """A NodeExecStats with a random subset of its fields set."""
    node = protos.NodeExecStats()
    for field in ("node_name", "timeline_label"):
        if draw(st.booleans()):
            setattr(node, field, draw(text))
    for field in ("all_start_micros", "op_start_rel_micros", "op_end_rel_micros", "all_end_rel_micros",
                  "scheduled_micros", "all_start_nanos", "op_start_rel_nanos", "op_end_rel_nanos",
                  "all_end_rel_nanos", "scheduled_nanos"):
        if draw(st.booleans()):
            setattr(node, field, draw(int64s))
    if draw(st.booleans()):
        node.thread_id = draw(st.integers(0, 0xFFFF_FFFF))
    for _ in range(draw(st.integers(0, 3))):
        used = node.memory.add(allocator_name=draw(text), total_bytes=draw(int64s),
                               allocator_bytes_in_use=draw(int64s))
        for _ in range(draw(st.integers(0, 3))):
            used.allocation_records.add(alloc_micros=draw(int64s), alloc_bytes=draw(int64s))
    for _ in range(draw(st.integers(0, 3))):
        out = node.output.add(slot=draw(st.integers(-(1 << 31), (1 << 31) - 1)))
        if draw(st.booleans()):
            out.tensor_description.dtype = draw(st.integers(0, 30))
            for _ in range(draw(st.integers(0, 3))):
                out.tensor_description.shape.dim.add(size=draw(int64s))
            if draw(st.booleans()):
                a = out.tensor_description.allocation_description
                a.requested_bytes, a.ptr = draw(int64s), draw(st.integers(0, U64))
                a.allocator_name = draw(text)
    if draw(st.booleans()):
        node.memory_stats.temp_memory_size = draw(int64s)
        node.memory_stats.SetInParent()
    return node


def pack(messages: list[bytes], gaps: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Messages laid out in one buffer with junk between them; returns (buffer, starts, ends)."""
    data, starts, ends = b"", [], []
    for i, message in enumerate(messages):
        data += gaps[i % len(gaps)] if gaps else b""
        starts.append(len(data))
        data += message
        ends.append(len(data))
    return data + b"\xff" * 3, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


# --- valid input: the same fields as protobuf's parser ----------------------------------

@common
@given(raw_messages)
def test_one_message_matches_protobuf(data):
    assert decoded_fields(data, decode(data, [0], [len(data)])) == reference_fields(data)


@common
@given(st.lists(raw_messages, min_size=1, max_size=90), st.lists(st.binary(max_size=5), max_size=3))
def test_many_messages_match_protobuf(messages, gaps):
    # 32+ messages go through the lockstep passes and finish in the sequential scan
    data, starts, ends = pack(messages, gaps)
    decoded = decoded_messages(data, decode(data, starts, ends))
    for i, message in enumerate(messages):
        assert decoded.get(i, {}) == reference_fields(message)


@common
@given(st.lists(node_exec_stats(), min_size=1, max_size=70))
def test_node_exec_stats_fields(nodes):
    payloads = [n.SerializeToString() for n in nodes]
    data, starts, ends = pack(payloads, [b"\x00\x07"])
    fields = decode(data, starts, ends)
    n = len(nodes)
    for number, name in ((2, "all_start_micros"), (13, "all_start_nanos"), (17, "scheduled_nanos"),
                         (5, "all_end_rel_micros")):
        values = wire.as_signed(fields.scalar(number, n, np.uint64))
        assert values.tolist() == [getattr(node, name) for node in nodes]
    assert fields.scalar(10, n, np.uint64).tolist() == [node.thread_id for node in nodes]
    owner, span_starts, span_ends = fields.spans(1)
    names = {m: data[a:b].decode() for m, a, b in zip(owner.tolist(), span_starts.tolist(), span_ends.tolist())}
    assert [names.get(i, "") for i in range(n)] == [node.node_name for node in nodes]
    assert fields.has(12, n).tolist() == [node.HasField("memory_stats") for node in nodes]
    # repeated messages: each occurrence's payload is the submessage, in order
    for number, name in ((6, "memory"), (7, "output")):
        owner, span_starts, span_ends = fields.spans(number)
        got = [[] for _ in nodes]
        for m, a, b in zip(owner.tolist(), span_starts.tolist(), span_ends.tolist()):
            got[m].append(data[a:b])
        assert got == [[item.SerializeToString() for item in getattr(node, name)] for node in nodes]
    # one level down, all messages of the level at once
    owner, span_starts, span_ends = fields.spans(6)
    used = decode(data, span_starts, span_ends)
    expected = [u.allocator_bytes_in_use for node in nodes for u in node.memory]
    assert wire.as_signed(used.scalar(5, len(owner), np.uint64)).tolist() == expected


@common
@given(st.lists(node_exec_stats(), max_size=60))
def test_decode_one_by_one_equals_all_at_once(nodes):
    payloads = [n.SerializeToString() for n in nodes]
    data, starts, ends = pack(payloads, [])
    together = decoded_messages(data, decode(data, starts, ends))
    for i in range(len(payloads)):
        alone = decode(data, starts[i:i + 1], ends[i:i + 1])
        assert decoded_fields(data, alone) == together.get(i, {})


def _long_run(seed: int) -> bytes:
    """A run of length-delimited field 4 (an XSpace line's events) long enough to be split
    in bulk: payloads of 0 to 300 bytes full of the run's own tag byte, a few with two- and
    three-byte lengths, one with a four-byte length, between other fields."""
    rng = np.random.default_rng(seed)
    payloads = [bytes(rng.choice([0x22, 0x08, 0x80, 0x01, 0xFF], size=int(n)).astype(np.uint8))
                for n in rng.integers(0, 300, size=4000)]
    payloads[100] = b"\x22" * 20_000           # a three-byte length
    payloads[2000] = b"\x22\x81" * (1 << 20)  # a four-byte length: the loop reads it
    head = encode_field(1, VARINT, 7) + encode_field(2, LENGTH, b"name")
    run = b"".join(encode_field(4, LENGTH, payload) for payload in payloads)
    return head + run + encode_field(9, VARINT, 300) + encode_field(4, LENGTH, b"\x22\x22")


@pytest.mark.parametrize("block", [4096, 1 << 22])
def test_long_runs_split_in_bulk_match_protobuf(monkeypatch, block):
    monkeypatch.setattr(wire, "_RUN_BLOCK", block)
    data = _long_run(block)
    assert decoded_fields(data, decode(data, [0], [len(data)])) == reference_fields(data)


def test_long_run_with_a_bad_length_fails_where_the_loop_does(monkeypatch):
    data = _long_run(3)
    bad = bytearray(data[:-40])  # the last field of the run claims more than remains
    errors = []
    for threshold in (1 << 16, 1 << 62):  # in bulk, then the plain loop
        monkeypatch.setattr(wire, "_VECTOR_RUN_MIN", threshold)
        with pytest.raises(WireError) as caught:
            decode(bytes(bad), [0], [len(bad)])
        errors.append((caught.value.reason, caught.value.offset))
    assert errors[0] == errors[1]


def test_varint_lengths_and_extremes():
    values = [0, 1, 127, 128, 300, 16383, 16384, (1 << 35) + 5, 1 << 49, (1 << 56) - 1, 1 << 56,
              (1 << 63) - 1, 1 << 63, U64, -1, -(1 << 63), 1_700_000_000_123_456_789]
    message = b"".join(encode_field(1, VARINT, v) for v in values)
    for layout in ([message], [message] * 40):  # sequential, then lockstep
        data, starts, ends = pack(layout, [b""])
        fields = decode(data, starts, ends)
        _, got, _ = fields.select(1, VARINT)
        assert got.tolist() == [v & U64 for v in values] * len(layout)


def test_varints_at_the_very_end_of_the_buffer():
    # the last bytes of a buffer are read one at a time, not as 64-bit words
    for value in (5, 300, 1 << 40, 1 << 62, U64):
        messages = [encode_field(3, VARINT, value)] * 40
        data = b"".join(messages)
        starts = np.arange(40) * len(messages[0])
        fields = decode(data, starts, starts + len(messages[0]))
        assert fields.scalar(3, 40, np.uint64).tolist() == [value] * 40


def test_fixed_width_fields():
    message = encode_field(2, FIXED64, 0x0102030405060708) + encode_field(3, FIXED32, 0xDEADBEEF)
    for count in (1, 40):
        data, starts, ends = pack([message] * count, [b"\x01"])
        fields = decode(data, starts, ends)
        assert fields.select(2, FIXED64)[1].tolist() == [0x0102030405060708] * count
        assert fields.select(3, FIXED32)[1].tolist() == [0xDEADBEEF] * count
    # a double, as XSpace stats carry them
    plane = protos.XPlane()
    plane.stats.add(metadata_id=1, double_value=2.5)
    stat = plane.stats[0].SerializeToString()
    _, values, _ = decode(stat, [0], [len(stat)]).select(2, FIXED64)
    assert np.array(values, dtype=np.uint64).view(np.float64).tolist() == [2.5]


def test_flat_columns_and_groups_stay_available():
    data = encode_field(2, VARINT, 7) + encode_field(1, LENGTH, b"ab") + encode_field(2, VARINT, 9)
    fields = decode(data, [0], [len(data)])
    assert fields.field.tolist() == [1, 2, 2]
    assert fields.value.tolist() == [2, 7, 9]
    assert fields.message.tolist() == [0, 0, 0]
    assert fields.groups == {1: slice(0, 1), 2: slice(1, 3)}
    assert fields.scalar(2, 1).tolist() == [9]  # last wins
    empty = decode(b"", [], [])
    assert empty.numbers() == [] and len(empty.field) == 0


def test_wrong_wire_type_is_rejected_by_select():
    data = encode_field(4, LENGTH, b"xyz")
    with pytest.raises(WireError, match="wire type 2"):
        decode(data, [0], [len(data)]).scalar(4, 1)


# --- strings ------------------------------------------------------------------------------

@common
@given(st.lists(st.one_of(st.sampled_from([b"cpu", b"GPU_0_bfc", b"", b"cuda_host_bfc"]),
                          st.binary(max_size=80)), min_size=1, max_size=60))
def test_intern_strings_matches_one_by_one(payloads):
    data, starts, ends = pack(payloads, [b"\x05"])
    data = data[:-3]  # the last payload ends at the end of the buffer
    table = Strings()
    ids = wire.intern_strings(data, starts, ends, table)
    texts = list(table)
    assert [texts[i] for i in ids.tolist()] == [p.decode("utf-8", "replace") for p in payloads]


def test_intern_strings_survives_hash_collisions(monkeypatch):
    payloads = [b"allocator_%d_long_name" % (i % 5) for i in range(50)]
    data, starts, ends = pack(payloads, [b""])
    table = Strings()
    monkeypatch.setattr(wire, "_MIX", np.uint64(0))  # every key collides
    ids = wire.intern_strings(data, starts, ends, table)
    texts = list(table)
    assert [texts[i] for i in ids.tolist()] == [p.decode() for p in payloads]


def test_strings_with_nul_bytes():
    payloads = [b"a\x00b", b"", "ünï".encode()]
    data, starts, ends = pack(payloads, [b"\x00"])
    assert wire.strings(data, starts, ends) == ["a\x00b", "", "ünï"]


# --- malformed input: WireError, nothing else, no hang -------------------------------------

def decode_or_error(data: bytes, starts, ends):
    with time_limit(10):
        try:
            return decode(data, starts, ends)
        except WireError as error:
            assert isinstance(error.offset, int) and 0 <= error.offset <= len(data)
            return error


@common
@given(st.binary(max_size=64))
def test_random_bytes(data):
    got = decode_or_error(data, [0], [len(data)])
    try:
        expected = reference_fields(data)
    except DecodeError:
        expected = None
    if not isinstance(got, WireError):  # what the decoder accepts, protobuf reads the same
        assert expected == decoded_fields(data, got)
    elif expected is not None:  # protobuf is laxer only about field 0 and groups
        assert 0 in expected or any(t in (3, 4) for rows in expected.values() for t, _ in rows)


@common
@given(st.lists(node_exec_stats(), min_size=1, max_size=50), st.data())
def test_mutated_messages(nodes, data):
    payloads = [n.SerializeToString() for n in nodes]
    buffer, starts, ends = pack(payloads, [])
    mutated = bytearray(buffer)
    for _ in range(data.draw(st.integers(1, 6))):
        if not mutated:
            break
        at = data.draw(st.integers(0, len(mutated) - 1))
        mutated[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    blob = bytes(mutated[:cut])
    got = decode_or_error(blob, starts[starts < cut], np.minimum(ends[starts < cut], cut))
    if not isinstance(got, WireError):
        decoded = decoded_messages(blob, got)
        for i in range(int((starts < cut).sum())):
            a, b = int(starts[i]), int(min(ends[i], cut))
            assert decoded.get(i, {}) == reference_fields(blob[a:b])


@pytest.mark.parametrize("data, reason", [
    (b"\x08", "varint runs past"),                        # value missing
    (b"\x08\x80", "varint runs past"),                    # value cut short
    (b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10"),  # 11-byte varint
    (b"\x0a\x05ab", "claims 5 bytes"),                    # length past the end
    (b"\x00\x01", "field number 0"),
    (b"\x0b", "wire type 3"),                             # groups are not supported
    (b"\x0c", "wire type 4"),
    (b"\x0e", "wire type 6"),
    (b"\x09\x01\x02", "fixed-width"),                     # fixed64 cut short
    (b"\x88\x80\x80\x80\x80\x00\x01", "tag longer"),
    (b"\xf8\xff\xff\xff\x1f\x01", "out of range"),        # field number beyond 2^29 - 1
])
def test_malformed_examples(data, reason):
    for copies in (1, 40):  # sequential and lockstep
        buffer, starts, ends = pack([data] * copies, [b""])
        with pytest.raises(WireError, match=reason):
            decode(buffer, starts, ends)


def test_spans_outside_the_buffer():
    with pytest.raises(WireError, match="past the end of the data"):
        decode(b"\x08\x01", [0], [5])
    with pytest.raises(WireError):
        decode(b"\x08\x01", [2], [1])


# --- the C loop and the numpy decoder agree ------------------------------------------------

def _columns(fields: wire.Fields) -> dict:
    """Every field's rows as lists, in the order ``select`` gives (by message, wire order)."""
    out = {}
    for number in fields.numbers():
        part = fields._parts[number]
        order = np.argsort(part["message"], kind="stable")
        out[number] = [part[name][order].tolist() for name in ("message", "wire_type", "value", "offset")]
    return out


@c_loop_only
@common
@given(st.lists(st.one_of(raw_messages, st.binary(max_size=40)), min_size=1, max_size=60),
       st.lists(st.binary(max_size=5), max_size=3), st.lists(st.integers(1, 6), max_size=3, unique=True))
def test_compiled_and_numpy_decoders_agree(decoder, messages, gaps, dense):
    """Valid or not (random bytes among the messages): the C loop accepts exactly what the
    numpy decoder accepts, finds the same rows, and its dense columns equal ``scalar``."""
    data, starts, ends = pack(messages, gaps)
    found = wire._wirec.decode(data, starts, ends, tuple(dense))
    try:
        reference = wire.decode_numpy(data, starts, ends)
    except WireError:
        # Malformed: the C loop declines and decode() raises the numpy decoder's error.
        # (It may also decline valid input whose dense field is not a varint.)
        assert found is None
        return
    if found is None:  # declined only for a dense field of another wire type
        assert any(n in reference.numbers() and (reference._parts[n]["wire_type"] != VARINT).any() for n in dense)
        return
    compiled = decode(data, starts, ends, tuple(dense))
    expected = {n: rows for n, rows in _columns(reference).items() if n not in dense}
    assert _columns(compiled) == expected
    for number in dense:
        assert compiled.scalar(number, len(starts), np.uint64).tolist() == \
            reference.scalar(number, len(starts), np.uint64).tolist()


@pytest.mark.parametrize("wire_decoder", ["numpy"], indirect=True)  # runs where the C loop is not built too
def test_compiled_decoder_is_built_where_a_compiler_is(decoder):
    """CI machines have gcc: the benchmark figures assume the C loop, so its absence there
    (a broken build step) must not go unnoticed."""
    import shutil
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the numpy decoder is the one in use")
    assert wire._wirec is not None


def test_dense_fields_are_read_with_scalar_only(decoder):
    data = encode_field(1, VARINT, 5) + encode_field(2, VARINT, 300) + encode_field(2, VARINT, 301)
    fields = decode(data, [0], [len(data)], dense=(2,))
    assert fields.scalar(1, 1).tolist() == [5] and fields.scalar(2, 1).tolist() == [301]  # last wins
    if decoder == "compiled":
        with pytest.raises(ValueError, match="dense"):
            fields.select(2)


@c_loop_only
@pytest.mark.parametrize("before, after", [
    (b"\x0a\x00" * 3, b"\x0a\x02"),   # three empty fields become one holding another: a row fewer
    (b"\x0a\x02\x0a\x00", b"\x0a\x00"),  # one field holding another becomes two: a row more
    (b"\x08\x01\x08\x01", b"\x10"),  # field 1 becomes field 2, which the count never saw
])
def test_buffer_changed_between_the_passes_is_refused(decoder, before, after):
    """The C loop counts rows with the GIL released, allocates, then fills them: another
    thread may write to a bytearray in between. Here the allocator (called between the two
    passes) does the writing. Filling fewer rows than counted would leave uninitialised
    rows at the end of a column; more would overrun it. Both raise."""
    raw = bytearray(before)
    calls = []

    def allocate(size: int) -> np.ndarray:
        if not calls:
            raw[:len(after)] = after
        calls.append(size)
        return np.empty(size, dtype=np.uint8)

    with pytest.raises(RuntimeError, match="changed while it was decoded"):
        wire._wirec.decode(raw, np.array([0], np.int64), np.array([len(raw)], np.int64), (), allocate)
    assert calls  # the write happened between the passes


@c_loop_only
def test_spans_changed_between_the_passes_are_refused(decoder):
    """starts and ends are arrays another thread may write to as well: each pass checks
    every span as it reads it, so a span moved past the data is refused, not read."""
    raw = encode_field(1, VARINT, 5) * 2
    starts, ends = np.array([0, 2], np.int64), np.array([2, 4], np.int64)

    def allocate(size: int) -> np.ndarray:
        ends[1] = 1 << 40
        return np.empty(size, dtype=np.uint8)

    with pytest.raises(RuntimeError, match="changed while it was decoded"):
        wire._wirec.decode(raw, starts, ends, (), allocate)
    assert wire._wirec.decode(raw, starts, ends) is None  # the same span before the count: declined


@c_loop_only
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("change", ["fewer", "more", "moved"])
def test_events_changed_between_the_passes_are_refused(decoder, threads, change):
    """The events loop as well: threads that split the second pass at the count's
    checkpoints (every 2 events here) write only their own rows. An event fewer or more
    than counted raises or declines (None): no column comes back with a row left unwritten
    or written past its end. Events moved off the checkpoints (a thread starts inside an
    event) are read as whatever fields lie there; the rows still are those counted."""
    from tracebridge.readers.xspace import _EVENT_NUMBERS
    events, metadata_id = _EVENT_NUMBERS[0], _EVENT_NUMBERS[1]
    event = encode_field(events, LENGTH, encode_field(metadata_id, VARINT, 3))
    raw = bytearray(event * 8)
    changed = {"fewer": event * 7 + encode_field(events + 1, LENGTH, b"\x08\x03"),
               "more": event * 6 + encode_field(events, LENGTH, b"") * 4,
               "moved": encode_field(events, LENGTH, b"\x08\x03\x08\x03") + event * 6
               + encode_field(events, LENGTH, b"")}[change]
    assert len(changed) == len(raw)
    starts, ends = np.array([0], np.int64), np.array([len(raw)], np.int64)

    def allocate(size: int) -> np.ndarray:
        raw[:] = changed
        return np.empty(size, dtype=np.uint8)

    try:
        found = wire._wirec.events(raw, starts, ends, _EVENT_NUMBERS, allocate, threads, 2)
    except RuntimeError as error:
        assert "changed while it was decoded" in str(error)
        return
    if change == "moved" and found is not None:
        assert len(found[0]) == 4 * 8 and not np.frombuffer(found[0], np.int32).any()
    else:
        assert found is None


@c_loop_only
def test_events_split_between_threads_at_any_checkpoint(decoder):
    """Lines of 0 to 9 events, events of every kind of field: with 1 to 4 threads and a
    checkpoint every 1 to 5 events, the columns are the one-thread ones."""
    from tracebridge.readers.xspace import _EVENT_NUMBERS
    events, metadata_id, offset, duration, stats, occurrences = _EVENT_NUMBERS
    chance = np.random.default_rng(35)
    raw, starts, ends = bytearray(), [], []
    for line in range(12):
        starts.append(len(raw))
        raw += encode_field(1, VARINT, line)  # a line's own field before its events
        for k in range(int(chance.integers(0, 10))):
            body = encode_field(metadata_id, VARINT, k) + encode_field(offset, VARINT, 1000 * k + line)
            if k % 3 == 0:
                body += encode_field(stats, LENGTH, encode_field(1, VARINT, k))
            if k % 4 == 1:
                body += encode_field(occurrences, VARINT, 2)
            raw += encode_field(events, LENGTH, body + encode_field(duration, VARINT, k + 1))
        ends.append(len(raw))
    raw = bytes(raw)
    starts, ends = np.array(starts, np.int64), np.array(ends, np.int64)
    alone = wire._wirec.events(raw, starts, ends, _EVENT_NUMBERS, None, 1)
    for threads in range(1, 5):
        for every in range(1, 6):
            split = wire._wirec.events(raw, starts, ends, _EVENT_NUMBERS, None, threads, every)
            assert [bytes(c) for c in split] == [bytes(c) for c in alone], (threads, every)


@c_loop_only
def test_dense_field_numbers_are_checked(decoder):
    """The first bad dense field number is the error reported (the C API is not called again
    once an error is set), and a number outside protobuf's range is refused rather than cut
    to 32 bits (2**32 + 1 would have read field 1 as dense)."""
    data = encode_field(1, VARINT, 5)
    span = np.array([0], np.int64), np.array([len(data)], np.int64)
    with pytest.raises(TypeError):
        wire._wirec.decode(data, *span, ("x", -1))
    for number in (0, (1 << 29), (1 << 32) + 1):
        with pytest.raises(ValueError, match="field number"):
            wire._wirec.decode(data, *span, (number,))
    assert wire._wirec.decode(data, *span, (1,))[1].keys() == {1}


@c_loop_only
def test_column_sizes_that_overflow_are_refused(decoder):
    """A column's size is rows x width bytes; a count whose product does not fit a
    Py_ssize_t is refused before anything is allocated (no input small enough to test
    with reaches it, hence the C loop's own size function)."""
    largest = np.iinfo(np.intp).max
    assert wire._wirec._column_bytes(1000, 8) == 8000
    assert wire._wirec._column_bytes(largest // 8, 8) == largest // 8 * 8
    with pytest.raises(MemoryError):
        wire._wirec._column_bytes(largest // 8 + 1, 8)


def test_wire_error_pickles_and_converts():
    error = pickle.loads(pickle.dumps(WireError("varint runs past the end", 42)))
    assert (error.reason, error.offset) == ("varint runs past the end", 42)
    converted = error.to_format_error("x.pb", "RunMetadata")
    assert isinstance(converted, TraceFormatError) and "byte 42" in str(converted)


# --- the StepStats reader on bad bytes ------------------------------------------------------

def _run_metadata(nodes: list) -> bytes:
    run_metadata = protos.RunMetadata()
    device = run_metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    device.node_stats.extend(nodes)
    return run_metadata.SerializeToString()


@common
@given(st.lists(node_exec_stats(), min_size=1, max_size=20), st.data())
def test_reader_raises_only_trace_format_errors(nodes, data):
    blob = bytearray(_run_metadata(nodes))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    with time_limit(10):
        try:
            stepstats.read_run_metadatas([(0, "", bytes(blob))], {"source_format": "runmetadata"})
        except TraceFormatError as error:
            assert error.where is None or error.where.startswith("byte ")


# --- two processes give the same results as one -----------------------------------------------

def _labelled_nodes(count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    nodes = []
    for i in range(count):
        inputs = [f"n{j}" for j in range(max(0, i - 2), i)]
        if i % 7 == 0:
            inputs.append(f"^n{i // 2}")
        if i % 11 == 0:
            inputs.append(f"n{i // 3}:1")
        start = 1_700_000_000_000_000_000 + int(rng.integers(0, 10**9))
        node = protos.NodeExecStats(
            node_name=f"n{i}", timeline_label=f"n{i} = Op{i % 4}({', '.join(inputs)})" if i % 13 else "odd",
            all_start_nanos=start, all_end_rel_nanos=int(rng.integers(0, 10**6)), thread_id=i % 3)
        used = node.memory.add(allocator_name="cpu" if i % 5 else "GPU_0_bfc", total_bytes=i)
        used.allocation_records.add(alloc_micros=start // 1000, alloc_bytes=64)
        used.allocation_records.add(alloc_micros=start // 1000 + 3, alloc_bytes=-64)
        node.output.add(slot=0).tensor_description.shape.dim.add(size=i % 9)
        nodes.append(node)
    return nodes


def test_reader_with_two_processes_matches_one(monkeypatch, tmp_path):
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(120)))
    monkeypatch.setattr(stepstats, "_CHUNK", 16)  # 8 chunks: 4 read in the worker
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "1")
    one = tracebridge.load(path)
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "2")
    two = tracebridge.load(path)
    assert one == two and one.strings == two.strings  # string ids too


def test_reader_worker_errors_surface(monkeypatch, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # the last node holds a group tag: it is read by the worker
    device = encode_field(1, LENGTH, b"/job:localhost/replica:0/task:0/device:CPU:0") + b"".join(
        encode_field(2, LENGTH, node.SerializeToString()) for node in _labelled_nodes(120))
    device += encode_field(2, LENGTH, b"\x0b")
    path = tmp_path / "bad.pb"
    path.write_bytes(encode_field(1, LENGTH, encode_field(1, LENGTH, device)))
    monkeypatch.setattr(stepstats, "_CHUNK", 16)
    errors = []
    for workers in ("1", "2"):
        monkeypatch.setenv("TRACEBRIDGE_WORKERS", workers)
        with pytest.raises(TraceFormatError) as caught:
            tracebridge.load(path)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert list(scratch.iterdir()) == []  # the worker's result file is gone


def test_writer_with_two_processes_matches_one(monkeypatch, tmp_path):
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(300)))
    trace = tracebridge.load(path)
    monkeypatch.setattr("tracebridge.writers.chrome._CHUNK", 25)
    outputs = {}
    for workers in (1, 2):
        for memory in (False, True):
            out = tmp_path / f"w{workers}{memory}.json"
            write_chrome(trace, out, dataflow=True, memory=memory, workers=workers)
            outputs[workers, memory] = out.read_bytes()
    for memory in (False, True):
        assert outputs[1, memory] == outputs[2, memory]
        json.loads(outputs[2, memory])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tracebridge-")] == []


def test_writer_child_failure_is_raised_and_cleaned_up(monkeypatch, tmp_path):
    from tracebridge.writers import chrome
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(200)))
    trace = tracebridge.load(path)
    monkeypatch.setattr(chrome, "_CHUNK", 25)
    parent = os.getpid()
    original = chrome._Events._counter_events

    def broken(self, lo, hi):  # fails in the child only
        if os.getpid() != parent:
            raise ValueError("boom")
        return original(self, lo, hi)
    monkeypatch.setattr(chrome._Events, "_counter_events", broken)
    out = tmp_path / "out.json"
    with pytest.raises(tracebridge.OutputError, match="boom"):
        chrome.write_chrome(trace, out, memory=True, workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pb"]


def test_reader_falls_back_when_the_worker_dies(monkeypatch, tmp_path):
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(120)))
    monkeypatch.setattr(stepstats, "_CHUNK", 16)
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "1")
    expected = tracebridge.load(path)
    parent = os.getpid()
    original = split_read._WorkerBuilder.rows_read

    def dies(self):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
        return original(self)
    monkeypatch.setattr(split_read._WorkerBuilder, "rows_read", dies)
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "2")
    with pytest.warns(RuntimeWarning, match="worker process failed"):
        got = tracebridge.load(path)
    assert got == expected and got.strings == expected.strings


def test_one_process_when_fork_fails(monkeypatch, tmp_path):
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(150)))
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "1")
    expected = tracebridge.load(path)
    write_chrome(expected, tmp_path / "one.json", memory=True)

    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setenv("TRACEBRIDGE_WORKERS", "2")  # one chunk only: also fine
    assert tracebridge.load(path) == expected
    monkeypatch.setattr(stepstats, "_CHUNK", 16)
    assert tracebridge.load(path) == expected
    write_chrome(expected, tmp_path / "two.json", memory=True, workers=2)
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "run.pb", "two.json"]


def test_forks_leave_piped_stdout_alone(tmp_path):
    """Forked workers leave through os._exit: what the parent buffered for a pipe is
    written once, and the only output is the parent's."""
    import subprocess
    import sys
    path = tmp_path / "run.pb"
    path.write_bytes(_run_metadata(_labelled_nodes(400)))
    script = ("import sys, tracebridge; from tracebridge.readers import stepstats; "
              "from tracebridge.writers import chrome; stepstats._CHUNK = 50; chrome._CHUNK = 50; "
              "print('before'); t = tracebridge.load(sys.argv[1]); t.to_chrome(sys.argv[2], memory=True); "
              "print('after', len(t))")
    done = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TRACEBRIDGE_WORKERS="2"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "before\nafter 400\n"
    assert done.stderr == ""
    json.loads((tmp_path / "out.json").read_text())


# --- the reader's bulk label parsing against the one-by-one parser ------------------------------

label_parts = st.sampled_from(["n", "a/b", " ", "=", " = ", "(", ")", ", ", ",", "^", ":1", "/_3", "ü",
                               "\x00", "K", "MatMul", "x y"])
label_bytes = st.lists(label_parts, max_size=8).map(lambda parts: "".join(parts).encode())
raw_names = st.one_of(label_bytes, st.binary(max_size=6))


@st.composite
def named_nodes(draw):
    """(node_name, timeline_label) as bytes, often of the canonical form."""
    name = draw(raw_names)
    kind = draw(st.integers(0, 3))
    if kind == 0:  # "name = Kernel(args)"
        args = draw(st.lists(label_bytes, max_size=3))
        label = name + b" = " + draw(label_bytes) + b"(" + b", ".join(args) + b")"
    elif kind == 1:  # another name in front
        label = draw(raw_names) + b" = " + draw(label_bytes) + b"(" + draw(label_bytes) + b")"
    else:
        label = draw(st.one_of(label_bytes, st.binary(max_size=12)))
    return name, label


@common
@given(st.lists(named_nodes(), min_size=1, max_size=40))
def test_bulk_labels_match_one_by_one(nodes):
    device = encode_field(1, LENGTH, b"/job:localhost/replica:0/task:0/device:CPU:0")
    for i, (name, label) in enumerate(nodes):
        node = encode_field(1, LENGTH, name) + encode_field(8, LENGTH, label) + encode_field(13, VARINT, 1000 + i)
        device += encode_field(2, LENGTH, node)
    data = encode_field(1, LENGTH, encode_field(1, LENGTH, device))
    bulk = stepstats.read_run_metadatas([(0, "", data)], {})
    original = stepstats._CanonicalLabels.__init__

    def nothing_in_bulk(self, *args):
        original(self, *args)
        self.others = np.arange(len(args[1]))
        self.rows = self.rows[:0]
        for name in ("kernel_start", "kernel_end", "args_start", "args_end"):
            setattr(self, name, getattr(self, name)[:0])
    stepstats._CanonicalLabels.__init__ = nothing_in_bulk
    try:
        one_by_one = stepstats.read_run_metadatas([(0, "", data)], {})
    finally:
        stepstats._CanonicalLabels.__init__ = original
    assert bulk == one_by_one
    assert [o.label for o in bulk.records()] == [o.label for o in one_by_one.records()]
