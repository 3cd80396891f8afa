"""Which steps to trace: a pure function of the step index, shared by every capture."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    """Trace ``steps`` steps (None: all), one every ``every``, after ``warmup`` untraced ones.

    ``Schedule(warmup=2, every=3, steps=2)`` traces steps 2 and 5 of 0, 1, 2, ...
    """

    warmup: int = 0
    every: int = 1
    steps: int | None = None

    def __post_init__(self):
        if self.warmup < 0 or self.every < 1 or (self.steps is not None and self.steps < 0):
            raise ValueError("need warmup >= 0, every >= 1 and steps >= 0 (or None)")

    def wants(self, index: int) -> bool:
        """Whether the step with this 0-based index is traced."""
        k = index - self.warmup
        if k < 0 or k % self.every:
            return False
        return self.steps is None or k // self.every < self.steps

    def done(self, index: int) -> bool:
        """True when no step from ``index`` on will be traced."""
        return self.steps is not None and index >= self.warmup + self.every * self.steps
