"""The memory a run holds: each allocator's peak, and for the largest the bytes in use at
each step's end and each step's working set, from the trace's allocator counters. A
measure of one run, read by the comparison (each side's memory) and by the findings
(memory growing across steps, the working set grown against a control run)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model.trace import Trace
from .summary import allocator_peaks


@dataclass(frozen=True)
class MemoryUse:
    """Allocator memory of a run: each allocator's peak bytes in use; for the largest, the
    bytes in use at each step's end and each step's working set (its peak less what was in
    use when it started: what the step's computation itself needs). Empty without
    allocator counters."""

    peaks: dict[str, int] = field(default_factory=dict)
    allocator: str | None = None
    peak: int = 0
    in_use_at_step_end: list[int] = field(default_factory=list)
    working_set_per_step: list[int] = field(default_factory=list)


def memory_in_use(trace: Trace) -> MemoryUse:
    """The run's :class:`MemoryUse`, from its allocator counters."""
    counters = trace.counters
    if not counters.rows:
        return MemoryUse()
    peaks = allocator_peaks(trace)
    allocator = max(peaks, key=peaks.get)
    mine = counters["allocator"] == trace.string_id(allocator)
    times, values = counters["time_ns"][mine], counters["bytes_in_use"][mine]
    order = np.argsort(times, kind="stable")
    times, values = times[order], values[order]
    at_end, working = [], []
    for step in trace.steps:
        before = int(np.searchsorted(times, step.start_ns, side="right")) - 1
        base = int(values[before]) if before >= 0 else 0
        lo, hi = np.searchsorted(times, [step.start_ns, step.end_ns], side="right")
        at_end.append(int(values[hi - 1]) if hi > 0 else 0)
        working.append(int(values[lo:hi].max()) - base if hi > lo else 0)
    return MemoryUse(peaks, allocator, peaks[allocator], at_end, working)


__all__ = ["MemoryUse", "memory_in_use"]
