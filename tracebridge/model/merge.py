"""Merging traces: several captures (hosts, Keras modes, profiling sessions) into one.

Devices with the same name and host become one device; lanes of a device with the same
name become one lane; steps are kept side by side; every table's references (string ids,
op rows, memory rows, devices, lanes, steps, blocks) are renumbered.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .builder import Strings
from .schema import NO_STEP, TABLE_COLUMNS, is_string_column
from .table import Table
from .trace import Lane, Trace

_OP_REFERENCES = {"ops": (), "inputs": ("op",), "outputs": ("op",), "memory": ("op",),
                  "transfers": ("op",), "aliases": ("op",), "event_stats": ("op",),
                  "links": ("producer", "consumer"), "allocations": (), "counters": ()}


def merge_traces(traces: Sequence[Trace], metadata: dict | None = None) -> Trace:
    """One trace holding all of ``traces``; metadata is the first's, updated with ``metadata``."""
    if not traces:
        raise ValueError("nothing to merge")
    strings = Strings()
    devices: dict[tuple, int] = {}
    device_list = []
    lanes: dict[tuple, int] = {}
    lane_list: list[Lane] = []
    steps = []
    columns: dict[str, dict[str, list[np.ndarray]]] = {k: {c: [] for c in cols}
                                                         for k, cols in TABLE_COLUMNS.items()}
    op_offset = memory_offset = block_offset = 0
    for trace in traces:
        string_map = np.array([strings[text] for text in trace.strings], dtype=np.int64)
        device_map = np.empty(len(trace.devices), dtype=np.int64)
        for i, device in enumerate(trace.devices):
            key = (device.name, device.host)
            if key not in devices:
                devices[key] = len(device_list)
                device_list.append(device)
            device_map[i] = devices[key]
        lane_map = np.empty(len(trace.lanes), dtype=np.int64)
        for i, lane in enumerate(trace.lanes):
            key = (int(device_map[lane.device]), lane.name, lane.thread_id)
            if key not in lanes:
                lanes[key] = len(lane_list)
                lane_list.append(Lane(key[0], lane.name, lane.thread_id))
            lane_map[i] = lanes[key]
        step_map = np.append(np.arange(len(trace.steps), dtype=np.int64) + len(steps), NO_STEP)
        steps.extend(trace.steps)
        for kind, cols in TABLE_COLUMNS.items():
            table = trace.table(kind)
            for column in cols:
                values = table[column].astype(np.int64) if table[column].dtype.kind in "iu" else table[column]
                if is_string_column(kind, column):
                    values = string_map[values]
                elif column in _OP_REFERENCES[kind]:
                    values = values + op_offset
                elif kind == "allocations" and column == "memory":
                    values = values + memory_offset
                elif kind == "ops" and column == "device":
                    values = device_map[values]
                elif kind == "ops" and column == "lane":
                    values = lane_map[values]
                elif kind == "ops" and column == "step":
                    values = step_map[values]
                elif kind == "ops" and column == "block":
                    values = values + block_offset
                columns[kind][column].append(values)
        op_offset += len(trace)
        memory_offset += trace.memory.rows
        block_offset += int(trace.ops["block"].max()) + 1 if len(trace) else 0
    tables = {}
    for kind, cols in TABLE_COLUMNS.items():
        tables[kind] = Table({c: np.concatenate(columns[kind][c]).astype(cols[c]) for c in cols})
    # Lanes must stay grouped by device for writers: renumber in (device, first seen) order.
    order = sorted(range(len(lane_list)), key=lambda i: (lane_list[i].device, i))
    renumber = np.empty(len(lane_list) + 1, dtype=np.int64)
    renumber[order] = np.arange(len(order))
    ops = tables["ops"]
    if len(ops["lane"]):
        tables["ops"] = ops.with_columns(lane=renumber[ops["lane"]].astype(np.int32))
    merged_metadata = {**traces[0].metadata, "merged_traces": len(traces), **(metadata or {})}
    return Trace(strings=strings.as_tuple(), devices=tuple(device_list),
                 lanes=tuple(lane_list[i] for i in order), steps=tuple(steps), tables=tables,
                 metadata=merged_metadata)
