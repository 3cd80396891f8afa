"""RunMetadata / StepStats, binary, into the model.

Binary messages are decoded with :mod:`.wire`, level by level, over the whole input at
once, with field numbers from tracebridge's schema (:mod:`tracebridge.protos`); text dumps
(:mod:`.pbtxt`) and pickles (:mod:`.pickles`) become binary messages and take the same
path, so there is one decoder to trust.

The time fields: TF 2.21 fills ``all_start_nanos`` and the ``*_rel_nanos`` fields on every
node from a local executor; TF 1.x files and the RPC layer's ``RecvTensor`` records have
only the ``*_micros`` ones. Nanoseconds are used when present, else micros × 1000.

Labels: ``name = KernelType(in0, in1, ^ctrl)`` for executor nodes; GPU tracer devices
(``/stream:``, ``/memcpy``) name kernels ``node:op`` with an optional ``@@node#`` in the
label; ``RecvTensor`` labels are ``[<bytes>B] [<rate>] edge_<id>_<tensor> from <src> to <dst>``.

Speed (a million node_stats in about 4 s on 2 cores): nodes are read in chunks; labels of
the usual form are taken apart in bulk, as bytes, and only the others one by one; from
``split_read.PARALLEL_MIN_NODES`` on, a forked worker reads the second half of the chunks and hands
its rows back through a temporary file, as the caller's :class:`~tracebridge.options.Parallelism`
allows. The result is the same either way, string ids included.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from itertools import repeat

import numpy as np

from .. import protos
from ..errors import TraceFormatError
from ..model.builder import TIME_LIMIT_NS, UNASSIGNED, TraceBuilder
from ..model.schema import OpFlag, OutputFlag
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source
from .split_read import read_chunks
from .wire import (LENGTH, Buffer, Fields, WireError, as_signed, decode, decode_submessages, intern_all, intern_strings,
                   strings, strings_per_message)

_RECV = re.compile(
    r"\[(?P<bytes>\d+)B\]\s*\[(?P<rate>[\d.]+)(?P<unit>[KMG]?)b/s\]\s*(?P<edge>\S+)"
    r"\s+from\s+(?P<src>\S+)\s+to\s+(?P<dst>\S+)")
_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
_RECV_LABEL_MAX = 4096
_RUN_METADATA = protos.field_numbers("tensorflow.RunMetadata")
_STEP_STATS = protos.field_numbers("tensorflow.StepStats")
_DEVICE = protos.field_numbers("tensorflow.DeviceStepStats")
_THREAD_NAME = protos.field_numbers("tensorflow.DeviceStepStats.ThreadNamesEntry")
_GRAPH = protos.field_numbers("tensorflow.GraphDef")
_GRAPH_NODE = protos.field_numbers("tensorflow.NodeDef")
_NODE = protos.field_numbers("tensorflow.NodeExecStats")
_MEMORY_STATS = protos.field_numbers("tensorflow.MemoryStats")
_OUTPUT = protos.field_numbers("tensorflow.NodeOutput")
_TENSOR = protos.field_numbers("tensorflow.TensorDescription")
_ALLOCATION = protos.field_numbers("tensorflow.AllocationDescription")
_SHAPE = protos.field_numbers("tensorflow.TensorShapeProto")
_DIM = protos.field_numbers("tensorflow.TensorShapeProto.Dim")
_MEMORY = protos.field_numbers("tensorflow.AllocatorMemoryUsed")
_RECORD = protos.field_numbers("tensorflow.AllocationRecord")
# Nodes decoded at once: at most _CHUNK (bounds the decoder's temporary arrays), at least
# _MIN_CHUNK (numpy's per-call overhead), else an eighth of the nodes, so that two processes
# can share the work. Chunks depend on the input only, so one process or two read the same.
_CHUNK = 100_000
_MIN_CHUNK = 20_000
_US_LIMIT = TIME_LIMIT_NS // 1000  # microsecond times beyond this would wrap around when scaled


def read(source: Source, parallelism: Parallelism) -> Trace:
    """A binary RunMetadata or StepStats file."""
    return read_run_metadatas([(0, "", source.data)], {"source_format": "runmetadata"}, path=source.path,
                              parallelism=parallelism)


def read_run_metadatas(runs: Iterable[tuple[int, str, bytes]], metadata: dict, path=None,
                       op_types: dict[str, str] | None = None,
                       parallelism: Parallelism = Parallelism()) -> Trace:
    """Serialized RunMetadata (or StepStats) messages, each one step:
    ``(step_number, step_name, data)``. ``op_types`` maps node names to graph op types
    (a capture knows its graph); partition graphs in the messages are used otherwise."""
    builder = TraceBuilder(metadata)
    for number, name, data in runs:
        try:
            _add_run_metadata(builder, data, step=builder.step(number, name), op_types=op_types,
                              parallelism=parallelism)
        except WireError as error:
            raise error.to_format_error(path, "RunMetadata") from None
    if builder.op_count == 0 and not builder.device_list:
        raise TraceFormatError("protobuf holds no step stats (no devices)", path=path)
    return builder.build()


def _add_run_metadata(builder: TraceBuilder, raw: bytes, *, step: int, op_types: dict[str, str] | None,
                      parallelism: Parallelism) -> None:
    """Decode one serialized RunMetadata or StepStats into ``builder`` as step ``step``."""
    top = decode(raw, [0], [len(raw)])
    # RunMetadata.step_stats and StepStats.dev_stats share field number 1: what it holds
    # tells the two messages apart.
    _, starts, ends = top.spans(_RUN_METADATA.step_stats)
    level = decode(raw, starts, ends)
    if _is_device_list(raw, level):      # a bare StepStats: its field 1 is DeviceStepStats
        devices = level, starts, ends
    else:                                # RunMetadata: its field 1 is StepStats
        _, dev_starts, dev_ends = level.spans(_STEP_STATS.dev_stats)
        devices = decode(raw, dev_starts, dev_ends), dev_starts, dev_ends
        if op_types is None:
            op_types = _graph_op_types(raw, top)
    _add_devices(builder, raw, *devices, step=step, op_types=op_types or {}, parallelism=parallelism)


def _is_device_list(raw: bytes, fields: Fields) -> bool:
    """True when the messages decoded in ``fields`` look like DeviceStepStats: their
    device name field is a printable device name."""
    mask = (fields.field == _DEVICE.device) & (fields.wire_type == LENGTH)
    if not mask.any():
        return False
    start = int(fields.offset[mask][0])
    name = raw[start:start + int(fields.value[mask][0])]
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return bool(text) and text.isprintable() and (":" in text or text.startswith("/"))


def _graph_op_types(raw: bytes, top: Fields) -> dict[str, str]:
    """Node name -> graph op type from the partition graphs."""
    _, starts, ends = top.spans(_RUN_METADATA.partition_graphs)
    if not len(starts):
        return {}
    graphs = decode(raw, starts, ends)
    _, node_starts, node_ends = graphs.spans(_GRAPH.node)
    nodes = decode(raw, node_starts, node_ends)
    names = strings_per_message(raw, nodes, _GRAPH_NODE.name, len(node_starts))
    types = strings_per_message(raw, nodes, _GRAPH_NODE.op, len(node_starts))
    return dict(zip(names, types))


def _interned_per_message(builder: TraceBuilder, raw: bytes, fields: Fields, number: int,
                          count: int) -> np.ndarray:
    """A singular, low-cardinality string field as string ids, one per message."""
    messages, starts, ends = fields.spans(number)
    ids = np.zeros(count, dtype=np.int64)  # id 0 is ""
    ids[messages] = intern_strings(raw, starts, ends, builder.strings)
    return ids


def _add_devices(builder: TraceBuilder, raw: bytes, dev_fields: Fields, dev_starts, dev_ends, *,
                 step: int, op_types: dict[str, str], parallelism: Parallelism) -> None:
    names = strings_per_message(raw, dev_fields, _DEVICE.device, len(dev_starts))
    node_owner, node_starts, node_ends = dev_fields.spans(_DEVICE.node_stats)
    _add_thread_names(builder, raw, dev_fields, names)
    blocks = np.array([builder.new_block() for _ in names], dtype=np.int64)
    device_ids = np.array([builder.device(n) for n in names], dtype=np.int64)
    # GPU tracer devices (stream and memcpy records) name their kernels differently (see _kernel_name)
    tracer_device = np.array([_is_tracer_device(n) for n in names], dtype=bool)
    total = len(node_starts)
    size = min(_CHUNK, max(_MIN_CHUNK, -(-total // 8)))
    chunks = [(lo, min(lo + size, total)) for lo in range(0, total, size)]

    def read(target, some_chunks) -> None:
        for lo, hi in some_chunks:
            owner = node_owner[lo:hi]
            _add_nodes(target, raw, node_starts[lo:hi], node_ends[lo:hi], device_ids[owner], blocks[owner],
                       tracer_device[owner], step, op_types)

    read_chunks(builder, chunks, read, total, parallelism)


def _is_tracer_device(name: str) -> bool:
    return "/stream:" in name or "/memcpy" in name


def _add_thread_names(builder, raw, dev_fields: Fields, names: list[str]) -> None:
    owner, starts, ends = dev_fields.spans(_DEVICE.thread_names)
    if not len(starts):
        return
    entries = decode(raw, starts, ends)
    keys = entries.scalar(_THREAD_NAME.key, len(starts))
    values = strings_per_message(raw, entries, _THREAD_NAME.value, len(starts))
    for device_index, key, value in zip(owner.tolist(), keys.tolist(), values):
        builder.name_lane(builder.device(names[device_index]), key, value)


def _add_nodes(builder: TraceBuilder, raw: bytes, starts, ends, device_ids, blocks,
               on_tracer_device: np.ndarray, step: int, op_types: dict[str, str]) -> None:
    n = len(starts)
    f = decode(raw, starts, ends)
    signed = lambda number: as_signed(f.scalar(number, n, np.uint64))  # noqa: E731

    def ns(number: int, scale: int, limit: int = TIME_LIMIT_NS) -> np.ndarray:
        # Clipped before scaling and adding, so that a corrupt time (2**63 µs) cannot wrap
        # around int64: starts to +-2**62 ns, relative times to half that.
        bound = limit // scale
        return np.clip(signed(number), -bound, bound) * scale

    half = TIME_LIMIT_NS // 2
    has_nanos = f.has(_NODE.all_start_nanos, n)
    micros = ~has_nanos
    start = np.where(has_nanos, ns(_NODE.all_start_nanos, 1), ns(_NODE.all_start_micros, 1000))
    op_start = start + np.where(has_nanos, ns(_NODE.op_start_rel_nanos, 1, half),
                                ns(_NODE.op_start_rel_micros, 1000, half))
    op_end = start + np.where(has_nanos, ns(_NODE.op_end_rel_nanos, 1, half), ns(_NODE.op_end_rel_micros, 1000, half))
    end = start + np.where(has_nanos, ns(_NODE.all_end_rel_nanos, 1, half), ns(_NODE.all_end_rel_micros, 1000, half))
    scheduled = np.where(micros, ns(_NODE.scheduled_micros, 1000), ns(_NODE.scheduled_nanos, 1))
    flags = (has_nanos * 1).astype(np.uint8) * int(OpFlag.HAS_NANOS)
    flags |= (scheduled != 0).astype(np.uint8) * int(OpFlag.HAS_SCHEDULED)
    flags |= f.has(_NODE.memory_stats, n).astype(np.uint8) * int(OpFlag.HAS_MEMORY_STATS)
    name_start, name_end = _span_per_message(f, _NODE.node_name, n)
    label_start, label_end = _span_per_message(f, _NODE.timeline_label, n)
    node_names = strings(raw, name_start, name_end)

    first_op = builder.op_count
    s = builder.strings
    # Labels of the usual form "<node name> = Kernel(in0, in1)" are taken apart in bulk;
    # the rest (GPU tracer records, RecvTensor, other label forms) one by one below.
    labels = _CanonicalLabels(raw, name_start, name_end, label_start, label_end,
                              on_tracer_device | (np.array(node_names, dtype=object) == "RecvTensor"))
    fast = labels.rows
    fast_names = node_names if len(fast) == n else [node_names[i] for i in fast.tolist()]
    names_col = np.zeros(n, dtype=np.int64)
    names_col[fast] = intern_all(s, fast_names)
    kernels = np.zeros(n, dtype=np.int64)
    kernels[fast] = intern_strings(raw, labels.kernel_start, labels.kernel_end, s)
    input_counts, input_texts = labels.inputs()
    inputs_op = np.repeat(fast + first_op, input_counts)
    inputs_name = intern_all(s, input_texts)
    label_ids = np.zeros(n, dtype=np.int64)
    label_canonical = int(OpFlag.LABEL_CANONICAL)
    flags[fast] |= label_canonical
    types = kernels.copy()
    if op_types:
        graph_types = list(map(op_types.get, fast_names))
        known = [i for i, t in enumerate(graph_types) if t is not None]
        types[fast[known]] = intern_all(s, [graph_types[i] for i in known])

    slow_op, slow_name = [], []
    add_input_op, add_input_name = slow_op.append, slow_name.append
    for i in labels.others.tolist():
        node_name = node_names[i]
        label = raw[label_start[i]:label_end[i]].decode("utf-8", "replace")
        if on_tracer_device[i]:
            name, kernel = _kernel_name(node_name, label)
            label_ids[i] = s[label]
            if node_name != f"{name}:{kernel}":  # an @@op# annotation renamed it
                builder.add_row("aliases", op=first_op + i, name=node_name)
        elif node_name == "RecvTensor" and not label.startswith("RecvTensor = "):
            # The RPC layer's record of a tensor received (its label names the transfer);
            # an op of that name has an op's label, and is read as the op below.
            name, kernel = node_name, "RecvTensor"
            _add_transfer(builder, first_op + i, label)
            label_ids[i] = s[label]
        else:
            name = node_name
            kernel, inputs, canonical = _parse_label(label, node_name)
            if canonical:  # rebuilt from name, kernel and inputs when written back
                flags[i] |= label_canonical
            else:
                label_ids[i] = s[label]
            op = first_op + i
            for text in inputs:
                add_input_op(op)
                add_input_name(s[text])
        names_col[i] = s[name]
        kernels[i] = s[kernel]
        types[i] = s[op_types.get(name, kernel)] if op_types else kernels[i]
    memory_stats = _memory_stats(raw, f, n)
    builder.extend("ops", name=names_col, op_type=types, kernel=kernels,
                   label=label_ids, start_ns=start, end_ns=end,
                   op_start_ns=op_start, op_end_ns=op_end, scheduled_ns=scheduled,
                   thread_id=f.scalar(_NODE.thread_id, n), device=device_ids, lane=np.full(n, UNASSIGNED),
                   step=np.full(n, step), block=blocks, flags=flags, **memory_stats)
    if slow_op:  # keep the inputs in op order
        inputs_op = np.concatenate([inputs_op, np.array(slow_op, dtype=np.int64)])
        inputs_name = np.concatenate([inputs_name, np.array(slow_name, dtype=np.int64)])
        order = np.argsort(inputs_op, kind="stable")
        inputs_op, inputs_name = inputs_op[order], inputs_name[order]
    builder.extend("inputs", op=inputs_op, name=inputs_name)
    _add_outputs(builder, raw, f, first_op)
    _add_memory(builder, raw, f, first_op)


def _span_per_message(fields: Fields, number: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` of a singular length-delimited field per message (last wins; an
    empty span where absent)."""
    messages, starts, ends = fields.spans(number)
    span_start = np.zeros(count, dtype=np.int64)
    span_end = np.zeros(count, dtype=np.int64)
    span_start[messages] = starts
    span_end[messages] = ends
    return span_start, span_end


