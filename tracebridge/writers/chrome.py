"""Chrome trace (Trace Event Format) for chrome://tracing, Perfetto and speedscope.

Layout: pid 0 holds step markers, pid 1 the allocator counters, and every device is a
process of its own (pid 2 + device index, sorted by index) with one thread per lane
(sorted in lane order; a line xprof derived from the device's streams is named
``... (derived)``) and a ``network`` thread for transfers. A lane of XLA thunks or kernels
has a ``TF ops · <lane>`` thread (``JAX ops · <lane>`` in a JAX run) sorted right above it: a
span per run of its events that compute one TF op, as xprof shows TensorFlow Ops above XLA Ops. Op events follow TF's timeline.py (``name`` = op type, args
``name``/``op``/``input<i>``) so existing habits carry over; flow arrows link a producer
to its consumers on other lanes or devices, as timeline.py's ``show_dataflow`` does, and
a host launch to the kernel or copy it started.

Timestamps are absolute microseconds since the epoch like timeline.py's, written as exact
decimals (``1700000000000123.456``) so nanoseconds survive in the text. Counter samples
of one allocator at the same timestamp are merged into the last one (the counter is a
step function, so nothing is lost). The output is streamed in chunks and deterministic:
the same trace gives the same bytes.

Speed: events are formatted a chunk at a time from columns prepared with numpy (quoted
strings, pids, tids, the parts of timestamps), so the per-event Python work is one
f-string. Large outputs are written by two processes (see :func:`write_chrome`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from json.encoder import encode_basestring_ascii as _quote

import numpy as np

from .._files import atomic_output
from .._fork import ChildFailed, ForkedJob
from ..errors import OutputError
from ..model.accelerator import launches
from ..model.dataflow import dataflow_edges
from ..model.hlo import HLO_INSTRUCTION, HLO_MODULES, LINK_STATS, TF_OP_SPAN_CAT, framework_ops
from ..model.lanes import first_fit, nested_fit, op_spans
from ..model.schema import CALL_STATS, Category
from ..model.trace import Trace
from ..options import choose_parallelism
from .chrome_threads import (FIRST_DEVICE_PID, NETWORK_LANE, NETWORK_TID, json_readings, local_lane_numbers,
                             pid_tid_texts, pids_and_tids, thread_ids)

STEPS_PID, ALLOCATORS_PID = 0, 1
_SORT = 1024  # thread sort index: lane number * _SORT (+ k for its k-th sub-row)
NETWORK_SORT = 1 << 30  # the network thread's sort index (+ k for its k-th sub-row): after the lanes
DERIVED_SUFFIX = " (derived)"  # thread names of lanes xprof derived from a device's streams
_CHUNK = 20_000
# Below this many events one process writes everything: forking and joining the
# second half costs more than it saves.
PARALLEL_MIN_EVENTS = 300_000
# Relative cost of one event of each kind (measured), to split the work in two halves.
_COST = {"ops": 1.0, "flows": 1.0, "counters": 0.4}


def write_chrome(trace: Trace, path: str | os.PathLike, *, dataflow: bool = True,
                 memory: bool = False, progress=None, workers: int | None = None) -> None:
    """Write ``trace`` to ``path`` (``.json``, or gzip for ``.json.gz``).

    ``dataflow`` adds flow arrows between lanes; ``memory`` adds allocator counters.
    ``progress(done, total)`` is called as op events are written.

    ``workers``: processes that format events (see :mod:`tracebridge.options`). The
    default (``None``) uses two for large uncompressed outputs where forking is safe,
    else one. Compressed outputs are written by one. With two, a forked child formats the
    second half of the events into a temporary file beside ``path`` while this process
    formats the first half; the child's file is then appended. An error in the child is
    raised here (as :class:`OutputError`), an error or interrupt here stops the child, and
    the temporary file is removed in every case.
    """
    parallelism = choose_parallelism(workers)
    events = _Events(trace, dataflow=dataflow, memory=memory)
    batches = events.batches()
    compress = os.fspath(path).endswith(".gz")
    n = len(trace)
    with atomic_output(path) as out:
        out.write(events.header().encode("utf-8"))
        two = not compress and parallelism.splits(sum(batch.hi - batch.lo for batch in batches), PARALLEL_MIN_EVENTS)
        split = _split_point(batches) if two else len(batches)
        if split < len(batches):
            _write_in_two(out, path, batches, split, progress=progress, total=n)
        else:
            _write_batches(out, batches, first=True, progress=progress, total=n)
        out.write(events.footer().encode("utf-8"))


def chrome_chunks(trace: Trace, *, dataflow: bool = True, memory: bool = False, progress=None):
    """The Chrome trace JSON as a sequence of text chunks."""
    events = _Events(trace, dataflow=dataflow, memory=memory)
    yield events.header()
    first = True
    for batch in events.batches():
        chunk = batch.text()
        if chunk:
            yield ("" if first else ",\n") + chunk
            first = False
        if progress and batch.ops_done is not None:
            progress(batch.ops_done, len(trace))
    yield events.footer()


class _EventBatch:
    """Rows ``lo:hi`` of one kind of event (ops, flows, counters; or the metadata and
    step events whole): ``text()`` formats them, joined by ",\\n". ``weight``, the
    estimated cost, places the split between this process and a forked one; ``ops_done``,
    the ops written once this batch is, drives the progress bar."""

    __slots__ = ("format", "lo", "hi", "weight", "ops_done")

    def __init__(self, format, lo: int, hi: int, weight: float, ops_done: int | None = None):
        self.format, self.lo, self.hi, self.weight, self.ops_done = format, lo, hi, weight, ops_done

    def text(self) -> str:
        return self.format(self.lo, self.hi)


class _Events:
    """Everything the event formatters share, prepared once (before any fork)."""

    def __init__(self, trace: Trace, *, dataflow: bool, memory: bool):
        self.trace, self.dataflow, self.memory = trace, dataflow, memory
        self.quoted = np.array(list(map(_quote, trace.strings)), dtype=object)
        ops = trace.ops
        self.pid, self.tid, self.sub_row_threads = pids_and_tids(trace)
        self.where = pid_tid_texts(self.pid, self.tid)
        # The category travels as the event's "cat" ("Op" as in timeline.py for TF ops), so
        # that host annotations of a TF2 trace are still told apart after a round trip.
        # TF1's GPU tracer records (stream and memcpy devices) are "Op" events there too.
        categories = np.array([f'"cat":"{c.chrome}",' for c in Category], dtype=object)
        tracer = np.array([d.kind in ("stream", "memcpy") for d in trace.devices] or [False])
        shown = np.where(tracer[ops["device"]] & np.isin(ops["category"], (Category.DEVICE, Category.MEMCPY)),
                         int(Category.OP), ops["category"]) if len(trace) else ops["category"]
        self.op_head = categories[shown] + self.where
        self.start, self.end = ops["start_ns"], ops["end_ns"]
        self.input_offsets = trace.input_offsets()
        # Extra args of some rows (written by the general path below): a transfer's bytes,
        # an XLA event's HLO instruction and every framework op it computes.
        self.transfers = _transfer_args(trace, self.quoted)
        for op, text in _hlo_args(trace, self.quoted).items():
            self.transfers[op] = self.transfers.get(op, "") + text
        for op, text in _call_args(trace, self.quoted).items():  # a tf.function call's stats
            self.transfers[op] = self.transfers.get(op, "") + text
        self.transfer_ops = np.array(sorted(self.transfers), dtype=np.int64)
        self.tf_op_events, self.tf_op_threads = _tf_op_spans(trace, self.quoted, self.pid, self.tid)
        self.step_rows = step_rows(trace)
        self.consumer = self.producer = np.zeros(0, dtype=np.int64)
        if dataflow:
            self.producer, self.consumer = cross_lane_flows(trace, self.pid, self.tid)
        self.counters = _merged_counters(trace.counters) if memory else None

    @staticmethod
    def header() -> str:
        # traceEvents first and no displayTimeUnit: some trace processors stop at unknown
        # leading keys or read every time as nanoseconds when that key is present.
        return '{"traceEvents":[\n'

    def footer(self) -> str:
        trace = self.trace
        other = {"source_format": trace.source_format}
        other.update({k: v for k, v in trace.metadata.items() if isinstance(v, (str, int, float))})
        modules = trace.metadata.get(HLO_MODULES)
        if modules:  # the XLA modules' HLO (model/hlo.py): JSON-able entries, kept for a reread
            other[HLO_MODULES] = json.dumps(modules, separators=(",", ":"))
        text = ",".join(f"{_quote(str(k))}:{_json_scalar(v)}" for k, v in sorted(other.items()))
        return '\n],"otherData":{' + text + "}}\n"

    def batches(self) -> list[_EventBatch]:
        trace = self.trace
        threads = (self.sub_row_threads, self.tf_op_threads, int(self.step_rows.max(initial=0)) + 1)
        batches = [_EventBatch(lambda lo, hi: ",\n".join(_metadata_events(trace, self.memory, *threads)), 0, 0, 0.0),
                   _EventBatch(lambda lo, hi: ",\n".join(_step_events(trace, self.step_rows)), 0, 0, 0.0)]
        if self.tf_op_events:
            batches.append(_EventBatch(lambda lo, hi: ",\n".join(self.tf_op_events), 0, 0,
                                       _COST["ops"] * len(self.tf_op_events)))
        n = len(trace)
        for lo in range(0, n, _CHUNK):
            hi = min(n, lo + _CHUNK)
            batches.append(_EventBatch(self._op_events, lo, hi, _COST["ops"] * (hi - lo), ops_done=hi))
        for lo in range(0, len(self.consumer), _CHUNK):
            hi = min(len(self.consumer), lo + _CHUNK)
            batches.append(_EventBatch(self._flow_events, lo, hi, _COST["flows"] * (hi - lo)))
        if self.counters is not None:
            rows = len(self.counters[0])
            for lo in range(0, rows, _CHUNK):
                hi = min(rows, lo + _CHUNK)
                batches.append(_EventBatch(self._counter_events, lo, hi, _COST["counters"] * (hi - lo)))
        return batches

    def _op_events(self, lo: int, hi: int) -> str:
        """Op events. Ops with up to two inputs (most) are formatted by count of inputs,
        each input a field of the f-string; the others join their inputs first."""
        ops, quoted = self.trace.ops, self.quoted
        kernel, name = quoted[ops["kernel"][lo:hi]], quoted[ops["name"][lo:hi]]
        where = self.op_head[lo:hi]  # "cat":...,"pid":...,"tid":...
        ts, ts_frac = _micros_columns(self.start[lo:hi])
        dur, dur_frac = _micros_columns(self.end[lo:hi] - self.start[lo:hi])
        offsets = self.input_offsets[lo:hi + 1]
        counts = np.diff(offsets)
        inputs = self.trace.inputs["name"]
        other = counts > 2
        if len(self.transfer_ops):
            at = self.transfer_ops
            other[at[(at >= lo) & (at < hi)] - lo] = True
        events = np.empty(hi - lo, dtype=object)
        for count in range(3):
            rows = np.flatnonzero((counts == count) & ~other)
            if not len(rows):
                continue
            columns = [c[rows].tolist() for c in (kernel, where, ts, ts_frac, dur, dur_frac, name)]
            first = offsets[rows]
            if count == 0:
                events[rows] = [
                    f'{{"ph":"X",{w},"name":{k},"ts":{a}{af},"dur":{d}{df},'
                    f'"args":{{"name":{nm},"op":{k}}}}}'
                    for k, w, a, af, d, df, nm in zip(*columns)]
            elif count == 1:
                events[rows] = [
                    f'{{"ph":"X",{w},"name":{k},"ts":{a}{af},"dur":{d}{df},'
                    f'"args":{{"name":{nm},"op":{k},"input0":{i0}}}}}'
                    for k, w, a, af, d, df, nm, i0 in zip(*columns, quoted[inputs[first]].tolist())]
            else:
                events[rows] = [
                    f'{{"ph":"X",{w},"name":{k},"ts":{a}{af},"dur":{d}{df},'
                    f'"args":{{"name":{nm},"op":{k},"input0":{i0},"input1":{i1}}}}}'
                    for k, w, a, af, d, df, nm, i0, i1 in zip(*columns, quoted[inputs[first]].tolist(),
                                                               quoted[inputs[first + 1]].tolist())]
        rows = np.flatnonzero(other)
        if len(rows):
            columns = [c[rows].tolist() for c in (kernel, where, ts, ts_frac, dur, dur_frac, name)]
            args = [self._input_args(offsets[r], offsets[r + 1]) for r in rows.tolist()]
            extra = [self.transfers.get(lo + r, "") for r in rows.tolist()]
            events[rows] = [
                f'{{"ph":"X",{w},"name":{k},"ts":{a}{af},"dur":{d}{df},'
                f'"args":{{"name":{nm},"op":{k}{i}{e}}}}}'
                for k, w, a, af, d, df, nm, i, e in zip(*columns, args, extra)]
        return ",\n".join(events.tolist())

    def _input_args(self, first: int, last: int) -> str:
        """``,"input0":"a","input1":"b"`` for the input rows ``first:last``."""
        names = self.quoted[self.trace.inputs["name"][first:last]].tolist()
        return "".join([f',"input{k}":{text}' for k, text in enumerate(names)])

    def _flow_events(self, lo: int, hi: int) -> str:
        """One arrow per data input whose producer ran on another lane or device. Both
        ends sit at the start of their slice, with the slice's own timestamp text: viewers
        read timestamps as doubles (0.25 us steps at epoch scale), and only the exact same
        text is sure to land inside the slice ("bp":"e" = bind to the enclosing slice)."""
        consumer, producer = self.consumer[lo:hi], self.producer[lo:hi]
        names = self.quoted[self.trace.ops["name"][producer]].tolist()
        start_ts, start_frac = _micros_parts(self.start[producer])
        end_ts, end_frac = _micros_parts(self.start[consumer])
        return ",\n".join([
            f'{{"ph":"s","cat":"DataFlow","name":{name},"id":{i},{pw},"ts":{a}{af}}},\n'
            f'{{"ph":"t","cat":"DataFlow","name":{name},"id":{i},{cw},"ts":{b}{bf},"bp":"e"}}'
            for name, i, pw, a, af, cw, b, bf in zip(
                names, range(lo, hi), self.where[producer].tolist(), start_ts, start_frac,
                self.where[consumer].tolist(), end_ts, end_frac)])

    def _counter_events(self, lo: int, hi: int) -> str:
        allocator, time_ns, in_use = (column[lo:hi] for column in self.counters)
        ts, ts_frac = _micros_parts(time_ns)
        return ",\n".join([
            f'{{"ph":"C","cat":"Memory","name":{name},"pid":{ALLOCATORS_PID},"tid":0,"ts":{a}{af},'
            f'"args":{{"bytes_in_use":{value}}}}}'
            for name, a, af, value in zip(self.quoted[allocator].tolist(), ts, ts_frac, in_use.tolist())])


def _write_batches(out, batches: list[_EventBatch], *, first: bool, progress=None, total: int = 0) -> bool:
    """Write the batches' events to ``out``; returns whether nothing was written yet."""
    for batch in batches:
        chunk = batch.text()
        if chunk:
            if not first:
                out.write(b",\n")
            out.write(chunk.encode("utf-8"))
            first = False
        if progress and batch.ops_done is not None:
            progress(batch.ops_done, total)
    return first


