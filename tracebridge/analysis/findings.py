"""Findings: why a TF2 port is slower than its TF1 run, or what one run shows by itself.

A :class:`~.evidence.Finding` names a porting mistake (``kind``), the share of the test
run's step time it explains, the evidence it rests on (ops, steps, lanes, events, measured
times) and one line of advice linking to the section of ``migration_guide/`` that shows the
fix. Each kind is a :class:`~.detectors.Detector`: ``measure`` a run or a pair of runs into
that kind's evidence (:mod:`.evidence`), ``judge`` the evidence into findings. One
table, :data:`DETECTORS`, serves ``advise(trace)`` (one run) and
``comparison_findings(comparison)`` (a TF1/TF2 pair, where the control run is the baseline
each measure is taken against). Findings are ranked by share. Every threshold below has a
noise margin and says where it comes from: the measures of good ports
(``tests/test_findings.py``) on a loaded 2-core machine.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from ..model.trace import Trace
from .compare_result import Comparison
from .compare_types import PerSide
from .detectors import Detector, PairDetector, PresenceDetector, Run, RunDetector, RunPair, ShareDetector
from .evidence import (DeviceIdleEvidence, EagerOpsEvidence, Finding, Findings, FusionEvidence, HostGapsEvidence,
                       InputWaitEvidence, LeftBehindEvidence, RetracingEvidence, XlaCompileEvidence,
                       XlaFusionEvidence)
from .pair_findings import Regressions, fusion_rows, regressions, working_set_growth, xla_fusions
from .run_findings import StepMemory, device_idle, eager_ops, host_gaps, input_wait, retracing, xla_compile

# --- thresholds (shares of step time unless said otherwise) --------------------------------
# Eager ops: a few ops outside a tf.function (a tf.constant of the batch) are normal and cost
# well under 1% of a step; a forgotten tf.function puts nearly the whole step in eager ops.
EAGER_MIN_SHARE = 0.05
EAGER_MIN_OPS_PER_STEP = 3
# Retracing: one tracing in the traced steps is a first call (or a new input shape); a
# function traced twice or more inside them is retracing. Any share counts, since a good
# port traces nothing once warm.
RETRACE_MIN_TRACINGS = 2
# XLA compilation: one compilation in the traced steps is a first call (or one new input
# shape); two or more are a function that recompiles. Any share counts: a compilation of
# even a two-matmul function took 110-160 ms on this 2-core machine (TF 2.21 CPU), and a
# good port compiles nothing once warm.
XLA_MIN_COMPILATIONS = 2
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
# step beyond the comparison's threshold and noise_ns (pair_findings.beyond_noise); the test
# steps must be slower than the control's the same way (ops that move while the step does not
# are concurrency, not a regression); and a group must explain 7.5% of the test step in
# shared time (below). Good ports captured minutes apart from their TF1 run on a loaded
# 2-core machine showed groups of up to 6.4% (gradient ops sharing the cores side by side);
# float64 ports' largest groups measured 8.7-18.6% (9 pairs, both builds).
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


# --- one run's kinds ----------------------------------------------------------------------
class EagerOps(PresenceDetector):
    kind = "eager_ops"
    advice = "ops run eagerly inside the step: wrap the step in tf.function"

    def measure_run(self, run: Run) -> EagerOpsEvidence:
        return eager_ops(run.view)

    def shows(self, evidence: EagerOpsEvidence) -> bool:
        per_step = evidence.ops_per_step
        return bool(per_step) and evidence.share >= EAGER_MIN_SHARE and \
            float(np.median(per_step)) >= EAGER_MIN_OPS_PER_STEP

    def summary(self, evidence: EagerOpsEvidence) -> str:
        return (f"{int(np.median(evidence.ops_per_step))} ops per step run eagerly "
                f"({evidence.share:.0%} of the step time)")


class Retracing(PresenceDetector):
    kind = "retracing"
    advice = ("the tf.function is traced again inside the steps: pass tensors, not Python scalars, "
              "or give it an input_signature / reduce_retracing=True")

    def measure_run(self, run: Run) -> RetracingEvidence:
        return retracing(run.view)

    def shows(self, evidence: RetracingEvidence) -> bool:
        return sum(evidence.graph_buildings_per_step) >= RETRACE_MIN_TRACINGS or bool(evidence.functions)

    def summary(self, evidence: RetracingEvidence) -> str:
        counts = evidence.graph_buildings_per_step
        versions = sum(len(v) for v in evidence.functions.values())
        return (f"{sum(counts)} tracings in {sum(1 for c in counts if c)} of {len(counts)} steps, "
                f"{versions} function versions")


class XlaCompile(PresenceDetector):
    kind = "xla_compile"
    advice = ("XLA compiles the function again inside the steps, once per new input shape: "
              "pad or bucket inputs to a few shapes (drop_remainder=True, padded_batch)")

    def measure_run(self, run: Run) -> XlaCompileEvidence:
        return xla_compile(run.view)

    def shows(self, evidence: XlaCompileEvidence) -> bool:
        return len(evidence.steps) >= XLA_MIN_COMPILATIONS

    def summary(self, evidence: XlaCompileEvidence) -> str:
        counts = evidence.compilations_per_step
        functions = ", ".join(dict.fromkeys(evidence.functions))
        shapes = [s for s in evidence.input_shapes if s]
        return (f"{len(evidence.steps)} XLA compilations of {functions} in {sum(1 for c in counts if c)} of "
                f"{len(counts)} steps, {sum(evidence.compile_ns) / 1e6:.1f} ms"
                + (f"; inputs {'; '.join(dict.fromkeys(shapes))}" if shapes else ""))


class HostGaps(ShareDetector):
    kind = "host_gaps"
    advice = ("no TF op runs for part of the step (Python work, or waiting): find the work "
              "(python_tracer_level=1 names it) and move it into the graph or tf.data")
    least, extra = HOST_GAP_MIN_SHARE, HOST_GAP_MIN_EXTRA
    alone, in_test_step = "{share:.0%} of the step time no op runs", "no op runs"

    def measure_run(self, run: Run) -> HostGapsEvidence:
        explained = []  # eager sections and retracing are their own findings' time
        for detector in (EAGER_OPS, RETRACING):
            evidence = run.evidence(detector)
            if detector.shows(evidence):
                explained += evidence.sections
        return host_gaps(run.view, explained)

    def finding(self, share: float, summary: str, evidence: HostGapsEvidence | None) -> Finding:
        """With the Python tracer on, the summary names the Python work the gaps hold, so
        the text says what --json does (the frames nest: a caller and its callee both show)."""
        frames = list((evidence.python_in_gaps_ns or {}).items())[:3] if evidence is not None else []
        if frames:
            summary += "; Python in the gaps (all steps): " + ", ".join(
                f"{frame.lstrip('$')} ({ns / 1e6:.3f} ms)" for frame, ns in frames)
        return super().finding(share, summary, evidence)


class InputWait(ShareDetector):
    kind = "input_wait"
    advice = ("the step waits for its input: add .prefetch(tf.data.AUTOTUNE) and "
              "map(..., num_parallel_calls=tf.data.AUTOTUNE)")
    least, extra = INPUT_MIN_SHARE, INPUT_MIN_EXTRA
    alone, in_test_step = "steps wait {share:.0%} of their time for input", "the step waits for input"

    def measure_run(self, run: Run) -> InputWaitEvidence:
        return input_wait(run.view)

    def against(self, mine: InputWaitEvidence, theirs: InputWaitEvidence) -> InputWaitEvidence:
        return dataclasses.replace(super().against(mine, theirs), control_events=theirs.events)


class DeviceIdle(RunDetector):
    kind = "device_idle"
    advice = ("the device waits on the host: move input and Python work off the step's path "
              "(tf.data prefetch to device, larger steps, tf.function)")

    def measure_run(self, run: Run) -> DeviceIdleEvidence | None:
        return device_idle(run.view)

    def judge_run(self, evidence: DeviceIdleEvidence | None) -> Finding | None:
        if evidence is None or evidence.share < DEVICE_IDLE_MIN_SHARE:
            return None
        return self.finding(evidence.share, f"{evidence.device} is idle {evidence.idle_share:.0%} of the time, "
                            f"{evidence.share:.0%} while the host works", evidence)

    def judge_pair(self, evidence: PerSide[DeviceIdleEvidence | None]) -> Finding | None:
        base = evidence.control.share if evidence.control else 0.0
        if evidence.test is None or evidence.test.share - base < DEVICE_IDLE_MIN_EXTRA:
            return None
        return self.judge_run(evidence.test)


class MemoryGrowth(RunDetector):
    """Memory each step leaves behind (one run, or the test run where the control run does
    not), or, of a pair, a step's working set grown."""

    kind = "memory_growth"
    advice = "peak allocator memory grew: release per-step tensors (no Python lists of outputs)"

    def measure_run(self, run: Run) -> StepMemory:
        return StepMemory(run.memory, run.view)

    def judge_run(self, evidence: StepMemory) -> Finding | None:
        """The bytes in use at step ends rising from most steps to the next
        (MEMORY_RISING_SHARE of them, each by MEMORY_MIN_STEP_RISE), by more than
        MEMORY_MIN_BYTES in all. A good port's bytes in use at step end stay flat or jump
        once (a cache or a buffer filled: measured 2 MiB once in 4 steps); the allocator's
        own fluctuation measured up to 0.7 MiB down between steps."""
        memory, view = evidence.use, evidence.view
        ends = [memory.in_use_at_step_end[p] for p in view.step_positions] if memory.allocator else []
        if len(ends) < 3:
            return None
        rises = [b - a for a, b in zip(ends, ends[1:])]
        rising = sum(1 for r in rises if r > MEMORY_MIN_STEP_RISE)
        grown = ends[-1] - ends[0]
        if rising < MEMORY_RISING_SHARE * len(rises) or grown <= MEMORY_MIN_BYTES:
            return None
        return self.finding(0.0, f"{grown / 2**20:.1f} MiB more in use over {len(rises)} steps, "
                            f"more after {rising} of them ({memory.allocator})",
                            LeftBehindEvidence(ends, view.numbers(), memory.peaks))

    def judge_pair(self, evidence: PerSide[StepMemory]) -> Finding | None:
        grown = working_set_growth(evidence.map(lambda measured: measured.use),
                                   evidence.map(lambda measured: measured.view))
        if grown and grown.test_least_working_set - grown.control_working_set > \
                max(MEMORY_MIN_GROWTH * grown.control_working_set, MEMORY_MIN_BYTES):
            return self.finding(0.0, f"a step's working set {grown.control_working_set / 2**20:.1f} -> "
                                f"{grown.test_least_working_set / 2**20:.1f} MiB or more", grown)
        if self.judge_run(evidence.control):
            return None  # the control run grows the same way: not the port's doing
        return self.judge_run(evidence.test)


