"""How a finding's kind is found: a :class:`Detector` measures a run (:class:`Run`) or a
pair of runs (:class:`RunPair`) into its evidence, then judges the evidence into findings
against the :class:`~.common.thresholds.Thresholds` the run or pair carries. The kinds themselves
and the one table of them are in :mod:`tracebridge.analysis.findings`.

A kind whose finding rests on measured time (``timing``) is judged on every step, never on
one sample: one run by the lower bound of its per-step median share (:func:`.common.shift.median_bounds`),
a pair by the lower bound of the shift between the runs' per-step shares (:func:`.common.shift.shift`).
With fewer steps than ``min_steps`` a side it is not judged at all (:func:`.kinds._found`
says so in a note)."""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from ...model.trace import Trace
from ..common.shift import median_bounds, shift
from ..common.thresholds import DEFAULT, Thresholds
from ..common.types import PerSide
from ..compare.result import Comparison
from ..run.memory import MemoryUse, memory_in_use
from .evidence import GUIDE, Evidence, Finding
from ..run.steady import StepSelection
from .run_measures import StepView


class Run:
    """One run's steps looked at (``steps``: a :class:`~.run.steady.StepSelection`, the
    first N steps to leave out, or None: the steady state found from the trace) and each
    kind's evidence of it, measured once: host gaps and framework overhead leave out the
    time eager ops explain."""

    def __init__(self, trace: Trace, steps: "StepSelection | int | None" = None, memory: MemoryUse | None = None,
                 limits: Thresholds = DEFAULT):
        self.trace, self.view, self.limits = trace, StepView(trace, steps), limits
        self._memory = memory  # a comparison measured it already
        self._measured: dict[str, object] = {}

    @property
    def steps(self) -> int:
        return len(self.view.steps)

    @property
    def timing_judged(self) -> bool:
        return self.steps >= self.limits.min_steps

    @functools.cached_property
    def memory(self) -> MemoryUse:
        return self._memory if self._memory is not None else memory_in_use(self.trace)

    def evidence(self, detector: "RunDetector"):
        if detector.kind not in self._measured:
            self._measured[detector.kind] = detector.measure_run(self)
        return self._measured[detector.kind]


class RunPair:
    """A comparison's two runs, each from the steps the comparison kept."""

    def __init__(self, comparison: Comparison):
        self.comparison, self.limits = comparison, comparison.thresholds
        chosen = comparison.steady if comparison.steady is not None else comparison.warmup
        self.runs = PerSide.of(lambda side: Run(getattr(comparison, side), getattr(chosen, side),
                                                getattr(comparison.memory, side), self.limits))
        for side, run in self.runs.items():  # the comparison's breakdown is of the same steps: measured once
            run.view.breakdown = getattr(comparison.breakdown, side)

    @property
    def timing_judged(self) -> bool:
        return all(run.timing_judged for run in self.runs)

    @functools.cached_property
    def views(self) -> PerSide[StepView]:
        return self.runs.map(lambda run: run.view)

    @property
    def step_ns(self) -> float:
        return self.comparison.steps.test.median_ns or 1.0

    def part_share(self, part: str) -> float:
        """What ``part`` added to the median step (the headline's part, test - control), as a
        share of the test run's median step."""
        return self.comparison.part_delta(part) / self.step_ns


class Detector(ABC):
    """One kind of finding: ``measure(run or pair) -> evidence`` (None: nothing to judge),
    then ``judge(evidence) -> findings``."""

    kind: ClassVar[str]
    advice: ClassVar[str]
    timing: ClassVar[bool] = False  # rests on measured time: withheld below min_steps steps a side

    @abstractmethod
    def measure(self, subject: Run | RunPair): ...

    @abstractmethod
    def judge(self, evidence, limits: Thresholds) -> list[Finding]: ...

    def finding(self, share: float, summary: str, evidence: Evidence, interval: dict | None = None) -> Finding:
        return Finding(self.kind, float(round(share, 4)), summary, evidence, self.advice, f"{GUIDE}#{self.kind}",
                       interval=interval)


class RunDetector(Detector):
    """A kind one run shows by itself. Of a pair, both runs are measured, and the test run
    must show it where the control does not (or by a margin more)."""

    def measure(self, subject: Run | RunPair):
        if isinstance(subject, RunPair):
            return subject.runs.map(self.measure)
        return subject.evidence(self)

    def judge(self, evidence, limits: Thresholds) -> list[Finding]:
        found = self.judge_pair(evidence, limits) if isinstance(evidence, PerSide) else self.judge_run(evidence, limits)
        return [found] if found else []

    @abstractmethod
    def measure_run(self, run: Run): ...

    @abstractmethod
    def judge_run(self, evidence, limits: Thresholds) -> Finding | None: ...

    @abstractmethod
    def judge_pair(self, evidence: PerSide, limits: Thresholds) -> Finding | None: ...


