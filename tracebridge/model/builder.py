"""TraceBuilder: how readers and captures assemble a :class:`Trace`.

Readers append to plain Python lists (the fastest thing CPython offers per row) and call
:meth:`TraceBuilder.build` once; that turns the lists into typed columns, derives lanes
from timing where the source has no usable thread ids, derives step extents and the
allocator counters, and freezes everything.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from .accelerator import mark_tracer_records
from .devices import Device, parse_device
from .lanes import first_fit
from .schema import NO_STEP, TABLE_COLUMNS
from .table import Table
from .trace import Lane, Step, Trace

UNASSIGNED = -1
# Times (ns since the epoch, or since the profile start) are kept within +-2**62 ns (the
# years 1824 to 2116), so that a difference of any two, which writers and summaries
# compute, fits int64. Readers clip or reject corrupt times further out.
TIME_LIMIT_NS = 1 << 62
_TIME_COLUMNS = {"ops": ("start_ns", "end_ns", "op_start_ns", "op_end_ns", "scheduled_ns"),
                 "counters": ("time_ns",), "allocations": ("time_ns",)}


class Strings(dict):
    """Interning table: ``strings["MatMul"]`` returns its id, adding it on first use."""

    def __init__(self):
        super().__init__()
        self["" ] = 0

    def __missing__(self, text: str) -> int:
        index = len(self)
        self[text] = index
        return index

    def as_tuple(self) -> tuple[str, ...]:
        return tuple(self)  # dicts keep insertion order, which is id order


class TraceBuilder:
    """Accumulates rows for one trace. Column lists are public for fast readers:
    ``builder.columns["ops"]["start_ns"].append(...)``; :meth:`add_op` is the easy way."""

    def __init__(self, metadata: dict[str, Any] | None = None):
        self.strings = Strings()
        self._metadata: dict[str, Any] = dict(metadata or {})
        self.columns = {kind: {c: [] for c in cols} for kind, cols in TABLE_COLUMNS.items()}
        self._chunks: dict[str, list[dict[str, np.ndarray]]] = {kind: [] for kind in TABLE_COLUMNS}
        self._chunk_rows = dict.fromkeys(TABLE_COLUMNS, 0)  # rows in _chunks, kept (rows() is hot)
        self._blocks = 0  # device-stats blocks handed out so far (see ops.block)
        self._devices: dict[tuple[str, str | None], int] = {}
        self.device_list: list[Device] = []
        self._steps: list[dict[str, Any]] = []
        self._lane_names: dict[tuple[int, int], str] = {}  # (device, thread_id) -> name
        self.fixed_lanes: dict[tuple[int, str], int] = {}  # sources with real lanes
        self._lanes: list[Lane] = []

    # --- small objects --------------------------------------------------------------
    def device(self, name: str, host: str | None = None) -> int:
        key = (name, host)
        index = self._devices.get(key)
        if index is None:
            index = self._devices[key] = len(self.device_list)
            self.device_list.append(_parse_device(name, host))
        return index

    def step(self, number: int, name: str = "", start_ns: int | None = None,
             end_ns: int | None = None) -> int:
        """Declare a step; extents left as None are derived from its ops."""
        self._steps.append({"number": number, "name": name, "start_ns": start_ns, "end_ns": end_ns})
        return len(self._steps) - 1

    def new_block(self) -> int:
        """A new device-stats block number (``ops.block``): a writer of StepStats writes one
        DeviceStepStats per block, as the source had them."""
        self._blocks += 1
        return self._blocks - 1

    def name_lane(self, device: int, thread_id: int, name: str) -> None:
        """The name the source gives a thread, for the lanes derived from its ops."""
        self._lane_names[(device, thread_id)] = name

    def note(self, **entries: Any) -> None:
        """Metadata entries for the trace; a later value replaces an earlier one."""
        self._metadata.update(entries)

    def metadata_value(self, key: str, default: Any = None) -> Any:
        """A metadata entry noted so far (a reader summing over files adds to it)."""
        return self._metadata.get(key, default)

    def note_first(self, **entries: Any) -> None:
        """Metadata entries, where not noted yet (several files: the first one's stay)."""
        for key, value in entries.items():
            self._metadata.setdefault(key, value)

    def lane(self, device: int, name: str, thread_id: int | None = None) -> int:
        """A lane given by the source (an XSpace line); ops on it keep it as it is."""
        key = (device, name)
        index = self.fixed_lanes.get(key)
        if index is None:
            index = self.fixed_lanes[key] = len(self._lanes)
            self._lanes.append(Lane(device, name, thread_id))
        return index

    # --- rows -------------------------------------------------------------------------
    def add_op(self, *, name: str, op_type: str, start_ns: int, end_ns: int, device: int,
               kernel: str | None = None, label: str = "", inputs: tuple[str, ...] = (),
               op_start_ns: int | None = None, op_end_ns: int | None = None,
               scheduled_ns: int = 0, thread_id: int = 0, lane: int = UNASSIGNED,
               step: int = NO_STEP, block: int | None = None, flags: int = 0, category: int = 0,
               temp_bytes: int = 0, persistent_bytes: int = 0) -> int:
        s = self.strings
        ops = self.columns["ops"]
        index = self.rows("ops")
        row = {
            "name": s[name], "op_type": s[op_type], "kernel": s[kernel or op_type], "label": s[label],
            "start_ns": start_ns, "end_ns": end_ns,
            "op_start_ns": start_ns if op_start_ns is None else op_start_ns,
            "op_end_ns": end_ns if op_end_ns is None else op_end_ns,
            "scheduled_ns": scheduled_ns, "thread_id": thread_id, "device": device, "lane": lane,
            "step": step, "block": device if block is None else block, "flags": flags,
            "category": category,
            "temp_bytes": temp_bytes, "persistent_bytes": persistent_bytes,
            "device_temp_bytes": 0, "device_persistent_bytes": 0,
        }
        for column, value in row.items():
            ops[column].append(value)
        inputs_op, inputs_name = self.columns["inputs"]["op"], self.columns["inputs"]["name"]
        for text in inputs:
            inputs_op.append(index)
            inputs_name.append(s[text])
        return index

    def add_row(self, kind: str, /, **values: Any) -> int:
        """Append one row to a child table (outputs, memory, allocations, transfers, counters).
        String values are interned; columns not given are 0."""
        index = self.rows(kind)
        for column, values_list in self.columns[kind].items():
            value = values.get(column, 0)
            values_list.append(self.strings[value] if isinstance(value, str) else value)
        return index

    def extend(self, kind: str, /, **columns: Any) -> None:
        """Append many rows at once as columns (arrays or lists of equal length); columns
        not given are 0. String columns must already be ids."""
        self._flush(kind)
        dtypes = TABLE_COLUMNS[kind]
        unknown = set(columns) - set(dtypes)
        if unknown or not columns:
            raise ValueError(f"extend({kind!r}): unknown columns {sorted(unknown)}")
        rows = len(next(iter(columns.values())))
        self._chunk_rows[kind] += rows
        self._chunks[kind].append({c: np.asarray(columns[c], dtype=dtypes[c]) if c in columns
                                   else np.zeros(rows, dtype=dtypes[c]) for c in dtypes})

    def rows(self, kind: str) -> int:
        # A running count: summing the chunks on every call made a file of many small
        # steps (an event file with thousands of tagged RunMetadata) quadratic.
        current = self.columns[kind]
        return self._chunk_rows[kind] + len(current[next(iter(current))])

    @property
    def op_count(self) -> int:
        return self.rows("ops")

    def _flush(self, kind: str) -> None:
        current = self.columns[kind]
        if current[next(iter(current))]:
            dtypes = TABLE_COLUMNS[kind]
            self._chunk_rows[kind] += len(current[next(iter(current))])
            self._chunks[kind].append({c: np.asarray(v, dtype=dtypes[c]) for c, v in current.items()})
            self.columns[kind] = {c: [] for c in dtypes}

    # --- freezing -----------------------------------------------------------------------
    def build(self) -> Trace:
        tables = {}
        for kind, dtypes in TABLE_COLUMNS.items():
            self._flush(kind)
            chunks = self._chunks[kind]
            tables[kind] = {c: (chunks[0][c] if len(chunks) == 1 else
                                np.concatenate([chunk[c] for chunk in chunks]) if chunks else
                                np.zeros(0, dtype=dtypes[c])) for c in dtypes}
            self._chunks[kind] = []  # free the chunks early
            self._chunk_rows[kind] = 0
        _clip_times(tables)
        ops = tables["ops"]
        mark_tracer_records(ops, self.device_list, self.strings.as_tuple())
        lanes = self._assign_lanes(ops)
        steps = self._finish_steps(ops)
        if len(tables["counters"]["time_ns"]) == 0 and len(tables["allocations"]["time_ns"]):
            tables["counters"] = _counters_from_allocations(tables["memory"], tables["allocations"])
        for kind in ("inputs", "outputs", "memory", "transfers", "aliases", "event_stats"):
            _sort_by_parent(tables[kind], "op")
        _sort_by_parent(tables["allocations"], "memory")
        _sort_by_parent(tables["links"], "producer")
        return Trace(strings=self.strings.as_tuple(), devices=tuple(self.device_list),
                     lanes=lanes, steps=steps, tables={k: Table(v) for k, v in tables.items()},
                     metadata=self._metadata)

    def _finish_steps(self, ops: dict[str, np.ndarray]) -> tuple[Step, ...]:
        steps = []
        count = len(self._steps)
        if any(spec["start_ns"] is None or spec["end_ns"] is None for spec in self._steps):
            # Extents of all steps in one pass over the ops (one pass per step would be
            # quadratic for a file with thousands of steps).
            step_col = ops["step"]
            mine = np.flatnonzero((step_col >= 0) & (step_col < count))
            owner = step_col[mine].astype(np.int64)
            lows = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
            highs = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
            np.minimum.at(lows, owner, ops["start_ns"][mine])
            np.maximum.at(highs, owner, ops["end_ns"][mine])
            has_ops = np.bincount(owner, minlength=count) > 0
        for index, spec in enumerate(self._steps):
            lo, hi = spec["start_ns"], spec["end_ns"]
            if lo is None or hi is None:
                if has_ops[index]:
                    lo = int(lows[index]) if lo is None else lo
                    hi = int(highs[index]) if hi is None else hi
                else:
                    lo = hi = lo if lo is not None else (hi or 0)
            lo = min(max(int(lo), -TIME_LIMIT_NS), TIME_LIMIT_NS - 1)
            hi = min(max(int(hi), -TIME_LIMIT_NS), TIME_LIMIT_NS - 1)
            steps.append(Step(spec["number"], lo, hi, spec["name"]))
        return tuple(steps)

    def _assign_lanes(self, ops: dict[str, np.ndarray]) -> tuple[Lane, ...]:
        """Give every op without a source lane a derived one, then number lanes by device.

        Ops are grouped by (device, thread_id); inside a group, overlapping ops go to
        separate lanes, first fit in start order. TF 2.21 records thread_id 0 for every
        op, so in practice lanes come from the timing alone.
        """
        lane = ops["lane"]
        pending = np.flatnonzero(lane == UNASSIGNED)
        lanes = list(self._lanes)
        if len(pending):
            device, thread = ops["device"][pending], ops["thread_id"][pending]
            start, end = ops["start_ns"][pending], ops["end_ns"][pending]
            order = np.lexsort((end, start, thread, device))
            groups = defaultdict(list)
            keys = np.stack([device[order], thread[order].astype(np.int64)], axis=1)
            boundaries = np.flatnonzero(np.any(np.diff(keys, axis=0) != 0, axis=1)) + 1
            for chunk in np.split(order, boundaries):
                d, t = int(device[chunk[0]]), int(thread[chunk[0]])
                sub = first_fit(start[chunk], end[chunk])
                groups[(d, t)] = (chunk, sub)
            threads_per_device = defaultdict(set)
            for d, t in groups:
                threads_per_device[d].add(t)
            for (d, t), (chunk, sub) in sorted(groups.items()):
                real_thread = len(threads_per_device[d]) > 1 or t != 0
                base = len(lanes)
                for k in range(int(sub.max()) + 1):
                    if real_thread:
                        name = self._lane_names.get((d, t), f"thread {t}")
                        name = name if k == 0 else f"{name} ({k})"
                    else:
                        name = f"lane {k}"
                    lanes.append(Lane(d, name, t if real_thread else None))
                lane[pending[chunk]] = base + sub
        # Number lanes device by device, keeping each device's lanes in creation order.
        order = sorted(range(len(lanes)), key=lambda i: (lanes[i].device, i))
        renumber = np.empty(len(lanes) + 1, dtype=np.int32)
        renumber[order] = np.arange(len(order), dtype=np.int32)
        if len(lane) and order != list(range(len(order))):  # (a reader's lanes come device by device)
            ops["lane"] = renumber[lane]
        return tuple(lanes[i] for i in order)


def _parse_device(name: str, host: str | None) -> Device:
    try:
        return parse_device(name, host)
    except ValueError:  # a part int() refuses: "²" passes str.isdigit(), 5,000 digits exceed int()
        return Device(name=name, host=host)


def _clip_times(tables: dict[str, dict[str, np.ndarray]]) -> None:
    checked = set()  # a column that is another's too (an op's start as its op_start) is looked at once
    for kind, names in _TIME_COLUMNS.items():
        for name in names:
            column = tables[kind][name]
            if id(column) in checked:
                continue
            if len(column) and (column.min() < -TIME_LIMIT_NS or column.max() >= TIME_LIMIT_NS):
                tables[kind][name] = np.clip(column, -TIME_LIMIT_NS, TIME_LIMIT_NS - 1)
            else:
                checked.add(id(column))


def _sort_by_parent(columns: dict[str, np.ndarray], parent: str) -> None:
    keys = columns[parent]
    if len(keys) and np.any(keys[1:] < keys[:-1]):
        order = np.argsort(keys, kind="stable")
        for name in columns:
            columns[name] = columns[name][order]


def _counters_from_allocations(memory: dict[str, np.ndarray],
                               allocations: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Bytes in use per allocator over time: the running sum of allocation records
    (allocations positive, frees negative), starting from zero at the first record."""
    allocator = memory["allocator"][allocations["memory"]]
    time_ns, amount = allocations["time_ns"], allocations["bytes"]
    order = np.lexsort((time_ns, allocator))
    allocator, time_ns, amount = allocator[order], time_ns[order], amount[order]
    in_use = np.cumsum(amount)
    starts = np.flatnonzero(np.r_[True, allocator[1:] != allocator[:-1]])
    group_offset = np.repeat(in_use[starts] - amount[starts], np.diff(np.r_[starts, len(amount)]))
    return {"allocator": allocator, "time_ns": time_ns, "bytes_in_use": in_use - group_offset}