# --- a pair's kinds -------------------------------------------------------------------------
class FusionChange(PairDetector):
    """Fusion rows one way: a fused kernel in the control run (``lost``) or in the test run."""

    lost: ClassVar[bool]

    def measure_pair(self, pair: RunPair) -> FusionEvidence | None:
        return fusion_rows(pair.comparison, self.lost)

    def judge(self, evidence: FusionEvidence) -> list[Finding]:
        delta = evidence.delta_total_ns
        return [self.finding(evidence.share, f"{len(evidence.ops)} fused kernel(s) "
                             f"{'unfused' if self.lost else 'fused'} in the test run, {delta / 1e6:+.3f} ms per step",
                             evidence)]


class FusionLost(FusionChange):
    kind = "fusion_lost"
    advice = ("the test run computes unfused what the control run ran as one fused kernel: "
              "keep Grappler's remapper on and the fusable pattern (bias_add, float32)")
    lost = True


class FusionGained(FusionChange):
    kind = "fusion_gained"
    advice = "the test run fuses what the control run computed op by op (no action needed)"
    lost = False


class XlaFusion(PairDetector):
    """What XLA fused (one run compiled with XLA) that the other run ran as separate ops."""

    kind = "xla_fusion"
    advice = ("XLA computes these ops in fused kernels where the other run ran each one: nothing to fix; "
              "compare like for like (jit_compile on both sides, or off on both)")

    def measure_pair(self, pair: RunPair) -> XlaFusionEvidence | None:
        return xla_fusions(pair.comparison, pair.views)

    def judge(self, evidence: XlaFusionEvidence) -> list[Finding]:
        other = "control" if evidence.xla_run == "test" else "test"
        separate = sum(sum(times) for times in evidence.separate_ns)
        # distinct ops and kernels: XLA computes some ops again in several fusions
        tf_ops = {op for ops in evidence.tf_ops for op in ops}
        kernels = {name for names in evidence.instructions for name in names}
        return [self.finding(evidence.share,
                             f"XLA ({evidence.xla_run} run) computes {len(tf_ops)} TF ops in {len(kernels)} fused "
                             f"kernels where the {other} run ran {sum(len(ops) for ops in evidence.separate_ops)} "
                             f"separate ops: {separate / 1e6:.3f} -> {sum(evidence.xla_ns) / 1e6:.3f} ms per step "
                             f"({len(evidence.ops)} rows)", evidence)]


