"""Where the time went: totals per op, op type and device, and a trace's vital counts.

Everything is computed with ``np.bincount`` over interned ids, so a summary of a million
ops costs milliseconds, not a Python loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..._fork import ThreadedJob
from ...model.accelerator import busy_ns, device_rows, self_times
from ...model.graph_outline import graph_outline
from ...model.hlo import ASYNC_COPY, HLO_MODULES, framework_ops
from ...model.kernel_names import short_kernel_name
from ...model.schema import STEP_INPUTS, Category
from ...model.trace import Trace
from ...options import choose_parallelism
from ..common.tables import csv_text, ms, plural
from ..common.xla import hlo_rows
from .breakdown import PARTS, step_breakdown
from .intervals import compiled as _compiled  # whether the C loops run
from .intervals import start_runs
from .steady import select_steps
from .vocabulary import rows_among

try:  # the per-key totals as one C loop (setup.py builds it where a C compiler is found)
    from . import _groupc
except ImportError:
    _groupc = None


@dataclass(frozen=True)
class Summary:
    """Rows of ``{"key", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share",
    "device_ns", "host_ns"}`` for each grouping, largest total first; ``share`` is of all
    counted time.

    On an accelerator trace the counted time is device time (``time == "device"``): each
    kernel, copy or XLA op's self time, counted once, credited to the TF op it ran for;
    ``host_ns`` is the TF ops' own time on the host. Otherwise it is host op time."""

    total_ns: int
    op_count: int
    counted: str = "op"     # which rows were counted: "op", "device+memcpy" or "all"
    steps: list[dict] = field(default_factory=list)
    by_op: list[dict] = field(default_factory=list)
    by_type: list[dict] = field(default_factory=list)
    by_device: list[dict] = field(default_factory=list)
    by_kernel: list[dict] = field(default_factory=list)
    by_hlo: list[dict] = field(default_factory=list)  # XLA: per HLO instruction (common/xla.py)
    time: str = "host"      # "device" when the trace has device activity
    total_span_ns: int = 0
    counted_as: str = ""    # what the counted rows are called ("TF ops", "kernels", ...: counted_words)
    # where the median step's time goes (analysis/run/breakdown.py), over the steady state
    # (analysis/run/steady.py): {"median_ns", "parts", "api", "steps", "device", "notes",
    # "one_time", "steady_note"}; None without steps. Each of ``steps`` has its own "parts".
    breakdown: dict | None = None

    def to_dict(self) -> dict:
        return {"total_ns": self.total_ns, "op_count": self.op_count, "counted": self.counted,
                "time": self.time, "total_span_ns": self.total_span_ns, "steps": self.steps,
                "breakdown": self.breakdown,
                "by_op": self.by_op, "by_type": self.by_type, "by_device": self.by_device,
                "by_kernel": self.by_kernel, "by_hlo": self.by_hlo}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        tables = (("op", self.by_op), ("op_type", self.by_type), ("device", self.by_device), ("kernel", self.by_kernel))
        return csv_text(["group", "key", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share", "device_ns",
                         "host_ns"],
                        ([group, row["key"], row["count"], row["total_ns"], row["mean_ns"], row["min_ns"],
                          row["max_ns"], f"{row['share']:.6f}", row.get("device_ns", 0), row.get("host_ns", 0)]
                         for group, rows in tables for row in rows))

    def to_text(self) -> str:
        what = self.counted_as or COUNTED_WORDS.get(self.counted, "events")
        of_what = " device time" if self.time == "device" else ""
        lines = [f"{self.op_count} {what}, {ms(self.total_ns)}{of_what} in all"]
        if self.steps:
            durations = [s["duration_ns"] for s in self.steps]
            lines.append(f"{plural(len(self.steps), 'step')}, median {ms(int(np.median(durations)))} "
                         f"(min {ms(min(durations))}, max {ms(max(durations))})")
        if self.breakdown:
            lines += breakdown_lines(self.breakdown)
        both = self.time == "device"
        tables = [("Top ops by device time" if both else "Top ops by total time", self.by_op), ("By op type", self.by_type),
                  ("By device", self.by_device)]
        if self.by_kernel:  # C++ kernel names demangled and shortened (--json keeps them whole)
            tables.append(("Top kernels by device time",
                           [dict(row, key=short_kernel_name(row["key"])) for row in self.by_kernel]))
        if self.by_hlo:
            # each with every framework op it computes: a fusion's time is all of theirs
            tables.append(("Top HLO instructions (framework ops computed)",
                           [dict(row, op=", ".join(row["tf_ops"])) for row in self.by_hlo]))
        for title, rows in tables:
            lines += ["", title, _table(rows, both)]
            if rows is self.by_type and any(row["key"] == ASYNC_COPY for row in rows):
                lines.append(f"  ({ASYNC_COPY}: XLA's copy-start/copy-done pairs, copies between memories that run "
                             "beside the compute; a copy-done's time is the wait for its copy)")
        return "\n".join(lines)

    __str__ = to_text


