"""What an accelerator's rows are: kernels linked to their TF ops, derived lines, duplicates.

Both profiling worlds record device work more than once, and a sum over every row counts
it several times:

- TF1's GPU tracer records each kernel and copy on ``/gpu:0/stream:all`` *and* on
  ``/gpu:0/stream:N``; copies a third time on ``/gpu:0/memcpy``. The record on
  ``stream:all`` is the one that counts; the others get ``OpFlag.DUPLICATE``.
- xprof adds lines to a device plane that it derived from the device's own events
  (``TensorFlow Ops`` repeats the compute stream, ``TensorFlow Name Scope`` nests scopes,
  ``Steps``, ``XLA Modules``). Their rows are ``Category.DERIVED``.

A device row (``DEVICE``/``MEMCPY``) names the TF op it ran for in ``name``/``op_type``
and the kernel, copy or XLA op itself in ``kernel``. Device time is each row's self time
on its lane (xprof's definition: a row's duration less the rows nested in it).
"""

from __future__ import annotations

import re

import numpy as np

from .devices import Device
from .schema import Category, OpFlag
from .parts import Step

# Lines of a device plane that xprof derives from the events of its other lines.
DERIVED_LINES = frozenset({
    "TensorFlow Ops", "TensorFlow Name Scope", "Steps", "XLA Modules", "XLA TraceMe",
    "Async XLA Ops", "Source", "Launch Stats", "SparseCore Ops", "SparseCore Modules",
})
_ANNOTATION_ARGS = re.compile(r"#[^#]*#")


def is_derived_line(line_name: str, plane_has_streams: bool) -> bool:
    """A GPU plane's work is on its ``Stream #N(...)`` lines, so every other line of it was
    derived from them (its ``XLA Ops`` too); a TPU plane's work is its ``XLA Ops`` line.
    ``Async XLA Ops`` span from an async op's start to its done and overlap the ops that
    run meanwhile: xprof does not count them as op time either."""
    if plane_has_streams:
        return not line_name.startswith("Stream")
    return line_name in DERIVED_LINES


def op_of_annotation(annotation: str) -> tuple[str, str] | None:
    """The TF op a GPU kernel ran for, from its ``annotation``/``tf_op`` stat: levels joined
    by ``::``, each ``name:Type`` with ``#arg=...#`` arguments; the innermost level that
    names an op wins (``Outer:Call#...#::#edge_name=x#`` names ``Outer``). A level without
    a type (``MakeTensorFromProto``) is its own type; an XLA op's ``tf_op`` path
    (``jit(f)/jit(main)/add:``) takes its last path element as type, as xprof shows it."""
    for level in reversed(annotation.split("::")):
        level = _ANNOTATION_ARGS.sub("", level).strip()
        if not level:
            continue
        name, colon, op_type = level.rpartition(":")
        if not colon:
            return level, level
        if not name:
            continue
        return name, op_type or name.rsplit("/", 1)[-1]
    return None