class OpRegression(PairDetector):
    """Aligned ops slower beyond noise (the comparison's threshold and ``noise_ns``), one
    finding per op type and top-level scope."""

    kind = "op_regression"
    advice = "aligned ops run slower in the test run: check the kernel, dtype and data format"

    def measure_pair(self, pair: RunPair) -> Regressions | None:
        return regressions(pair.comparison, pair.views)

    def judge(self, evidence: Regressions) -> list[Finding]:
        kept = [g for g in evidence.groups if g.shared_delta_ns / evidence.step_ns >= REGRESSION_MIN_SHARE]
        if evidence.matched_delta_ns < REGRESSION_MIN_EXPLAINED * evidence.step_slowdown_ns:
            return []  # the ops' time moved little of the steps' slowdown: the machine, not the ops
        return [self.finding(g.shared_delta_ns / evidence.step_ns,
                             f"{g.op_type} in {g.scope or 'top level'}: {len(g.ops)} op(s) "
                             f"{g.control_median_ns / 1e6:.3f} -> {g.test_median_ns / 1e6:.3f} ms"
                             f"{'; ' + g.cause if g.cause else ''}", g) for g in kept]


EAGER_OPS, RETRACING = EagerOps(), Retracing()
# Every kind, in the order findings of equal share are listed.
DETECTORS: tuple[Detector, ...] = (EAGER_OPS, RETRACING, XlaCompile(), HostGaps(), InputWait(), DeviceIdle(), FusionLost(),
                                   FusionGained(), XlaFusion(), OpRegression(), MemoryGrowth())
