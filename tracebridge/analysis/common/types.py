"""The typed parts of a comparison: one value per run (:class:`PerSide`), the time compared
(:class:`TimeBasis`), step statistics and groupings. Analyses pass these; dicts appear only
where a comparison is written out (``to_dict``, JSON, CSV, the writers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Generic, TypeVar

from ...errors import OptionError

T = TypeVar("T")
U = TypeVar("U")

SIDES = ("control", "test")


@dataclass(frozen=True)
class PerSide(Generic[T]):
    """One value for each run of a comparison: the baseline (``control``) and the run
    measured against it (``test``)."""

    control: T
    test: T

    @classmethod
    def of(cls, make: Callable[[str], T]) -> "PerSide[T]":
        """``make(side)`` for each side name, ``"control"`` first."""
        return cls(make("control"), make("test"))

    def items(self) -> Iterator[tuple[str, T]]:
        yield "control", self.control
        yield "test", self.test

    def __iter__(self) -> Iterator[T]:
        yield self.control
        yield self.test

    def map(self, change: Callable[[T], U]) -> "PerSide[U]":
        return PerSide(change(self.control), change(self.test))

    def to_dict(self, plain: Callable[[T], object] = lambda value: value) -> dict:
        return {side: plain(value) for side, value in self.items()}


class TimeBasis(str, Enum):
    """The time a comparison aligns on: ``DEVICE`` (kernels and copies credited to each TF
    op, counted once), ``HOST`` (the TF ops' own time), or ``AUTO`` (device time when both
    runs have some; resolved before anything is compared)."""

    AUTO = "auto"
    DEVICE = "device"
    HOST = "host"

    @classmethod
    def parse(cls, value: "TimeBasis | str") -> "TimeBasis":
        """The public API and the CLI take the option's text too."""
        try:
            return cls(value)
        except ValueError:
            raise OptionError(f"time={value!r}: choose 'device', 'host' or 'auto'") from None


@dataclass(frozen=True)
class StepStats:
    """A run's step durations after the warm-up (all of them where the run is shorter)."""

    count: int = 0
    median_ns: float = 0.0
    p90_ns: float = 0.0
    min_ns: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GroupTimes:
    """One op type, top-level scope or device: the time of its ops in each run."""

    key: str
    time_ns: PerSide[float]

    @property
    def delta_ns(self) -> float:
        return self.time_ns.test - self.time_ns.control

    def to_dict(self, statistic: str) -> dict:
        return {"key": self.key, f"control_{statistic}_ns": self.time_ns.control,
                f"test_{statistic}_ns": self.time_ns.test, "delta_ns": self.delta_ns}


@dataclass(frozen=True)
class Groups:
    """Rows' per-step medians summed by op type and by top-level scope, and op time per
    device per step (a mean over steps); each list by the size of its change."""

    op_type: list[GroupTimes]
    scope: list[GroupTimes]
    device: list[GroupTimes]

    def to_dict(self) -> dict:
        return {"op_type": [g.to_dict("median") for g in self.op_type],
                "scope": [g.to_dict("median") for g in self.scope],
                "device": [g.to_dict("mean") for g in self.device]}


__all__ = ["SIDES", "GroupTimes", "Groups", "PerSide", "StepStats", "TimeBasis"]