class _CanonicalLabels:
    """Finds, in bulk, the nodes whose label is exactly ``f"{name} = {kernel}({args})"``
    and reads kernel and arguments from the bytes, as :func:`_parse_label` would.

    ``rows``: those nodes (the others are ``others``, left to ``_parse_label``);
    ``kernel_start``/``kernel_end``/``args_start``/``args_end``: byte spans in ``raw``.
    Nodes with a non-ASCII name or an ``=`` in it are left out, so that byte
    comparisons are text comparisons and the first ``" = "`` follows the name. Bytes
    are compared eight at a time, as 64-bit words."""

    def __init__(self, raw: bytes, name_start, name_end, label_start, label_end, excluded):
        buf = Buffer(raw)
        data, words = buf.bytes, buf.words
        name_len = name_end - name_start
        kernel_start = label_start + name_len + 3
        ok = ~excluded & (label_end - kernel_start >= 2)  # at least "()" after " = "
        # word reads stay inside the buffer
        ok &= (np.maximum(name_end, label_end) + 8 <= len(data))
        ok &= data[np.where(ok, label_end - 1, 0)] == ord(")")
        for k, char in enumerate(b" = "):
            ok &= data[np.where(ok, label_start + name_len + k, 0)] == char
        rows = np.flatnonzero(ok)
        # The name's bytes against the label's first bytes: equal, ASCII, no "=".
        for k in range(0, int(name_len[rows].max(initial=0)), 8):
            rows = rows[name_len[rows] > k]
            name_word = words[name_start[rows] + k]
            left = np.minimum(name_len[rows] - k, 8).astype(np.uint64)
            mask = np.where(left == 8, _ALL_BITS, (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))
            bad = ((name_word ^ words[label_start[rows] + k]) & mask) != 0
            bad |= (name_word & mask & _HIGH_BITS) != 0
            bad |= _has_byte(name_word, mask, ord("="))
            ok[rows[bad]] = False
        # The first "(" after " = ", before the closing ")".
        rows = np.flatnonzero(ok)
        paren = np.full(len(rows), -1, dtype=np.int64)
        pending = np.arange(len(rows))
        k = 0
        while len(pending):
            at = kernel_start[rows[pending]] + k
            inside = at < label_end[rows[pending]] - 1
            pending, at = pending[inside], at[inside]
            if not len(pending):
                break
            word = words[at]
            found = _first_byte(word, ord("("))
            hit = found >= 0
            hit &= at + found < label_end[rows[pending]] - 1
            paren[pending[hit]] = at[hit] + found[hit]
            pending = pending[~hit]
            k += 8
        ok[rows[paren < 0]] = False
        keep = paren >= 0
        rows, paren = rows[keep], paren[keep]
        self.rows = rows
        self.others = np.flatnonzero(~ok)
        self.kernel_start, self.kernel_end = kernel_start[rows], paren
        self.args_start, self.args_end = paren + 1, label_end[rows] - 1
        self._raw = raw

    def inputs(self) -> tuple[np.ndarray, list[str]]:
        """Number of inputs of each row, and all inputs' texts in row order
        (``args.split(", ")`` of each row's non-empty arguments). The arguments are
        joined with NUL, decoded once and split twice."""
        starts, ends = self.args_start, self.args_end
        nonempty = np.flatnonzero(ends > starts)
        counts = np.zeros(len(starts), dtype=np.int64)
        raw = self._raw
        pieces = [raw[a:b] for a, b in zip(starts[nonempty].tolist(), ends[nonempty].tolist())]
        if not pieces:
            return counts, []
        joined = b"\\x00".join(pieces)
        if joined.count(b"\\x00") == len(pieces) - 1:
            text = joined.decode("utf-8", "replace")
            per_row = text.split("\\x00")
            texts = text.replace("\\x00", ", ").split(", ")
        else:  # an argument holds NUL
            per_row = [piece.decode("utf-8", "replace") for piece in pieces]
            texts = ", ".join(per_row).split(", ")
        counts[nonempty] = np.fromiter(map(str.count, per_row, repeat(", ")), dtype=np.int64,
                                       count=len(per_row)) + 1
        return counts, texts


