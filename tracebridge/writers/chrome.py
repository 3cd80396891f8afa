"""Chrome trace (Trace Event Format) for chrome://tracing, Perfetto and speedscope.

Layout: pid 0 holds step markers, pid 1 the allocator counters, and every device is a
process of its own (pid 2 + device index) with one thread per lane and a ``network``
thread for transfers. Op events follow TF's timeline.py (``name`` = op type, args
``name``/``op``/``input<i>``) so existing habits carry over; flow arrows link a producer
to its consumers on other lanes or devices, as timeline.py's ``show_dataflow`` does.

Timestamps are absolute microseconds since the epoch like timeline.py's, written as exact
decimals (``1700000000000123.456``) so nanoseconds survive in the text. The output is
streamed in chunks and deterministic: the same trace gives the same bytes.
"""

from __future__ import annotations

import os
from json.encoder import encode_basestring_ascii as _quote

import numpy as np

from .._files import atomic_output
from ..model.trace import Trace

STEPS_PID, ALLOCATORS_PID, FIRST_DEVICE_PID = 0, 1, 2
NETWORK_TID = 999_999
_CHUNK = 20_000


def write_chrome(trace: Trace, path: str | os.PathLike, *, dataflow: bool = True,
                 memory: bool = False, progress=None) -> None:
    """Write ``trace`` to ``path`` (``.json``, or gzip for ``.json.gz``).

    ``dataflow`` adds flow arrows between lanes; ``memory`` adds allocator counters.
    ``progress(done, total)`` is called as op events are written.
    """
    with atomic_output(path) as out:
        for chunk in chrome_chunks(trace, dataflow=dataflow, memory=memory, progress=progress):
            out.write(chunk.encode("utf-8"))


def chrome_chunks(trace: Trace, *, dataflow: bool = True, memory: bool = False, progress=None):
    """The Chrome trace JSON as a sequence of text chunks."""
    quoted = _QuotedStrings(trace.strings)
    header = {"source_format": trace.source_format}
    header.update({k: v for k, v in trace.metadata.items() if isinstance(v, (str, int, float))})
    other = ",".join(f"{_quote(str(k))}:{_json_scalar(v)}" for k, v in sorted(header.items()))
    yield '{"displayTimeUnit":"ns","otherData":{' + other + '},"traceEvents":[\n'
    first = True
    for chunk in _event_chunks(trace, quoted, dataflow=dataflow, memory=memory, progress=progress):
        if chunk:
            yield ("" if first else ",\n") + chunk
            first = False
    yield "\n]}\n"


def _event_chunks(trace: Trace, quoted: "_QuotedStrings", *, dataflow: bool, memory: bool, progress):
    yield ",\n".join(_metadata_events(trace, memory))
    yield ",\n".join(_step_events(trace))
    ops = trace.ops
    n = len(trace)
    pid, tid = _pids_and_tids(trace)
    start, end = ops["start_ns"], ops["end_ns"]
    input_offsets = trace.input_offsets()
    input_names = trace.inputs["name"]
    transfers = _transfer_args(trace, quoted)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        ts = _micros(start[lo:hi])
        dur = _micros(end[lo:hi] - start[lo:hi])
        names = ops["name"][lo:hi].tolist()
        kernels = ops["kernel"][lo:hi].tolist()
        pids, tids = pid[lo:hi].tolist(), tid[lo:hi].tolist()
        offsets = input_offsets[lo:hi + 1].tolist()
        inputs = input_names[offsets[0]:offsets[-1]].tolist()
        base = offsets[0]
        events = []
        for i in range(hi - lo):
            kernel = quoted[kernels[i]]
            args = quoted.inputs(inputs[offsets[i] - base:offsets[i + 1] - base])
            extra = transfers.get(lo + i, "")
            events.append(
                f'{{"ph":"X","cat":"Op","name":{kernel},"pid":{pids[i]},"tid":{tids[i]},'
                f'"ts":{ts[i]},"dur":{dur[i]},"args":{{"name":{quoted[names[i]]},"op":{kernel}{args}{extra}}}}}')
        yield ",\n".join(events)
        if progress:
            progress(hi, n)
    if dataflow:
        yield from _flow_chunks(trace, quoted, pid, tid)
    if memory:
        yield from _counter_chunks(trace, quoted)


