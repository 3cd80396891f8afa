"""Packing intervals into lanes: the builder derives a device's lanes from timing with it,
and the HTML view splits a lane's overlapping ops into sub-rows with it."""

from __future__ import annotations

import heapq

import numpy as np

try:  # the optional C loop of nested_fit (setup.py); numpy passes where it is not built
    from . import _lanesc
except ImportError:
    _lanesc = None


def first_fit(start: np.ndarray, end: np.ndarray, also=()) -> np.ndarray:
    """Lane numbers for intervals sorted by start: the lowest lane free at each start.

    ``also``: the same intervals as other readers place them (``(start, end)`` array pairs
    in the same order, each reading's starts in that order too, as a monotone rounding
    keeps them); a lane's intervals are then disjoint in every reading as well."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    readings = [(start, end), *also]
    if n == 1 or all(np.all(np.maximum.accumulate(e)[:-1] <= s[1:]) for s, e in readings):
        return np.zeros(n, dtype=np.int32)  # the common case: nothing overlaps
    if also:
        # Interval j frees its lane for the first interval that starts after j ended in
        # every reading (starts only grow): its release index, compared with the index.
        keys = np.zeros(n, dtype=np.int64)
        for s, e in readings:
            np.maximum(keys, np.searchsorted(s, e, side="left"), out=keys)
        frees, at = keys.tolist(), range(n)
    else:
        frees, at = end.tolist(), start.tolist()
    # Heaps, not a scan of every lane per op: thousands of ops running at once (a file
    # that repeats one event) would make the scan quadratic. Starts only grow, so a lane
    # free at one start stays free for the next ones: the lowest free lane is the first
    # fit a scan would find.
    result = np.zeros(n, dtype=np.int32)
    busy: list[tuple[int, int]] = []  # (end, or release index, and lane) of lanes in use
    free: list[int] = []              # lanes free again, lowest first
    lanes = 0
    for i, (now, frees_at) in enumerate(zip(at, frees)):
        while busy and busy[0][0] <= now:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (frees_at, lane))
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


def nested_fit(start: np.ndarray, end: np.ndarray, also=()) -> np.ndarray:
    """Sub-row numbers for intervals sorted by (start, longest first), so that the
    intervals of a sub-row are disjoint or nested, never partly overlapping: what a
    Chrome trace's thread holds (Perfetto drops an event that partly overlaps another of
    its thread). Row 0 keeps everything that fits it; most rows of real traces do.

    ``also``: the same intervals as other readers place them (``(start, end)`` array pairs
    in the same order, each reading's starts in that order too, as a monotone rounding
    keeps them): a sub-row's intervals nest or are disjoint in every reading as well. Two
    intervals that nest in one reading but whose starts tie in another, with the later one
    longer there, take two rows: which one a reader opens first is its own choice.

    Placed one at a time by the C loop (``_lanesc``, one pass), else by
    :func:`nested_fit_numpy`: the same rows."""
    n = len(start)
    if _lanesc is None or n < 2:
        return nested_fit_numpy(start, end, also)
    result = np.empty(n, dtype=np.int32)
    _lanesc.nested_rows([(np.ascontiguousarray(s, dtype=np.int64), np.ascontiguousarray(e, dtype=np.int64))
                         for s, e in [(start, end), *also]], result)
    return result


def nested_fit_numpy(start: np.ndarray, end: np.ndarray, also=()) -> np.ndarray:
    """:func:`nested_fit` with numpy passes that find the few intervals (the knots) that
    need placing one at a time, and a loop over those alone."""
    n = len(start)
    result = np.zeros(n, dtype=np.int32)
    if n < 2:
        return result
    readings = [(start, end), *also]
    rows = np.flatnonzero(_knots(readings, n))
    if len(rows) < 2:
        return result
    # Knots apart from each other in every reading place as if alone. Most are two
    # neighbours that touch as a viewer reads them: rows 0 and 1, no loop.
    firsts = _part_firsts([(s[rows], e[rows]) for s, e in readings])
    sizes = np.diff(np.r_[firsts, len(rows)])
    first, second = rows[firsts[sizes == 2]], rows[firsts[sizes == 2] + 1]
    apart = np.ones(len(first), dtype=bool)
    for s, e in readings:
        apart &= (e[first] <= s[second]) | (e[second] <= e[first])
    result[second[~apart]] = 1
    rows = rows[np.repeat(sizes > 2, sizes)]
    if len(rows):
        result[rows] = _nested_rows([(s[rows].tolist(), e[rows].tolist()) for s, e in readings])
    return result


_PEELED_LEVELS = 64  # below this depth of nesting, what is left is placed one at a time
_NESTING_CHECKED_EVERY = 8  # levels: a few cheap peels, then drop the parts that nest


_KNOTS_AT_A_TIME = 1 << 20  # intervals whose knots are found together: bounds the temporaries


def _knots(readings: list, n: int) -> np.ndarray:
    """:func:`_knots_of` a run of whole parts at a time (a part: intervals after all before
    have ended, in every reading), about a million intervals each: the passes' temporaries
    are a few arrays the size of what they look at, 0.14 GB more on a 10M-op lane at once."""
    if n <= _KNOTS_AT_A_TIME:
        return _knots_of(readings, n)
    firsts = _part_firsts(readings)
    cuts = np.unique(firsts[np.searchsorted(firsts, np.arange(0, n, _KNOTS_AT_A_TIME), side="left")
                            .clip(max=len(firsts) - 1)])
    knot = np.zeros(n, dtype=bool)
    for lo, hi in zip(cuts.tolist(), [*cuts[1:].tolist(), n]):
        knot[lo:hi] = _knots_of([(s[lo:hi], e[lo:hi]) for s, e in readings], hi - lo)
    return knot


def _knots_of(readings: list, n: int) -> np.ndarray:
    """The intervals :func:`nested_fit` places one at a time: all but those that nest in or
    are disjoint from every other one in every reading. Those fit row 0 whatever else is
    there and never keep another one off it, so the others alone place as all of them would.

    Found in numpy passes, level by level: the intervals split into parts where everything
    before has ended in every reading (a lane of serial ops: all parts of one interval, all
    free). The first interval of a part leaves it: free if it ends last in every reading
    (a step around its ops), else a knot, and so is every interval of the part that starts
    before it ends and ends after it in some reading (an op that ends after its step as a
    viewer reads them); the rest of the part goes on to the next level. Every few levels,
    parts whose intervals nest (:func:`_unmatched`) are dropped as free: deep call stacks."""
    knot = np.zeros(n, dtype=bool)
    left = np.arange(n)
    for level in range(_PEELED_LEVELS):
        if len(left) < 2:
            return knot
        times = readings if len(left) == n else [(s[left], e[left]) for s, e in readings]
        firsts = _part_firsts(times)
        sizes = np.diff(np.r_[firsts, len(left)])
        kept = sizes > 1
        if level % _NESTING_CHECKED_EVERY == _NESTING_CHECKED_EVERY - 1 and kept.any():
            inside = np.repeat(kept, sizes)
            broken = np.zeros(int(inside.sum()), dtype=bool)
            for s, e in times:
                broken |= _unmatched(s[inside], e[inside])
            kept[kept] = np.logical_or.reduceat(broken, np.cumsum(sizes[kept]) - sizes[kept])
        if not kept.any():
            return knot
        inside = np.repeat(kept, sizes)
        left, sizes = left[inside], sizes[kept]
        firsts = np.cumsum(sizes) - sizes
        first = np.repeat(firsts, sizes)  # each interval's part's first interval (in left)
        across = np.zeros(len(left), dtype=bool)  # partly over its part's first interval
        for s, e in times:
            s, e = s[inside], e[inside]
            across |= (s < e[first]) & (e[first] < e)
        knot[left[across]] = True
        knot[left[firsts][np.logical_or.reduceat(across, firsts)]] = True
        inside = np.ones(len(left), dtype=bool)
        inside[firsts] = False
        left = left[inside]
    knot[left] = True  # too deep to peel: placed one at a time
    return knot


def _part_firsts(readings: list) -> np.ndarray:
    """Where each part begins (intervals in start order; a part: those after everything
    before has ended, in every reading), as indices."""
    begins = np.ones(len(readings[0][0]), dtype=bool)
    for s, e in readings:
        begins[1:] &= np.maximum.accumulate(e)[:-1] <= s[1:]
    return np.flatnonzero(begins)


def _nested_rows(readings: list[tuple[list, list]]) -> list[int]:
    """:func:`nested_fit` one interval at a time: per row and reading, a stack of the ends of
    the intervals open at the current start (each nested in the one below)."""
    n = len(readings[0][0])
    result = [0] * n
    rows: list[list[list]] = []  # per row, per reading: ends of its open intervals
    for i in range(n):
        for k, stacks in enumerate(rows):
            fits = True
            for open_ends, (s, e) in zip(stacks, readings):
                while open_ends and open_ends[-1] <= s[i]:
                    open_ends.pop()
                if open_ends and e[i] > open_ends[-1]:
                    fits = False
            if fits:
                for open_ends, (_, e) in zip(stacks, readings):
                    open_ends.append(e[i])
                result[i] = k
                break
        else:
            rows.append([[e[i]] for _, e in readings])
            result[i] = len(rows) - 1
    return result


def _unmatched(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals in start order (the longer first where starts tie): whether each one's
    start and end fail to pair up as parentheses. None does iff the intervals nest as
    :func:`nested_fit` wants them (an interval nests in the earlier one it overlaps, not
    the other way round); one that does pair up may still partly overlap another one.

    Each interval opens at its start and closes at its end; ends come before starts at one
    time (touching intervals are disjoint), and of ends at one time, the later opened
    first. At every depth opens and closes alternate; the pairs are each open and the next
    close at its depth. An interval of no length can neither enclose nor partly overlap
    anything: left out."""
    unmatched = np.zeros(len(start), dtype=bool)
    has_length = np.flatnonzero(end > start)
    m = len(has_length)
    if m < 2:
        return unmatched
    s, e = start[has_length], end[has_length]
    by_end = (m - 1 - np.argsort(e[::-1], kind="stable"))  # closes by (end, later opened first)
    e_sorted = e[by_end]
    closed_before_open = np.searchsorted(e_sorted, s, side="right")
    opened_before_close = np.searchsorted(s, e_sorted, side="left")
    index = np.arange(m)
    # each open's and close's depth and place in the merged order
    level = np.concatenate([index - closed_before_open + 1, opened_before_close - index])
    place = np.concatenate([index + closed_before_open, index + opened_before_close])
    who = np.concatenate([index, by_end])
    merged = np.empty(2 * m, dtype=np.int64)
    merged[place] = np.arange(2 * m)
    level = level[merged]
    # a stable sort by depth keeps the merged order within a depth (small ints: radix sort)
    level = level.astype(np.int16 if level.max() < (1 << 15) else np.int64)
    paired = who[merged][np.argsort(level, kind="stable")]
    opens, closes = paired[0::2], paired[1::2]
    wrong = opens != closes
    if wrong.any():
        bad = np.zeros(m, dtype=bool)
        bad[opens[wrong]] = bad[closes[wrong]] = True
        unmatched[has_length[bad]] = True
    return unmatched


def op_spans(rows: np.ndarray, start: np.ndarray, end: np.ndarray, names: np.ndarray):
    """The TF op spans of one lane's XLA events (``rows``, by start, with their ``start``
    and ``end``): one per run of consecutive events of one TF op (their row's name in
    ``names``), from the first's start to the last's end. Returns each span's first row
    (whose name, type and step it shows), start, end and number of events."""
    name = names[rows]
    firsts = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
    counts = np.diff(np.r_[firsts, len(rows)])
    return rows[firsts], np.minimum.reduceat(start, firsts), np.maximum.reduceat(end, firsts), counts