_ALL_BITS = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_HIGH_BITS = np.uint64(0x8080_8080_8080_8080)
_LOW_BITS = np.uint64(0x0101_0101_0101_0101)


def _zero_bytes(x: np.ndarray) -> np.ndarray:
    """The high bit of each byte of ``x`` that is zero; exact for the lowest zero byte
    (a borrow can only mark bytes above a zero byte)."""
    return (x - _LOW_BITS) & ~x & _HIGH_BITS


def _has_byte(word: np.ndarray, mask: np.ndarray, char: int) -> np.ndarray:
    """Whether a byte equal to ``char`` is among the bytes of ``word`` that ``mask`` keeps."""
    x = (word ^ (_LOW_BITS * np.uint64(char))) | ~mask
    return _zero_bytes(x) != 0


def _first_byte(word: np.ndarray, char: int) -> np.ndarray:
    """Index (0-7) of the first byte of ``word`` equal to ``char``, -1 where none."""
    z = _zero_bytes(word ^ (_LOW_BITS * np.uint64(char)))
    lowest = z & (~z + np.uint64(1))
    index = (np.frexp(lowest.astype(np.float64))[1] >> 3) - 1  # bit 8i+7 -> i
    return np.where(z != 0, index, -1)


def _memory_stats(raw: bytes, f: Fields, n: int) -> dict[str, np.ndarray]:
    owner, starts, ends = f.spans(_NODE.memory_stats)
    numbers = {"temp_bytes": _MEMORY_STATS.temp_memory_size,
               "device_temp_bytes": _MEMORY_STATS.device_temp_memory_size,
               "persistent_bytes": _MEMORY_STATS.persistent_memory_size,
               "device_persistent_bytes": _MEMORY_STATS.device_persistent_memory_size}
    columns = {column: np.zeros(n, np.int64) for column in numbers}
    if len(owner):
        stats = decode(raw, starts, ends)
        for column, number in numbers.items():
            columns[column][owner] = as_signed(stats.scalar(number, len(owner), np.uint64))
    return columns


