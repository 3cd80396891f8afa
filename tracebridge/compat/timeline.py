"""``tensorflow.python.client.timeline`` without TensorFlow.

Legacy scripts turn ``run_metadata.step_stats`` into a Chrome trace with
``timeline.Timeline(step_stats, graph).generate_chrome_trace_format()``. The codemod
points their import here, so this module offers the same names (``Timeline``,
``StepStatsAnalysis``, ``AllocationMaximum``) and, for the same StepStats, returns the
same text as TF 2.21's module, character for character. Scripts that diff or
post-process those files then keep working, and reading a trace never pays for
importing TensorFlow.

What "the same" takes, since TF's output is the specification (each point is
checked against TF in ``tests/test_compat_timeline.py``):

* process ids: 0 is "Allocators", then two per ``dev_stats`` entry in order ("<device>
  Compute", "<device> Tensors"). Two entries naming the same device both get their
  pids, but all their events go to the later entry's pids.
* thread ids are lanes, not the recorded ``thread_id``: per device, each node takes the
  first lane whose last node ended strictly before the node starts. Lane 0 starts
  "ended at 0", so a node starting at 0 opens lane 1.
* every output of every node is a tensor named ``node`` (output 0) or ``node:i``; all
  tensors exist before any input is looked up, so order in the StepStats does not
  matter. A name produced twice keeps its first place in the order but takes the later
  producer and the object id "number of distinct tensors so far", which can repeat.
* inputs come from the label ``name = Op(in0, in1)``; one not found loses a ``/_N``
  suffix (a Send/Recv that partitioning added). GPU tracer devices (``/stream:``,
  ``/memcpy``) and ``RecvTensor`` nodes have no inputs; a kernel's name and op come
  from ``name:op`` or from ``@@name:op#`` in its label.
* a flow arrow is drawn only between different (pid, tid) pairs; ids count from 0.
* memory: a tensor lives from its producer's start to the latest of its producer's end
  and its consumers' ends minus 1; per allocator, changes sorted by (time, bytes, name)
  give a running total. A free of 0 bytes counts as an allocation for the live set.
* JSON: ``json.dumps(indent=4, separators=(',', ': '))``, ASCII-escaped, metadata first.

Where this module differs on purpose: it never changes the caller's message (TF
writes the lanes into ``thread_id``), each analysis starts afresh (TF appends a second
call's events to the first's), an unknown ``op_time`` is an error (TF treats it as
"all"), and ROCm builds' extra ``kernel`` arg is not emitted (it depends on how TF was
built, which this module cannot ask without importing it). ``graph`` is accepted and
ignored, as TF ignores it.
"""

from __future__ import annotations

import json
import logging
import re
from json.encoder import encode_basestring_ascii
from typing import NamedTuple

from google.protobuf.message import DecodeError, Message

from .. import protos
from ..errors import TraceFormatError
from ..model.trace import Trace

__all__ = ["AllocationMaximum", "StepStatsAnalysis", "Timeline"]

_log = logging.getLogger(__name__)

# "name = Op(in0, in1)". The groups are greedy and the match is not anchored at the end,
# exactly as TF reads labels, so odd labels (an " = " or parentheses inside a name)
# split where TF splits them.
_OP_LABEL = re.compile(r"(.*) = (.*)\((.*)\)")
_OP_TIMES = ("schedule", "gpu", "all")


class AllocationMaximum(NamedTuple):
    """An allocator's peak: when (micros), how many bytes, and the tensors live then."""

    timestamp: int
    num_bytes: int
    tensors: set


class StepStatsAnalysis(NamedTuple):
    """``chrome_trace.format_to_string(pretty)`` gives the JSON; ``allocator_maximums``
    maps allocator names to :class:`AllocationMaximum` (empty unless memory was shown)."""

    chrome_trace: _ChromeTrace
    allocator_maximums: dict