def _metadata_events(trace: Trace, memory: bool) -> list[str]:
    events = []
    if trace.steps:
        events.append(_process_name(STEPS_PID, "Steps", -2))
    if memory and trace.counters.rows:
        events.append(_process_name(ALLOCATORS_PID, "Allocators", -1))
    lanes_by_device: dict[int, list[tuple[int, str]]] = {}
    local = _local_lane_numbers(trace)
    for index, lane in enumerate(trace.lanes):
        lanes_by_device.setdefault(lane.device, []).append((int(local[index]), lane.name))
    network_devices = set(trace.ops["device"][trace.transfers["op"]].tolist()) if trace.transfers.rows else set()
    for index, device in enumerate(trace.devices):
        pid = FIRST_DEVICE_PID + index
        events.append(_process_name(pid, device.name, index))
        for tid, name in lanes_by_device.get(index, []):
            events.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},'
                          f'"args":{{"name":{_quote(name)}}}}}')
        if index in network_devices:
            events.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{NETWORK_TID},'
                          f'"args":{{"name":"network"}}}}')
    return events


def _process_name(pid: int, name: str, sort_index: int) -> str:
    return (f'{{"ph":"M","name":"process_name","pid":{pid},"args":{{"name":{_quote(name)}}}}},\n'
            f'{{"ph":"M","name":"process_sort_index","pid":{pid},"args":{{"sort_index":{sort_index}}}}}')


def _step_events(trace: Trace) -> list[str]:
    events = []
    for step in trace.steps:
        label = step.name or f"step {step.number}"
        ts, dur = _micros(np.array([step.start_ns, step.end_ns - step.start_ns], dtype=np.int64))
        events.append(f'{{"ph":"X","cat":"Step","name":{_quote(label)},"pid":{STEPS_PID},"tid":0,'
                      f'"ts":{ts},"dur":{dur},"args":{{"step_num":{step.number}}}}}')
    return events


def _local_lane_numbers(trace: Trace) -> np.ndarray:
    """Lane number within its device for every lane (lanes are stored device by device)."""
    devices = np.array([lane.device for lane in trace.lanes], dtype=np.int64)
    if not len(devices):
        return devices
    first = np.r_[0, np.flatnonzero(devices[1:] != devices[:-1]) + 1]
    counts = np.diff(np.r_[first, len(devices)])
    return np.arange(len(devices)) - np.repeat(first, counts)