ADVICE = {detector.kind: detector.advice for detector in DETECTORS}
KINDS = tuple(ADVICE)


def advise(trace: Trace, *, warmup: int = 0) -> Findings:
    """What one run shows by itself (tfprof's ``advise`` for both worlds)."""
    return _found(Run(trace, warmup))


def comparison_findings(comparison: Comparison) -> Findings:
    """Findings of a comparison: the test run measured against the control run."""
    return _found(RunPair(comparison))


def _found(subject: Run | RunPair) -> Findings:
    out = []
    for detector in DETECTORS:
        evidence = detector.measure(subject)
        if evidence is not None:
            out += detector.judge(evidence)
    for finding in out:
        _bound(finding, subject)
    return Findings(sorted(out, key=lambda f: -f.share))


def _bound(finding: Finding, subject: Run | RunPair) -> None:
    """Say what the share is of, and the most fixing it could save a step: a port whose step
    went from 31.8 to 56.5 ms saves at most 24.7 ms, whatever share of 56.5 ms it names."""
    if isinstance(subject, RunPair):
        steps = subject.comparison.steps
        finding.of = "the test run's median step"
        finding.saves_at_most_ns = min(finding.share * steps.test.median_ns,
                                       max(steps.test.median_ns - steps.control.median_ns, 0.0))
    else:
        view = subject.view
        finding.of = "the run's step time"
        finding.saves_at_most_ns = finding.share * view.total_ns / len(view.steps) if view.steps else None


__all__ = ["ADVICE", "DETECTORS", "KINDS", "Detector", "Finding", "Findings", "Run", "RunPair", "advise",
           "comparison_findings"]
