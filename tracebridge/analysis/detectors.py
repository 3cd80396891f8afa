"""How a finding's kind is found: a :class:`Detector` measures a run (:class:`Run`) or a
pair of runs (:class:`RunPair`) into its evidence, then judges the evidence into findings.
The kinds themselves, their thresholds and the one table of them are in :mod:`.findings`."""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from typing import ClassVar

from ..model.trace import Trace
from .compare_result import Comparison
from .compare_types import PerSide
from .evidence import GUIDE, Evidence, Finding, MemoryUse
from .run_findings import StepView, memory_in_use


class Run:
    """One run's steps (after the warm-up) and each kind's evidence of it, measured once:
    host gaps leave out the time eager ops and retracing explain."""

    def __init__(self, trace: Trace, warmup: int = 0, memory: MemoryUse | None = None):
        self.trace, self.view = trace, StepView(trace, warmup)
        self._memory = memory  # a comparison measured it already
        self._measured: dict[str, object] = {}

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
        self.comparison = comparison
        self.runs = PerSide.of(lambda side: Run(getattr(comparison, side), getattr(comparison.warmup, side),
                                                getattr(comparison.memory, side)))

    @functools.cached_property
    def views(self) -> PerSide[StepView]:
        return self.runs.map(lambda run: run.view)

    @property
    def step_ns(self) -> float:
        return self.comparison.steps.test.median_ns or 1.0


class Detector(ABC):
    """One kind of finding: ``measure(run or pair) -> evidence`` (None: nothing to judge),
    then ``judge(evidence) -> findings``."""

    kind: ClassVar[str]
    advice: ClassVar[str]

    @abstractmethod
    def measure(self, subject: Run | RunPair): ...

    @abstractmethod
    def judge(self, evidence) -> list[Finding]: ...

    def finding(self, share: float, summary: str, evidence: Evidence) -> Finding:
        return Finding(self.kind, float(round(share, 4)), summary, evidence, self.advice, f"{GUIDE}#{self.kind}")


class RunDetector(Detector):
    """A kind one run shows by itself. Of a pair, both runs are measured, and the test run
    must show it where the control does not (or by a margin more)."""

    def measure(self, subject: Run | RunPair):
        if isinstance(subject, RunPair):
            return subject.runs.map(self.measure)
        return subject.evidence(self)

    def judge(self, evidence) -> list[Finding]:
        found = self.judge_pair(evidence) if isinstance(evidence, PerSide) else self.judge_run(evidence)
        return [found] if found else []

    @abstractmethod
    def measure_run(self, run: Run): ...

    @abstractmethod
    def judge_run(self, evidence) -> Finding | None: ...

    @abstractmethod
    def judge_pair(self, evidence: PerSide) -> Finding | None: ...


class PairDetector(Detector):
    """A kind only a pair of runs shows."""

    def measure(self, subject: Run | RunPair):
        return self.measure_pair(subject) if isinstance(subject, RunPair) else None

    @abstractmethod
    def measure_pair(self, pair: RunPair): ...


class PresenceDetector(RunDetector):
    """A kind a run shows or not (a good port never does); of a pair, the test run shows it
    and the control run does not."""

    @abstractmethod
    def shows(self, evidence) -> bool: ...

    @abstractmethod
    def summary(self, evidence) -> str: ...

    def judge_run(self, evidence) -> Finding | None:
        return self.finding(evidence.share, self.summary(evidence), evidence) if self.shows(evidence) else None

    def judge_pair(self, evidence: PerSide) -> Finding | None:
        return None if self.shows(evidence.control) else self.judge_run(evidence.test)


class ShareDetector(RunDetector):
    """A kind measured as a share of the step time: found from ``least`` in one run, and
    against a control run from ``least`` and ``extra`` more than the control's share (the
    finding's share: the difference)."""

    least: ClassVar[float]
    extra: ClassVar[float]
    alone: ClassVar[str]            # the summary of one run: a format of its ``share``
    in_test_step: ClassVar[str]     # what happens in that share of the test step

    def against(self, mine, theirs):
        """The test run's evidence, with the control's share beside it."""
        return dataclasses.replace(mine, control_share=round(theirs.share, 4))

    def judge_run(self, evidence) -> Finding | None:
        if evidence.share < self.least:
            return None
        return self.finding(evidence.share, self.alone.format(share=evidence.share), evidence)

    def judge_pair(self, evidence: PerSide) -> Finding | None:
        mine, theirs = evidence.test, evidence.control
        if mine.share < self.least or mine.share - theirs.share < self.extra:
            return None
        return self.finding(mine.share - theirs.share, f"{mine.share:.0%} of the test step {self.in_test_step} "
                            f"(control {theirs.share:.0%})", self.against(mine, theirs))


__all__ = ["Detector", "PairDetector", "PresenceDetector", "Run", "RunDetector", "RunPair", "ShareDetector"]