def counted_rows(trace: Trace) -> tuple[np.ndarray, str]:
    """The rows a summary counts: TF ops when there are any (host annotations such as
    ``EagerExecute`` enclose ops and would count their time twice), else device kernels
    and copies (a TPU profile), else every row."""
    category = trace.ops["category"]
    for wanted, label in (((Category.OP,), "op"), ((Category.DEVICE, Category.MEMCPY), "device+memcpy")):
        mask = rows_among(category, wanted)
        if mask.any():
            return mask, label
    return np.ones(len(trace), dtype=bool), "all"


# What a summary counts, most telling first: device time, TF ops' host time, every row.
MODES = ("device+memcpy", "op", "all")
# Rows from which the step breakdown runs in a thread of its own beside the grouping: below,
# the thread's start and the GIL's handovers cost about what the overlap saves.
THREADED_MIN_ROWS = 200_000


def summary_mode(trace: Trace) -> str:
    """The rows :func:`summarize` counts in ``trace`` (one of :data:`MODES`)."""
    if device_rows(trace.ops["category"], trace.ops["flags"]).any():
        return "device+memcpy"
    return counted_rows(trace)[1]


def _counted_mask(trace: Trace, mode: str, device: np.ndarray, host: np.ndarray) -> np.ndarray:
    """The rows a summary in ``mode`` counts (``device``, ``host``: the device rows and TF ops)."""
    if mode == "device+memcpy":
        return device
    return host if mode == "op" else np.ones(len(trace), dtype=bool)


def counted_ops(trace: Trace) -> tuple[int, str]:
    """How many rows ``summary`` counts, and what they are (:func:`counted_words`): ``info``
    says the same number. Profiler bookkeeping on the host (``ThreadpoolListener::Record``,
    ``EagerExecute``) is not an op."""
    mode = summary_mode(trace)
    ops = trace.ops
    mask = _counted_mask(trace, mode, device_rows(ops["category"], ops["flags"]), ops["category"] == Category.OP)
    return int(mask.sum()), counted_words(trace, mode)


# What the rows a summary counts are called, by mode: one vocabulary in every output (info,
# summary, the HTML page; a trace's repr and the writers' "wrote ..." lines count events).
# Kernels are what runs on a device (GPU kernels and copies, a TPU's XLA ops).
COUNTED_WORDS = {"op": "TF ops", "device+memcpy": "kernels", "all": "events"}


def counted_words(trace: Trace, mode: str) -> str:
    """:data:`COUNTED_WORDS` for ``trace``: the op rows of a JAX run are JAX ops."""
    return framework_ops(trace) if mode == "op" else COUNTED_WORDS[mode]


def breakdown_lines(breakdown: dict) -> list[str]:
    """The text of a summary's breakdown: the median step by part, the device's share, what
    was left out of the median, and what the format cannot tell."""
    counted = breakdown["steps"]
    lines = [f"median step ({plural(len(counted), 'step')}) {ms(breakdown['median_ns'])} = "
             + " + ".join(f"{part} {breakdown['parts'][part] / 1e6:.3f}" for part in PARTS) + " ms"]
    device = breakdown.get("device")
    if device:
        lines.append(f"device busy {ms(device['busy_ns'])}, idle {ms(device['idle_ns'])} of the median step: "
                     f"{device['bound']}-bound")
    lines += [f"note: {note}" for note in [breakdown.get("steady_note"), *breakdown.get("notes", ())] if note]
    return lines


def summarize(trace: Trace, top: int | None = None, mode: str | None = None, warmup: int | None = None) -> Summary:
    """``mode`` (one of :data:`MODES`, default :func:`summary_mode`): count these rows,
    as a summary of several traces together does where another trace decides the mode.
    ``warmup``: the steps the median step's breakdown leaves out (None: the steady state)."""
    # The step breakdown's walks, in a second thread while the rows are grouped here (both
    # spend their time in loops that release the GIL) where the trace is large enough.
    breakdown_job = (ThreadedJob(_steps_and_breakdown, trace, warmup)
                     if len(trace) >= THREADED_MIN_ROWS and choose_parallelism().threads() > 1 else None)
    ops = trace.ops
    device = device_rows(ops["category"], ops["flags"])
    host = ops["category"] == Category.OP
    mode = mode or (summary_mode(trace) if not device.any() else "device+memcpy")
    mask = _counted_mask(trace, mode, device, host)
    either = mask | host
    # Each device's busy time first, while no time column of this summary exists yet (it
    # sorts copies of the device's starts and ends: 48 MB for 3M rows).
    busy = _busy_by_device(ops, either)
    device_time = np.zeros(len(trace), dtype=np.int64)
    device_time[device] = self_times(ops["start_ns"], ops["end_ns"], ops["lane"], np.flatnonzero(device))
    # 3M rows make every time column 24 MB: the host time is the durations zeroed in
    # place, and is the basis itself where TF ops are what is counted.
    duration = np.subtract(ops["end_ns"], ops["start_ns"], dtype=np.int64)
    host_time = np.where(host, duration, 0) if mode == "all" else duration
    if host_time is duration:
        duration[~host] = 0
    counted = mode
    if mode == "device+memcpy":
        time, basis = "device", device_time
    else:
        time, basis = "host", host_time if mode == "op" else duration
    total = int(basis.sum(where=mask))  # no 3M-row copy of the counted rows
    by_hlo = hlo_rows(trace, mask, basis, total, top)
    devices = np.array([d.name for d in trace.devices] or [""], dtype=object)
    span = trace.end_ns - trace.start_ns
    # The rows grouped, taken once for every grouping (3M rows make each column 24 MB);
    # without device rows, device time is zeros that stay unwritten (and cost no memory).
    everything = bool(either.all())
    # The C loop skips the rows left out itself: no copies of them (3M rows: 60 MB).
    selected = None if everything or not _compiled() else either
    kept = (lambda column: column) if everything or selected is not None else (lambda column: column[either])
    grouped_counted, grouped_basis = kept(mask), kept(basis)
    grouped_host = grouped_basis if host_time is basis else kept(host_time)
    grouped_device = kept(device_time) if device.any() else None  # None: no device time
    del duration, host_time, basis

    def group(keys: np.ndarray, labels) -> list[dict]:
        return _group(kept(keys), grouped_counted, grouped_basis, grouped_device, grouped_host, labels, total, top,
                      selected)

    # Grouped by device number, not name: hosts of a merged trace have devices of one name.
    by_device = group(ops["device"], range(len(devices)))
    for row in by_device:
        index = int(row["key"])
        row["key"] = str(devices[index])
        row["busy_ns"] = busy[index]
        row["idle_ns"] = span - row["busy_ns"]
    by_op, by_type = group(ops["name"], trace.strings), group(ops["op_type"], trace.strings)
    by_kernel = _kernels(trace, device, device_time, top) if time == "device" else []
    op_count = int(mask.sum())
    # Else the step breakdown last, once the grouped columns are gone (3M rows: 24 MB each).
    grouped_counted = grouped_basis = grouped_host = grouped_device = selected = either = None
    del device_time, mask
    steps, breakdown = breakdown_job.result() if breakdown_job else _steps_and_breakdown(trace, warmup)
    return Summary(
        total_ns=total, op_count=op_count, counted=counted, time=time, total_span_ns=span,
        counted_as=counted_words(trace, counted),
        steps=steps, breakdown=breakdown,
        by_op=by_op,
        by_type=by_type,
        by_device=by_device,
        by_kernel=by_kernel,
        by_hlo=by_hlo,
    )


def _steps_and_breakdown(trace: Trace, warmup: int | None) -> tuple[list[dict], dict | None]:
    """Each step with its parts (a step left out as one-time work says why), and the median
    step's breakdown over the steady state."""
    if not trace.steps:
        return [], None
    if len({device.host for device in trace.devices if device.host}) > 1:  # hosts step apart: summary --by-host
        return [{"number": s.number, "name": s.name, "start_ns": s.start_ns, "duration_ns": s.duration_ns}
                for s in trace.steps], None
    selection = select_steps(trace, warmup)
    found = step_breakdown(trace, selection.positions)
    one_time = {step.position: step for step in selection.one_time}
    steps = []
    for position, (step, parts) in enumerate(zip(trace.steps, found.steps)):
        row = {"number": step.number, "name": step.name, "start_ns": step.start_ns, "duration_ns": step.duration_ns,
               **parts.to_dict()}
        if position in one_time:
            row["one_time"] = dict(one_time[position].causes)
        steps.append(row)
    breakdown = {**found.to_dict(), "one_time": [s.to_dict() for s in selection.one_time],
                 "steady_note": selection.note()}
    return steps, breakdown


def _busy_by_device(ops, either: np.ndarray) -> dict[int, int]:
    """The busy time (union of the spans) of the ``either`` rows of each device."""
    device = ops["device"]
    if not len(device):
        return {}
    start, end = ops["start_ns"], ops["end_ns"]
    everything = bool(either.all())
    try:  # the devices with rows, counted without a copy of the rows' devices (3M rows: 12 MB)
        present = np.flatnonzero(np.bincount(device)).tolist()
    except ValueError:  # a negative device number: every number seen among the rows
        present = np.unique(device).tolist()
    if len(present) == 1:  # one device: its rows are the ``either`` rows
        return {present[0]: _busy(start, end, None if everything else either)} if everything or either.any() else {}
    busy = {}
    for index in present:
        rows = either & (device == index)
        if rows.any():
            busy[index] = _busy(start, end, rows)
    return busy


def _busy(start: np.ndarray, end: np.ndarray, rows: np.ndarray | None = None) -> int:
    """:func:`busy_ns` of the ``rows`` (a mask; None: every row); where the rows are a few
    runs in start order (an XSpace's lines), the C loop merges the runs, without busy_ns's
    sorted copies (3M rows: 48 MB)."""
    if _compiled() and len(start):
        runs = start_runs(start)
        if runs is not None:
            try:
                return _groupc.busy(start, end, runs, rows)
            except ValueError:  # an end before its start: busy_ns leaves it out
                pass
    if rows is None:
        return busy_ns(start, end)
    return busy_ns(start[rows], end[rows], scratch=True)


def _group(keys: np.ndarray, counted: np.ndarray, basis: np.ndarray, device_ns: np.ndarray | None,
           host_ns: np.ndarray, labels, total: int, top: int | None, selected: np.ndarray | None = None) -> list[dict]:
    """Rows per key: count, total, mean, min and max over the counted rows (on the basis
    time), and device and host time over all of the key's rows (``device_ns`` None: none).
    ``selected``: only these rows (a mask; the C loop's, which skips the others itself)."""
    if not len(keys):
        return []
    small = keys.dtype.kind in "iu" and int(keys.min()) >= 0 and int(keys.max()) < 4 * len(keys) + 1024
    if selected is not None and not (small and _compiled()):
        same = host_ns is basis
        keys, counted, basis = keys[selected], counted[selected], basis[selected]
        host_ns = basis if same else host_ns[selected]
        device_ns = None if device_ns is None else device_ns[selected]
        selected = None
        if not len(keys):
            return []
        small = keys.dtype.kind in "iu" and int(keys.min()) >= 0 and int(keys.max()) < 4 * len(keys) + 1024
    if small:
        # Small non-negative ids (string ids, device numbers): the keys index the sums
        # themselves, compacted to the keys that occur at the end (no sort, no inverse).
        unique, index, size = None, keys, int(keys.max()) + 1
    else:
        unique, index = np.unique(keys, return_inverse=True)
        index, size = index.ravel(), len(unique)

    every_row = bool(counted.all()) if selected is None else not np.any(selected & ~counted)
    hosts_are_sums = host_ns is basis
    if _compiled():  # one pass over the rows
        occurring, count, sums, hosts, devices, lows, highs = (np.frombuffer(column, dtype=np.int64) for column in
                                                               _groupc.totals(
            index, size, np.ascontiguousarray(basis, dtype=np.int64), None if every_row else counted,
            None if hosts_are_sums else np.ascontiguousarray(host_ns, dtype=np.int64),
            None if device_ns is None else np.ascontiguousarray(device_ns, dtype=np.int64), selected))
    else:
        occurring, count, sums, hosts, devices, lows, highs = _totals_numpy(index, size, basis, counted, every_row,
                                                                            host_ns, device_ns)
    lows[count == 0] = 0
    if unique is None:
        unique = np.flatnonzero(occurring)
        count, sums, devices, lows, highs = count[unique], sums[unique], devices[unique], lows[unique], highs[unique]
        hosts = sums if hosts_are_sums else hosts[unique]
    order = np.lexsort((unique, -hosts, -sums))
    if top is not None:
        order = order[:top]
    return [{"key": str(labels[unique[i]]), "count": int(count[i]), "total_ns": int(sums[i]),
             "mean_ns": int(sums[i] // count[i]) if count[i] else 0, "min_ns": int(lows[i]),
             "max_ns": int(highs[i]), "share": float(sums[i] / total) if total else 0.0,
             "device_ns": int(devices[i]), "host_ns": int(hosts[i])} for i in order.tolist()]


def _totals_numpy(index: np.ndarray, size: int, basis: np.ndarray, counted: np.ndarray, every_row: bool,
                  host_ns: np.ndarray, device_ns: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """``_groupc.totals`` with numpy: per key, its rows, its counted rows, the sums of the
    basis, host and device time, and the least and greatest basis of its counted rows."""
    def totals(weights: np.ndarray) -> np.ndarray:
        # Exact int64 sums (a weighted bincount would sum float64 copies of the rows).
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, index, weights)
        return out

    # Each sum over 3M rows is a pass: the ones whose answer is known (every row
    # counted, no device rows, host time as the basis) are skipped.
    occurring = np.bincount(index, minlength=size)
    count = occurring if every_row else totals(counted)
    sums = totals(basis)
    devices = totals(device_ns) if device_ns is not None else np.zeros(size, dtype=np.int64)
    hosts = sums if host_ns is basis else totals(host_ns)
    lows = np.full(size, np.iinfo(np.int64).max)
    highs = np.zeros(size, dtype=np.int64)
    if not every_row:
        index, basis = index[counted], basis[counted]
    np.minimum.at(lows, index, basis)
    np.maximum.at(highs, index, basis)
    return occurring, count, sums, hosts, devices, lows, highs


def _kernels(trace: Trace, device: np.ndarray, device_time: np.ndarray, top: int | None) -> list[dict]:
    """Device time per kernel (or XLA op) and the TF op it ran for."""
    ops = trace.ops
    rows = np.flatnonzero(device)
    width = max(len(trace.strings), 1)  # pair keys sort as (kernel, op) pairs do
    pairs = ops["kernel"][rows].astype(np.int64) * width + ops["name"][rows].astype(np.int64)
    total = int(device_time[rows].sum())
    found = _group(pairs, np.ones(len(rows), dtype=bool), device_time[rows], device_time[rows],
                   np.zeros(len(rows), dtype=np.int64), _KernelLabels(trace.strings, width), total, top)
    for row in found:
        row["key"], row["op"] = row["key"].split("\0", 1)
        del row["host_ns"]
    return found


class _KernelLabels:
    """Labels of (kernel, op) pair keys: ``"kernel\0op"``, split again by the caller."""

    def __init__(self, strings, width: int):
        self.strings, self.width = strings, width

    def __getitem__(self, key) -> str:
        kernel, op = divmod(int(key), self.width)
        return f"{self.strings[kernel]}\0{self.strings[op]}"


def describe(trace: Trace) -> dict:
    """What ``tracebridge info`` prints: format, steps, devices and counts."""
    ops = trace.ops
    per_device = np.bincount(ops["device"], minlength=len(trace.devices)) if len(trace) else \
        np.zeros(len(trace.devices), dtype=np.int64)
    peaks = allocator_peaks(trace)
    categories = np.bincount(ops["category"], minlength=len(Category)) if len(trace) else \
        np.zeros(len(Category), dtype=np.int64)
    counted, counted_as = counted_ops(trace)
    return {
        "format": trace.source_format,
        "categories": {category.label: int(n) for category, n in zip(Category, categories) if n},
        "metadata": dict(trace.metadata),
        "graph_outline": graph_outline(trace.metadata["graph"]) if trace.metadata.get("graph") else None,
        # "ops": what summary counts (its op_count); "events": every row, annotations included.
        "ops": counted, "counted": counted_as, "events": len(trace),
        "steps": [{"number": s.number, "name": s.name, "duration_ns": s.duration_ns} for s in trace.steps],
        "devices": [{"name": d.name, "kind": d.kind, "ops": int(per_device[i]),
                     "lanes": sum(1 for lane in trace.lanes if lane.device == i)}
                    for i, d in enumerate(trace.devices)],
        "span_ns": trace.end_ns - trace.start_ns,
        "transfers": {"count": trace.transfers.rows, "bytes": int(trace.transfers["bytes"].sum())},
        "memory": {"allocators": peaks, "allocation_records": trace.allocations.rows},
        "outputs": trace.outputs.rows,
        "layers": model_layers(trace),
    }


def model_layers(trace: Trace) -> list[dict]:
    """The model's layers as the recorded graph shows them (analysis/graphs/layers.py: its
    parameters grouped, in forward order), or [] without a graph."""
    from ..graphs.layers import attribute  # info's: a summary of 3M ops does without (24 ms of imports)
    from ..graphs.recorded_graph import decode_graph
    graph = decode_graph(trace.metadata)
    if graph is None:
        return []
    return [{"name": layer.name, "variables": list(layer.variables), "shapes": [list(s) for s in layer.shapes],
             "parameters": layer.parameters} for layer in attribute(graph).layers]


def shown_metadata(info: dict) -> list[tuple[str, str]]:
    """``info``'s metadata (of :func:`describe`) as text and CSV show it, key by key; what
    grows with the model or the run (the recorded graph, the HLO modules' protos, each
    step's input shapes) only outlined, anything else cut at :data:`_LONGEST` characters,
    since ``--json`` keeps it whole."""
    shown = []
    for key, value in sorted(info["metadata"].items()):
        if key == "source_format":
            continue
        if key == "graph":
            value = info["graph_outline"]
        elif key == HLO_MODULES and isinstance(value, list):
            value = _hlo_outline(value)
        elif key == STEP_INPUTS:
            value = _step_inputs_outline(value)
        value = str(value)
        if len(value) > _LONGEST:
            value = f"{value[:_LONGEST - 60]}... ({len(value):,} characters; --json prints it whole)"
        shown.append((key, value))
    return shown


_LONGEST = 300  # characters of a metadata value that info's text and CSV show


def _step_inputs_outline(value) -> str:
    """``6 steps, 6 input shapes: float32[4,64], float32[8,64], ...`` for ``metadata["step_inputs"]``."""
    try:
        shapes = json.loads(value)
    except (TypeError, ValueError):
        return str(value)
    if not isinstance(shapes, dict):
        return str(value)
    distinct = list(dict.fromkeys(map(str, shapes.values())))
    listed = "; ".join(distinct[:3]) + (f"; ... ({len(distinct) - 3} more)" if len(distinct) > 3 else "")
    return f"{len(shapes):,} steps, {len(distinct):,} input shape{'s' * (len(distinct) != 1)}: {listed}"


def _hlo_outline(modules: list) -> str:
    """``3 HLO modules (41,200 bytes): jit_train_step (2 programs), ...`` for
    ``metadata["hlo_modules"]``: each name once (a function compiled for two input types is
    one name with two program ids)."""
    names = [str(m.get("name", "?")) if isinstance(m, dict) else "?" for m in modules]
    size = sum(len(m.get("proto") or "") * 3 // 4 for m in modules if isinstance(m, dict))  # base64 -> bytes
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    shown = [f"{name} ({count} programs)" if count > 1 else name for name, count in counts.items()]
    listed = ", ".join(shown[:5]) + (f", ... ({len(shown) - 5} more)" if len(shown) > 5 else "")
    return f"{len(names)} HLO module{'s' * (len(names) != 1)} ({size:,} bytes): {listed}"


INFO_COLUMNS = ("section", "key", "kind", "count", "duration_ns", "lanes", "value")


def describe_csv(info: dict) -> str:
    """``tracebridge info --csv``: every line of the text as a row of :data:`INFO_COLUMNS`
    (section: format, metadata, ops, events, span, step, device, transfers, memory_peak,
    note), every step and device included."""
    def row(section, key="", kind="", count="", duration_ns="", lanes="", value=""):
        return (section, key, kind, count, duration_ns, lanes, value)
    rows = [row("format", value=info["format"])]
    rows += [row("metadata", key, value=value) for key, value in shown_metadata(info)]
    rows += [row("ops", info["counted"], count=info["ops"]), row("events", count=info["events"]),
             row("span", duration_ns=info["span_ns"])]
    rows += [row("step", s["number"], duration_ns=s["duration_ns"], value=s["name"]) for s in info["steps"]]
    rows += [row("device", d["name"], d["kind"], d["ops"], lanes=d["lanes"]) for d in info["devices"]]
    if info["transfers"]["count"]:
        rows.append(row("transfers", count=info["transfers"]["count"], value=info["transfers"]["bytes"]))
    rows += [row("memory_peak", name, value=peak) for name, peak in info["memory"]["allocators"].items()]
    rows += [row("note", value=note) for note in info.get("notes", ())]
    return csv_text(INFO_COLUMNS, rows)


def allocator_peaks(trace: Trace) -> dict[str, int]:
    """Each allocator's peak bytes in use, from the trace's allocator counters."""
    counters = trace.counters
    return {trace.strings[a]: int(counters["bytes_in_use"][counters["allocator"] == a].max())
            for a in np.unique(counters["allocator"]).tolist()}


def _table(rows: list[dict], device_first: bool = False) -> str:
    if not rows:
        return "  (none)"
    if device_first:  # device time leads; the host's own time beside it, where there is any
        host = any(r.get("host_ns", 0) for r in rows)
        header = ("device", "share", "count", "mean") + (("host",) if host else ()) + ("name",)
        body = [(ms(r["total_ns"]), f"{100 * r['share']:5.1f}%", str(r["count"]), ms(r["mean_ns"]))
                + ((ms(r.get("host_ns", 0)),) if host else ())
                + (r["key"] + (f"  ({r['op']})" if "op" in r else ""),)
                for r in rows]
    else:
        header = ("total", "share", "count", "mean", "name")
        body = [(ms(r["total_ns"]), f"{100 * r['share']:5.1f}%", str(r["count"]), ms(r["mean_ns"]), r["key"])
                for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header[:-1])]
    lines = ["  " + "  ".join(h.rjust(w) for h, w in zip(header[:-1], widths)) + "  " + header[-1]]
    for b in body:
        lines.append("  " + "  ".join(v.rjust(w) for v, w in zip(b[:-1], widths)) + "  " + b[-1])
    return "\n".join(lines)