class PairDetector(Detector):
    """A kind only a pair of runs shows."""

    def measure(self, subject: Run | RunPair):
        return self.measure_pair(subject) if isinstance(subject, RunPair) else None

    @abstractmethod
    def measure_pair(self, pair: RunPair): ...


class PresenceDetector(RunDetector):
    """A kind a run shows or not (a good port never does); of a pair, the test run shows it
    and the control run does not. ``measure_view``: the run measure (of its step view) that
    finds the evidence."""

    measure_view: ClassVar[Callable[[Any], Any]]

    def measure_run(self, run: Run):
        return type(self).measure_view(run.view)

    @abstractmethod
    def shows(self, evidence, limits: Thresholds) -> bool: ...

    @abstractmethod
    def summary(self, evidence) -> str: ...

    def judge_run(self, evidence, limits: Thresholds) -> Finding | None:
        return self.finding(evidence.share, self.summary(evidence), evidence) if self.shows(evidence, limits) else None

    def judge_pair(self, evidence: PerSide, limits: Thresholds) -> Finding | None:
        return None if self.shows(evidence.control, limits) else self.judge_run(evidence.test, limits)


class ShareDetector(RunDetector):
    """A kind measured as a share of each step's time: found in one run when the lower bound
    of its steps' median share reaches ``least``, and against a control run when, besides,
    the lower bound of the shift between the two runs' per-step shares reaches ``extra``
    (the finding's share: the difference of the runs' shares). ``least`` and ``extra`` name
    the :class:`~.common.thresholds.Thresholds` fields."""

    timing = True
    least: ClassVar[str]
    extra: ClassVar[str]
    alone: ClassVar[str]            # the summary of one run: a format of its ``share``
    in_test_step: ClassVar[str]     # what happens in that share of the test step
    # the step's part (analysis/run/breakdown.py) the kind's time is: against a control, the
    # finding's share is what that part added to the median step (None: the difference of shares)
    part: ClassVar[str | None] = None

    def measure(self, subject: Run | RunPair):
        if isinstance(subject, RunPair) and self.part is not None:
            found = subject.runs.map(self.measure)
            if found.test is not None:
                found = PerSide(found.control, dataclasses.replace(found.test, pair_share=subject.part_share(self.part)))
            return found
        return super().measure(subject)

    @abstractmethod
    def step_shares(self, evidence) -> list[float]:
        """The share of each step the kind took."""

    def against(self, mine, theirs):
        """The test run's evidence, with the control's share beside it."""
        return dataclasses.replace(mine, control_share=round(theirs.share if theirs is not None else 0.0, 4))

    def run_summary(self, evidence) -> str:
        return self.alone.format(share=evidence.share)

    def pair_summary(self, mine, base: float) -> str:
        return f"{mine.share:.0%} of the test step {self.in_test_step} (control {base:.0%})"

    def judge_run(self, evidence, limits: Thresholds) -> Finding | None:
        if evidence is None:  # nothing to measure (device_idle: no accelerator)
            return None
        bounds = median_bounds(self.step_shares(evidence), limits.confidence)
        if bounds.low < getattr(limits, self.least):
            return None
        return self.finding(evidence.share, self.run_summary(evidence), evidence,
                            {"of": "the share of each step", **bounds.to_dict()})

    def judge_pair(self, evidence: PerSide, limits: Thresholds) -> Finding | None:
        mine, theirs = evidence.test, evidence.control
        if self.judge_run(mine, limits) is None:
            return None
        moved = shift(self.step_shares(theirs) if theirs is not None else [0.0], self.step_shares(mine),
                      limits.confidence)
        if moved.low_ns < getattr(limits, self.extra):
            return None
        base = theirs.share if theirs is not None else 0.0
        share = mine.pair_share if mine.pair_share is not None else mine.share - base
        if share <= 0:  # the part's share grew, its time did not: nothing of the slowdown is its
            return None
        return self.finding(share, self.pair_summary(mine, base), self.against(mine, theirs),
                            {"of": "the shift of each step's share (test - control)",
                             **_shares(moved.to_dict())})

    def finding(self, share: float, summary: str, evidence, interval: dict | None = None) -> Finding:
        found = super().finding(share, summary, evidence, interval)
        if self.part is not None:
            found.parts = {self.part: found.share}
        return found


def _shares(shifted: dict) -> dict:
    """A shift of shares, its keys without the ``_ns`` they carry for times."""
    return {key.removesuffix("_ns"): value for key, value in shifted.items()}


__all__ = ["Detector", "PairDetector", "PresenceDetector", "Run", "RunDetector", "RunPair", "ShareDetector"]
