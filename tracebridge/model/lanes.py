"""Packing intervals into lanes: the builder derives a device's lanes from timing with it,
and the HTML view splits a lane's overlapping ops into sub-rows with it."""

from __future__ import annotations

import heapq

import numpy as np


def first_fit(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane numbers for intervals sorted by start: the lowest lane free at each start."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    running_end = np.maximum.accumulate(end)
    if n == 1 or np.all(running_end[:-1] <= start[1:]):
        return np.zeros(n, dtype=np.int32)  # the common case: nothing overlaps
    # Heaps, not a scan of every lane per op: thousands of ops running at once (a file
    # that repeats one event) would make the scan quadratic. Starts only grow, so a lane
    # free at one start stays free for the next ones: the lowest free lane is the first
    # fit a scan would find.
    result = np.zeros(n, dtype=np.int32)
    busy: list[tuple[int, int]] = []  # (end, lane) of lanes in use
    free: list[int] = []              # lanes free again, lowest first
    lanes = 0
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (e, lane))
        result[i] = lane
    return result


def by_group_start(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """The rows ordered by (``group``, start, longest first): ``np.lexsort((-end, start,
    group))``, or None where the rows are in that order already (a reader's rows come line
    by line, each line in time order: checking costs a pass, sorting 10M rows seconds and
    a few hundred MB of temporaries)."""
    if _in_group_start_order(group, start, end):
        return None
    return np.lexsort((-end, start, group))


_CHECKED_AT_ONCE = 1 << 20


def _in_group_start_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    for lo in range(0, max(len(group) - 1, 0), _CHECKED_AT_ONCE):
        hi = min(len(group) - 1, lo + _CHECKED_AT_ONCE)
        g0, g1 = group[lo:hi], group[lo + 1:hi + 1]
        s0, s1 = start[lo:hi], start[lo + 1:hi + 1]
        later = (g1 > g0) | ((g1 == g0) & ((s1 > s0) | ((s1 == s0) & (end[lo + 1:hi + 1] <= end[lo:hi]))))
        if not later.all():
            return False
    return True


def nested_fit(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sub-row numbers for intervals sorted by (start, longest first), so that the
    intervals of a sub-row are disjoint or nested, never partly overlapping: what a
    Chrome trace's thread holds (Perfetto drops an event that partly overlaps another of
    its thread). Row 0 keeps everything that fits it; most rows of real traces do."""
    result = np.zeros(len(start), dtype=np.int32)
    if len(start) < 2:
        return result
    # Only an interval that starts inside an earlier one and ends after every earlier one
    # ended can partly overlap in the common case; without one, all fit row 0.
    reach = np.maximum.accumulate(end)
    if not np.any((start[1:] < reach[:-1]) & (end[1:] > reach[:-1])):
        return result
    rows: list[list[int]] = []  # per row: ends of its open (enclosing) intervals
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        for k, open_ends in enumerate(rows):
            while open_ends and open_ends[-1] <= s:
                open_ends.pop()
            if not open_ends or e <= open_ends[-1]:
                open_ends.append(e)
                result[i] = k
                break
        else:
            rows.append([e])
            result[i] = len(rows) - 1
    return result


def op_spans(rows: np.ndarray, start: np.ndarray, end: np.ndarray, names: np.ndarray):
    """The TF op spans of one lane's XLA events (``rows``, by start, with their ``start``
    and ``end``): one per run of consecutive events of one TF op (their row's name in
    ``names``), from the first's start to the last's end. Returns each span's first row
    (whose name, type and step it shows), start, end and number of events."""
    name = names[rows]
    firsts = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
    counts = np.diff(np.r_[firsts, len(rows)])
    return rows[firsts], np.minimum.reduceat(start, firsts), np.maximum.reduceat(end, firsts), counts