def _add_outputs(builder: TraceBuilder, raw: bytes, f: Fields, first_op: int) -> None:
    owner, outputs = decode_submessages(raw, f, _NODE.output)
    if outputs is None:
        return
    count = len(owner)
    flags = np.zeros(count, np.uint8)
    dtype = np.zeros(count, np.int64)
    shape_ids = np.zeros(count, np.int64)
    alloc = {k: np.zeros(count, np.int64) for k in
             ("requested_bytes", "allocated_bytes", "allocator", "allocation_id")}
    ptr = np.zeros(count, np.uint64)
    desc_owner, desc_starts, desc_ends = outputs.spans(_OUTPUT.tensor_description)
    if len(desc_owner):
        flags[desc_owner] |= int(OutputFlag.HAS_DESCRIPTION)
        desc = decode(raw, desc_starts, desc_ends)
        dtype[desc_owner] = desc.scalar(_TENSOR.dtype, len(desc_owner))
        shape_owner, shape_starts, shape_ends = desc.spans(_TENSOR.shape)
        if len(shape_owner):
            rows = desc_owner[shape_owner]
            flags[rows] |= int(OutputFlag.HAS_SHAPE)
            shape_ids[rows] = intern_strings(raw, shape_starts, shape_ends, builder.strings, _shape_text)
        alloc_owner, alloc_starts, alloc_ends = desc.spans(_TENSOR.allocation_description)
        if len(alloc_owner):
            rows = desc_owner[alloc_owner]
            flags[rows] |= int(OutputFlag.HAS_ALLOCATION)
            a = decode(raw, alloc_starts, alloc_ends)
            m = len(alloc_owner)
            alloc["requested_bytes"][rows] = as_signed(a.scalar(_ALLOCATION.requested_bytes, m, np.uint64))
            alloc["allocated_bytes"][rows] = as_signed(a.scalar(_ALLOCATION.allocated_bytes, m, np.uint64))
            alloc["allocator"][rows] = _interned_per_message(builder, raw, a, _ALLOCATION.allocator_name, m)
            alloc["allocation_id"][rows] = as_signed(a.scalar(_ALLOCATION.allocation_id, m, np.uint64))
            single = a.scalar(_ALLOCATION.has_single_reference, m) != 0
            flags[rows[single]] |= int(OutputFlag.SINGLE_REFERENCE)
            ptr[rows] = a.scalar(_ALLOCATION.ptr, m, np.uint64)
    builder.extend("outputs", op=owner + first_op, slot=outputs.scalar(_OUTPUT.slot, count), dtype=dtype,
                   shape=shape_ids, ptr=ptr, flags=flags, **alloc)