def _split_point(batches: list[_EventBatch]) -> int:
    """Index of the first batch of the second half, by estimated cost."""
    total = sum(batch.weight for batch in batches)
    done = 0.0
    for index, batch in enumerate(batches):
        if done >= 0.5 * total:
            return index
        done += batch.weight
    return len(batches)


def _write_in_two(out, path, batches: list[_EventBatch], split: int, *, progress, total: int) -> None:
    """Write ``batches[:split]`` here while a forked child formats the rest into a
    temporary file beside ``path`` (each chunk preceded by ",\\n"), then append it."""
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    fd, part = tempfile.mkstemp(prefix=".tracebridge-", suffix=".part", dir=directory)
    os.close(fd)
    try:
        child = ForkedJob.start(lambda: _write_part(batches[split:], part))
        if child is None:
            _write_batches(out, batches, first=True, progress=progress, total=total)
            return
        with child:
            nothing_yet = _write_batches(out, batches[:split], first=True, progress=progress, total=total)
            try:
                empty = child.wait() == b" empty"
            except ChildFailed as failure:
                raise OutputError(f"{os.fspath(path)}: the second writer process failed: {failure}") from None
        out.flush()
        with open(part, "rb") as source:
            if nothing_yet and not empty:
                source.seek(2)  # nothing precedes the child's events: drop its leading ",\\n"
            _append(source, out)
        if progress and total and any(batch.ops_done for batch in batches[split:]):
            progress(total, total)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(part)


