"""Findings: why a TF2 port is slower than its TF1 run, or what one run shows by itself.

A :class:`~.evidence.Finding` names a porting mistake (``kind``), the share of the test
run's step time it explains, the evidence it rests on (ops, steps, lanes, events, measured
times) and one line of advice linking to the section of ``migration_guide/`` that shows the
fix. Each kind is a :class:`~.detectors.Detector`: ``measure`` a run or a pair of runs into
that kind's evidence (:mod:`.evidence`), ``judge`` the evidence into findings. One
table, :data:`DETECTORS`, serves ``advise(trace)`` (one run) and
``comparison_findings(comparison)`` (a TF1/TF2 pair, where the control run is the baseline
each measure is taken against). Findings are ranked by share. Every threshold is a field
of :class:`~.common.thresholds.Thresholds`, which says where each comes from. Timing kinds are
decided on intervals over steps (:mod:`.detectors`, :mod:`.common.shift`) and withheld, with a
note, where a run has fewer than ``min_steps`` steps.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from ...model.trace import Trace
from ..compare.result import Comparison
from ..common.types import PerSide
from .detectors import Detector, PairDetector, PresenceDetector, Run, RunDetector, RunPair, ShareDetector
from .evidence import (DeviceIdleEvidence, EagerOpsEvidence, Finding, Findings, FrameworkEvidence, FusionEvidence,
                       HostGapsEvidence, InputWaitEvidence, LeftBehindEvidence, RetracingEvidence, XlaCompileEvidence,
                       XlaFusionEvidence)
from .pair_measures import Regressions, fusion_rows, regressions, working_set_growth, xla_fusions
from .run_measures import (StepMemory, device_idle, eager_ops, framework_overhead, host_gaps, input_wait, retracing,
                           xla_compile)
from ..common.thresholds import DEFAULT, Thresholds
from ..run.breakdown import PARTS

# --- one run's kinds ----------------------------------------------------------------------
class EagerOps(PresenceDetector):
    kind = "eager_ops"
    advice = "ops run eagerly inside the step: wrap the step in tf.function"

    def shows(self, evidence: EagerOpsEvidence, limits: Thresholds) -> bool:
        per_step = evidence.ops_per_step
        return bool(per_step) and evidence.share >= limits.eager_min_share and \
            float(np.median(per_step)) >= limits.eager_min_ops_per_step

    def summary(self, evidence: EagerOpsEvidence) -> str:
        return (f"{int(np.median(evidence.ops_per_step))} ops per step run eagerly "
                f"({evidence.share:.0%} of the step time)")

    def measure_run(self, run: Run) -> EagerOpsEvidence:
        evidence = eager_ops(run.view)
        return dataclasses.replace(evidence, parts=_parts_within(run, evidence.sections))

    def finding(self, share: float, summary: str, evidence: EagerOpsEvidence, interval: dict | None = None) -> Finding:
        """An eager section holds the ops, their dispatch (framework) and Python between them
        (idle): its share claims those parts, in the proportions the sections hold them."""
        found = super().finding(share, summary, evidence, interval)
        parts = evidence.parts if evidence is not None else {}
        total = sum(parts.values())
        found.parts = {part: found.share * ns / total for part, ns in parts.items() if ns} if total else {}
        return found


class Retracing(PresenceDetector):
    kind = "retracing"
    advice = ("the tf.function is traced again inside the steps: pass tensors, not Python scalars, "
              "or give it an input_signature / reduce_retracing=True")

    measure_view = staticmethod(retracing)

    def shows(self, evidence: RetracingEvidence, limits: Thresholds) -> bool:
        return sum(evidence.retracings_per_step) >= limits.retrace_min_tracings

    def summary(self, evidence: RetracingEvidence) -> str:
        counts = evidence.retracings_per_step
        versions = ", ".join(f"{fn}: {len(names)} concrete function{'s' if len(names) != 1 else ''}"
                             for fn, names in evidence.functions.items())
        return (f"{sum(counts)} retracing{'s' if sum(counts) != 1 else ''} (tracings beyond a function's first) in "
                f"{_steps_with(counts)} steps ({versions} in the trace)")

    def finding(self, share: float, summary: str, evidence, interval: dict | None = None) -> Finding:
        found = super().finding(share, summary, evidence, interval)
        found.parts = {"compile": found.share}  # its sections are the step's compile part
        return found


class XlaCompile(PresenceDetector):
    kind = "xla_compile"
    advice = ("XLA compiles the function again inside the steps, once per new input shape: "
              "pad or bucket inputs to a few shapes (drop_remainder=True, padded_batch)")

    measure_view = staticmethod(xla_compile)

    def shows(self, evidence: XlaCompileEvidence, limits: Thresholds) -> bool:
        return _recompilations(evidence) >= limits.xla_min_recompilations

    def summary(self, evidence: XlaCompileEvidence) -> str:
        counts = evidence.compilations_per_step
        functions = ", ".join(dict.fromkeys(evidence.functions))
        shapes = [s for s in evidence.input_shapes if s]
        return (f"{len(evidence.steps)} XLA compilations of {functions} ({_recompilations(evidence)} beyond each "
                f"function's first call) in {_steps_with(counts)} steps, {sum(evidence.compile_ns) / 1e6:.1f} ms"
                + (f"; inputs {'; '.join(dict.fromkeys(shapes))}" if shapes else ""))

    def finding(self, share: float, summary: str, evidence: XlaCompileEvidence, interval: dict | None = None) -> Finding:
        """Its share is the recompilations' time alone: a first call's compilation is a
        one-time cost (the steady state leaves its step out; with it kept, it is not counted)."""
        if evidence is not None and sum(evidence.compile_ns):
            again = [ns for ns, first in zip(evidence.compile_ns, evidence.first_call) if not first]
            share = evidence.share * sum(again) / sum(evidence.compile_ns)
        found = super().finding(share, summary, evidence, interval)
        found.parts = {"compile": found.share}
        return found


def _steps_with(counts: list[int]) -> str:
    """``N of M``: the steps with any, of all."""
    return f"{sum(1 for c in counts if c)} of {len(counts)}"


class HostGaps(ShareDetector):
    kind = "host_gaps"
    advice = ("no TF op runs for part of the step (Python work, or waiting): find the work "
              "(python_tracer_level=1 names it) and move it into the graph or tf.data")
    least, extra = "host_gap_min_share", "host_gap_min_extra"
    alone, in_test_step = "{share:.0%} of the step time no op runs", "no op runs"
    part = "idle"

    def measure_run(self, run: Run) -> HostGapsEvidence:
        return dataclasses.replace(host_gaps(run.view, _eager_sections(run)),
                                   step_ns=[s.duration_ns for s in run.view.steps])

    def step_shares(self, evidence: HostGapsEvidence) -> list[float]:
        return _shares_of(evidence.gap_ns_per_step, evidence.step_ns)

    def finding(self, share: float, summary: str, evidence: HostGapsEvidence | None,
                interval: dict | None = None) -> Finding:
        """With the Python tracer on, the summary names the Python work the gaps hold, so
        the text says what --json does (the frames nest: a caller and its callee both show)."""
        frames = list((evidence.python_in_gaps_ns or {}).items())[:3] if evidence is not None else []
        if frames:
            summary += "; Python in the gaps (all steps): " + ", ".join(
                f"{frame.lstrip('$')} ({ns / 1e6:.3f} ms)" for frame, ns in frames)
        return super().finding(share, summary, evidence, interval)


class InputWait(ShareDetector):
    kind = "input_wait"
    advice = ("the step waits for its input: add .prefetch(tf.data.AUTOTUNE) and "
              "map(..., num_parallel_calls=tf.data.AUTOTUNE)")
    least, extra = "input_min_share", "input_min_extra"
    alone, in_test_step = "steps wait {share:.0%} of their time for input", "the step waits for input"
    part = "input"

    def measure_run(self, run: Run) -> InputWaitEvidence:
        return dataclasses.replace(input_wait(run.view), step_ns=[s.duration_ns for s in run.view.steps])

    def step_shares(self, evidence: InputWaitEvidence) -> list[float]:
        return _shares_of(evidence.wait_ns_per_step, evidence.step_ns)

    def against(self, mine: InputWaitEvidence, theirs: InputWaitEvidence) -> InputWaitEvidence:
        return dataclasses.replace(super().against(mine, theirs), control_events=theirs.events)


class FrameworkOverhead(ShareDetector):
    """The framework's time between ops bounds the step: ``tf.function`` dispatch, Keras's
    step function, the executor (the step's ``framework`` part). Alone: the lower bound of
    its steps' median share reaches ``framework_min_share`` and the steps spend more time in
    the framework than in ops; against a control, the shift's lower bound reaches
    ``framework_min_extra`` too. The advice fits the API that ran the steps."""

    kind = "framework_overhead"
    advice = ("the framework's time between ops bounds the step: do more work per call (Keras fit: "
              "steps_per_execution, a larger batch, jit_compile=True; a custom loop: the loop inside one "
              "tf.function; TF1: a tf.data pipeline instead of feed_dict)")
    least, extra = "framework_min_share", "framework_min_extra"
    alone, in_test_step = "{share:.0%} of the step time is the framework's between ops", "is the framework's"
    part = "framework"

    def measure_run(self, run: Run) -> FrameworkEvidence:
        return dataclasses.replace(framework_overhead(run.view, _eager_sections(run)),
                                   step_ns=[s.duration_ns for s in run.view.steps])

    def step_shares(self, evidence: FrameworkEvidence) -> list[float]:
        return _shares_of(evidence.framework_ns_per_step, evidence.step_ns)

    def judge_run(self, evidence: FrameworkEvidence, limits: Thresholds) -> Finding | None:
        # the framework bounds the step: more of it than of the ops
        if float(np.median(evidence.framework_ns_per_step or [0])) <= float(np.median(evidence.ops_ns_per_step or [0])):
            return None
        return super().judge_run(evidence, limits)

    def run_summary(self, evidence: FrameworkEvidence) -> str:
        return f"{super().run_summary(evidence)}{self._detail(evidence)}"

    def pair_summary(self, mine: FrameworkEvidence, base: float) -> str:
        return f"{super().pair_summary(mine, base)}{self._detail(mine)}"

    @staticmethod
    def _detail(evidence: FrameworkEvidence) -> str:
        framework = float(np.median(evidence.framework_ns_per_step or [0]))
        ops = float(np.median(evidence.ops_ns_per_step or [0]))
        calls = float(np.median(evidence.calls_per_step or [0]))
        api = FRAMEWORK_APIS.get(evidence.api, "")
        per_call = f", {calls:g} tf.function call{'s' * (calls != 1)} a step" if calls else ""
        return f" ({framework / 1e6:.3f} ms against {ops / 1e6:.3f} ms of ops a step{per_call}{api})"

    def finding(self, share: float, summary: str, evidence: FrameworkEvidence, interval: dict | None = None) -> Finding:
        found = super().finding(share, summary, evidence, interval)
        found.advice = FRAMEWORK_ADVICE.get(evidence.api if evidence is not None else "", self.advice)
        return found


# What ran the steps (analysis/run/breakdown.py, api_of), as the summary names it, and the fix for each.
FRAMEWORK_APIS = {"keras_fit": "; Keras fit", "tf_function": "; a tf.function a step", "session": "; a TF1 session",
                  "eager": "; eager ops"}
FRAMEWORK_ADVICE = {
    "keras_fit": ("Keras fit calls into the framework once a step, and that costs more than the step's ops: run "
                  "several steps per call (model.compile(..., steps_per_execution=32)), a larger batch, or "
                  "jit_compile=True"),
    "tf_function": ("each step is one tf.function call whose dispatch costs more than its ops: put the loop inside "
                    "one tf.function (for batch in dataset: ... in it), so one call runs many steps; or a larger batch"),
    "session": ("each session.run converts and copies its feed_dict and starts the executor: read the input with "
                "tf.data (an iterator in the graph) instead of feed_dict, and do more work per run (a larger batch)"),
    "eager": "each op is dispatched from Python: wrap the step in tf.function",
}


class DeviceIdle(ShareDetector):
    """The busiest device waiting on the host, per step (each window: the steps, or the
    profile's span where it has none)."""

    kind = "device_idle"
    advice = ("the device waits on the host: move input and Python work off the step's path "
              "(tf.data prefetch to device, larger steps, tf.function)")
    least, extra = "device_idle_min_share", "device_idle_min_extra"

    def measure_run(self, run: Run) -> DeviceIdleEvidence | None:
        return device_idle(run.view)

    def step_shares(self, evidence: DeviceIdleEvidence) -> list[float]:
        return evidence.waiting_share_per_window

    def run_summary(self, evidence: DeviceIdleEvidence) -> str:
        return (f"{evidence.device} is idle {evidence.idle_share:.0%} of the time, "
                f"{evidence.share:.0%} while the host works")

    def pair_summary(self, mine: DeviceIdleEvidence, base: float) -> str:
        return (f"{mine.device} waits on the host {mine.share:.0%} of the test run's time (control {base:.0%}), "
                f"idle {mine.idle_share:.0%}")


class MemoryGrowth(RunDetector):
    """Memory each step leaves behind (one run, or the test run where the control run does
    not), or, of a pair, a step's working set grown."""

    kind = "memory_growth"
    advice = "peak allocator memory grew: release per-step tensors (no Python lists of outputs)"

    def measure_run(self, run: Run) -> StepMemory:
        return StepMemory(run.memory, run.view)

    def judge_run(self, evidence: StepMemory, limits: Thresholds) -> Finding | None:
        """The bytes in use at step ends rising from most steps to the next
        (``memory_rising_share`` of them, each by ``memory_min_step_rise``), by more than
        ``memory_min_bytes`` in all. A good port's bytes in use at step end stay flat or jump
        once (a cache or a buffer filled: measured 2 MiB once in 4 steps); the allocator's
        own fluctuation measured up to 0.7 MiB down between steps."""
        memory, view = evidence.use, evidence.view
        ends = [memory.in_use_at_step_end[p] for p in view.step_positions] if memory.allocator else []
        if len(ends) < 3:
            return None
        rises = [b - a for a, b in zip(ends, ends[1:])]
        rising = sum(1 for r in rises if r > limits.memory_min_step_rise)
        grown = ends[-1] - ends[0]
        if rising < limits.memory_rising_share * len(rises) or grown <= limits.memory_min_bytes:
            return None
        return self.finding(0.0, f"{grown / 2**20:.1f} MiB more in use over {len(rises)} steps, "
                            f"more after {rising} of them ({memory.allocator})",
                            LeftBehindEvidence(ends, view.numbers(), memory.peaks))

    def judge_pair(self, evidence: PerSide[StepMemory], limits: Thresholds) -> Finding | None:
        grown = working_set_growth(evidence.map(lambda measured: measured.use),
                                   evidence.map(lambda measured: measured.view))
        if grown and grown.test_least_working_set - grown.control_working_set > \
                max(limits.memory_min_growth * grown.control_working_set, limits.memory_min_bytes):
            return self.finding(0.0, f"a step's working set {grown.control_working_set / 2**20:.1f} -> "
                                f"{grown.test_least_working_set / 2**20:.1f} MiB or more", grown)
        if self.judge_run(evidence.control, limits):
            return None  # the control run grows the same way: not the port's doing
        return self.judge_run(evidence.test, limits)


# --- a pair's kinds -------------------------------------------------------------------------
class FusionChange(PairDetector):
    """Fusion rows one way: a fused kernel in the control run (``lost``) or in the test run."""

    lost: ClassVar[bool]

    def measure_pair(self, pair: RunPair) -> FusionEvidence | None:
        return fusion_rows(pair.comparison, self.lost)

    def judge(self, evidence: FusionEvidence, limits: Thresholds) -> list[Finding]:
        delta = evidence.delta_total_ns
        found = self.finding(evidence.share, f"{len(evidence.ops)} fused kernel(s) "
                             f"{'unfused' if self.lost else 'fused'} in the test run, {delta / 1e6:+.3f} ms per step",
                             evidence)
        if self.lost:  # a gain explains no slowdown
            found.parts = {"ops": found.share}
        return [found]


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

    def judge(self, evidence: XlaFusionEvidence, limits: Thresholds) -> list[Finding]:
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
    """Aligned ops slower with the interval's confidence beyond the thresholds' margin, one
    finding per op type, naming the top-level scopes its ops are in
    (:func:`.pair_measures.regressions`)."""

    kind = "op_regression"
    advice = "aligned ops run slower in the test run: check the kernel, dtype and data format"
    timing = True

    def measure_pair(self, pair: RunPair) -> Regressions | None:
        return regressions(pair.comparison, pair.views)

    def judge(self, evidence: Regressions, limits: Thresholds) -> list[Finding]:
        kept = [g for g in evidence.groups if g.shared_delta_ns / evidence.step_ns >= limits.regression_min_share]
        if evidence.matched_delta_ns < limits.regression_min_explained * evidence.step_slowdown_ns:
            return []  # the ops' time moved little of the steps' slowdown: the machine, not the ops
        found = [self.finding(g.shared_delta_ns / evidence.step_ns,
                              f"{g.op_type} in {_few(g.scope)}: {len(g.ops)} op(s) "
                              f"{g.control_median_ns / 1e6:.3f} -> {g.test_median_ns / 1e6:.3f} ms"
                              f"{'; ' + g.cause if g.cause else ''}", g,
                              {"of": "the shift of the group's time per step (test - control)",
                               **g.shift.to_dict()}) for g in kept]
        for finding in found:
            finding.parts = {"ops": finding.share}
        return found


EAGER_OPS, RETRACING = EagerOps(), Retracing()
# Every kind, in the order findings of equal share are listed.
DETECTORS: tuple[Detector, ...] = (EAGER_OPS, RETRACING, XlaCompile(), HostGaps(), InputWait(), FrameworkOverhead(),
                                   DeviceIdle(), FusionLost(), FusionGained(), XlaFusion(), OpRegression(),
                                   MemoryGrowth())
ADVICE = {detector.kind: detector.advice for detector in DETECTORS}
KINDS = tuple(ADVICE)


def advise(trace: Trace, *, warmup: int | None = None, thresholds: Thresholds = DEFAULT) -> Findings:
    """What one run shows by itself (tfprof's ``advise`` for both worlds), over its steady
    state (``warmup`` None: the steps that hold one-time work, found from the trace, are left
    out and a note names them; ``warmup=N``: the first N steps instead)."""
    return _found(Run(trace, warmup, limits=thresholds))


class ComparisonFindings:
    """The findings of comparisons, as :func:`tracebridge.analysis.compare.compare` is
    handed them (its ``find``; a :class:`~tracebridge.analysis.compare.Finder`): the
    comparison sits below the findings, so its caller injects them."""

    def __call__(self, comparison: Comparison) -> Findings:
        """Findings of a comparison: the test run measured against the control run, with
        the comparison's thresholds."""
        return _found(RunPair(comparison))

    def withheld(self, steps: PerSide[int], limits: Thresholds) -> str | None:
        """The comparison's note that timing findings were withheld for want of steps."""
        return few_steps_note(steps, limits)

    def __repr__(self) -> str:
        return "comparison_findings"


comparison_findings = ComparisonFindings()


def few_steps_note(steps: PerSide[int] | int, limits: Thresholds) -> str | None:
    """The note that says timing findings were withheld for want of steps, and how many to
    capture; None where every run has enough."""
    counts = steps.to_dict() if isinstance(steps, PerSide) else {"the run": steps}
    short = {name: n for name, n in counts.items() if n < limits.min_steps}
    if not short:
        return None
    which = ", ".join(f"{name} {n}" for name, n in short.items())
    kinds = ", ".join(d.kind for d in DETECTORS if d.timing)
    return (f"too few steps to judge timing ({which}; {limits.min_steps} or more a run): no {kinds} "
            f"finding is made from so few samples; capture at least {limits.min_steps} steps after the "
            f"warm-up (trace(..., steps={max(limits.min_steps, 5)}), or keep steps: .json or .xplane.pb, "
            f"not one RunMetadata)")


def _found(subject: Run | RunPair) -> Findings:
    out, judged = [], subject.timing_judged
    for detector in DETECTORS:
        if detector.timing and not judged:
            continue
        evidence = detector.measure(subject)
        if evidence is not None:
            out += detector.judge(evidence, subject.limits)
    out = _claims_once(out, subject)
    for finding in out:
        _bound(finding, subject)
    notes = []
    if isinstance(subject, Run):  # a comparison says these among its own notes
        notes = [note for note in [subject.view.selection.note(), few_steps_note(subject.steps, subject.limits)]
                 if note]
    return Findings(sorted(out, key=lambda f: -f.share), notes=notes, thresholds=subject.limits)


def _recompilations(evidence: XlaCompileEvidence) -> int:
    """Compilations beyond each function's first call (analysis/run/calls.py): a first call
    compiles, which is a one-time cost, not a function that recompiles."""
    return sum(1 for first in evidence.first_call if not first)


def _eager_sections(run: Run) -> list:
    """The eager sections, where eager_ops shows: its time, no other kind's."""
    evidence = run.evidence(EAGER_OPS)
    return list(evidence.sections) if EAGER_OPS.shows(evidence, run.limits) else []


def _parts_within(run: Run, sections) -> dict[str, int]:
    """The time of each part of the steps inside ``sections`` (analysis/run/breakdown.py)."""
    if not sections:
        return {}
    timeline = run.view.breakdown.timeline
    starts, ends = [s for s, _ in sections], [e for _, e in sections]
    return {part: int(timeline.time(part, starts, ends).sum()) for part in PARTS}


def _claims_once(found: list[Finding], subject: Run | RunPair) -> list[Finding]:
    """No two findings claim the same time: device_idle's time is the host's parts while the
    device waits (input, framework, idle, compile, host ops), which the kinds of those parts
    may claim first; it keeps the rest of them, and is dropped where nothing is left."""
    idle = [f for f in found if f.kind == "device_idle"]
    if not idle:
        return found
    run = subject.runs.test if isinstance(subject, RunPair) else subject
    device = run.view.breakdown.device
    finding = idle[0]
    if not device or not device["idle_ns"]:
        return found
    by_part = {part: finding.share * ns / device["idle_ns"] for part, ns in device["idle_by_part"].items() if ns}
    claimed = set()
    for other in found:
        if other is not finding:
            for part, share in other.parts.items():
                if part in by_part and share > 0:
                    by_part[part] = max(by_part[part] - share, 0.0)
                    claimed.add(other.kind)
    left = sum(by_part.values())
    if left <= 1e-4:
        return [f for f in found if f is not finding]
    if claimed:
        finding.summary += f"; {left:.0%} of the step besides what {', '.join(sorted(claimed))} claim"
    finding.share = float(round(left, 4))
    finding.parts = {part: share for part, share in by_part.items() if share > 0}
    return found


def _few(scopes: str, most: int = 3) -> str:
    """Scopes listed with ", ", the first ``most`` of them and how many more."""
    names = scopes.split(", ")
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _shares_of(times: list[int], step_ns: list[int]) -> list[float]:
    """Each step's time as a share of its duration."""
    return [t / d if d else 0.0 for t, d in zip(times, step_ns)]


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


__all__ = ["ADVICE", "DETECTORS", "KINDS", "ComparisonFindings", "Detector", "Finding", "Findings", "Run", "RunPair", "Thresholds",
           "advise", "comparison_findings", "few_steps_note"]