def mark_tracer_records(ops: dict[str, np.ndarray], devices: list[Device], strings) -> None:
    """TF1 GPU tracer devices (``stream:*``, ``memcpy``): their rows are device work
    (``DEVICE``, or ``MEMCPY`` for copies), and a record repeated on another of the same
    GPU's tracer devices (same name, start and end) is flagged ``DUPLICATE``: ``stream:all``
    keeps it, else the numbered stream, and ``memcpy`` never does."""
    tracer = [i for i, d in enumerate(devices) if d.kind in ("stream", "memcpy")]
    if not tracer or not len(ops["device"]):
        return
    device = ops["device"]
    rows = np.flatnonzero(np.isin(device, tracer))
    if not len(rows):
        return
    category = ops["category"] = ops["category"].copy()
    flags = ops["flags"] = ops["flags"].copy()
    # Host-side categories only: a Chrome trace written by tracebridge already says "Device".
    host_side = np.isin(category[rows], (Category.OP, Category.HOST))
    copies = {t for t in np.unique(ops["op_type"][rows]).tolist() if "MEMCPY" in strings[t].upper()}
    memcpy_device = np.array([devices[d].kind == "memcpy" or t in copies
                              for d, t in zip(device[rows].tolist(), ops["op_type"][rows].tolist())], dtype=bool)
    category[rows[host_side & memcpy_device]] = Category.MEMCPY
    category[rows[host_side & ~memcpy_device]] = Category.DEVICE
    # Rank: stream:all 0, stream:N 1, memcpy 2; a record is kept on its lowest rank.
    rank_of = {i: 0 if devices[i].stream == "all" else 2 if devices[i].kind == "memcpy" else 1 for i in tracer}
    gpu_of = {i: (devices[i].host, devices[i].job, devices[i].replica, devices[i].task, devices[i].type,
                  devices[i].index, devices[i].name.split("/stream:")[0].split("/memcpy")[0]) for i in tracer}
    best: dict[tuple, int] = {}
    keys = []
    for row, d in zip(rows.tolist(), device[rows].tolist()):
        key = (gpu_of[d], int(ops["name"][row]), int(ops["start_ns"][row]), int(ops["end_ns"][row]))
        keys.append(key)
        rank = rank_of[d]
        if best.get(key, 3) > rank:
            best[key] = rank
    duplicate = [row for row, key, d in zip(rows.tolist(), keys, device[rows].tolist()) if rank_of[d] > best[key]]
    # Two records of one op on stream:all itself are two kernels, not a duplicate: only a
    # record of a higher rank than the key's best is flagged.
    flags[duplicate] |= np.uint8(OpFlag.DUPLICATE)