class Timeline:
    """A Chrome trace of one StepStats, as TF's ``timeline.Timeline`` makes it.

    ``step_stats``: a StepStats or RunMetadata message (TensorFlow's or tracebridge's),
    either one serialized, or a :class:`tracebridge.Trace`. ``graph`` is ignored, as in TF.
    Raises :class:`TraceFormatError` for anything else.
    """

    def __init__(self, step_stats, graph=None) -> None:
        self._step_stats = _as_step_stats(step_stats)

    def analyze_step_stats(self, show_dataflow: bool = True, show_memory: bool = True,
                           op_time: str = "schedule") -> StepStatsAnalysis:
        """Events for the step. ``op_time``: "schedule" (as recorded), "all" (each op
        stretched to the end of its GPU kernels) or "gpu" (the span of its kernels)."""
        if op_time not in _OP_TIMES:
            raise ValueError(f"op_time must be one of {', '.join(_OP_TIMES)}, not {op_time!r}")
        return _Analysis(self._step_stats, op_time).run(show_dataflow, show_memory)

    def generate_chrome_trace_format(self, show_dataflow: bool = True, show_memory: bool = False,
                                     op_time: str = "schedule") -> str:
        """The Chrome trace JSON text (indented, as TF writes it)."""
        analysis = self.analyze_step_stats(show_dataflow, show_memory, op_time)
        return analysis.chrome_trace.format_to_string(pretty=True)


def _as_step_stats(source):
    """tracebridge's own StepStats message for any accepted input; the caller's object is
    only read (a TF message is serialized, ours is used as it is)."""
    if isinstance(source, protos.StepStats):
        return source
    if isinstance(source, Trace):
        return source.to_run_metadata().step_stats
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _parse_serialized(bytes(source))
    if isinstance(source, Message):
        if hasattr(source, "dev_stats"):
            try:
                return protos.StepStats.FromString(source.SerializeToString())
            except DecodeError as error:
                raise TraceFormatError(f"{type(source).__name__} is not a StepStats: {error}") from None
        if hasattr(source, "step_stats"):
            return _as_step_stats(source.step_stats)
    raise TraceFormatError(f"Timeline takes a StepStats, a RunMetadata, either one serialized, or a "
                           f"Trace, not {type(source).__name__} (to read a file, use tracebridge.load)")


def _parse_serialized(data: bytes):
    """Serialized StepStats or RunMetadata. Both begin with field 1, so the wire format
    alone does not tell them apart: the reading that yields printable device names wins
    (read the wrong way, a device name is a nested message's bytes, or fails to parse)."""
    for message_type in (protos.StepStats, protos.RunMetadata):
        try:
            message = message_type.FromString(data)
        except DecodeError:
            continue
        step_stats = message if message_type is protos.StepStats else message.step_stats
        devices = [dev.device for dev in step_stats.dev_stats]
        if devices and all(name and name.isprintable() for name in devices):
            return step_stats
    raise TraceFormatError("bytes are neither a serialized StepStats nor a RunMetadata with step stats")


def _is_gpu_tracer(device: str) -> bool:
    return "/stream:" in device or "/memcpy" in device


def _kernel_name(label: str, node_name: str) -> tuple[str, str]:
    """(op name, op type) of a GPU tracer record: ``@@name:op#`` in the label if there is
    one (the '#' must be the label's first), else the node name ``name:op``."""
    at, hash_mark = label.find("@@"), label.find("#")
    if at >= 0 and hash_mark > at + 2:
        node_name = label[at + 2:hash_mark]
    name, colon, rest = node_name.partition(":")
    return name, rest.partition(":")[0] if colon else "unknown"


def _op_and_inputs(label: str) -> tuple[str, list[str]]:
    match = _OP_LABEL.match(label)
    if match is None:
        return "unknown", []
    inputs = match.group(3)
    return match.group(2), inputs.split(", ") if inputs else []


class _Tensor:
    """One tensor's life: who made it (for flow arrows) and when it was last used."""

    __slots__ = ("object_id", "pid", "created", "last_use", "producer", "output")

    def __init__(self, object_id: int, pid: int, created: int, producer: tuple[int, int, int], output):
        self.object_id = object_id
        self.pid = pid                # the device's "Tensors" process
        self.created = created        # producer's start
        self.last_use = producer[0]   # producer's end, later consumers' end - 1
        self.producer = producer      # (end, compute pid, lane)
        self.output = output          # the NodeOutput message: size and description


