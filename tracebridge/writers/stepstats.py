"""The model back to RunMetadata / StepStats, as TensorFlow's own tools read them.

What TF 2.21 fills survives a round trip field by field: nanosecond times are written
with the micros TF derives from them (``rel_micros = (start + rel) // 1000 - start // 1000``,
which is how the executor truncates both ends), micros-only records stay micros-only,
and outputs, memory and memory_stats keep what was set. Ops that came from a source
without labels (XSpace) get TF's label form ``name = Type(in0, in1)``.
"""

from __future__ import annotations

import os

import numpy as np

from .. import protos
from .._files import atomic_output, write_bytes
from ..model.schema import Category, OpFlag, OutputFlag
from ..model.trace import Trace

# The flags as plain ints: they are tested for every node and output (model/schema.py says why).
_CANONICAL, _NANOS, _SCHEDULED, _MEMORY_STATS = map(int, (OpFlag.LABEL_CANONICAL, OpFlag.HAS_NANOS,
                                                         OpFlag.HAS_SCHEDULED, OpFlag.HAS_MEMORY_STATS))
_DESCRIPTION, _SHAPE, _ALLOCATION, _SINGLE_REFERENCE = map(int, (OutputFlag.HAS_DESCRIPTION, OutputFlag.HAS_SHAPE,
                                                                  OutputFlag.HAS_ALLOCATION, OutputFlag.SINGLE_REFERENCE))


def write_run_metadata(trace: Trace, path: str | os.PathLike) -> None:
    """Binary RunMetadata (``.pb``), which TF's ``timeline.Timeline`` accepts."""
    write_bytes(path, to_run_metadata(trace).SerializeToString(deterministic=True))


def write_pbtxt(trace: Trace, path: str | os.PathLike) -> None:
    """RunMetadata as protobuf text (``.pbtxt``), as ``str(run_metadata)`` prints it."""
    with atomic_output(path, compress=False) as out:
        out.write(str(to_run_metadata(trace)).encode("utf-8"))


def to_run_metadata(trace: Trace):
    """All node executions of ``trace`` in one RunMetadata, one DeviceStepStats per block."""
    run_metadata = protos.RunMetadata()
    _fill_step_stats(_Prepared(trace), run_metadata.step_stats, np.flatnonzero(node_rows(trace)))
    return run_metadata


def run_metadata_per_step(trace: Trace):
    """``(step, RunMetadata)`` for each step, as ``FileWriter.add_run_metadata`` took them."""
    step_column = trace.ops["step"]
    nodes = node_rows(trace)
    prepared = _Prepared(trace)  # once for all steps, not once a step
    for position, step in enumerate(trace.steps):
        run_metadata = protos.RunMetadata()
        _fill_step_stats(prepared, run_metadata.step_stats, np.flatnonzero(nodes & (step_column == position)))
        yield step, run_metadata


def node_rows(trace: Trace) -> np.ndarray:
    """Rows that are node executions in StepStats' sense: TF ops, device kernels and copies.
    XSpace host annotations (``EagerExecute``, Python frames, tf.data) are not; a trace with
    nothing else (host_tracer_level 1) is written whole rather than empty."""
    rows = np.isin(trace.ops["category"], (Category.OP, Category.DEVICE, Category.MEMCPY))
    return rows if rows.any() else np.ones(len(trace), dtype=bool)


class _Prepared:
    """A trace's columns as Python lists and its child-table offsets, made once per trace."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.columns = {name: trace.ops[name].tolist() for name in trace.ops}
        self.inputs_offsets = trace.input_offsets()
        self.input_names = trace.inputs["name"].tolist()
        self.outputs_offsets = np.searchsorted(trace.outputs["op"], np.arange(len(trace) + 1))
        self.memory_offsets = np.searchsorted(trace.memory["op"], np.arange(len(trace) + 1))
        self.record_offsets = np.searchsorted(trace.allocations["memory"], np.arange(trace.memory.rows + 1))
        aliases = trace.table("aliases")
        self.aliases = dict(zip(aliases["op"].tolist(), aliases["name"].tolist()))

    def node_texts(self, i: int) -> tuple[str, str]:
        """``node_name`` and ``timeline_label`` of row ``i`` as StepStats holds them: GPU
        tracer records keep their ``name:kernel`` (or annotated) node name, and canonical
        labels (``name = Kernel(inputs)``, not stored) are rebuilt."""
        strings, columns = self.trace.strings, self.columns
        name, kernel = strings[columns["name"][i]], strings[columns["kernel"][i]]
        if i in self.aliases:
            name = strings[self.aliases[i]]
        elif self.trace.devices[columns["device"][i]].stream is not None and ":" not in name:
            name = f"{name}:{kernel}"
        if columns["flags"][i] & _CANONICAL:
            inputs = self.input_names[self.inputs_offsets[i]:self.inputs_offsets[i + 1]]
            return name, f"{name} = {kernel}({', '.join(strings[n] for n in inputs)})"
        return name, strings[columns["label"][i]]


def node_texts(trace: Trace) -> tuple[list[str], list[str]]:
    """Every row's ``node_name`` and ``timeline_label`` as :func:`to_run_metadata` writes them."""
    prepared = _Prepared(trace)
    pairs = [prepared.node_texts(i) for i in range(len(trace))]
    return [name for name, _ in pairs], [label for _, label in pairs]


