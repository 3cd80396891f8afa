"""RunMetadata / StepStats (binary or text) into the model.

Binary messages are decoded with :mod:`.wire`, level by level, over the whole input at
once; text dumps are parsed with protobuf's text format into tracebridge's own schema and
then take the same binary path, so there is one decoder to trust.

The time fields: TF 2.21 fills ``all_start_nanos`` and the ``*_rel_nanos`` fields on every
node from a local executor; TF 1.x files and the RPC layer's ``RecvTensor`` records have
only the ``*_micros`` ones. Nanoseconds are used when present, else micros × 1000.

Labels: ``name = KernelType(in0, in1, ^ctrl)`` for executor nodes; GPU tracer devices
(``/stream:``, ``/memcpy``) name kernels ``node:op`` with an optional ``@@node#`` in the
label; ``RecvTensor`` labels are ``[<bytes>B] [<rate>] edge_<id>_<tensor> from <src> to <dst>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
from google.protobuf import text_format

from .. import protos
from ..errors import TraceFormatError
from ..model.builder import UNASSIGNED, TraceBuilder
from ..model.trace import (HAS_MEMORY_STATS, HAS_NANOS, HAS_SCHEDULED, LABEL_CANONICAL, OUT_HAS_ALLOCATION,
                           OUT_HAS_DESCRIPTION, OUT_HAS_SHAPE, OUT_SINGLE_REFERENCE,
                           Trace)
from .wire import LENGTH, Fields, WireError, as_signed, decode, intern_strings, strings

_RECV = re.compile(
    r"\[(?P<bytes>\d+)B\]\s*\[(?P<rate>[\d.]+)(?P<unit>[KMG]?)b/s\]\s*(?P<edge>\S+)"
    r"\s+from\s+(?P<src>\S+)\s+to\s+(?P<dst>\S+)")
_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
# NodeExecStats field numbers
_NAME, _START_US, _OP_START_US, _OP_END_US, _END_US = 1, 2, 3, 4, 5
_MEMORY, _OUTPUT, _LABEL, _SCHED_US, _THREAD, _MEMORY_STATS = 6, 7, 8, 9, 10, 12
_START_NS, _OP_START_NS, _OP_END_NS, _END_NS, _SCHED_NS = 13, 14, 15, 16, 17
_CHUNK = 200_000  # nodes decoded at once: bounds the decoder's temporary arrays


def text_to_bytes(text: str, path=None) -> bytes:
    """``str(run_metadata)`` or ``str(step_stats)`` dumps, as binary RunMetadata."""
    head = text.lstrip()[:64]
    target = protos.StepStats() if head.startswith("dev_stats") else protos.RunMetadata()
    try:
        # Unknown fields (graph attrs, cost graphs) are skipped; what tracebridge uses is defined.
        text_format.Parse(text, target, allow_unknown_field=True)
    except text_format.ParseError as error:
        raise TraceFormatError(f"not a RunMetadata text dump: {error}", path=path) from None
    if target.DESCRIPTOR.name == "StepStats":
        run_metadata = protos.RunMetadata()
        run_metadata.step_stats.CopyFrom(target)
        target = run_metadata
    return target.SerializeToString()


def read_run_metadatas(runs: Iterable[tuple[int, str, bytes]], metadata: dict, path=None,
                       op_types: dict[str, str] | None = None) -> Trace:
    """Serialized RunMetadata (or StepStats) messages, each one step:
    ``(step_number, step_name, data)``. ``op_types`` maps node names to graph op types
    (a capture knows its graph); partition graphs in the messages are used otherwise."""
    builder = TraceBuilder(metadata)
    for number, name, data in runs:
        try:
            add_run_metadata(builder, data, step=builder.step(number, name), op_types=op_types)
        except WireError as error:
            raise error.to_format_error(path, "RunMetadata") from None
    if builder.op_count == 0 and not builder.device_list:
        raise TraceFormatError("protobuf holds no step stats (no devices)", path=path)
    return builder.build()


def add_run_metadata(builder: TraceBuilder, raw: bytes, *, step: int, host: str | None = None,
                     op_types: dict[str, str] | None = None) -> None:
    """Decode one serialized RunMetadata or StepStats into ``builder`` as step ``step``."""
    top = decode(raw, [0], [len(raw)])
    _, starts, ends = top.spans(1)
    level = decode(raw, starts, ends)
    if _is_device_list(raw, level):      # a bare StepStats: field 1 is DeviceStepStats
        devices = level, starts, ends
    else:                                # RunMetadata: field 1 is StepStats
        _, dev_starts, dev_ends = level.spans(1)
        devices = decode(raw, dev_starts, dev_ends), dev_starts, dev_ends
        if op_types is None:
            op_types = _graph_op_types(raw, top)
    _add_devices(builder, raw, *devices, step=step, op_types=op_types or {}, host=host)


def _is_device_list(raw: bytes, fields: Fields) -> bool:
    """True when the messages decoded in ``fields`` look like DeviceStepStats: their
    field 1 is a printable device name."""
    mask = (fields.field == 1) & (fields.wire_type == LENGTH)
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
    """Node name -> graph op type from the partition graphs (RunMetadata field 3)."""
    _, starts, ends = top.spans(3)
    if not len(starts):
        return {}
    graphs = decode(raw, starts, ends)
    _, node_starts, node_ends = graphs.spans(1)
    nodes = decode(raw, node_starts, node_ends)
    names = _strings_per_message(raw, nodes, 1, len(node_starts))
    types = _strings_per_message(raw, nodes, 2, len(node_starts))
    return dict(zip(names, types))


def _strings_per_message(raw: bytes, fields: Fields, number: int, count: int) -> list[str]:
    """A singular string field, one per message ('' where absent)."""
    messages, starts, ends = fields.spans(number)
    texts = strings(raw, starts, ends)
    if len(messages) == count and (count == 0 or messages[-1] == count - 1) and \
            np.all(messages[1:] > messages[:-1]):
        return texts  # the usual case: the field once in every message
    out = [""] * count
    for m, text in zip(messages.tolist(), texts):
        out[m] = text
    return out


def _interned_per_message(builder: TraceBuilder, raw: bytes, fields: Fields, number: int,
                          count: int) -> np.ndarray:
    """A singular, low-cardinality string field as string ids, one per message."""
    messages, starts, ends = fields.spans(number)
    ids = np.zeros(count, dtype=np.int64)  # id 0 is ""
    ids[messages] = intern_strings(raw, starts, ends, builder.strings)
    return ids


def _add_devices(builder: TraceBuilder, raw: bytes, dev_fields: Fields, dev_starts, dev_ends, *,
                 step: int, op_types: dict[str, str], host: str | None) -> None:
    names = _strings_per_message(raw, dev_fields, 1, len(dev_starts))
    node_owner, node_starts, node_ends = dev_fields.spans(2)
    _add_thread_names(builder, raw, dev_fields, names, host)
    blocks = np.arange(len(names)) + builder.blocks
    builder.blocks += len(names)
    device_ids = np.array([builder.device(n, host) for n in names], dtype=np.int64)
    for chunk in range(0, len(node_starts), _CHUNK):
        part = slice(chunk, chunk + _CHUNK)
        owner = node_owner[part]
        _add_nodes(builder, raw, node_starts[part], node_ends[part], device_ids[owner], blocks[owner],
                   [names[i] for i in owner.tolist()], step, op_types)


def _add_thread_names(builder, raw, dev_fields: Fields, names: list[str], host) -> None:
    owner, starts, ends = dev_fields.spans(3)
    if not len(starts):
        return
    entries = decode(raw, starts, ends)
    keys = entries.scalar(1, len(starts))
    values = _strings_per_message(raw, entries, 2, len(starts))
    for device_index, key, value in zip(owner.tolist(), keys.tolist(), values):
        builder.lane_names[(builder.device(names[device_index], host), key)] = value


def _add_nodes(builder: TraceBuilder, raw: bytes, starts, ends, device_ids, blocks,
               device_names: list[str], step: int, op_types: dict[str, str]) -> None:
    n = len(starts)
    f = decode(raw, starts, ends)
    signed = lambda number: as_signed(f.scalar(number, n, np.uint64))  # noqa: E731
    start_ns = signed(_START_NS)
    has_nanos = f.has(_START_NS, n)
    micros = ~has_nanos
    start = np.where(has_nanos, start_ns, signed(_START_US) * 1000)
    op_start = start + np.where(has_nanos, signed(_OP_START_NS), signed(_OP_START_US) * 1000)
    op_end = start + np.where(has_nanos, signed(_OP_END_NS), signed(_OP_END_US) * 1000)
    end = start + np.where(has_nanos, signed(_END_NS), signed(_END_US) * 1000)
    scheduled = np.where(micros, signed(_SCHED_US) * 1000, signed(_SCHED_NS))
    flags = (has_nanos * 1).astype(np.uint8) * HAS_NANOS
    flags |= (scheduled != 0).astype(np.uint8) * HAS_SCHEDULED
    flags |= f.has(_MEMORY_STATS, n).astype(np.uint8) * HAS_MEMORY_STATS
    node_names = _strings_per_message(raw, f, _NAME, n)
    labels = _strings_per_message(raw, f, _LABEL, n)

    first_op = builder.op_count
    s = builder.strings
    names_col, kernels, types, label_ids = [], [], [], []
    inputs_op, inputs_name = [], []
    special = [i for i, d in enumerate(device_names) if "/stream:" in d or "/memcpy" in d] \
        if any("/stream:" in d or "/memcpy" in d for d in set(device_names)) else []
    special_set = set(special)
    canonical_rows = []
    add_input_op, add_input_name = inputs_op.append, inputs_name.append
    for i, (node_name, label) in enumerate(zip(node_names, labels)):
        if i in special_set:
            name, kernel = _kernel_name(node_name, label)
            label_ids.append(s[label])
            if node_name != f"{name}:{kernel}":  # an @@op# annotation renamed it
                builder.add_row("aliases", op=first_op + i, name=node_name)
        elif node_name == "RecvTensor":
            name, kernel = node_name, "RecvTensor"
            _add_transfer(builder, first_op + i, label)
            label_ids.append(s[label])
        else:
            name = node_name
            kernel, inputs, canonical = _parse_label(label, node_name)
            if canonical:  # rebuilt from name, kernel and inputs when written back
                canonical_rows.append(i)
                label_ids.append(0)
            else:
                label_ids.append(s[label])
            op = first_op + i
            for text in inputs:
                add_input_op(op)
                add_input_name(s[text])
        names_col.append(s[name])
        kernels.append(s[kernel])
        types.append(s[op_types.get(name, kernel)] if op_types else kernels[-1])
    flags[canonical_rows] |= LABEL_CANONICAL
    memory_stats = _memory_stats(raw, f, n)
    builder.extend("ops", name=names_col, op_type=types, kernel=kernels,
                   label=label_ids, start_ns=start, end_ns=end,
                   op_start_ns=op_start, op_end_ns=op_end, scheduled_ns=scheduled,
                   thread_id=f.scalar(_THREAD, n), device=device_ids, lane=np.full(n, UNASSIGNED),
                   step=np.full(n, step), block=blocks, flags=flags, **memory_stats)
    builder.extend("inputs", op=inputs_op, name=inputs_name)
    _add_outputs(builder, raw, f, first_op)
    _add_memory(builder, raw, f, first_op)


def _memory_stats(raw: bytes, f: Fields, n: int) -> dict[str, np.ndarray]:
    owner, starts, ends = f.spans(_MEMORY_STATS)
    columns = {k: np.zeros(n, np.int64) for k in
               ("temp_bytes", "device_temp_bytes", "persistent_bytes", "device_persistent_bytes")}
    if len(owner):
        stats = decode(raw, starts, ends)
        for column, number in (("temp_bytes", 1), ("device_temp_bytes", 2),
                               ("persistent_bytes", 3), ("device_persistent_bytes", 4)):
            columns[column][owner] = as_signed(stats.scalar(number, len(owner), np.uint64))
    return columns


def _add_outputs(builder: TraceBuilder, raw: bytes, f: Fields, first_op: int) -> None:
    owner, starts, ends = f.spans(_OUTPUT)
    count = len(owner)
    if not count:
        return
    outputs = decode(raw, starts, ends)
    flags = np.zeros(count, np.uint8)
    dtype = np.zeros(count, np.int64)
    shape_ids = np.zeros(count, np.int64)
    alloc = {k: np.zeros(count, np.int64) for k in
             ("requested_bytes", "allocated_bytes", "allocator", "allocation_id")}
    ptr = np.zeros(count, np.uint64)
    desc_owner, desc_starts, desc_ends = outputs.spans(3)
    if len(desc_owner):
        flags[desc_owner] |= OUT_HAS_DESCRIPTION
        desc = decode(raw, desc_starts, desc_ends)
        dtype[desc_owner] = desc.scalar(1, len(desc_owner))
        shape_owner, shape_starts, shape_ends = desc.spans(2)
        if len(shape_owner):
            rows = desc_owner[shape_owner]
            flags[rows] |= OUT_HAS_SHAPE
            shape_ids[rows] = intern_strings(raw, shape_starts, shape_ends, builder.strings, _shape_text)
        alloc_owner, alloc_starts, alloc_ends = desc.spans(4)
        if len(alloc_owner):
            rows = desc_owner[alloc_owner]
            flags[rows] |= OUT_HAS_ALLOCATION
            a = decode(raw, alloc_starts, alloc_ends)
            m = len(alloc_owner)
            alloc["requested_bytes"][rows] = as_signed(a.scalar(1, m, np.uint64))
            alloc["allocated_bytes"][rows] = as_signed(a.scalar(2, m, np.uint64))
            alloc["allocator"][rows] = _interned_per_message(builder, raw, a, 3, m)
            alloc["allocation_id"][rows] = as_signed(a.scalar(4, m, np.uint64))
            single = a.scalar(5, m) != 0
            flags[rows[single]] |= OUT_SINGLE_REFERENCE
            ptr[rows] = a.scalar(6, m, np.uint64)
    builder.extend("outputs", op=owner + first_op, slot=outputs.scalar(1, count), dtype=dtype,
                   shape=shape_ids, ptr=ptr, flags=flags, **alloc)


def _add_memory(builder: TraceBuilder, raw: bytes, f: Fields, first_op: int) -> None:
    owner, starts, ends = f.spans(_MEMORY)
    count = len(owner)
    if not count:
        return
    used = decode(raw, starts, ends)
    s = builder.strings
    first_row = builder.rows("memory")
    builder.extend("memory", op=owner + first_op,
                   allocator=_interned_per_message(builder, raw, used, 1, count),
                   total_bytes=as_signed(used.scalar(2, count, np.uint64)),
                   peak_bytes=as_signed(used.scalar(3, count, np.uint64)),
                   live_bytes=as_signed(used.scalar(4, count, np.uint64)),
                   allocator_bytes_in_use=as_signed(used.scalar(5, count, np.uint64)))
    rec_owner, rec_starts, rec_ends = used.spans(6)
    if len(rec_owner):
        records = decode(raw, rec_starts, rec_ends)
        m = len(rec_owner)
        builder.extend("allocations", memory=rec_owner + first_row,
                       time_ns=as_signed(records.scalar(1, m, np.uint64)) * 1000,
                       bytes=as_signed(records.scalar(2, m, np.uint64)))


def _shape_text(payload: bytes) -> str:
    """A serialized TensorShapeProto as ``"64,128"`` (``""`` for a scalar, ``"?"`` for
    unknown rank; unknown dims are ``-1``)."""
    shape = protos.TensorShapeProto.FromString(payload)
    return "?" if shape.unknown_rank else ",".join(str(d.size) for d in shape.dim)


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
    match = _RECV.search(label)
    if not match:
        return
    edge = match.group("edge")
    tensor = edge.split("_", 2)[2] if edge.startswith("edge_") and edge.count("_") >= 2 else edge
    builder.add_row("transfers", op=op, bytes=int(match.group("bytes")),
                    rate_bps=float(match.group("rate")) * _UNITS[match.group("unit")],
                    src=match.group("src"), dst=match.group("dst"), tensor=tensor)