def _write_part(batches: list[_EventBatch], part: str) -> bytes:
    """In the child: format ``batches`` into ``part``; says whether nothing was written."""
    with open(part, "wb") as target:
        empty = _write_batches(target, batches, first=False)
    return b" empty" if empty else b""


def _append(source, out) -> None:
    """Copy the rest of ``source`` to the end of ``out`` (in the kernel where possible)."""
    try:
        in_fd, out_fd = source.fileno(), out.fileno()
        while os.copy_file_range(in_fd, out_fd, 1 << 30):
            pass
    except (AttributeError, OSError):
        shutil.copyfileobj(source, out, 1 << 22)


def _metadata_events(trace: Trace, memory: bool, extra_threads: list = (), tf_op_threads: list = (),
                     step_threads: int = 1) -> list[str]:
    events = []
    if trace.steps:
        events.append(_process_name(STEPS_PID, "Steps", -2))
        for row in range(step_threads):  # steps that overlap take more rows (step_rows)
            events.append(f'{{"ph":"M","name":"thread_name","pid":{STEPS_PID},"tid":{row},"args":{{"name":"steps"}}}}')
    if memory and trace.counters.rows:
        events.append(_process_name(ALLOCATORS_PID, "Allocators", -1))
        events.append(f'{{"ph":"M","name":"thread_name","pid":{ALLOCATORS_PID},"tid":0,'
                      f'"args":{{"name":"allocators"}}}}')
    lanes_by_device, network_devices = device_threads(trace, extra_threads)
    network_sub_rows = {pid - FIRST_DEVICE_PID for pid, _, lane, _ in extra_threads if lane == NETWORK_LANE}
    for index, device in enumerate(trace.devices):
        pid = FIRST_DEVICE_PID + index
        events.append(_process_name(pid, device.name, index))
        if device.host:  # devices of several hosts share names: the host is a label
            events.append(f'{{"ph":"M","name":"process_labels","pid":{pid},'
                          f'"args":{{"labels":{_quote("host:" + device.host)}}}}}')
        for tid, name, sort_index in lanes_by_device.get(index, []):  # a device's lanes in their order
            events.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},'
                          f'"args":{{"name":{_quote(name)}}}}},\n'
                          f'{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{tid},'
                          f'"args":{{"sort_index":{sort_index}}}}}')
        if index in network_devices:
            events.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{NETWORK_TID},'
                          f'"args":{{"name":"network"}}}}')
            if index in network_sub_rows:  # keeps its sub-rows right after it
                events.append(f'{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{NETWORK_TID},'
                              f'"args":{{"sort_index":{NETWORK_SORT}}}}}')
    for pid, tid, name, sort_index in tf_op_threads:
        events.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":{_quote(name)}}}}},\n'
                      f'{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{tid},'
                      f'"args":{{"sort_index":{sort_index}}}}}')
    return events