def _fill_step_stats(prepared: _Prepared, step_stats, rows: np.ndarray) -> None:
    trace = prepared.trace
    columns = prepared.columns
    outputs_offsets, memory_offsets = prepared.outputs_offsets, prepared.memory_offsets
    record_offsets = prepared.record_offsets
    blocks = trace.ops["block"][rows]
    # One DeviceStepStats per block, in order of first appearance.
    _, first = np.unique(blocks, return_index=True)
    block_order = blocks[np.sort(first)]
    for block in block_order.tolist():
        members = rows[blocks == block]
        device = trace.devices[columns["device"][members[0]]]
        dev_stats = step_stats.dev_stats.add(device=device.name)
        _thread_names(trace, dev_stats, members)
        for i in members.tolist():
            node = dev_stats.node_stats.add()
            node.node_name, node.timeline_label = prepared.node_texts(i)
            _set_times(node, columns, i)
            if columns["thread_id"][i]:
                node.thread_id = columns["thread_id"][i]
            if columns["flags"][i] & _MEMORY_STATS:
                stats = node.memory_stats
                stats.SetInParent()
                stats.temp_memory_size = columns["temp_bytes"][i]
                stats.persistent_memory_size = columns["persistent_bytes"][i]
                stats.device_temp_memory_size = columns["device_temp_bytes"][i]
                stats.device_persistent_memory_size = columns["device_persistent_bytes"][i]
            for row in range(outputs_offsets[i], outputs_offsets[i + 1]):
                _add_output(trace, node, row)
            for row in range(memory_offsets[i], memory_offsets[i + 1]):
                _add_memory(trace, node, row, record_offsets)


def _thread_names(trace: Trace, dev_stats, members: np.ndarray) -> None:
    for lane_index in set(trace.ops["lane"][members].tolist()):
        lane = trace.lanes[lane_index]
        if lane.thread_id is not None and 0 <= lane.thread_id < 2**32 and lane.name \
                and not lane.name.startswith("thread "):
            dev_stats.thread_names[lane.thread_id] = lane.name


def _set_times(node, columns, i: int) -> None:
    start, end = columns["start_ns"][i], columns["end_ns"][i]
    op_start, op_end = columns["op_start_ns"][i], columns["op_end_ns"][i]
    flags = columns["flags"][i]
    start_us = start // 1000
    node.all_start_micros = start_us
    node.op_start_rel_micros = op_start // 1000 - start_us
    node.op_end_rel_micros = op_end // 1000 - start_us
    node.all_end_rel_micros = end // 1000 - start_us
    if flags & _SCHEDULED:
        node.scheduled_micros = columns["scheduled_ns"][i] // 1000
    if flags & _NANOS:
        node.all_start_nanos = start
        node.op_start_rel_nanos = op_start - start
        node.op_end_rel_nanos = op_end - start
        node.all_end_rel_nanos = end - start
        if flags & _SCHEDULED:
            node.scheduled_nanos = columns["scheduled_ns"][i]


def _add_output(trace: Trace, node, row: int) -> None:
    out = trace.outputs
    flags = int(out["flags"][row])
    output = node.output.add()
    output.slot = int(out["slot"][row])
    if not flags & _DESCRIPTION:
        return
    description = output.tensor_description
    description.SetInParent()
    description.dtype = int(out["dtype"][row])
    if flags & _SHAPE:
        shape = description.shape
        shape.SetInParent()
        text = trace.strings[out["shape"][row]]
        if text == "?":
            shape.unknown_rank = True
        else:
            for size in text.split(",") if text else ():
                shape.dim.add(size=int(size))
    if flags & _ALLOCATION:
        allocation = description.allocation_description
        allocation.SetInParent()
        allocation.requested_bytes = int(out["requested_bytes"][row])
        allocation.allocated_bytes = int(out["allocated_bytes"][row])
        allocation.allocator_name = trace.strings[out["allocator"][row]]
        allocation.allocation_id = int(out["allocation_id"][row])
        allocation.has_single_reference = bool(flags & _SINGLE_REFERENCE)
        allocation.ptr = int(out["ptr"][row])


def _add_memory(trace: Trace, node, row: int, record_offsets: np.ndarray) -> None:
    memory, records = trace.memory, trace.allocations
    used = node.memory.add()
    used.allocator_name = trace.strings[memory["allocator"][row]]
    used.total_bytes = int(memory["total_bytes"][row])
    used.peak_bytes = int(memory["peak_bytes"][row])
    used.live_bytes = int(memory["live_bytes"][row])
    used.allocator_bytes_in_use = int(memory["allocator_bytes_in_use"][row])
    for r in range(record_offsets[row], record_offsets[row + 1]):
        used.allocation_records.add(alloc_micros=int(records["time_ns"][r]) // 1000,
                                    alloc_bytes=int(records["bytes"][r]))