def _pids_and_tids(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    ops = trace.ops
    pid = ops["device"].astype(np.int64) + FIRST_DEVICE_PID
    local = _local_lane_numbers(trace)
    tid = local[ops["lane"]] if len(local) else np.zeros(len(trace), dtype=np.int64)
    if trace.transfers.rows:
        tid = tid.copy()
        tid[trace.transfers["op"]] = NETWORK_TID
    return pid, tid


def _transfer_args(trace: Trace, quoted: "_QuotedStrings") -> dict[int, str]:
    t = trace.transfers
    out = {}
    for op, size, rate, src, dst, tensor in zip(t["op"].tolist(), t["bytes"].tolist(), t["rate_bps"].tolist(),
                                                 t["src"].tolist(), t["dst"].tolist(), t["tensor"].tolist()):
        out[op] = (f',"bytes":{size},"rate_bps":{rate!r},"src":{quoted[src]},"dst":{quoted[dst]},'
                   f'"tensor":{quoted[tensor]}')
    return out


def _flow_chunks(trace: Trace, quoted: "_QuotedStrings", pid: np.ndarray, tid: np.ndarray):
    """One arrow per data input whose producer ran on another lane or device."""
    consumer, producer = dataflow_edges(trace)
    if not len(consumer):
        return
    differs = (pid[consumer] != pid[producer]) | (tid[consumer] != tid[producer])
    consumer, producer = consumer[differs], producer[differs]
    ops = trace.ops
    # Bind the start to the producer's last nanosecond, inside its slice, and the end
    # to the consumer's first ("bp":"e" = enclosing slice).
    start_ts = _micros(np.maximum(ops["end_ns"][producer] - 1, ops["start_ns"][producer]))
    end_ts = _micros(ops["start_ns"][consumer])
    names = ops["name"][producer].tolist()
    p_pid, p_tid = pid[producer].tolist(), tid[producer].tolist()
    c_pid, c_tid = pid[consumer].tolist(), tid[consumer].tolist()
    for lo in range(0, len(consumer), _CHUNK):
        events = []
        for i in range(lo, min(len(consumer), lo + _CHUNK)):
            name = quoted[names[i]]
            events.append(f'{{"ph":"s","cat":"DataFlow","name":{name},"id":{i},"pid":{p_pid[i]},'
                          f'"tid":{p_tid[i]},"ts":{start_ts[i]}}},\n'
                          f'{{"ph":"t","cat":"DataFlow","name":{name},"id":{i},"pid":{c_pid[i]},'
                          f'"tid":{c_tid[i]},"ts":{end_ts[i]},"bp":"e"}}')
        yield ",\n".join(events)


def dataflow_edges(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(consumer, producer)`` op rows for every data input whose producer is in the
    same step. Input ``x:1`` is produced by ``x``; partitioning suffixes (``x/_3``) are
    dropped as timeline.py drops them; control inputs (``^x``) carry no data."""
    inputs = trace.inputs
    if not inputs.rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    strings = trace.strings
    unique_inputs, inverse = np.unique(inputs["name"], return_inverse=True)
    ops = trace.ops
    name_ids = {}
    for i, text in enumerate(strings):
        name_ids.setdefault(text, i)
    producer_name = np.full(len(unique_inputs), -1, dtype=np.int64)
    for k, string_id in enumerate(unique_inputs.tolist()):
        text = strings[string_id]
        if text.startswith("^"):
            continue
        base = text.rsplit(":", 1)[0] if ":" in text and text.rsplit(":", 1)[1].isdigit() else text
        found = name_ids.get(base)
        if found is None and "/_" in base:
            found = name_ids.get(base[:base.rfind("/_")])
        if found is not None:
            producer_name[k] = found
    wanted = producer_name[inverse.ravel()]
    consumer = inputs["op"].astype(np.int64)
    keep = wanted >= 0
    consumer, wanted = consumer[keep], wanted[keep]
    # Look producers up by (step, name): names repeat from step to step.
    width = np.int64(len(strings) + 1)
    op_keys = (ops["step"].astype(np.int64) + 1) * width + ops["name"]
    order = np.argsort(op_keys, kind="stable")
    sorted_keys = op_keys[order]
    keys = (ops["step"][consumer].astype(np.int64) + 1) * width + wanted
    where = np.searchsorted(sorted_keys, keys)
    found = (where < len(sorted_keys)) & (sorted_keys[np.minimum(where, len(sorted_keys) - 1)] == keys)
    producer = order[np.minimum(where, len(order) - 1)][found]
    return consumer[found], producer


def _counter_chunks(trace: Trace, quoted: "_QuotedStrings"):
    counters = trace.counters
    ts = _micros(counters["time_ns"])
    allocators = counters["allocator"].tolist()
    values = counters["bytes_in_use"].tolist()
    for lo in range(0, counters.rows, _CHUNK):
        yield ",\n".join(
            f'{{"ph":"C","name":{quoted[allocators[i]]},"pid":{ALLOCATORS_PID},"tid":0,"ts":{ts[i]},'
            f'"args":{{"bytes_in_use":{values[i]}}}}}'
            for i in range(lo, min(counters.rows, lo + _CHUNK)))


def _micros(ns: np.ndarray) -> list[str]:
    """Integer nanoseconds as exact decimal microseconds: ``1234567`` -> ``"1234.567"``,
    ``1234000`` -> ``"1234"``."""
    ns = np.asarray(ns, dtype=np.int64)
    whole, frac = np.divmod(ns, 1000)
    whole_text = whole.tolist()
    if not np.any(frac):
        return [str(w) for w in whole_text]
    return [f"{w}.{f:03d}" if f else str(w) for w, f in zip(whole_text, frac.tolist())]


def _json_scalar(value) -> str:
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


class _QuotedStrings:
    """JSON-quoted strings of a trace's string table, quoted on first use."""

    def __init__(self, strings: tuple[str, ...]):
        self._strings = strings
        self._quoted: dict[int, str] = {}
        self._inputs: dict[tuple[int, ...], str] = {}

    def __getitem__(self, index: int) -> str:
        text = self._quoted.get(index)
        if text is None:
            text = self._quoted[index] = _quote(self._strings[index])
        return text

    def inputs(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return "".join(f',"input{k}":{self[i]}' for k, i in enumerate(ids))
