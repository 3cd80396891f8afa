"""Where the time went: totals per op, op type and device, and a trace's vital counts.

Everything is computed with ``np.bincount`` over interned ids, so a summary of a million
ops costs milliseconds, not a Python loop.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

import numpy as np

from ..model.schema import Category
from ..model.trace import Trace


@dataclass(frozen=True)
class Summary:
    """Rows of ``{"key", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share"}``
    for each grouping, largest total first; ``share`` is of all op time."""

    total_ns: int
    op_count: int
    counted: str = "op"     # which rows were counted: "op", "device+memcpy" or "all"
    steps: list[dict] = field(default_factory=list)
    by_op: list[dict] = field(default_factory=list)
    by_type: list[dict] = field(default_factory=list)
    by_device: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"total_ns": self.total_ns, "op_count": self.op_count, "counted": self.counted,
                "steps": self.steps,
                "by_op": self.by_op, "by_type": self.by_type, "by_device": self.by_device}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["group", "key", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share"])
        for group, rows in (("op", self.by_op), ("op_type", self.by_type), ("device", self.by_device)):
            for row in rows:
                writer.writerow([group, row["key"], row["count"], row["total_ns"], row["mean_ns"],
                                 row["min_ns"], row["max_ns"], f"{row['share']:.6f}"])
        return out.getvalue()

    def to_text(self) -> str:
        what = {"op": "ops", "device+memcpy": "device events", "all": "events"}.get(self.counted, "ops")
        lines = [f"{self.op_count} {what}, {_ms(self.total_ns)} in all"]
        if self.steps:
            durations = [s["duration_ns"] for s in self.steps]
            lines.append(f"{len(self.steps)} steps, median {_ms(int(np.median(durations)))} "
                         f"(min {_ms(min(durations))}, max {_ms(max(durations))})")
        for title, rows in (("Top ops by total time", self.by_op), ("By op type", self.by_type),
                            ("By device", self.by_device)):
            lines += ["", title, _table(rows)]
        return "\n".join(lines)

    __str__ = to_text


def counted_rows(trace: Trace) -> tuple[np.ndarray, str]:
    """The rows a summary counts: TF ops when there are any (host annotations such as
    ``EagerExecute`` enclose ops and would count their time twice), else device kernels
    and copies (a TPU profile), else every row."""
    category = trace.ops["category"]
    for wanted, label in (((Category.OP,), "op"), ((Category.DEVICE, Category.MEMCPY), "device+memcpy")):
        mask = np.isin(category, wanted)
        if mask.any():
            return mask, label
    return np.ones(len(trace), dtype=bool), "all"


def summarize(trace: Trace, top: int | None = None) -> Summary:
    mask, counted = counted_rows(trace)
    ops = trace.ops
    duration = (ops["end_ns"] - ops["start_ns"]).astype(np.int64)[mask]
    total = int(duration.sum())
    devices = np.array([d.name for d in trace.devices] or [""], dtype=object)
    return Summary(
        total_ns=total, op_count=int(mask.sum()), counted=counted,
        steps=[{"number": s.number, "name": s.name, "start_ns": s.start_ns,
                "duration_ns": s.duration_ns} for s in trace.steps],
        by_op=_group(ops["name"][mask], duration, trace.strings, total, top),
        by_type=_group(ops["op_type"][mask], duration, trace.strings, total, top),
        by_device=_group(ops["device"][mask], duration, devices, total, top),
    )


def _group(keys: np.ndarray, duration: np.ndarray, labels, total: int, top: int | None) -> list[dict]:
    if not len(keys):
        return []
    unique, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.ravel()
    count = np.bincount(inverse)
    sums = np.bincount(inverse, weights=duration).astype(np.int64)
    lows = np.full(len(unique), np.iinfo(np.int64).max)
    highs = np.zeros(len(unique), dtype=np.int64)
    np.minimum.at(lows, inverse, duration)
    np.maximum.at(highs, inverse, duration)
    order = np.lexsort((unique, -sums))
    if top is not None:
        order = order[:top]
    return [{"key": str(labels[unique[i]]), "count": int(count[i]), "total_ns": int(sums[i]),
             "mean_ns": int(sums[i] // count[i]), "min_ns": int(lows[i]), "max_ns": int(highs[i]),
             "share": float(sums[i] / total) if total else 0.0} for i in order.tolist()]


def describe(trace: Trace) -> dict:
    """What ``tracebridge info`` prints: format, steps, devices and counts."""
    ops = trace.ops
    per_device = np.bincount(ops["device"], minlength=len(trace.devices)) if len(trace) else \
        np.zeros(len(trace.devices), dtype=np.int64)
    peaks = {}
    counters = trace.counters
    for allocator in np.unique(counters["allocator"]).tolist():
        mine = counters["allocator"] == allocator
        peaks[trace.strings[allocator]] = int(counters["bytes_in_use"][mine].max())
    categories = np.bincount(ops["category"], minlength=len(Category)) if len(trace) else \
        np.zeros(len(Category), dtype=np.int64)
    return {
        "format": trace.source_format,
        "categories": {category.label: int(n) for category, n in zip(Category, categories) if n},
        "metadata": dict(trace.metadata),
        "ops": len(trace),
        "steps": [{"number": s.number, "name": s.name, "duration_ns": s.duration_ns} for s in trace.steps],
        "devices": [{"name": d.name, "kind": d.kind, "ops": int(per_device[i]),
                     "lanes": sum(1 for lane in trace.lanes if lane.device == i)}
                    for i, d in enumerate(trace.devices)],
        "span_ns": trace.end_ns - trace.start_ns,
        "transfers": {"count": trace.transfers.rows, "bytes": int(trace.transfers["bytes"].sum())},
        "memory": {"allocators": peaks, "allocation_records": trace.allocations.rows},
        "outputs": trace.outputs.rows,
    }


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _table(rows: list[dict]) -> str:
    if not rows:
        return "  (none)"
    header = ("total", "share", "count", "mean", "name")
    body = [(_ms(r["total_ns"]), f"{100 * r['share']:5.1f}%", str(r["count"]), _ms(r["mean_ns"]), r["key"])
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header[:-1])]
    lines = ["  " + "  ".join(h.rjust(w) for h, w in zip(header[:-1], widths)) + "  " + header[-1]]
    for b in body:
        lines.append("  " + "  ".join(v.rjust(w) for v, w in zip(b[:-1], widths)) + "  " + b[-1])
    return "\n".join(lines)