class _Analysis:
    """One pass over a StepStats; the node fields are copied out once as tuples
    ``(name, start, duration, label, outputs)`` so that ``op_time`` can change times
    without touching the message."""

    def __init__(self, step_stats, op_time: str):
        self.devices = [(dev.device, [(n.node_name, n.all_start_micros, n.all_end_rel_micros, n.timeline_label,
                                       n.output) for n in dev.node_stats])
                        for dev in step_stats.dev_stats]
        if op_time != "schedule":
            self.devices = _stretch_to_kernels(self.devices, gpu_only=op_time == "gpu")
        self.metadata = [_process_name("Allocators", 0)]
        self.pids = {}
        for index, (device, _) in enumerate(self.devices):
            compute, tensors = 2 * index + 1, 2 * index + 2
            self.pids[device] = compute, tensors  # a repeated device name: the last pids win
            self.metadata += [_process_name(device + " Compute", compute),
                              _process_name(device + " Tensors", tensors)]
        self.lanes = [_lanes(nodes) for _, nodes in self.devices]
        self.events = []
        self.tensors: dict[str, _Tensor] = {}

    def run(self, show_dataflow: bool, show_memory: bool) -> StepStatsAnalysis:
        self._add_tensors(show_memory)
        self._add_ops(show_dataflow)
        maximums = self._add_memory() if show_memory else {}
        return StepStatsAnalysis(_ChromeTrace(self.metadata, self.events), maximums)

    def _add_tensors(self, show_memory: bool) -> None:
        tensors, events = self.tensors, self.events
        for (device, nodes), lanes in zip(self.devices, self.lanes):
            compute_pid, tensors_pid = self.pids[device]
            for (name, start, duration, _, outputs), tid in zip(nodes, lanes):
                end = start + duration
                for index, output in enumerate(outputs):
                    tensor_name = f"{name}:{index}" if index else name
                    tensor = _Tensor(len(tensors), tensors_pid, start, (end, compute_pid, tid), output)
                    tensors[tensor_name] = tensor
                    if show_memory:
                        description = str(output.tensor_description).replace('"', "")
                        events.append({"ph": "N", "cat": "Tensor", "name": tensor_name, "pid": tensors_pid,
                                       "tid": tid, "ts": start, "id": tensor.object_id})
                        events.append({"ph": "O", "cat": "Tensor", "name": tensor_name, "pid": tensors_pid,
                                       "tid": tid, "ts": end - 1, "id": tensor.object_id,
                                       "args": {"snapshot": {"tensor_description": description}}})

    def _add_ops(self, show_dataflow: bool) -> None:
        tensors, events = self.tensors, self.events
        flow_id = 0
        for (device, nodes), lanes in zip(self.devices, self.lanes):
            compute_pid = self.pids[device][0]
            gpu_tracer = _is_gpu_tracer(device)
            for (name, start, duration, label, _), tid in zip(nodes, lanes):
                inputs = []
                if gpu_tracer:
                    name, op = _kernel_name(label, name)
                elif name == "RecvTensor":  # the RPC layer's label is not "name = Op(...)"
                    op = "RecvTensor"
                else:
                    op, inputs = _op_and_inputs(label)
                args = {"name": name, "op": op}
                for index, input_name in enumerate(inputs):
                    args[f"input{index}"] = input_name
                events.append({"ph": "X", "cat": "Op", "name": op, "pid": compute_pid, "tid": tid,
                               "ts": start, "dur": duration, "args": args})
                for input_name in inputs:
                    tensor = tensors.get(input_name)
                    if tensor is None:
                        cut = input_name.rfind("/_")
                        if cut > 0:
                            input_name = input_name[:cut]
                            tensor = tensors.get(input_name)
                        if tensor is None:
                            _log.debug("no tensor %s (removed by CSE?)", input_name)
                            continue
                    tensor.last_use = max(tensor.last_use, start + duration - 1)
                    made_at, made_pid, made_tid = tensor.producer
                    # Arrows within one lane would only clutter it.
                    if show_dataflow and (made_pid != compute_pid or made_tid != tid):
                        events.append({"ph": "s", "cat": "DataFlow", "name": input_name, "pid": made_pid,
                                       "tid": made_tid, "ts": made_at, "id": flow_id})
                        events.append({"ph": "t", "cat": "DataFlow", "name": input_name, "pid": compute_pid,
                                       "tid": tid, "ts": start, "id": flow_id})
                        flow_id += 1

    def _add_memory(self) -> dict[str, AllocationMaximum]:
        """Tensor deletions, then one running total of requested bytes per allocator."""
        events = self.events
        changes: dict[str, list[tuple[int, int, str]]] = {}
        for name, tensor in self.tensors.items():
            events.append({"ph": "D", "cat": "Tensor", "name": name, "pid": tensor.pid, "tid": 0,
                           "ts": tensor.last_use, "id": tensor.object_id})
            allocation = tensor.output.tensor_description.allocation_description
            size = allocation.requested_bytes
            series = changes.setdefault(allocation.allocator_name, [])
            series += [(tensor.created, size, name), (tensor.last_use, -size, name)]
        maximums = {}
        for allocator, series in changes.items():
            series.sort()
            total, live, peak = 0, set(), AllocationMaximum(0, 0, set())
            for time, size, name in series:
                total += size
                if size < 0:
                    live.discard(name)
                else:
                    live.add(name)
                if total > peak.num_bytes:
                    peak = AllocationMaximum(time, total, set(live))
                events.append({"ph": "C", "cat": "Memory", "name": allocator, "pid": 0, "tid": 0, "ts": time,
                               "args": {allocator: total}})
            maximums[allocator] = peak
        return maximums


