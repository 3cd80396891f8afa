"""Statistics of aligned rows: per-step medians and changes, coverage and shares per rule,
groupings, step durations."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ...model.trace import Trace
from ..common.shift import Shift, shift
from ..common.thresholds import Thresholds
from ..common.types import Groups, GroupTimes, PerSide, StepStats
from ..run.summary import counted_rows, summarize
from .names import Pair
from .result import Row
from .sides import Side


def add_both_times(rows: list[Row], control: Trace, test: Trace) -> None:
    """Every row shows its ops' device and host time, whichever was compared."""
    per_name = PerSide(control, test).map(lambda trace: {op["key"]: op for op in summarize(trace).by_op})

    def total(row: Row, kind: str, side: str) -> int:
        ops = getattr(per_name, side)
        return sum(ops[n][kind] for n in getattr(row.names, side) if n in ops)

    for row in rows:
        row.device_ns = PerSide.of(lambda side: total(row, "device_ns", side))
        row.host_ns = PerSide.of(lambda side: total(row, "host_ns", side))


def rule_shares(pairs: list[Pair], sides: PerSide[Side]) -> dict[str, PerSide[float]]:
    """Per rule, the share of each side's op time its rows matched (together: the coverage)."""
    shares: dict[str, list[float]] = {}
    for pair in pairs:
        if not (pair.control and pair.test):
            continue
        share = shares.setdefault(pair.rule, [0.0, 0.0])
        for k, (side, names) in enumerate(zip(sides, (pair.control, pair.test))):
            share[k] += sum(side.total[n] for n in names) / side.all_time if side.all_time else 0.0
    ranked = sorted(shares.items(), key=lambda item: -item[1][0] - item[1][1])
    return {rule: PerSide(*share) for rule, share in ranked}


def coverage(pairs: list[Pair], sides: PerSide[Side]) -> PerSide[float]:
    """The share of each side's op time that matched rows hold."""
    def matched(side: Side, names_of) -> float:
        total = sum(side.total[n] for pair in pairs if pair.control and pair.test for n in names_of(pair))
        return total / side.all_time if side.all_time else 1.0
    return PerSide(matched(sides.control, lambda pair: pair.control), matched(sides.test, lambda pair: pair.test))


def device_groups(sides: PerSide[Side]) -> list[GroupTimes]:
    """Op time per device per step (median over steps), both runs."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for position, side in enumerate(sides):
        trace = side.trace
        mask, _ = counted_rows(trace)
        steps = max(len(trace.steps), 1)
        durations = (trace.ops["end_ns"] - trace.ops["start_ns"])[mask]
        for device, total in zip(trace.ops["device"][mask].tolist(), durations.tolist()):
            out[trace.devices[device].name][position] += total / steps
    return _by_change(out)


def make_row(pair: Pair, sides: PerSide[Side], limits: Thresholds) -> tuple[Row, PerSide[np.ndarray]]:
    """A pair's row, and each side's per-step totals behind it (what findings test)."""
    values, per_steps = {}, {}
    for (name, side), names in zip(sides.items(), (pair.control, pair.test)):
        per_step = sum((side.per_step[n] for n in names), np.zeros(1)) if names else np.zeros(1)
        per_steps[name] = per_step
        values[name] = {
            "count": sum(side.count[n] for n in names), "total": sum(side.total[n] for n in names),
            "self": sum(side.self_time[n] for n in names),
            "median": float(np.median(per_step)), "p90": float(np.percentile(per_step, 90)),
            "min": float(per_step.min()),
        }
    types = {sides.control.type[n] for n in pair.control} | {sides.test.type[n] for n in pair.test}
    c, t = values["control"], values["test"]
    delta = t["median"] - c["median"]
    ratio = t["median"] / c["median"] if c["median"] > 0 and pair.test else None
    moved = shift(per_steps["control"], per_steps["test"], limits.confidence)
    if not pair.test:
        change = "-"
    elif not pair.control:
        change = "+"
    else:
        change = changed(moved, c["median"], limits)
    row = Row(key=pair.key, rule=pair.rule, op_type="/".join(sorted(types)),
              names=PerSide(pair.control, pair.test), count=PerSide(c["count"], t["count"]),
              total_ns=PerSide(int(c["total"]), int(t["total"])), self_ns=PerSide(int(c["self"]), int(t["self"])),
              median_ns=PerSide(c["median"], t["median"]), p90_ns=PerSide(c["p90"], t["p90"]),
              min_ns=PerSide(c["min"], t["min"]),
              delta_ns=delta, ratio=ratio, change=change,
              delta_low_ns=_finite(moved.low_ns), delta_high_ns=_finite(moved.high_ns),
              confidence=round(pair.confidence, 3) if pair.control and pair.test else 0.0)
    return row, PerSide(per_steps["control"], per_steps["test"])


def changed(moved: Shift, control_median: float, limits: Thresholds) -> str:
    """``+``/``-`` when the shift's interval clears the margin (the runs' own spread decides,
    not one sample), ``=`` otherwise. With fewer than ``min_steps`` steps a side there is no
    spread to judge by: the medians decide, and compare's notes say the change column rests
    on single samples."""
    margin = limits.margin(control_median)
    if min(moved.control_steps, moved.test_steps) < limits.min_steps:
        if abs(moved.estimate_ns) <= margin:
            return "="
        return "+" if moved.estimate_ns > 0 else "-"
    return "+" if moved.above(margin) else "-" if moved.below(margin) else "="


def _finite(value: float) -> float | None:
    """A bound as JSON holds it: None where the steps gave none."""
    return value if np.isfinite(value) else None


def groups(rows: list[Row], sides: PerSide[Side]) -> Groups:
    """Row medians per op type and per top-level name scope, and time per device."""
    by_key = []
    for key_of in (lambda r: r.op_type, lambda r: r.key.split("/")[0]):
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in rows:
            totals[key_of(row)][0] += row.median_ns.control
            totals[key_of(row)][1] += row.median_ns.test
        by_key.append(_by_change(totals))
    return Groups(op_type=by_key[0], scope=by_key[1], device=device_groups(sides))


def _by_change(totals: dict[str, list[float]]) -> list[GroupTimes]:
    """Groups from their two times, the largest change first."""
    found = [GroupTimes(key, PerSide(*times)) for key, times in totals.items()]
    return sorted(found, key=lambda g: -abs(g.delta_ns))


def step_durations(trace: Trace, steps) -> np.ndarray:
    """The durations of the steps at ``steps`` (positions in ``trace.steps``), or, given a
    number, of the steps after that many (all of them where the run is shorter)."""
    if isinstance(steps, int):
        durations = [s.duration_ns for s in trace.steps][steps:] or [s.duration_ns for s in trace.steps]
    else:
        durations = [trace.steps[p].duration_ns for p in steps]
    return np.array(durations, dtype=np.float64)


def step_stats(trace: Trace, steps) -> StepStats:
    durations = step_durations(trace, steps).tolist()
    if not durations:
        return StepStats()
    return StepStats(count=len(durations), median_ns=float(np.median(durations)),
                     p90_ns=float(np.percentile(durations, 90)), min_ns=float(min(durations)))


__all__ = ["add_both_times", "coverage", "device_groups", "groups", "changed", "make_row", "rule_shares", "step_durations",
           "step_stats"]