def _add_memory(builder: TraceBuilder, raw: bytes, f: Fields, first_op: int) -> None:
    owner, used = decode_submessages(raw, f, _NODE.memory)
    if used is None:
        return
    count = len(owner)
    first_row = builder.rows("memory")

    def signed(number: int, fields: Fields = used, rows: int = count) -> np.ndarray:
        return as_signed(fields.scalar(number, rows, np.uint64))

    builder.extend("memory", op=owner + first_op,
                   allocator=_interned_per_message(builder, raw, used, _MEMORY.allocator_name, count),
                   total_bytes=signed(_MEMORY.total_bytes), peak_bytes=signed(_MEMORY.peak_bytes),
                   live_bytes=signed(_MEMORY.live_bytes),
                   allocator_bytes_in_use=signed(_MEMORY.allocator_bytes_in_use))
    rec_owner, rec_starts, rec_ends = used.spans(_MEMORY.allocation_records)
    if len(rec_owner):
        records = decode(raw, rec_starts, rec_ends)
        m = len(rec_owner)
        builder.extend("allocations", memory=rec_owner + first_row,
                       time_ns=np.clip(signed(_RECORD.alloc_micros, records, m), -_US_LIMIT, _US_LIMIT) * 1000,
                       bytes=signed(_RECORD.alloc_bytes, records, m))


