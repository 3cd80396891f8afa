"""Statistics of aligned rows: per-step medians, changes, shares per rule, groupings,
memory peaks."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..model.trace import Trace
from .compare_names import Pair
from .compare_result import Row
from .compare_sides import Side
from .summary import counted_rows, summarize


def add_both_times(rows: list[Row], control: Trace, test: Trace) -> None:
    """Every row shows its ops' device and host time, whichever was compared."""
    for side, trace in (("control", control), ("test", test)):
        per_name = {row["key"]: row for row in summarize(trace).by_op}
        for row in rows:
            names = getattr(row, f"{side}_names")
            setattr(row, f"{side}_device_ns", sum(per_name[n]["device_ns"] for n in names if n in per_name))
            setattr(row, f"{side}_host_ns", sum(per_name[n]["host_ns"] for n in names if n in per_name))



def rule_shares(pairs: list["Pair"], sides: dict[str, "Side"]) -> dict[str, dict[str, float]]:
    """Per rule, the share of each side's op time its rows matched (together: the coverage)."""
    shares: dict[str, dict[str, float]] = {}
    for pair in pairs:
        if not (pair.control and pair.test):
            continue
        share = shares.setdefault(pair.rule, {"control": 0.0, "test": 0.0})
        for name, names in (("control", pair.control), ("test", pair.test)):
            side = sides[name]
            share[name] += sum(side.total[n] for n in names) / side.all_time if side.all_time else 0.0
    return dict(sorted(shares.items(), key=lambda item: -item[1]["control"] - item[1]["test"]))


def device_groups(sides: dict[str, "Side"]) -> list[dict]:
    """Op time per device per step (median over steps), both runs."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for position, side in enumerate((sides["control"], sides["test"])):
        trace = side.trace
        mask, _ = counted_rows(trace)
        steps = max(len(trace.steps), 1)
        durations = (trace.ops["end_ns"] - trace.ops["start_ns"])[mask]
        for device, total in zip(trace.ops["device"][mask].tolist(), durations.tolist()):
            out[trace.devices[device].name][position] += total / steps
    return sorted(({"key": k, "control_mean_ns": v[0], "test_mean_ns": v[1], "delta_ns": v[1] - v[0]}
                   for k, v in out.items()), key=lambda g: -abs(g["delta_ns"]))


def make_row(pair: Pair, sides: dict[str, Side], threshold: float, noise_ns: int) -> Row:
    values = {}
    for name, names in (("control", pair.control), ("test", pair.test)):
        side = sides[name]
        per_step = sum((side.per_step[n] for n in names), np.zeros(1)) if names else np.zeros(1)
        values[name] = {
            "count": sum(side.count[n] for n in names), "total": sum(side.total[n] for n in names),
            "self": sum(side.self_time[n] for n in names),
            "median": float(np.median(per_step)), "p90": float(np.percentile(per_step, 90)),
            "min": float(per_step.min()),
        }
    types = {sides["control"].type[n] for n in pair.control} | {sides["test"].type[n] for n in pair.test}
    c, t = values["control"], values["test"]
    delta = t["median"] - c["median"]
    ratio = t["median"] / c["median"] if c["median"] > 0 and pair.test else None
    if not pair.test:
        change = "-"
    elif not pair.control:
        change = "+"
    elif abs(delta) > max(threshold * c["median"], noise_ns):
        change = "+" if delta > 0 else "-"
    else:
        change = "="
    return Row(key=pair.key, rule=pair.rule, op_type="/".join(sorted(types)),
               control_names=pair.control, test_names=pair.test,
               control_count=c["count"], test_count=t["count"],
               control_total_ns=int(c["total"]), test_total_ns=int(t["total"]),
               control_self_ns=int(c["self"]), test_self_ns=int(t["self"]),
               control_median_ns=c["median"], test_median_ns=t["median"],
               control_p90_ns=c["p90"], test_p90_ns=t["p90"], control_min_ns=c["min"], test_min_ns=t["min"],
               delta_ns=delta, ratio=ratio, change=change,
               confidence=round(pair.confidence, 3) if pair.control and pair.test else 0.0)


def row_groups(rows: list[Row]) -> dict[str, list[dict]]:
    """Totals per op type and per top-level name scope, for both runs."""
    out = {}
    for label, key_of in (("op_type", lambda r: r.op_type), ("scope", lambda r: r.key.split("/")[0])):
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in rows:
            totals[key_of(row)][0] += row.control_median_ns
            totals[key_of(row)][1] += row.test_median_ns
        out[label] = sorted(({"key": k, "control_median_ns": v[0], "test_median_ns": v[1],
                              "delta_ns": v[1] - v[0]} for k, v in totals.items()),
                            key=lambda g: -abs(g["delta_ns"]))
    return out


def step_stats(trace: Trace, warmup: int) -> dict:
    durations = [s.duration_ns for s in trace.steps][warmup:] or [s.duration_ns for s in trace.steps]
    if not durations:
        return {"count": 0, "median_ns": 0.0, "p90_ns": 0.0, "min_ns": 0.0}
    return {"count": len(durations), "median_ns": float(np.median(durations)),
            "p90_ns": float(np.percentile(durations, 90)), "min_ns": float(min(durations))}


def memory_peaks(trace: Trace) -> dict[str, int]:
    counters = trace.counters
    return {trace.strings[a]: int(counters["bytes_in_use"][counters["allocator"] == a].max())
            for a in np.unique(counters["allocator"]).tolist()}


__all__ = ["add_both_times", "device_groups", "make_row", "memory_peaks", "row_groups", "rule_shares", "step_stats"]
