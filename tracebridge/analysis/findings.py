"""Findings: why a TF2 port is slower than its TF1 run, or what one run shows by itself.

A :class:`Finding` names a porting mistake (``kind``), the share of the test run's step
time it explains, the evidence it rests on (ops, steps, lanes, events, measured times) and
one line of advice linking to the section of ``migration_guide/`` that shows the fix.
``advise(trace)`` looks at one run; ``comparison_findings(comparison)`` at a TF1/TF2 pair,
where the control run is the baseline each measure is taken against. Findings are ranked by
share. Every threshold below has a noise margin and says where it comes from: the measures
of good ports (``tests/test_findings.py``) on a loaded 2-core machine.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ..model.trace import Trace
from ..model.schema import is_eager_name
from .kernels import fusion_parts, plain_kernel
from .run_findings import (StepView, device_idle, eager_ops, host_gaps, input_wait, memory_in_use,
                           per_step_medians, retracing, shared_times)

GUIDE = "migration_guide/README.md"
ADVICE = {
    "eager_ops": "ops run eagerly inside the step: wrap the step in tf.function",
    "retracing": "the tf.function is traced again inside the steps: pass tensors, not Python scalars, "
                 "or give it an input_signature / reduce_retracing=True",
    "host_gaps": "no TF op runs for part of the step (Python work, or waiting): find the work "
                 "(python_tracer_level=1 names it) and move it into the graph or tf.data",
    "input_wait": "the step waits for its input: add .prefetch(tf.data.AUTOTUNE) and "
                  "map(..., num_parallel_calls=tf.data.AUTOTUNE)",
    "fusion_lost": "the test run computes unfused what the control run ran as one fused kernel: "
                   "keep Grappler's remapper on and the fusable pattern (bias_add, float32)",
    "fusion_gained": "the test run fuses what the control run computed op by op (no action needed)",
    "op_regression": "aligned ops run slower in the test run: check the kernel, dtype and data format",
    "memory_growth": "peak allocator memory grew: release per-step tensors (no Python lists of outputs)",
    "device_idle": "the device waits on the host: move input and Python work off the step's path "
                   "(tf.data prefetch to device, larger steps, tf.function)",
}
KINDS = tuple(ADVICE)

# --- thresholds (shares of step time unless said otherwise) --------------------------------
# Eager ops: a few ops outside a tf.function (a tf.constant of the batch) are normal and cost
# well under 1% of a step; a forgotten tf.function puts nearly the whole step in eager ops.
EAGER_MIN_SHARE = 0.05
EAGER_MIN_OPS_PER_STEP = 3
# Retracing: one tracing in the traced steps is a first call (or a new input shape); a
# function traced twice or more inside them is retracing. Any share counts, since a good
# port traces nothing once warm.
RETRACE_MIN_TRACINGS = 2
# Host gaps: good tf.function ports measured 12-16% of their steps outside any op
# (dispatch, executor hand-offs) and TF1 sessions 2-6%; Python work of a few ms measured
# 50%+. A single run needs 30%; against a control, 15 points more than the control's gaps.
HOST_GAP_MIN_SHARE = 0.30
HOST_GAP_MIN_EXTRA = 0.15
# Input wait: a prefetched pipeline blocks a step for well under 2%.
INPUT_MIN_SHARE = 0.10
INPUT_MIN_EXTRA = 0.05
# Device idle: the share of the time the device is idle while the host works. xprof's
# overview calls a step "highly input bound" from 20% of it waiting on the host; the TPU
# inference profile of the corpus, busy 78%, waits 12%; the multi-worker GPU job's GPU:6 idles
# 30% of its 21.3 ms step (xprof: 14.9 ms of device compute) and the host works in 28% of it.
DEVICE_IDLE_MIN_SHARE = 0.25
DEVICE_IDLE_MIN_EXTRA = 0.10
# Op regression: a row is slower when its fastest test step is slower than its median control
# step beyond the comparison's threshold (_beyond_noise); the test steps must be slower than
# the control's the same way (ops that move while the step does not are concurrency, not a
# regression); and a group must explain 7.5% of the test step in shared time (below). Good
# ports captured minutes apart from their TF1 run on a loaded 2-core machine showed groups of
# up to 6.4% (gradient ops sharing the cores side by side); float64 ports' largest groups
# measured 8.7-18.6% (9 pairs, both builds).
REGRESSION_MIN_SHARE = 0.075
# ... and the matched ops together must explain 40% of the steps' slowdown, in shared time
# (each moment split among the ops running then): good ports captured while other processes
# loaded the machine were 10-37% slower per step, with gradient ops that ran side by side
# 2-7x slower in wall time, and their ops explained at most 30% of it in shared time; ports
# that compute in float64 had their ops explain 85-90% (the rest: fusions they lost).
REGRESSION_MIN_EXPLAINED = 0.4
# Memory: a step's working set (its peak bytes in use less those in use at its start) in the
# smallest test step more than 50% and 1 MiB above the control's median step. Good TF2 ports
# of the small CNN measured 0% (plain build) and up to 35% (oneDNN) above the TF1 session's,
# a float64 port 900%; persistent memory (variables, prefetch buffers) is not a step's.
MEMORY_MIN_GROWTH = 0.50
MEMORY_MIN_BYTES = 1 << 20
MEMORY_MIN_STEP_RISE = 1 << 18
MEMORY_RISING_SHARE = 0.75


@dataclass
class Finding:
    kind: str
    share: float            # of the test run's (or the run's) step time
    summary: str            # what was measured, one line
    evidence: dict = field(default_factory=dict)
    advice: str = ""
    link: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def to_text(self) -> str:
        return f"{self.share:6.1%}  {self.kind:14} {self.summary}\n        fix: {self.advice} ({self.link})"


def _finding(kind: str, share: float, summary: str, evidence: dict) -> Finding:
    return Finding(kind, float(round(share, 4)), summary, _plain(evidence), ADVICE[kind],
                   f"{GUIDE}#{kind}")


class Findings(list):
    """Findings ranked by share, with text and JSON forms."""

    def to_text(self) -> str:
        if not self:
            return "findings: none"
        return "\n".join(["findings (share of the step time they explain):"] + [f.to_text() for f in self])

    def to_json(self) -> str:
        return json.dumps([f.to_dict() for f in self], indent=2)

    __str__ = to_text


def advise(trace: Trace, *, warmup: int = 0) -> Findings:
    """What one run shows by itself (tfprof's ``advise`` for both worlds)."""
    view = StepView(trace, warmup)
    out = []
    measures = _time_measures(view)
    eager, retrace, wait, gaps = (measures[k] for k in ("eager_ops", "retracing", "input_wait", "host_gaps"))
    if _is_eager(eager):
        out.append(_finding("eager_ops", eager.share, _eager_summary(eager), _drop(eager.evidence)))
    if _is_retracing(retrace):
        out.append(_finding("retracing", retrace.share, _retrace_summary(retrace), _drop(retrace.evidence)))
    if gaps.share >= HOST_GAP_MIN_SHARE:
        out.append(_finding("host_gaps", gaps.share, f"{gaps.share:.0%} of the step time no op runs",
                            gaps.evidence))
    if wait.share >= INPUT_MIN_SHARE:
        out.append(_finding("input_wait", wait.share, f"steps wait {wait.share:.0%} of their time for input",
                            _drop(wait.evidence)))
    idle = device_idle(view)
    if idle is not None and idle.share >= DEVICE_IDLE_MIN_SHARE:
        out.append(_finding("device_idle", idle.share, _idle_summary(idle), idle.evidence))
    grown = _memory_growth_in_run(trace, view)
    if grown:
        out.append(grown)
    return Findings(sorted(out, key=lambda f: -f.share))


def comparison_findings(comparison) -> Findings:
    """Findings of a comparison: the test run measured against the control run."""
    warmups = _warmups(comparison)
    control, test = StepView(comparison.control, warmups[0]), StepView(comparison.test, warmups[1])
    base, measures = _time_measures(control), _time_measures(test)
    out = []
    eager = measures["eager_ops"]
    if _is_eager(eager) and not _is_eager(base["eager_ops"]):
        out.append(_finding("eager_ops", eager.share, _eager_summary(eager), _drop(eager.evidence)))
    retrace = measures["retracing"]
    if _is_retracing(retrace) and not _is_retracing(base["retracing"]):
        out.append(_finding("retracing", retrace.share, _retrace_summary(retrace), _drop(retrace.evidence)))
    for kind, least, extra in (("host_gaps", HOST_GAP_MIN_SHARE, HOST_GAP_MIN_EXTRA),
                               ("input_wait", INPUT_MIN_SHARE, INPUT_MIN_EXTRA)):
        mine, theirs = measures[kind], base[kind]
        if mine.share >= least and mine.share - theirs.share >= extra:
            what = "no op runs" if kind == "host_gaps" else "the step waits for input"
            evidence = {**_drop(mine.evidence), "control_share": round(theirs.share, 4)}
            if kind == "input_wait":
                evidence["control_events"] = theirs.evidence["events"]
            out.append(_finding(kind, mine.share - theirs.share,
                                f"{mine.share:.0%} of the test step {what} (control {theirs.share:.0%})", evidence))
    idle, idle_base = device_idle(test), device_idle(control)
    if idle is not None and idle.share >= DEVICE_IDLE_MIN_SHARE and \
            idle.share - (idle_base.share if idle_base else 0.0) >= DEVICE_IDLE_MIN_EXTRA:
        out.append(_finding("device_idle", idle.share, _idle_summary(idle), idle.evidence))
    step_ns = comparison.steps["test"]["median_ns"] or 1.0
    out += _fusion_findings(comparison, step_ns)
    out += _regressions(comparison, step_ns)
    grown = _memory_growth(comparison)
    if grown:
        out.append(grown)
    return Findings(sorted(out, key=lambda f: -f.share))


# --- time measures ------------------------------------------------------------------------
def _time_measures(view: StepView) -> dict:
    eager, retrace, wait = eager_ops(view), retracing(view), input_wait(view)
    explained = []
    if _is_eager(eager):
        explained += eager.evidence["sections"]
    if _is_retracing(retrace):
        explained += retrace.evidence["sections"]
    return {"eager_ops": eager, "retracing": retrace, "input_wait": wait,
            "host_gaps": host_gaps(view, explained)}


def _is_eager(measure) -> bool:
    per_step = measure.evidence["ops_per_step"]
    return bool(per_step) and measure.share >= EAGER_MIN_SHARE and float(np.median(per_step)) >= EAGER_MIN_OPS_PER_STEP


def _is_retracing(measure) -> bool:
    return sum(measure.evidence["graph_buildings_per_step"]) >= RETRACE_MIN_TRACINGS or \
        bool(measure.evidence["functions"])


def _eager_summary(measure) -> str:
    per_step = measure.evidence["ops_per_step"]
    return f"{int(np.median(per_step))} ops per step run eagerly ({measure.share:.0%} of the step time)"


def _retrace_summary(measure) -> str:
    counts = measure.evidence["graph_buildings_per_step"]
    names = sum(len(v) for v in measure.evidence["functions"].values())
    return (f"{sum(counts)} tracings in {sum(1 for c in counts if c)} of {len(counts)} steps, "
            f"{names} function versions")


def _idle_summary(measure) -> str:
    return (f"{measure.evidence['device']} is idle {measure.evidence['idle_share']:.0%} of the time, "
            f"{measure.share:.0%} while the host works")


def _drop(evidence: dict) -> dict:
    """Evidence without the raw intervals (kept for the gap measure only)."""
    return {k: v for k, v in evidence.items() if k != "sections"}


def _warmups(comparison) -> tuple[int, int]:
    counts = (comparison.steps["control"]["count"], comparison.steps["test"]["count"])
    return tuple(max(len(t.steps) - n, 0) for t, n in zip((comparison.control, comparison.test), counts))


# --- comparison-only kinds ------------------------------------------------------------------
def _fusion_findings(comparison, step_ns: float) -> list[Finding]:
    """Fusion rows: a fused kernel on one side, its parts on the other. Parts that ran
    eagerly are eager_ops' finding (eager execution fuses nothing), not a fusion's."""
    lost, gained = [], []
    for row in comparison.rows:
        if row.rule != "fusion" or any(is_eager_name(n) for n in row.control_names + row.test_names):
            continue
        control_fused = len(row.control_names) == 1 and _fuses(comparison.control, row.control_names[0])
        (lost if control_fused else gained).append(row)
    out = []
    for kind, rows in (("fusion_lost", lost), ("fusion_gained", gained)):
        if not rows:
            continue
        delta = sum(r.delta_ns for r in rows)
        share = max(delta, 0.0) / step_ns if kind == "fusion_lost" else max(-delta, 0.0) / step_ns
        out.append(_finding(kind, share, f"{len(rows)} fused kernel(s) {'unfused' if kind == 'fusion_lost' else 'fused'}"
                            f" in the test run, {delta / 1e6:+.3f} ms per step",
                            {"ops": [r.key for r in rows], "delta_ns": [r.delta_ns for r in rows],
                             "control_ops": [list(r.control_names) for r in rows],
                             "test_ops": [list(r.test_names) for r in rows]}))
    return out


def _fuses(trace: Trace, name: str) -> bool:
    ops = trace.ops
    index = trace.strings.index(name) if name in trace.strings else -1
    rows = np.flatnonzero(ops["name"] == index)
    return bool(len(rows)) and bool(fusion_parts(trace.strings[int(ops["kernel"][rows[0]])]))


def _regressions(comparison, step_ns: float) -> list[Finding]:
    """Aligned ops slower beyond noise, grouped by op type and top scope."""
    c, t = comparison.steps["control"], comparison.steps["test"]
    if not _beyond_noise(c["median_ns"], t["min_ns"], comparison.threshold, 0):
        return []
    groups: dict[tuple[str, str], list] = {}
    for row in comparison.rows:
        if row.rule in ("unmatched", "optimizer", "fusion") or any(is_eager_name(n) for n in row.test_names):
            continue  # unmatched rows have no baseline; optimizer groups differ by design
        if _beyond_noise(row.control_median_ns, row.test_min_ns, comparison.threshold, 2_000):
            scope = row.test_names[0].split("/")[0] if "/" in row.test_names[0] else ""
            groups.setdefault((plain_kernel(row.op_type.split("/")[0]), scope), []).append(row)
    # Shares and the explained slowdown use each op's shared time (run_findings.shared_times).
    warmups = _warmups(comparison)
    shared = [per_step_medians(trace, shared_times(trace), StepView(trace, skip).positions)
              for trace, skip in zip((comparison.control, comparison.test), warmups)]

    def delta_of(rows) -> float:
        return sum(sum(shared[1].get(n, 0.0) for n in r.test_names) -
                   sum(shared[0].get(n, 0.0) for n in r.control_names) for r in rows)
    kept = {key: rows for key, rows in groups.items() if delta_of(rows) / step_ns >= REGRESSION_MIN_SHARE}
    matched = [r for r in comparison.rows if r.control_names and r.test_names]
    if delta_of(matched) < REGRESSION_MIN_EXPLAINED * (t["median_ns"] - c["median_ns"]):
        return []  # the ops' time moved little of the steps' slowdown: the machine, not the ops
    out = []
    for (op_type, scope), rows in kept.items():
        delta = delta_of(rows)
        evidence = {"op_type": op_type, "scope": scope, "ops": [r.key for r in rows],
                    "control_median_ns": sum(r.control_median_ns for r in rows),
                    "test_median_ns": sum(r.test_median_ns for r in rows),
                    "shared_delta_ns": delta}
        cause = _kernel_change(comparison, rows)
        if cause:
            evidence["cause"] = cause
        out.append(_finding("op_regression", delta / step_ns,
                            f"{op_type} in {scope or 'top level'}: {len(rows)} op(s) "
                            f"{evidence['control_median_ns'] / 1e6:.3f} -> {evidence['test_median_ns'] / 1e6:.3f} ms"
                            f"{'; ' + cause if cause else ''}", evidence))
    return out


def _beyond_noise(control_median: float, test_min: float, threshold: float, noise_ns: float) -> bool:
    """Slower beyond the per-step spread: even the test run's fastest step is slower than the
    control run's median one, by more than the threshold and the noise floor. With a few
    steps on a loaded machine one outlier step moves a p90 by several times the median
    (measured: 1.25 ms median, 5.2 ms p90); a minimum and a median it does not move."""
    return test_min - control_median > max(threshold * control_median, noise_ns)


def _kernel_change(comparison, rows) -> str:
    """The likely cause when the trace shows one: other kernels for the same ops."""
    kernels = []
    for trace, side in ((comparison.control, "control"), (comparison.test, "test")):
        names = {n for r in rows for n in getattr(r, f"{side}_names")}
        ops = trace.ops
        ids = [trace.strings.index(n) for n in names if n in trace.strings]
        found = sorted({trace.strings[k] for k in np.unique(ops["kernel"][np.isin(ops["name"], ids)]).tolist()})
        kernels.append(found)
    if kernels[0] and kernels[1] and kernels[0] != kernels[1]:
        return f"different kernel: {', '.join(kernels[0])} -> {', '.join(kernels[1])}"
    return ""


def _memory_growth(comparison) -> Finding | None:
    """The test steps' working set beyond the control's, or memory left behind by each step."""
    warmups = _warmups(comparison)
    views = [StepView(trace, skip) for trace, skip in zip((comparison.control, comparison.test), warmups)]
    before, after = memory_in_use(comparison.control), memory_in_use(comparison.test)
    if before and after and views[0].positions and views[1].positions:  # working sets are per step
        base = float(np.median([before["working_set_per_step"][p] for p in views[0].positions]))
        least = min(after["working_set_per_step"][p] for p in views[1].positions)
        if least - base > max(MEMORY_MIN_GROWTH * base, MEMORY_MIN_BYTES):
            return _finding("memory_growth", 0.0, f"a step's working set {base / 2**20:.1f} -> "
                            f"{least / 2**20:.1f} MiB or more",
                            {"control": before, "test": after, "control_working_set": base,
                             "test_least_working_set": least, "steps": views[1].numbers()})
    if _memory_growth_in_run(comparison.control, views[0]):
        return None  # the control run grows the same way: not the port's doing
    return _memory_growth_in_run(comparison.test, views[1])


def _memory_growth_in_run(trace: Trace, view: StepView) -> Finding | None:
    """Memory each step leaves behind: the bytes in use at step ends rising from most steps
    to the next (MEMORY_RISING_SHARE of them, each by MEMORY_MIN_STEP_RISE), by more than
    MEMORY_MIN_BYTES in all. A good port's bytes in use at step end stay flat or jump once
    (a cache or a buffer filled: measured 2 MiB once in 4 steps); the allocator's own
    fluctuation measured up to 0.7 MiB down between steps."""
    memory = memory_in_use(trace)
    ends = [memory["in_use_at_step_end"][p] for p in view.positions] if memory else []
    if len(ends) < 3:
        return None
    rises = [b - a for a, b in zip(ends, ends[1:])]
    rising = sum(1 for r in rises if r > MEMORY_MIN_STEP_RISE)
    grown = ends[-1] - ends[0]
    if rising < MEMORY_RISING_SHARE * len(rises) or grown <= MEMORY_MIN_BYTES:
        return None
    return _finding("memory_growth", 0.0, f"{grown / 2**20:.1f} MiB more in use over {len(rises)} steps, "
                    f"more after {rising} of them ({memory['allocator']})",
                    {"in_use_at_step_end": ends, "steps": view.numbers(), "peaks": memory["peaks"]})


def _plain(value):
    """JSON-ready: numpy numbers as Python ones."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


__all__ = ["ADVICE", "KINDS", "Finding", "Findings", "advise", "comparison_findings"]