def _shape_text(raw: bytes, start: int, end: int) -> str:
    """The TensorShapeProto at ``raw[start:end]`` as ``"64,128"`` (``""`` for a scalar,
    ``"?"`` for unknown rank; unknown dims are ``-1``)."""
    shape = decode(raw, [start], [end])
    if shape.scalar(_SHAPE.unknown_rank, 1)[0]:
        return "?"
    _, dim_starts, dim_ends = shape.spans(_SHAPE.dim)
    sizes = as_signed(decode(raw, dim_starts, dim_ends).scalar(_DIM.size, len(dim_starts), np.uint64))
    return ",".join(map(str, sizes.tolist()))


def _parse_label(label: str, node_name: str = "") -> tuple[str, list[str], bool]:
    """``"n = Kernel(a, ^b)"`` -> ``("Kernel", ["a", "^b"], canonical)``; a label of another
    form gives ``("unknown", [], False)``, as TF's timeline.py reads it. ``canonical``: the
    label is exactly ``f"{node_name} = {kernel}({', '.join(inputs)})"``."""
    lhs, sep, call = label.partition(" = ")
    if not sep or not call.endswith(")"):
        return "unknown", [], False
    kernel, paren, args = call[:-1].partition("(")
    if not paren:
        return "unknown", [], False
    return kernel, args.split(", ") if args else [], lhs == node_name


