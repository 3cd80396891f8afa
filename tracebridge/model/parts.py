"""The small objects of a trace: its lanes, its steps and an op as one record.

They sit below :mod:`.trace` (which re-exports them) so that the modules a trace uses,
such as :mod:`.accelerator` (an accelerator's own steps), can build them without importing
the trace.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lane:
    """A row of non-overlapping ops on one device: a real thread when the source names
    one, else a lane derived from timing (TF 2.21 leaves ``thread_id`` at 0)."""

    device: int
    name: str
    thread_id: int | None = None


@dataclass(frozen=True)
class Step:
    """One traced step: a ``session.run`` call, a traced function call or a step marker."""

    number: int
    start_ns: int
    end_ns: int
    name: str = ""

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Op:
    """One op execution, built on demand from the columns."""

    index: int
    name: str
    op_type: str
    kernel: str
    device: str
    lane: int
    step: int | None
    start_ns: int
    end_ns: int
    inputs: tuple[str, ...]
    label: str

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns
