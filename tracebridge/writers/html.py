"""A standalone HTML timeline of a trace: one file, no network, canvas-drawn.

The successor of tfvis: one panel per device with its ops in lanes, coloured by op type;
network and collective ops (``RecvTensor``, ``_Send``/``_Recv``, ``NcclAllReduce``,
``HorovodAllreduce``, ``Collective*``) in a lane group of their own with bytes and
source -> destination; hover box, details panel, search, step selector, top ops, allocator
memory, chrome://tracing keys (W/S zoom, A/D pan).

The page draws on canvases with level-of-detail merging: a million ops draw their first view
in about half a second on two cores (``bench/bench_html.py``). Data is embedded as columns,
not one object per op:

* ``<script type="application/json" id="tb0-meta" class="tracebridge-trace">``: devices,
  lanes (each a run of ops in page order), steps, op types, top ops, the column manifest;
* ``<script type="application/octet-stream" id="tb0-strings">``: the string table (op
  names, inputs, kernels, labels, transfer ends) as JSON;
* ``<script type="application/octet-stream" id="tb0-<column>">``: little-endian typed
  arrays.

Both are base64, raw-deflated first (zlib level 1) where that halves them (names, inputs,
small ids; ``meta.deflated`` lists which): the page inflates them with the browser's own
``DecompressionStream``. At a million ops that makes the page about a third of the size.
The page draws as soon as the time, duration and type columns are decoded; names, inputs
and the rest follow (``window.tracebridge.ready``).

Times are integer nanoseconds relative to ``base_ns`` (a decimal string in the meta, as
epoch nanoseconds do not fit a double). Starts are stored as deltas from the previous op
of the same lane (uint32 when they fit, else float64 offsets), durations as uint32 (else
float64); ids use the narrowest unsigned type that holds them.

Page order of ops: devices in trace order (only those ``device_pattern`` matches), then
each device's compute lanes (the trace's lanes; overlapping ops of one lane are split
into sub-rows), then its network lanes, each lane by start time. A lane of XLA kernels or
thunks (events readers/xspace_xla.py linked to their HLO) has a "TF ops" lane ("JAX ops" in a
JAX run) above it: one
span per run of its events of one TF op, a page op of its own (flags bit 2), so that a
click on the op or on one of its events highlights both. ``window.tracebridge``
exposes a small API (see ``html_assets/start.js``; the page shell is :mod:`.html_page`).

Safety: everything from the trace is JSON with ``<``, ``>`` and ``&`` escaped and
non-ASCII as ``\\uXXXX``, so nothing can end a script element; the page builds its DOM
with ``textContent`` only, and a Content-Security-Policy allows no script but the page's
own (by hash) and no network at all.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence

import numpy as np

from .._files import atomic_output
from ..model.graph_outline import graph_outline
from ..model.hlo import HLO_INSTRUCTION, HLO_MODULES, LINK_STATS, framework_ops
from ..model.kernel_names import demangled, short_kernel_name
from ..model.lanes import first_fit, op_spans
from .thread_roles import lane_labels
from ..model.schema import NO_STEP, Category, OpFlag
from ..model.trace import Trace
from .html_page import page_end, page_head, page_script

FORMAT_VERSION = 1
TOP_ROWS = 100  # rows of the top-ops and op-type tables
COMPRESS_LEVEL = 1

# Network and collective op types (exact), and prefixes of families of them.
NETWORK_TYPES = frozenset({
    "RecvTensor", "_Send", "_Recv", "_HostSend", "_HostRecv", "_RecvTensor",
    "HorovodAllreduce", "HorovodAllgather", "HorovodBroadcast", "HorovodAlltoall",
    "HorovodReducescatter", "NcclAllReduce", "NcclReduce", "NcclBroadcast",
})
NETWORK_PREFIXES = ("Collective", "Nccl", "_Nccl", "Horovod")


def is_network_type(op_type: str) -> bool:
    """True for op types drawn in the network and collectives lane group."""
    return op_type in NETWORK_TYPES or op_type.startswith(NETWORK_PREFIXES)


def html_document(trace: Trace, *, device_pattern: str | None = None,
                  title: str | None = None, problems: Sequence = ()) -> str:
    """The whole page as text (ASCII only). See :func:`write_html` for the options."""
    return "".join(_document_parts(trace, device_pattern=device_pattern, title=title, problems=problems))


def write_html(trace: Trace, path: str | os.PathLike, *, device_pattern: str | None = None,
               title: str | None = None, problems: Sequence = ()) -> None:
    """Write the timeline page of ``trace`` to ``path``: one self-contained HTML file that
    works from ``file://`` without any network.

    ``device_pattern``: a regular expression searched in device names; only matching
    devices are shown (and summarized). ``title``: the page title (default: the source
    format and op count). ``problems``: what ``tracebridge doctor`` found in the trace
    (objects with ``code``, ``missing``, ``evidence`` and ``fix``; :func:`tracebridge.save`
    passes them), shown as a panel above the timeline. Raises :class:`~tracebridge.errors.OutputError` when the file
    cannot be written (no partial file is left) and ``re.error`` for a bad pattern.
    """
    parts = _document_parts(trace, device_pattern=device_pattern, title=title, problems=problems)
    with atomic_output(path, compress=os.fspath(path).endswith(".gz")) as out:
        for part in parts:
            out.write(part.encode("ascii"))


def notebook_html(trace: Trace, *, height: int = 640, max_ops: int = 300_000, **options) -> str:
    """What ``Trace._repr_html_`` shows: the page in a sandboxed ``<iframe srcdoc>`` (its
    scripts run in an opaque origin, apart from the notebook). Traces above ``max_ops``
    ops get a one-line hint instead, as the notebook would hold the whole page."""
    if len(trace) > max_ops:
        return (f"<p>{html.escape(repr(trace))}: more than {max_ops:,} events for a notebook; open it with "
                "<code>tracebridge.writers.html.write_html(trace, 'timeline.html')</code>.</p>")
    document = html_document(trace, **options)
    return (f'<iframe sandbox="allow-scripts" style="width:100%;height:{int(height)}px;border:1px solid #ccc" '
            f'srcdoc="{html.escape(document, quote=True)}"></iframe>')


# --------------------------------------------------------------------------- the page

def _document_parts(trace: Trace, *, device_pattern: str | None, title: str | None,
                    problems: Sequence) -> Iterator[str]:
    script = page_script(comparison=False)
    timeline = TimelineData(trace, device_pattern=device_pattern, title=title)
    yield page_head(script, timeline.title, "timeline")
    yield problems_panel(problems)
    yield from timeline.blocks("tb0")
    yield page_end(script)


def problems_panel(problems: Sequence) -> str:
    """The doctor's findings (computed by :mod:`tracebridge.analysis.run.doctor`, handed in by
    the caller) as plain HTML outside the app: escaped text in a list, no script, nothing
    when there are none."""
    if not problems:
        return ""
    items = "".join(f"<li><b>{html.escape(p.code)}</b>: {html.escape(p.missing)} ({html.escape(p.evidence)}); "
                    f"fix: {html.escape(p.fix)}</li>" for p in problems)
    text = (f'<section id="tb-doctor" style="font:12px sans-serif;padding:4px 8px;background:#fff8e1">'
            f"<b>tracebridge doctor</b><ul>{items}</ul></section>\n")
    return text.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _finite(value):
    """``value`` with floats that JSON lacks (NaN, infinities) as None, in dicts and lists too."""
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _json(value) -> str:
    """JSON that cannot end a <script> element or open a comment, in ASCII."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _used_ids(size: int, *columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The string ids used in ``columns`` (sorted) and a map from old id to new (0..k-1):
    a mask over the string table, linear where ``np.unique`` would sort."""
    present = np.zeros(size, dtype=bool)
    for ids in columns:
        present[ids] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1).astype(np.int64)


def _uint(values: np.ndarray) -> tuple[str, np.ndarray]:
    """The narrowest little-endian unsigned type holding ``values`` (all >= 0)."""
    top = int(values.max()) if len(values) else 0
    for code, dtype in (("u8", "<u1"), ("u16", "<u2"), ("u32", "<u4")):
        if top <= np.iinfo(dtype).max:
            return code, values.astype(dtype)
    return "f64", values.astype("<f8")



# A device panel with more lanes than this starts folded (one click opens it).
FOLD_LANES = 8
_KIND_RANK = {"compute": 0, "stream": 1, "memcpy": 2}


def is_accelerator(device) -> bool:
    return (device.type or "").upper() in ("GPU", "TPU") or device.kind in ("stream", "memcpy")


def page_order(trace: Trace, devices: list[int]) -> list[int]:
    """The order of the device panels: accelerators first (each GPU, then its streams and
    copies), then hosts, busiest first, and devices without ops last; a trace's file order
    says nothing to a reader."""
    events = np.bincount(trace.ops["device"], minlength=len(trace.devices)) if len(trace) else \
        np.zeros(len(trace.devices), dtype=np.int64)

    def key(index: int):
        device = trace.devices[index]
        idle = not events[index]  # a device without ops (an idle GPU plane) after those with some
        if is_accelerator(device):
            return (idle, 0, device.host or "", device.type or "", device.index if device.index is not None else -1,
                    _KIND_RANK.get(device.kind, 3), -int(events[index]), device.name)
        return (idle, 1, "", "", 0, 0, -int(events[index]), device.name)
    return sorted(devices, key=key)

SPAN_FLAG = 2  # the flags column's bit of a TF op span drawn over its XLA events


class XlaLinks:
    """Per trace row, the string ids of what readers/xspace_xla.py linked its XLA event to
    (its ``hlo_instruction``, ``hlo_module`` and, for a fusion of several, ``tf_ops`` event
    stats; -1 where none)."""

    def __init__(self, trace: Trace):
        size = len(trace) + 1 if trace.string_id(HLO_INSTRUCTION) >= 0 else 1  # no XLA: nothing to hold
        self.instruction = np.full(size, -1, dtype=np.int64)
        self.module = np.full(size, -1, dtype=np.int64)
        self.tf_ops = np.full(size, -1, dtype=np.int64)
        if size == 1:
            self.any = False
            return
        for key, column in zip(LINK_STATS, (self.instruction, self.module, self.tf_ops)):
            rows, values = trace.event_stat(key)
            column[rows] = values
        self.any = bool((self.instruction >= 0).any())


class TimelineData:
    """One trace as a timeline page draws it: its devices and lanes laid out, its ops as
    typed columns and a meta object; :meth:`blocks` writes them as the page's data blocks
    (the diff page of :mod:`.compare_html` holds two)."""

    def __init__(self, trace: Trace, *, device_pattern: str | None, title: str | None):
        self.hidden_devices = 0
        if device_pattern is not None:
            pattern = re.compile(device_pattern)
            kept = [i for i, d in enumerate(trace.devices) if pattern.search(d.name)]
            self.hidden_devices = len(trace.devices) - len(kept)
            trace = trace.filter(device=device_pattern)
        else:
            kept = list(range(len(trace.devices)))
        self.trace = trace
        self.device_ids = page_order(trace, kept)
        self.title = title if title is not None else (
            f"{trace.source_format} trace, {len(trace):,} events" + (f" ({device_pattern})" if device_pattern else ""))
        self.columns: dict[str, tuple[str, np.ndarray]] = {}
        self._layout()

    # --- lanes and page order -----------------------------------------------------------
    def _layout(self) -> None:
        trace, ops = self.trace, self.trace.ops
        strings = trace.strings
        page_device = np.full(len(trace.devices) + 1, -1, dtype=np.int64)
        page_device[self.device_ids] = np.arange(len(self.device_ids))
        rows = np.flatnonzero(page_device[ops["device"]] >= 0) if len(trace) else np.zeros(0, np.int64)
        # Network ops: by op type or kernel, by name (RecvTensor), or having a transfer row.
        type_ids = _used_ids(len(strings), ops["op_type"], ops["kernel"])[0]
        network_ids = [i for i in type_ids.tolist() if is_network_type(strings[i])]
        recv = strings.index("RecvTensor") if "RecvTensor" in strings else -1
        network = (np.isin(ops["op_type"], network_ids) | np.isin(ops["kernel"], network_ids)
                   | (ops["name"] == recv))
        network[trace.transfers["op"]] = True
        network = network[rows]
        xla = XlaLinks(trace)
        framework = framework_ops(trace) if xla.any else "TF ops"  # the lane of spans above XLA events
        device = page_device[ops["device"][rows]]
        start = ops["start_ns"][rows]
        end = np.maximum(ops["end_ns"][rows], start)  # a negative duration is drawn as zero
        group_lane = np.where(network, -1, ops["lane"][rows]).astype(np.int64)
        order = np.lexsort((end, start, group_lane, network, device))
        rows, device, start, end = rows[order], device[order], start[order], end[order]
        network, group_lane = network[order], group_lane[order]

        # Host threads go by their role (TF compute 2, tf.data 1, Python), their own name on hover.
        labels = _lane_labels(trace)
        # Runs of one (device, network, lane); overlapping ops of a run get sub-rows.
        key_change = np.flatnonzero((np.diff(device) != 0) | (np.diff(network.astype(np.int8)) != 0)
                                    | (np.diff(group_lane) != 0)) + 1 if len(rows) else np.zeros(0, np.int64)
        bounds = np.r_[0, key_change, len(rows)].astype(np.int64) if len(rows) else np.zeros(1, np.int64)
        display = np.zeros(len(rows), dtype=np.int64)
        lanes: list[dict] = []
        spans: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # rows, starts, ends, lanes
        resorted = False
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            sub = first_fit(start[a:b], end[a:b])
            count = int(sub.max()) + 1
            is_net = bool(network[a])
            renamed = False
            if is_net:
                base_name = "network"
            else:
                known = 0 <= group_lane[a] < len(trace.lanes)
                thread = trace.lanes[int(group_lane[a])].name if known else "lane"
                base_name = labels[int(group_lane[a])] if known else thread
                renamed = base_name != thread
                if trace.ops["category"][rows[a]] == Category.DERIVED:  # xprof's lines from the streams
                    base_name += " (derived)"
                # XLA kernels and thunks sit under their TF op: a lane of TF op spans above them
                linked = np.flatnonzero(xla.instruction[rows[a:b]] >= 0) + a if xla.any else ()
                if len(linked):
                    span_rows, span_start, span_end, _ = op_spans(rows[linked], start[linked], end[linked], ops["name"])
                    span_sub = first_fit(span_start, span_end)
                    span_count = int(span_sub.max()) + 1
                    for k in range(span_count):
                        lanes.append({"device": int(device[a]), "name": framework + (f" / {k + 1}" if k else ""),
                                      "network": False, "tf_ops": True})
                    spans.append((span_rows, span_start, span_end, len(lanes) - span_count + span_sub))
                    resorted = True
            for k in range(count):
                name = (f"{base_name} {k + 1}" if is_net and count > 1 else
                        f"{base_name} / {k + 1}" if count > 1 and k else base_name)
                lanes.append({"device": int(device[a]), "name": name, "network": is_net,
                              **({"thread": thread} if renamed else {})})
            display[a:b] = len(lanes) - count + sub
            resorted |= count > 1
        span = np.zeros(len(rows), dtype=bool)
        if spans:  # the TF op spans join the page's ops, each standing for its first XLA event's row
            rows, start, end, display = (np.concatenate([rows] + [s[0] for s in spans]),
                                         np.concatenate([start] + [s[1] for s in spans]),
                                         np.concatenate([end] + [s[2] for s in spans]),
                                         np.concatenate([display] + [s[3] for s in spans]))
            span = np.r_[span, np.ones(len(rows) - len(span), dtype=bool)]
        if resorted:
            again = np.lexsort((end, start, display))
            rows, start, end, display, span = rows[again], start[again], end[again], display[again], span[again]
        offsets = np.searchsorted(display, np.arange(len(lanes) + 1)).astype(np.int64)
        for i, lane in enumerate(lanes):
            lane["first"] = int(offsets[i])
        self.rows, self.lanes, self.lane_offsets, self.span, self.xla = rows, lanes, offsets, span, xla
        self.base_ns = int(start.min()) if len(start) else trace.start_ns
        self._op_columns(start, end, offsets)

    def _op_columns(self, start: np.ndarray, end: np.ndarray, offsets: np.ndarray) -> None:
        trace, ops, rows = self.trace, self.trace.ops, self.rows
        n = len(rows)
        rel = start - self.base_ns
        duration = end - start
        # Starts: delta from the previous op of the same lane (the lane's first: from base).
        previous = np.r_[0, rel[:-1]] if n else rel
        first_of_lane = offsets[:-1][offsets[:-1] < offsets[1:]]
        previous = previous.copy()
        previous[first_of_lane] = 0
        delta = rel - previous
        if n == 0 or int(delta.max()) < 2**32:
            self.columns["start"] = ("u32", delta.astype("<u4"))
            self.start_delta = True
        else:
            self.columns["start"] = ("f64", rel.astype("<f8"))
            self.start_delta = False
        self.columns["dur"] = (("u32", duration.astype("<u4")) if n == 0 or int(duration.max()) < 2**32
                               else ("f64", duration.astype("<f8")))
        # Op types: an index into meta.types (few), needed for the first draw (colours).
        type_ids = ops["op_type"][rows]
        unique_types, remap_types = _used_ids(len(trace.strings), type_ids)
        self.types = [trace.strings[i] for i in unique_types.tolist()]
        self.columns["type"] = _uint(remap_types[type_ids])
        step = ops["step"][rows].astype(np.int64)
        self.columns["step"] = _uint(np.where(step == NO_STEP, 0, step + 1))
        span, real = self.span, ~self.span
        # flags: 1 the label is canonical (name = kernel(inputs)), 2 a TF op span over XLA events
        self.columns["flags"] = ("u8", ((((ops["flags"][rows] & int(OpFlag.LABEL_CANONICAL)) != 0) & real)
                                        | (span * SPAN_FLAG)).astype("<u1"))
        # Inputs of each op in page order: counts, then the flat name ids.
        input_offsets = trace.input_offsets()
        counts = (input_offsets[rows + 1] - input_offsets[rows]).astype(np.int64) if n else np.zeros(0, np.int64)
        counts[span] = 0
        total = int(counts.sum())
        firsts = np.repeat(input_offsets[rows].astype(np.int64) - np.r_[0, np.cumsum(counts)[:-1]], counts) \
            if n else np.zeros(0, np.int64)
        input_names = trace.inputs["name"][firsts + np.arange(total)] if total else np.zeros(0, np.int64)
        # Sparse columns: kernels that differ from the op type, stored (non-canonical) labels.
        kernel = ops["kernel"][rows]
        kernel_at = np.flatnonzero((kernel != type_ids) & real)
        label = ops["label"][rows]
        label_at = np.flatnonzero((label != 0) & ((ops["flags"][rows] & int(OpFlag.LABEL_CANONICAL)) == 0) & real)
        # XLA events: their HLO instruction, module and (a fusion of several) TF ops.
        xla = self.xla
        hlo_at = np.flatnonzero((xla.instruction[rows] >= 0) & real) if xla.any else np.zeros(0, np.int64)
        tf_ops_at = np.flatnonzero((xla.tf_ops[rows] >= 0) & real) if xla.any else np.zeros(0, np.int64)
        # Transfers, by the page position of their op.
        position = np.full(len(trace) + 1, -1, dtype=np.int64)
        position[rows[real]] = np.flatnonzero(real)
        transfers = trace.transfers
        t_pos = position[transfers["op"]] if transfers.rows else np.zeros(0, np.int64)
        t_keep = np.flatnonzero(t_pos >= 0)
        t_keep = t_keep[np.argsort(t_pos[t_keep], kind="stable")]
        # One string table for every string column the page reads.
        string_columns = {
            "name": ops["name"][rows], "inputs": input_names, "kernel_id": kernel[kernel_at],
            "label_id": label[label_at], "xfer_src": transfers["src"][t_keep],
            "xfer_dst": transfers["dst"][t_keep], "xfer_tensor": transfers["tensor"][t_keep],
            "hlo_id": xla.instruction[rows[hlo_at]], "hlo_module_id": xla.module[rows[hlo_at]],
            "tf_ops_id": xla.tf_ops[rows[tf_ops_at]],
        }
        used, remap = _used_ids(len(trace.strings), *string_columns.values())
        self.strings = [trace.strings[i] for i in used.tolist()]
        # C++ kernel names: the short form to show, the whole (demangled) for hover
        self.kernel_names = {}
        for index in np.unique(remap[string_columns["kernel_id"]]).tolist():
            name = self.strings[index]
            short = short_kernel_name(name)
            if short != name:
                self.kernel_names[str(index)] = [short, demangled(name)]
        for key, ids in string_columns.items():
            self.columns[key] = _uint(remap[ids])
        self.columns["input_count"] = _uint(counts)
        self.columns["kernel_at"] = _uint(kernel_at)
        self.columns["label_at"] = _uint(label_at)
        self.columns["hlo_at"] = _uint(hlo_at)
        self.columns["tf_ops_at"] = _uint(tf_ops_at)
        self.columns["xfer_at"] = _uint(t_pos[t_keep])
        self.columns["xfer_bytes"] = ("f64", transfers["bytes"][t_keep].astype("<f8"))
        self.columns["xfer_rate"] = ("f64", transfers["rate_bps"][t_keep].astype("<f8"))
        self._counters()

    def _counters(self) -> None:
        counters, strings = self.trace.counters, self.trace.strings
        order = np.lexsort((counters["time_ns"], counters["allocator"]))
        allocator = counters["allocator"][order]
        self.columns["counter_time"] = ("f64", (counters["time_ns"][order] - self.base_ns).astype("<f8"))
        in_use = counters["bytes_in_use"][order]
        self.columns["counter_bytes"] = ("f64", in_use.astype("<f8"))
        self.allocators = []
        if len(allocator):
            starts = np.flatnonzero(np.r_[True, allocator[1:] != allocator[:-1]])
            ends = np.r_[starts[1:], len(allocator)]
            for a, b in zip(starts.tolist(), ends.tolist()):
                self.allocators.append({"name": strings[int(allocator[a])], "first": a, "count": b - a,
                                        "peak": int(in_use[a:b].max())})

    # --- output -------------------------------------------------------------------------
    def meta(self, prefix: str) -> dict:
        trace = self.trace
        from .. import __version__
        summary = trace.summary(top=TOP_ROWS)
        lane_counts = np.diff(self.lane_offsets) * np.array([not lane.get("tf_ops") for lane in self.lanes], dtype=np.int64)
        devices = []
        # a host of many threads folds only to keep busy accelerators in view: alone, it shows
        accelerators_busy = any(is_accelerator(trace.devices[i]) and lane["device"] == page_index
                                for page_index, i in enumerate(self.device_ids) for lane in self.lanes)
        for page_index, device_index in enumerate(self.device_ids):
            device = trace.devices[device_index]
            mine = [i for i, lane in enumerate(self.lanes) if lane["device"] == page_index]
            devices.append({"name": device.name, "short": device.short_name, "kind": device.kind,
                            "lanes": mine, "ops": int(sum(int(lane_counts[i]) for i in mine)),
                            # a host of 53 threads starts folded, so the GPUs stay in view
                            "folded": len(self.device_ids) > 1 and (not mine or len(mine) > FOLD_LANES
                                                                    and not is_accelerator(device)
                                                                    and accelerators_busy)})
        metadata = {str(k): v if isinstance(v, (str, int, bool)) or v is None
                    or (isinstance(v, float) and np.isfinite(v)) else str(v)
                    for k, v in trace.metadata.items()}
        if metadata.get("graph"):  # the run panel shows an outline, not 860 kB of JSON
            metadata["graph"] = graph_outline(metadata["graph"])
        modules = trace.metadata.get(HLO_MODULES)
        if isinstance(modules, list):  # names, not the protos' base64
            names = list(dict.fromkeys(str(m.get("name")) for m in modules if isinstance(m, dict)))  # each once
            metadata[HLO_MODULES] = f"{len(modules)} XLA module(s): " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")

        def rows(grouped: list[dict]) -> list[dict]:
            return [{"key": r["key"], "count": r["count"], "total_ns": r["total_ns"],
                     "mean_ns": r["mean_ns"], "share": round(r["share"], 6),
                     "device_ns": r["device_ns"], "host_ns": r["host_ns"]} for r in grouped]

        return {
            "format": "tracebridge-timeline", "version": FORMAT_VERSION, "generator": f"tracebridge {__version__}",
            "prefix": prefix, "title": self.title, "source_format": trace.source_format,
            "metadata": metadata, "base_ns": str(self.base_ns),
            "span_ns": int(max((trace.ops["end_ns"][self.rows].max() - self.base_ns) if len(self.rows) else 0, 0)),
            "op_count": int(len(self.rows)), "hidden_devices": self.hidden_devices,
            "devices": devices,
            "lanes": [{"device": lane["device"], "name": lane["name"], "network": lane["network"],
                       "first": lane["first"], **({"tf_ops": True} if lane.get("tf_ops") else {}),
                       **({"thread": lane["thread"]} if "thread" in lane else {})} for lane in self.lanes],
            "span_count": int(self.span.sum()),
            "lane_end": int(len(self.rows)),
            "steps": [{"number": s.number, "name": s.name, "start": s.start_ns - self.base_ns,
                       "end": s.end_ns - self.base_ns} for s in trace.steps],
            "types": self.types, "start_delta": self.start_delta,
            "strings": len(self.strings),
            "columns": {key: {"dtype": code, "length": int(len(values))}
                        for key, (code, values) in self.columns.items()},
            "allocators": self.allocators,
            # string index of a kernel -> [short name, whole name demangled] (model/kernel_names.py)
            "kernel_names": self.kernel_names,
            # A click on one of these ops highlights the TF op and its kernels (their rows
            # share the op's name: the TF op that launched each kernel or copy).
            "linked_names": self._linked_names(),
            # On accelerator traces the top ops rank by device time (a TF op's kernels, once).
            "summary": {"counted": summary.counted, "counted_as": summary.counted_as, "time": summary.time,
                        "total_ns": summary.total_ns,
                        "op_count": summary.op_count,
                        "by_op": rows(summary.by_op), "by_type": rows(summary.by_type)},
            # where the median step's time goes (analysis/run/breakdown.py): the sidebar's stacked bar
            "breakdown": _finite(summary.breakdown),
        }

    def _linked_names(self) -> list[str]:
        """Names of the page's TF ops that ran kernels or copies on an accelerator, or XLA
        kernels or thunks (drawn under their TF op's span)."""
        ops = self.trace.ops
        device_work = np.isin(ops["category"][self.rows], (Category.DEVICE, Category.MEMCPY))
        if self.xla.any:
            device_work |= self.xla.instruction[self.rows] >= 0
        names = np.unique(ops["name"][self.rows][device_work])
        return [self.trace.strings[i] for i in names.tolist()]

    def blocks(self, prefix: str) -> Iterator[str]:
        packed = {"strings": _pack(_json(self.strings).encode("ascii"))}
        for key, (_, values) in self.columns.items():
            packed[key] = _pack(np.ascontiguousarray(values).tobytes())
        meta = self.meta(prefix)
        meta["deflated"] = sorted(key for key, (_, deflated) in packed.items() if deflated)
        yield (f'<script type="application/json" id="{prefix}-meta" class="tracebridge-trace">'
               f"{_json(meta)}</script>\n")
        for key, (text, _) in packed.items():
            yield f'<script type="application/octet-stream" id="{prefix}-{key}">{text}</script>\n'


def _lane_labels(trace: Trace) -> list[str]:
    """Each lane's label (:func:`~.thread_roles.lane_labels`, numbered device by device)."""
    labels = [lane.name for lane in trace.lanes]
    by_device: dict[int, list[int]] = {}
    for index, lane in enumerate(trace.lanes):
        by_device.setdefault(lane.device, []).append(index)
    for indices in by_device.values():
        for index, label in zip(indices, lane_labels([trace.lanes[i].name for i in indices])):
            labels[index] = label
    return labels


def _pack(data: bytes) -> tuple[str, bool]:
    """Base64 of ``data``, raw-deflated (what the browser's ``DecompressionStream("deflate-raw")``
    reads) when that at least halves it. Names, inputs and small ids shrink 3-20x; times and
    durations barely shrink, and inflating costs the page more than it saves in reading."""
    compressor = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)
    deflated = compressor.compress(data) + compressor.flush()
    if len(deflated) <= len(data) // 2:
        return base64.b64encode(deflated).decode("ascii"), True
    return base64.b64encode(data).decode("ascii"), False