def _kernel_name(node_name: str, label: str) -> tuple[str, str]:
    """GPU tracer records: ``node_name`` is ``name:op``; a ``@@name#`` in the label wins."""
    start, end = label.find("@@"), label.find("#")
    if start >= 0 and end >= 0 and start + 2 < end:
        node_name = label[start + 2:end]
    name, _, op = node_name.partition(":")
    return name, (op.split(":")[0] if op else "unknown")


def _add_transfer(builder: TraceBuilder, op: int, label: str) -> None:
    # Only the label's head is searched: TF's RecvTensor labels are a few hundred
    # characters, and on a long run of "[1B] [1b/s]" without spaces the pattern
    # backtracks quadratically.
    match = _RECV.search(label[:_RECV_LABEL_MAX])
    if not match:
        return
    try:
        size, rate = int(match.group("bytes")), float(match.group("rate"))
    except ValueError:  # "1.2.3" b/s, or more digits than int() takes
        return
    if size >= 1 << 63 or not math.isfinite(rate):
        return
    edge = match.group("edge")
    tensor = edge.split("_", 2)[2] if edge.startswith("edge_") and edge.count("_") >= 2 else edge
    builder.add_row("transfers", op=op, bytes=size, rate_bps=rate * _UNITS[match.group("unit")],
                    src=match.group("src"), dst=match.group("dst"), tensor=tensor)