def device_threads(trace: Trace, extra_threads: list = ()) -> tuple[dict[int, list[tuple[int, str, int]]], set[int]]:
    """Every device's threads ``(tid, name, sort index)`` in lane order, sub-rows of a lane
    (``extra_threads`` of :func:`pids_and_tids`) right after it, and the devices that
    also have a network thread (transfers): the layout every trace viewer output shares."""
    lanes_by_device: dict[int, list[tuple[int, str, int]]] = {}
    local = local_lane_numbers(trace)
    # Lines xprof derived from a device's streams (TensorFlow Ops, Steps, ...) say so.
    derived = set(np.unique(trace.ops["lane"][trace.ops["category"] == Category.DERIVED]).tolist())
    labels = [f"{lane.name}{DERIVED_SUFFIX}" if index in derived else lane.name
              for index, lane in enumerate(trace.lanes)]
    for index, lane in enumerate(trace.lanes):  # (tid, name, sort index)
        tid = int(thread_ids(int(local[index]), FIRST_DEVICE_PID + lane.device))
        lanes_by_device.setdefault(lane.device, []).append((tid, labels[index], _SORT * int(local[index])))
    for pid, tid, lane, k in extra_threads:
        if lane == NETWORK_LANE:  # a sub-row of the network thread
            thread = (tid, "network", NETWORK_SORT + k)
        else:
            thread = (tid, labels[lane], _SORT * int(local[lane]) + min(k, _SORT - 1))
        lanes_by_device[pid - FIRST_DEVICE_PID].append(thread)
    network_devices = set(trace.ops["device"][trace.transfers["op"]].tolist()) if trace.transfers.rows else set()
    return lanes_by_device, network_devices


