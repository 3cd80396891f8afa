"""Slices of a trace for a viewer: some steps, a time window, long events only.

``slice_trace(trace, steps="3-5", start="1ms", end="5ms", min_duration="10us")`` keeps the
ops that match every given condition, whole (an op that overlaps the window is kept with
its full extent), together with the kernels and copies those ops launched (wherever
these fall), so that launch flows and dataflow arrows between kept ops stay. The slice
says in its metadata (``slice``, also appended to ``notes``) what it left out and how many
events ``min_duration`` dropped.

Times are nanoseconds, or text with a unit: ``"10us"``, ``"1.5 ms"``, ``"2s"``, ``"500ns"``.
``start``/``end`` are relative to the trace's start; ``steps`` is ``"3-5"``, ``"3,7"``,
``"1-3,8"``, a number or a collection of numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptionError
from .accelerator import launches

if TYPE_CHECKING:  # annotations only: trace.py imports this module (Trace.slice, Trace.filter)
    from .trace import Trace

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)\s*$")


def parse_duration(value, what: str = "duration") -> int:
    """Nanoseconds from an int (ns) or text with a unit (``"10us"``)."""
    if isinstance(value, bool):
        raise OptionError(f"{what}: not a duration: {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float):
        return round(value)
    match = _DURATION.match(str(value))
    if not match:
        raise OptionError(f"{what}: {value!r} is not a duration (write e.g. 10us, 1.5ms, 2s, 500ns)")
    return round(float(match.group(1)) * _UNITS[match.group(2)])


def parse_steps(value) -> set[int]:
    """Step numbers from ``"3-5"``, ``"3,7"``, ``"1-3,8"``, an int or numbers."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return {int(value)}
    if not isinstance(value, str) and isinstance(value, Iterable):
        return {int(v) for v in value}
    numbers: set[int] = set()
    for part in str(value).split(","):
        match = re.match(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$", part)
        if not match:
            raise OptionError(f"steps: {value!r} is not a list of steps (write e.g. 3-5 or 3,7)")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise OptionError(f"steps: {part.strip()!r} is an empty range")
        if high - low > 10_000_000:
            raise OptionError(f"steps: {part.strip()!r} is too wide a range")
        numbers.update(range(low, high + 1))
    return numbers


def slice_trace(trace: Trace, *, steps=None, start=None, end=None, min_duration=None) -> Trace:
    """The part of ``trace`` that the conditions select (see the module's docstring)."""
    ops = trace.ops
    keep = np.ones(len(trace), dtype=bool)
    said = []
    kept_steps = list(trace.steps)
    if steps is not None:
        numbers = parse_steps(steps)
        positions = [i for i, s in enumerate(trace.steps) if s.number in numbers]
        if not positions:
            known = ", ".join(str(s.number) for s in trace.steps[:20]) or "none"
            raise OptionError(f"steps {steps}: no such step in this trace (steps: {known})")
        in_steps = np.isin(ops["step"], positions)
        said.append(f"steps {_ranges(sorted(trace.steps[i].number for i in positions))}: "
                    f"left out {int((~in_steps).sum())} ops of other steps or of none")
        keep &= in_steps
        chosen = set(positions)
        kept_steps = [s if i in chosen else None for i, s in enumerate(trace.steps)]
    if start is not None or end is not None:
        origin = trace.start_ns
        low = origin + parse_duration(start, "start") if start is not None else None
        high = origin + parse_duration(end, "end") if end is not None else None
        if low is not None and high is not None and high < low:
            raise OptionError(f"the window ends ({end}) before it starts ({start})")
        inside = np.ones(len(trace), dtype=bool)
        if low is not None:
            inside &= ops["end_ns"] >= low
        if high is not None:
            inside &= ops["start_ns"] <= high
        said.append(f"window {_time(start)} to {_time(end)} after the trace start: "
                    f"left out {int((keep & ~inside).sum())} ops outside it")
        keep &= inside
        kept_steps = [s if s is not None and (low is None or s.end_ns >= low) and (high is None or s.start_ns <= high)
                      else None for s in kept_steps]
    short = np.zeros(len(trace), dtype=bool)
    if min_duration is not None:
        shortest = parse_duration(min_duration, "min_duration")
        short = keep & (ops["end_ns"] - ops["start_ns"] < shortest)
        keep &= ~short
    # The kernels and copies of every kept op stay with it, wherever they fall.
    launched = launches(trace)
    if launched:
        kernel = np.fromiter(launched.keys(), dtype=np.int64, count=len(launched))
        launcher = np.fromiter(launched.values(), dtype=np.int64, count=len(launched))
        followers = kernel[keep[launcher] & ~keep[kernel]]
        if len(followers):
            keep[followers] = True
            said.append(f"kept {len(followers)} kernels or copies of kept ops that the conditions left out")
    if min_duration is not None:
        dropped = int((short & ~keep).sum())
        said.append(f"min duration {_time(min_duration)}: dropped {dropped} events shorter")
    sliced = trace._take_ops(keep)
    if any(s is None for s in kept_steps):
        sliced = sliced._with(steps=tuple(kept_steps))
    if start is not None or end is not None:
        sliced = with_counters_within(sliced, low, high)
    text = "; ".join(said)
    previous = trace.metadata.get("notes")
    return sliced.with_metadata(slice=text, sliced_from_ops=len(trace),
                                notes="; ".join([str(previous), text] if previous else [text]))


def with_counters_within(trace: Trace, low: int | None, high: int | None) -> Trace:
    """``trace`` without the counter samples before ``low`` or after ``high`` (absolute
    nanoseconds, either None for no bound): a time window's counters, as ops are windowed."""
    counters = trace.counters
    window = np.ones(counters.rows, dtype=bool)
    if low is not None:
        window &= counters["time_ns"] >= low
    if high is not None:
        window &= counters["time_ns"] <= high
    return trace._with(tables={**trace._tables, "counters": counters.take(window)})


def _ranges(numbers: list[int]) -> str:
    parts, run = [], []
    for number in numbers:
        if run and number == run[-1] + 1:
            run.append(number)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [number]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def _time(value) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, str) else f"{parse_duration(value)}ns"