def _process_name(name: str, pid: int) -> dict:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def _lanes(nodes: list[tuple]) -> list[int]:
    """Each node's lane: the first whose last node ended strictly before this one starts."""
    ends, lanes = [0], []
    for _, start, duration, _, _ in nodes:
        for lane, end in enumerate(ends):
            if start > end:
                ends[lane] = start + duration
                break
        else:
            lane = len(ends)
            ends.append(start + duration)
        lanes.append(lane)
    return lanes


def _stretch_to_kernels(devices: list, gpu_only: bool) -> list:
    """op_time "all"/"gpu": ops on ``/job`` devices that ran kernels on a ``/stream:all``
    device end at their last kernel's end ("all"), and also start at their first
    kernel's start ("gpu")."""
    spans: dict[str, tuple[int, int]] = {}
    for device, nodes in devices:
        if "/stream:all" in device:
            for name, start, duration, label, _ in nodes:
                op_name = _kernel_name(label, name)[0]
                first, last = spans.get(op_name, (start, start + duration))
                spans[op_name] = min(first, start), max(last, start + duration)
    stretched = []
    for device, nodes in devices:
        if "/job" in device and "/stream:all" not in device:
            nodes = [_stretch(node, spans.get(node[0]), gpu_only) for node in nodes]
        stretched.append((device, nodes))
    return stretched


def _stretch(node: tuple, span: tuple[int, int] | None, gpu_only: bool) -> tuple:
    if span is None:
        return node
    name, start, duration, label, outputs = node
    end = max(span[1], start + duration)
    if gpu_only:
        start = span[0]
    return name, start, end - start, label, outputs


class _ChromeTrace:
    """The events of one analysis; ``format_to_string`` as TF's formatter offers it."""

    def __init__(self, metadata: list[dict], events: list[dict]):
        self.metadata = metadata
        self.events = events

    def format_to_string(self, pretty: bool = False) -> str:
        trace = {"traceEvents": self.metadata + self.events}
        return _indented(trace, 0) if pretty else json.dumps(trace, separators=(",", ":"))


_NEWLINE_INDENT = ["\n" + "    " * depth for depth in range(8)]


def _indented(value, depth: int) -> str:
    """``json.dumps(value, indent=4, separators=(',', ': '))`` for what events hold (dicts,
    lists, str, int), about twice as fast: with ``indent``, json falls back from its C
    encoder to pure Python, and the output of a large step is hundreds of megabytes."""
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        inner = _NEWLINE_INDENT[depth + 1]
        items = []
        for key, item in value.items():
            item_kind = type(item)
            text = (encode_basestring_ascii(item) if item_kind is str else
                    int.__repr__(item) if item_kind is int else _indented(item, depth + 1))
            items.append(encode_basestring_ascii(key) + ": " + text)
        return "{" + inner + ("," + inner).join(items) + _NEWLINE_INDENT[depth] + "}"
    if kind is list:
        if not value:
            return "[]"
        inner = _NEWLINE_INDENT[depth + 1]
        return "[" + inner + ("," + inner).join([_indented(item, depth + 1) for item in value]) + \
            _NEWLINE_INDENT[depth] + "]"
    return encode_basestring_ascii(value) if kind is str else int.__repr__(value)