def cross_lane_flows(trace: Trace, pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(producer, consumer)`` op rows of the flow arrows: dataflow edges and host launch
    -> kernel or copy, where the two ends are on different threads (``pid``/``tid`` of
    :func:`pids_and_tids`)."""
    consumer, producer = dataflow_edges(trace)
    launcher, launched = _launch_edges(trace)  # host launch -> its kernel or copy
    consumer, producer = np.concatenate([consumer, launched]), np.concatenate([producer, launcher])
    if not len(consumer):
        return producer.astype(np.int64), consumer.astype(np.int64)
    differs = (pid[consumer] != pid[producer]) | (tid[consumer] != tid[producer])
    return producer[differs], consumer[differs]


def _process_name(pid: int, name: str, sort_index: int) -> str:
    return (f'{{"ph":"M","name":"process_name","pid":{pid},"args":{{"name":{_quote(name)}}}}},\n'
            f'{{"ph":"M","name":"process_sort_index","pid":{pid},"args":{{"sort_index":{sort_index}}}}}')


def step_rows(trace: Trace) -> np.ndarray:
    """The thread (row) of each step on the Steps process: steps that partly overlap, at
    nanoseconds or as the viewers read the times (chrome_threads.json_readings), take
    rows after the first."""
    start = np.array([s.start_ns for s in trace.steps], dtype=np.int64)
    end = np.array([s.end_ns for s in trace.steps], dtype=np.int64)
    order = np.lexsort((-end, start))
    rows = np.zeros(len(start), dtype=np.int64)
    rows[order] = nested_fit(start[order], end[order], json_readings(start[order], end[order]))
    return rows


def _step_events(trace: Trace, rows: np.ndarray) -> list[str]:
    events = []
    for step, row in zip(trace.steps, rows.tolist()):
        label = step.name or f"step {step.number}"
        ts, dur = _micros(np.array([step.start_ns, step.end_ns - step.start_ns], dtype=np.int64))
        events.append(f'{{"ph":"X","cat":"Step","name":{_quote(label)},"pid":{STEPS_PID},"tid":{row},'
                      f'"ts":{ts},"dur":{dur},"args":{{"step_num":{step.number}}}}}')
    return events


def _transfer_args(trace: Trace, quoted: np.ndarray) -> dict[int, str]:
    t = trace.transfers
    out = {}
    for op, size, rate, src, dst, tensor in zip(t["op"].tolist(), t["bytes"].tolist(), t["rate_bps"].tolist(),
                                                 t["src"].tolist(), t["dst"].tolist(), t["tensor"].tolist()):
        out[op] = (f',"bytes":{size},"rate_bps":{rate!r},"src":{quoted[src]},"dst":{quoted[dst]},'
                   f'"tensor":{quoted[tensor]}')
    return out


def _tf_op_spans(trace: Trace, quoted: np.ndarray, pid: np.ndarray, tid: np.ndarray) \
        -> tuple[list[str], list[tuple[int, int, str, int]]]:
    """The TF op spans above each lane of XLA events (those the reader linked to an HLO
    instruction): their events, and their threads ``(pid, tid, name, sort index)``, a new
    tid on the lane's device sorted just before the lane (spans that overlap, as the
    events under them may, take a second thread)."""
    linked = np.unique(trace.event_stat(HLO_INSTRUCTION)[0])
    if not len(linked):
        return [], []
    ops = trace.ops
    linked = linked[np.lexsort((ops["end_ns"][linked], ops["start_ns"][linked], ops["lane"][linked]))]
    local = local_lane_numbers(trace)
    next_tid: dict[int, int] = {}  # per device with XLA lanes: the first tid after its threads
    for device_pid in np.unique(pid[linked]).tolist():
        mine = tid[(pid == device_pid) & (tid != NETWORK_TID)]
        next_tid[device_pid] = int(mine.max()) + 1 if len(mine) else 0
    events, threads = [], []
    what = framework_ops(trace)  # "TF ops", or "JAX ops" in a JAX run
    lanes = ops["lane"][linked]
    cuts = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1], True])
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        rows = linked[lo:hi]
        lane = int(lanes[lo])
        first, start, end, count = op_spans(rows, ops["start_ns"][rows], ops["end_ns"][rows], ops["name"])
        sub = first_fit(start, end, json_readings(start, end))  # disjoint as viewers read them too
        device_pid = int(pid[rows[0]])
        tids = []
        for k in range(int(sub.max()) + 1):
            if next_tid[device_pid] == device_pid:  # not the pid's tid (chrome_threads.thread_ids)
                next_tid[device_pid] += 1
            tids.append(next_tid[device_pid])
            next_tid[device_pid] += 1
            name = f"{what} · {trace.lanes[lane].name}" + (f" / {k + 1}" if k else "")
            threads.append((device_pid, tids[-1], name, _SORT * int(local[lane]) - (int(sub.max()) + 1) + k))
        ts, ts_frac = _micros_parts(start)
        dur, dur_frac = _micros_parts(end - start)
        for row, t, a, af, d, df, n in zip(first.tolist(), np.array(tids)[sub].tolist(), ts, ts_frac, dur, dur_frac,
                                           count.tolist()):
            name, op_type = quoted[ops["name"][row]], quoted[ops["op_type"][row]]
            events.append(f'{{"ph":"X","cat":"{TF_OP_SPAN_CAT}","pid":{device_pid},"tid":{t},"name":{name},'
                          f'"ts":{a}{af},"dur":{d}{df},"args":{{"name":{name},"op":{op_type},"xla_events":{n}}}}}')
    return events, threads


def _hlo_args(trace: Trace, quoted: np.ndarray) -> dict[int, str]:
    """``,"hlo_instruction":...,"hlo_module":...,"tf_ops":...,"op_type":...`` of each XLA
    event the reader linked to its HLO (readers/xspace_xla.py): a viewer shows the op's
    instruction beside it."""
    stats = trace.table("event_stats")
    wanted = {trace.string_id(key): key for key in LINK_STATS}
    wanted.pop(-1, None)
    if HLO_INSTRUCTION not in wanted.values():
        return {}
    rows = np.flatnonzero(np.isin(stats["key"], list(wanted)))
    out: dict[int, str] = {}
    for op, key, value in zip(stats["op"][rows].tolist(), stats["key"][rows].tolist(), stats["value"][rows].tolist()):
        out[op] = out.get(op, "") + f',"{wanted[key]}":{quoted[value]}'
    # an XLA event's kernel is its instruction, its type the TF op's: both kept for a reread
    op_type, kernel = trace.ops["op_type"], trace.ops["kernel"]
    for op in out:
        if op_type[op] != kernel[op]:
            out[op] += f',"op_type":{quoted[op_type[op]]}'
    return out


def _call_args(trace: Trace, quoted: np.ndarray) -> dict[int, str]:
    """``,"tf_function_call":...,"tracing_count":...`` of each tf.function call's host event
    (model/schema.py, CALL_STATS): which tracings are a first call's rests on them."""
    stats = trace.table("event_stats")
    wanted = {trace.string_id(key): key for key in CALL_STATS}
    wanted.pop(-1, None)
    if not wanted or not stats.rows:
        return {}
    rows = np.flatnonzero(np.isin(stats["key"], list(wanted)))
    out: dict[int, str] = {}
    for op, key, value in zip(stats["op"][rows].tolist(), stats["key"][rows].tolist(), stats["value"][rows].tolist()):
        out[op] = out.get(op, "") + f',"{wanted[key]}":{quoted[value]}'
    return out


