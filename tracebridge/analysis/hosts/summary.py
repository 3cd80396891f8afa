"""A summary of many hosts, computed host by host and merged.

Each host's part is its own full summary (every row, no ``top`` cut) plus what the merge
needs to order rows as one trace of all hosts would: the host's string table (ties are
broken by string id, and a merged trace numbers strings host after host) and its number
of devices. Counts, sums, minima and maxima merge exactly; step lists are concatenated,
so medians of step times are exact too. The result equals ``summarize`` of the merged
trace (tests/test_hosts.py checks it).

Which rows are counted depends on all hosts (device time when any host has device
activity): a host whose own choice differs is summarized again with the common one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...model.schema import Category
from ...model.trace import Trace
from ..run.summary import MODES, Summary, summarize, summary_mode
from .engine import HostInput, HostLoader, host_runner


@dataclass(frozen=True)
class LaneTime:
    """The counted time on one lane of a host (for the stragglers' lanes)."""

    lane: str
    device: str
    time_ns: int


@dataclass(frozen=True)
class HostPart:
    """One host's summary part: small and picklable (rows per op, not per event), what a
    Dask worker hands back. ``summary`` has every row (no ``top`` cut); ``strings`` and
    ``devices`` are what the merge orders rows by, as one trace of all hosts would."""

    host: str
    path: str
    natural_mode: str           # the rows this host alone would count (one of MODES)
    mode: str                   # the rows counted, common to all hosts after host_parts
    summary: Summary
    strings: tuple[str, ...]    # the host's string table: ties are broken by string id
    devices: int
    device_index: dict[str, int]  # device name -> its index in the host's trace
    start_ns: int
    end_ns: int
    ops: int
    profile_start_ns: int | None  # the host's own clock, for step skew across hosts
    lanes: tuple[LaneTime, ...]


def summarize_hosts(files: Sequence[HostInput], *, load: HostLoader, top: int | None = None,
                    filters: dict | None = None, workers: int | None = None, scheduler: str | None = None,
                    progress: bool = False) -> Summary:
    """The summary of a multi-host profile's hosts (see
    :func:`tracebridge.readers.host_files.host_files`), each read by ``load`` and
    summarized where it runs: in this process, on a local Dask cluster (``workers``) or on
    an existing one (``scheduler="tcp://HOST:PORT"``)."""
    parts = host_parts(files, load=load, filters=filters, workers=workers, scheduler=scheduler,
                       progress=progress)
    return merge_parts(parts, top)


def host_part(file: HostInput, *, load: HostLoader, mode: str | None = None,
              filters: dict | None = None) -> HostPart:
    """One host's summary part, its trace read by ``load``."""
    return summarize_host(file, load(file), mode=mode, filters=filters)


def summarize_host(file: HostInput, trace: Trace, *, mode: str | None = None,
                   filters: dict | None = None) -> HostPart:
    """The summary part of ``file``'s trace, read already."""
    if filters:
        trace = trace.filter(**filters)
    natural = summary_mode(trace)
    summary = summarize(trace, top=None, mode=mode or natural)
    ops = trace.ops
    counted = np.isin(ops["category"], (Category.DEVICE, Category.MEMCPY) if summary.time == "device"
                      else (Category.OP,))
    lane_time = np.bincount(ops["lane"][counted], weights=(ops["end_ns"] - ops["start_ns"])[counted],
                            minlength=len(trace.lanes)) if len(trace.lanes) else np.zeros(0)
    return HostPart(
        host=file.host, path=file.path, natural_mode=natural, mode=mode or natural, summary=summary,
        strings=trace.strings, devices=len(trace.devices),
        device_index={d.name: i for i, d in enumerate(trace.devices)},
        start_ns=trace.start_ns, end_ns=trace.end_ns, ops=len(trace),
        profile_start_ns=trace.metadata.get("profile_start_ns"),
        lanes=tuple(LaneTime(lane.name, trace.devices[lane.device].name, int(t))
                    for lane, t in zip(trace.lanes, lane_time.tolist())))


def host_parts(files: Sequence[HostInput], *, load: HostLoader, filters: dict | None = None,
               workers: int | None = None, scheduler: str | None = None, progress: bool = False) -> list[HostPart]:
    """Every host's part, all counting the same rows."""
    with host_runner(workers=workers, scheduler=scheduler, progress=progress) as run:
        parts = run(functools.partial(host_part, load=load, filters=filters), files)
        mode = common_mode(parts)
        redo = [i for i, part in enumerate(parts) if part.mode != mode]
        if redo:
            again = run(functools.partial(host_part, load=load, mode=mode, filters=filters),
                        [files[i] for i in redo])
            for i, part in zip(redo, again):
                parts[i] = part
    return parts


def common_mode(parts: Sequence[HostPart]) -> str:
    """The rows a summary of all hosts counts: device time if any host has it, else TF
    ops if any host has them, else every row."""
    return min((part.natural_mode for part in parts), key=MODES.index, default="all")


def merge_parts(parts: Sequence[HostPart], top: int | None = None) -> Summary:
    """The summary of all hosts together, from their parts (in host order)."""
    if not parts:
        raise ValueError("no hosts to merge")
    order: dict[str, int] = {}  # string -> id in a trace of all hosts, read host after host
    for part in parts:
        for text in part.strings:
            order.setdefault(text, len(order))
    summaries = [part.summary for part in parts]
    total = sum(s.total_ns for s in summaries)
    spans = [(p.start_ns, p.end_ns) for p in parts if p.ops]
    span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0
    devices, offset = [], 0
    for part in parts:
        for row in part.summary.by_device:
            devices.append((offset + part.device_index[row["key"]], row))
        offset += part.devices
    by_device = _rows([((index,), [row]) for index, row in devices], total, top, lambda key: key[0])
    for row in by_device:
        row["idle_ns"] = span - row["busy_ns"]
    first = summaries[0]
    # One host: its steps' parts and its median step's breakdown; hosts step apart, so of
    # several there is none (summary --by-host and each host's summary have them).
    steps = [step if len(summaries) == 1 else {key: step[key] for key in _STEP_KEYS}
             for s in summaries for step in s.steps]
    return Summary(
        total_ns=total, op_count=sum(s.op_count for s in summaries), counted=first.counted,
        time=first.time, total_span_ns=span, counted_as=first.counted_as, steps=steps,
        breakdown=first.breakdown if len(summaries) == 1 else None,
        by_op=_rows(_by_key(summaries, "by_op"), total, top, lambda key: order[key[0]]),
        by_type=_rows(_by_key(summaries, "by_type"), total, top, lambda key: order[key[0]]),
        by_device=by_device,
        by_kernel=_rows(_by_key(summaries, "by_kernel", ("key", "op")), total, top,
                        lambda key: (order[key[0]], order[key[1]])),
        by_hlo=_hlo_rows(summaries, total, top),
    )


_STEP_KEYS = ("number", "name", "start_ns", "duration_ns")  # a step of a summary of several hosts


def _hlo_rows(summaries: Sequence[Summary], total: int, top: int | None) -> list[dict]:
    """The by-HLO tables merged: an instruction of a module, summed over hosts, in
    ``hlo_rows``' order (total time, then instruction name)."""
    merged: dict[tuple, dict] = {}
    for summary in summaries:
        for row in summary.by_hlo:
            key = (row["module"], row["key"])
            if key in merged:
                merged[key]["count"] += row["count"]
                merged[key]["total_ns"] += row["total_ns"]
            else:
                merged[key] = dict(row)
    rows = sorted(merged.values(), key=lambda row: (-row["total_ns"], row["key"]))
    for row in rows:
        row["mean_ns"] = row["total_ns"] // row["count"] if row["count"] else 0
        row["share"] = row["total_ns"] / total if total else 0.0
    return rows if top is None else rows[:top]


def _by_key(summaries: Sequence[Summary], table: str, fields=("key",)) -> list[tuple[tuple, list[dict]]]:
    grouped: dict[tuple, list[dict]] = {}
    for summary in summaries:
        for row in getattr(summary, table):
            grouped.setdefault(tuple(row[f] for f in fields), []).append(row)
    return list(grouped.items())


def _rows(groups, total: int, top: int | None, tie) -> list[dict]:
    """Rows of one table merged across hosts, in ``summarize``'s order: total time, then
    host time, then the key's id in a trace of all hosts."""
    merged = []
    for key, rows in groups:
        count = sum(r["count"] for r in rows)
        sums = sum(r["total_ns"] for r in rows)
        row = {**rows[0], "count": count, "total_ns": sums, "mean_ns": sums // count if count else 0,
               "min_ns": min((r["min_ns"] for r in rows if r["count"]), default=0),
               "max_ns": max(r["max_ns"] for r in rows), "share": sums / total if total else 0.0,
               "device_ns": sum(r.get("device_ns", 0) for r in rows)}
        if "host_ns" in rows[0]:
            row["host_ns"] = sum(r["host_ns"] for r in rows)
        if "busy_ns" in rows[0]:
            row["busy_ns"] = sum(r["busy_ns"] for r in rows)
        merged.append((key, row))
    merged.sort(key=lambda item: (-item[1]["total_ns"], -item[1].get("host_ns", 0), tie(item[0])))
    rows = [row for _, row in merged]
    return rows if top is None else rows[:top]