def device_rows(category: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Kernels and copies, each counted once."""
    # Two comparisons of bytes, not np.isin's table; the flags only where there is any (3M
    # rows of a CPU run: a tenth of a millisecond, not 5).
    kind = (category == np.uint8(Category.DEVICE)) | (category == np.uint8(Category.MEMCPY))
    return kind & ((flags & np.uint8(OpFlag.DUPLICATE)) == 0) if kind.any() else kind


def self_times(start: np.ndarray, end: np.ndarray, lane: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Self time of ``rows`` (indices), among those rows only: a row's duration less its
    direct children's on the same lane. Rows that overlap without nesting (a TPU copy
    measured by the device clock runs past the next op's start) keep their whole time,
    as in xprof's op statistics; busy time (:func:`busy_ns`) is where overlap counts once."""
    own = (end[rows] - start[rows]).astype(np.int64)
    if not len(rows):
        return own
    order = np.lexsort((-end[rows], start[rows], lane[rows]))
    s, e, ln = start[rows][order].tolist(), end[rows][order].tolist(), lane[rows][order].tolist()
    own_sorted = own[order]
    stack: list[int] = []
    last_lane = None
    for k in range(len(order)):
        if ln[k] != last_lane:
            stack, last_lane = [], ln[k]
        while stack and e[stack[-1]] <= s[k]:
            stack.pop()
        if stack and e[k] <= e[stack[-1]]:
            own_sorted[stack[-1]] -= e[k] - s[k]  # a direct child: its time is not the parent's own
        stack.append(k)
    out = np.empty_like(own)
    out[order] = np.maximum(own_sorted, 0)
    return out


def busy_ns(start: np.ndarray, end: np.ndarray, scratch: bool = False) -> int:
    """Length of the union of intervals. ``scratch``: the arrays are the caller's own
    copies, and may be reordered and overwritten (it saves two copies of 3M rows)."""
    if not len(start):
        return 0
    if not np.any(end < start):
        # The union is where more intervals have started than ended, which depends only
        # on the starts and the ends as two sorted lists, not on which end is whose: two
        # plain sorts do it, without an argsort and gathers (3M rows: several times
        # faster, and a fraction of the temporaries). The k-th smallest end is never
        # before the k-th smallest start, so the sorted ends are their own running
        # maximum, and the union is the whole extent less the gaps where a start comes
        # after every earlier end.
        s, e = (start, end) if scratch else (start.copy(), end.copy())
        # "stable" is a merge sort of runs: rows come line by line, each line in time
        # order, so it is nearly linear here (3M rows: 10 ms, quicksort 190 ms).
        s.sort(kind="stable")
        e.sort(kind="stable")
        extent = int(e[-1]) - int(s[0])
        gaps = np.subtract(s[1:], e[:-1], out=s[1:])
        np.maximum(gaps, 0, out=gaps)
        return extent - int(gaps.sum())
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # A new busy stretch starts where a row starts after everything before it ended.
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    starts = s[new]
    ends = np.append(reach[np.flatnonzero(new)[1:] - 1], reach[-1])
    return int((ends - starts).sum())


def launches(trace) -> dict[int, int]:
    """``{device row: host row that launched it}`` for the kernels and copies counted once.

    An XSpace links a launch to its kernel by ``correlation_id`` (the trace's ``launch``
    links). TF1's tracer records no such id: a stream record names its op, and that op's
    own record on the GPU device (its dispatch, on a host thread) is the launch: the one of
    that name, device and step that started last before the kernel did (or, for a kernel
    whose clock runs ahead of the host's, the first one of the step)."""
    ops = trace.ops
    kernels = np.flatnonzero(device_rows(ops["category"], ops["flags"]))
    if not len(kernels):
        return {}
    links = trace.table("links")
    if links.rows and "launch" in trace.strings:
        mine = links["kind"] == trace.strings.index("launch")
        wanted = set(kernels.tolist())
        return {int(k): int(h) for h, k in zip(links["producer"][mine].tolist(), links["consumer"][mine].tolist())
                if k in wanted}
    # A stream device has no job or task (``/gpu:0/stream:all``): host, type and index match.
    gpu_of = {i: (d.host, d.type, d.index) for i, d in enumerate(trace.devices)}
    host_rows = np.flatnonzero(ops["category"] == int(Category.OP))
    host_rows = host_rows[np.argsort(ops["start_ns"][host_rows], kind="stable")]
    by_key: dict[tuple, list[int]] = {}
    for row, device, name, step in zip(host_rows.tolist(), ops["device"][host_rows].tolist(),
                                       ops["name"][host_rows].tolist(), ops["step"][host_rows].tolist()):
        if trace.devices[device].stream is None:
            by_key.setdefault((gpu_of[device], name, step), []).append(row)
    found = {}
    starts = ops["start_ns"]
    for row, device, name, step in zip(kernels.tolist(), ops["device"][kernels].tolist(),
                                       ops["name"][kernels].tolist(), ops["step"][kernels].tolist()):
        candidates = by_key.get((gpu_of[device], name, step))
        if not candidates:
            continue
        at = int(np.searchsorted(starts[candidates], starts[row], side="right")) - 1
        found[row] = candidates[max(at, 0)]
    return found


def device_steps(trace) -> dict[str, tuple]:
    """Each accelerator's own steps, ``{device name: (Step, ...)}``, from its ``Steps`` line
    (kept as derived rows named by step number). The trace's steps are one per number; a
    device's differ from them in where they lie: devices step on their own clocks."""
    ops = trace.ops
    step_lanes = [i for i, lane in enumerate(trace.lanes)
                  if lane.name == "Steps" and trace.devices[lane.device].kind != "host"]
    rows = np.flatnonzero(np.isin(ops["lane"], step_lanes) & (ops["category"] == int(Category.DERIVED)))
    spans: dict[str, dict[int, list[int]]] = {}
    for row in rows[np.argsort(ops["start_ns"][rows], kind="stable")].tolist():
        device = trace.devices[int(ops["device"][row])].name
        text = trace.strings[int(ops["name"][row])]
        mine = spans.setdefault(device, {})
        number = int(text) if text.isdigit() else len(mine)
        span = mine.setdefault(number, [int(ops["start_ns"][row]), int(ops["end_ns"][row])])
        span[0], span[1] = min(span[0], int(ops["start_ns"][row])), max(span[1], int(ops["end_ns"][row]))
    return {device: tuple(Step(number, lo, hi, f"step {number}") for number, (lo, hi) in sorted(mine.items()))
            for device, mine in sorted(spans.items())}