def _merged_counters(counters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counter rows with each run of samples of one allocator at one timestamp reduced to
    its last sample (the value the counter holds from that time on)."""
    allocator, time_ns, in_use = counters["allocator"], counters["time_ns"], counters["bytes_in_use"]
    if len(allocator) > 1:
        last = np.r_[(allocator[1:] != allocator[:-1]) | (time_ns[1:] != time_ns[:-1]), True]
        if not last.all():
            allocator, time_ns, in_use = allocator[last], time_ns[last], in_use[last]
    return allocator, time_ns, in_use


_FRACTIONS = np.array([""] + [f".{f:03d}" for f in range(1, 1000)], dtype=object)


def _micros_columns(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer nanoseconds as exact decimal microseconds, in two parts to print side by
    side: whole microseconds (floor) and ``".456"`` (``""`` for whole microseconds)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole, frac = np.divmod(ns, 1000)
    negative = np.flatnonzero((ns < 0) & (frac != 0))
    if len(negative):
        # Floor division would print -1500 ns as "-2" ".500", which reads back as -2.5 us:
        # these few are written as the sign and the digits of their magnitude.
        magnitude = -ns[negative]
        whole = whole.astype(object)
        whole[negative] = [f"-{m // 1000}" for m in magnitude.tolist()]
        frac = frac.copy()
        frac[negative] = magnitude % 1000
    return whole, _FRACTIONS[frac]


def _micros_parts(ns: np.ndarray) -> tuple[list[int], list[str]]:
    """:func:`_micros_columns` as lists."""
    whole, frac = _micros_columns(ns)
    return whole.tolist(), frac.tolist()


def _micros(ns: np.ndarray) -> list[str]:
    """Integer nanoseconds as exact decimal microseconds: ``1234567`` -> ``"1234.567"``,
    ``1234000`` -> ``"1234"``."""
    whole, frac = _micros_parts(ns)
    return [f"{w}{f}" for w, f in zip(whole, frac)]


def _json_scalar(value) -> str:
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _launch_edges(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(launch, kernel)`` op rows: an XSpace's launch links, a TF1 op's dispatch record
    and its kernels (:func:`~tracebridge.model.accelerator.launches`)."""
    pairs = launches(trace)
    return (np.fromiter(pairs.values(), dtype=np.int64, count=len(pairs)),
            np.fromiter(pairs.keys(), dtype=np.int64, count=len(pairs)))
