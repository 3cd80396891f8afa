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
