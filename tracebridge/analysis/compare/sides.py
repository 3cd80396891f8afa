"""One run of a comparison: its ops by name, with their times per step, kernel types,
order and dataflow, ready for alignment."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ...errors import OptionError
from ...model.accelerator import device_rows
from ...model.accelerator import self_times as accelerator_self_times
from ...model.trace import Trace
from ..common.kernels import plain_kernel
from ..common.types import TimeBasis
from ..common.xla import xla_ops
from ..graphs.recorded_graph import decode_graph, graph_node_name
from ..run.summary import counted_rows


# --- the time compared: a layer over the rows, so the alignment stays what it is ----------
def chosen_time(control: Trace, test: Trace, time: TimeBasis | str) -> TimeBasis:
    """The time both runs are compared on: ``time`` itself, or for ``AUTO`` device time
    where both runs have some. A string is read as a :class:`TimeBasis` value."""
    time = TimeBasis.parse(time)
    has_device = [bool(device_rows(t.ops["category"], t.ops["flags"]).any()) for t in (control, test)]
    if time is TimeBasis.DEVICE and not all(has_device):
        side = "control" if not has_device[0] else "test"
        raise OptionError(f"time='device': the {side} run has no device activity (kernels or copies)")
    if time is TimeBasis.AUTO:
        return TimeBasis.DEVICE if all(has_device) else TimeBasis.HOST
    return time


def _timed_rows(trace: Trace, time: TimeBasis) -> tuple[np.ndarray, np.ndarray]:
    """The rows compared and each one's time: device rows and their self time, or the
    counted host rows and their durations."""
    ops = trace.ops
    if time is TimeBasis.DEVICE:
        mask = device_rows(ops["category"], ops["flags"])
        durations = np.zeros(len(trace), dtype=np.int64)
        durations[mask] = accelerator_self_times(ops["start_ns"], ops["end_ns"], ops["lane"], np.flatnonzero(mask))
        return mask, durations
    mask, _ = counted_rows(trace)
    return mask, (ops["end_ns"] - ops["start_ns"]).astype(np.int64)


def self_times(trace: Trace) -> np.ndarray:
    """Each row's duration less the rows nested in it on the same lane (an XSpace host
    annotation encloses the work it starts; TF op kernels on one lane do not nest)."""
    ops = trace.ops
    return accelerator_self_times(ops["start_ns"], ops["end_ns"], ops["lane"], np.arange(len(trace)))


class Side:
    def __init__(self, trace: Trace):
        self.trace = trace
        self.names: list[str] = []          # distinct op names, in first-seen order
        self.type: dict[str, str] = {}      # the kernel as recorded
        self.plain_type: dict[str, str] = {}  # the kernel by its name without oneDNN
        self.total: dict[str, int] = {}
        self.self_time: dict[str, int] = {}
        self.per_step: dict[str, np.ndarray] = {}
        self.count: dict[str, int] = {}
        self.order: dict[str, int] = {}     # position of first occurrence within its step
        self.rewritten: dict[str, str] = {}
        self.producers: dict[str, tuple[str, ...]] = {}  # data inputs, where the trace has them
        self.consumers: dict[str, list[str]] = defaultdict(list)
        self.all_time = 0
        self.graph = decode_graph(trace.metadata)


def prepare_side(trace: Trace, rules, steps, time: TimeBasis = TimeBasis.HOST) -> Side:
    """``trace``'s ops ready for alignment, timed over the steps at ``steps`` (positions in
    ``trace.steps``; a number: the steps after that many, all where the run is shorter)."""
    side = Side(trace)
    mask, timed = _timed_rows(trace, time)
    ops = trace.ops
    if isinstance(steps, int):
        steps = range(steps, len(trace.steps)) if len(trace.steps) > steps else range(len(trace.steps))
    step_positions = set(steps)
    if step_positions:
        mask = mask & np.isin(ops["step"], sorted(step_positions))
    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((ops["start_ns"][rows], ops["step"][rows]))]
    durations = timed[rows]
    own = durations if time is TimeBasis.DEVICE else self_times(trace)[rows]
    names = [trace.strings[i] for i in ops["name"][rows].tolist()]
    kernels = [trace.strings[i] for i in ops["kernel"][rows].tolist()]
    step_index = ops["step"][rows]
    step_slots = {p: k for k, p in enumerate(sorted(step_positions))} if step_positions else {}
    n_steps = max(len(step_slots), 1)
    position_in_step: dict[int, int] = defaultdict(int)
    for name, kernel, duration, self_ns, step in zip(names, kernels, durations.tolist(), own.tolist(),
                                                     step_index.tolist()):
        if name not in side.total:
            side.names.append(name)
            side.type[name] = kernel
            side.plain_type[name] = plain_kernel(kernel)
            side.total[name] = 0
            side.self_time[name] = 0
            side.count[name] = 0
            side.per_step[name] = np.zeros(n_steps)
            side.order[name] = position_in_step[step]
            rewritten = name
            for pattern, replacement in rules:
                rewritten = pattern.sub(replacement, rewritten)
            side.rewritten[name] = rewritten
        position_in_step[step] += 1
        side.total[name] += duration
        side.self_time[name] += self_ns
        side.count[name] += 1
        side.per_step[name][step_slots.get(step, 0)] += duration
        side.all_time += duration
    # An XLA row's kernel is its HLO instruction (``convolution.5``): the type the rules
    # compare is the TF op's it stands for, which the reader gave the row.
    linked = set(xla_ops(trace)) & set(side.total)
    for name, row in zip(names, rows.tolist()):
        if name in linked:
            side.plain_type[name] = trace.strings[int(ops["op_type"][row])]
            linked.discard(name)
    _dataflow(side, rows, names)
    if side.graph:  # positions by the graph, not by timing: the same graphs, the same pairs
        last = len(side.graph.order)
        side.order = {name: side.graph.order.get(graph_node_name(name), last + side.order[name]) for name in side.names}
    if not side.producers and side.graph:  # XSpace records no inputs: the graph has them
        for name in side.names:
            side.producers[name] = side.graph.producers.get(name, ())
            for producer in side.producers[name]:
                side.consumers[producer].append(name)
    return side


def _dataflow(side: Side, rows: np.ndarray, names: list[str]) -> None:
    """Each op's data inputs (``name:1`` as ``name``; control inputs left out) and consumers,
    from its first run. XSpace traces record none."""
    trace = side.trace
    if not trace.inputs.rows:
        return
    first = {}
    for row, name in zip(rows.tolist(), names):
        first.setdefault(name, row)
    op_of_input, input_name = trace.inputs["op"], trace.inputs["name"]
    for name, row in first.items():
        lo, hi = np.searchsorted(op_of_input, [row, row + 1])
        inputs = tuple(dict.fromkeys(
            text.split(":")[0] for text in (trace.strings[i] for i in input_name[lo:hi].tolist())
            if not text.startswith("^")))
        side.producers[name] = inputs
        for producer in inputs:
            side.consumers[producer].append(name)


__all__ = ["Side", "chosen_time", "prepare_side", "self_times"]
