"""Unions of intervals, and how much of a union lies before given moments: the arithmetic of
a step breakdown (:mod:`.breakdown`), on a trace's rows.

A trace's rows are often a few runs in start order (an XSpace's lines: 3M rows in 3 runs).
There the optional C loops of ``_groupc`` (setup.py builds them where it can) merge the runs
as they walk them, with no sorted copies; :func:`compiled` says whether they run. numpy does
the same elsewhere (tests/test_summary_totals.py and tests/test_step_times.py check that the
two agree).
"""

from __future__ import annotations

import os

import numpy as np

try:  # setup.py builds it where it can
    from . import _groupc
except ImportError:
    _groupc = None

MAX_RUNS = 64  # the C loops' limit: a head per run


def compiled() -> bool:
    """Whether the C loops of ``_groupc`` run: built, and ``TRACEBRIDGE_PURE_WIRE`` not 1."""
    return _groupc is not None and os.environ.get("TRACEBRIDGE_PURE_WIRE") != "1"


def start_runs(start: np.ndarray) -> np.ndarray | None:
    """The offsets (int64, from 0 to the row count) of the runs of ``start`` in ascending
    order, for the C loops; None where there are :data:`MAX_RUNS` or more."""
    breaks = np.flatnonzero(start[1:] < start[:-1]) + 1
    if len(breaks) >= MAX_RUNS:
        return None
    return np.concatenate([[0], breaks, [len(start)]]).astype(np.int64)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by a sort: numpy 2's hash-based unique takes seconds on the
    millions of bounds of a 3M-event trace, where sorting them takes a fraction of one, and
    its first call imports ``numpy.ma`` (15 ms of a summary)."""
    values = np.sort(values, kind="stable")  # sorted runs (each part's union) merged, not sorted afresh
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint ``(starts, ends)``. As in
    :func:`~tracebridge.model.accelerator.busy_ns`: starts and ends sorted apart, a gap where
    the k-th smallest end comes before the (k+1)-th smallest start."""
    keep = end > start
    s, e = np.sort(start[keep], kind="stable"), np.sort(end[keep], kind="stable")
    if not len(s):
        return s, e
    breaks = np.flatnonzero(e[:-1] < s[1:])
    return s[np.r_[0, breaks + 1]], e[np.r_[breaks, len(e) - 1]]


def union_of_rows(start: np.ndarray, end: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`union` of the ``rows`` (a mask); where the trace's rows are a few runs in start
    order (an XSpace's lines), the C loop merges the runs, without copies of the rows or sorts
    (3M rows: 186 MB and a fifth of a second)."""
    if compiled() and len(start):
        runs = start_runs(start)
        if runs is not None:
            starts, ends = _groupc.union(np.ascontiguousarray(start, dtype=np.int64),
                                         np.ascontiguousarray(end, dtype=np.int64), runs,
                                         np.ascontiguousarray(rows, dtype=bool))
            return np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)
    return union(start[rows], end[rows])


def merged(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`union` of two unions (sorted, disjoint stretches): one of them where the other
    is empty, else the two merged as runs in start order by the C loop (no sorts)."""
    if not len(a[0]):
        return b
    if not len(b[0]):
        return a
    starts, ends = np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
    if compiled():
        both = _groupc.union(starts, ends, np.array([0, len(a[0]), len(starts)], dtype=np.int64))
        return np.frombuffer(both[0], dtype=np.int64), np.frombuffer(both[1], dtype=np.int64)
    return union(starts, ends)


def measure(stretches: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """How much of the sorted, disjoint ``stretches`` lies before each moment ``t``."""
    starts, ends = stretches
    if not len(starts):
        return np.zeros(len(t), dtype=np.int64)
    lengths = ends - starts
    before = np.r_[0, np.cumsum(lengths, dtype=np.int64)]
    k = np.searchsorted(starts, t, side="right") - 1
    at = np.maximum(k, 0)
    return np.where(k >= 0, before[at] + np.clip(t - starts[at], 0, lengths[at]), 0)


class Measure:
    """:func:`measure` of one set of stretches at any moments, its running sum made once (in
    place: one column of the stretches' count, 24 MB for 3M)."""

    def __init__(self, stretches: tuple[np.ndarray, np.ndarray]):
        self.starts, self.ends = stretches
        self.before = np.subtract(self.ends, self.starts, dtype=np.int64)
        np.cumsum(self.before, out=self.before)  # before[k]: the length of stretches 0..k

    def __call__(self, t: np.ndarray) -> np.ndarray:
        starts, ends = self.starts, self.ends
        if not len(starts):
            return np.zeros(len(t), dtype=np.int64)
        k = np.searchsorted(starts, t, side="right") - 1
        at = np.maximum(k, 0)
        length = ends[at] - starts[at]
        return np.where(k >= 0, self.before[at] - length + np.clip(t - starts[at], 0, length), 0)


def measure_with(a, b: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """:func:`measure` of the union of ``a``'s stretches and ``b`` (each sorted and disjoint;
    ``a`` a :class:`Measure`, or any function that measures a union at the moments asked):
    ``a``'s, plus ``b``'s, less their overlap's, which is ``a``'s measure inside ``b``'s
    stretches up to ``t``. ``a`` is asked only at ``t`` and ``b``'s bounds: no union of the
    two is made."""
    b_starts, b_ends = b
    if not len(b_starts):
        return a(t)
    inside = a(b_ends) - a(b_starts)  # a's time within each stretch of b
    before = np.r_[0, np.cumsum(inside, dtype=np.int64)]
    k = np.searchsorted(b_starts, t, side="right") - 1
    at = np.maximum(k, 0)
    partial = a(np.clip(t, b_starts[at], b_ends[at])) - a(b_starts[at])
    overlap = np.where(k >= 0, before[at] + partial, 0)
    return a(t) + measure(b, t) - overlap


class AtMoments:
    """A union's measure known at some moments only (:func:`row_measures`'), looked up
    there; a moment not among them is a caller's error."""

    def __init__(self, moments: np.ndarray, values: np.ndarray):
        self.moments, self.values = moments, values

    def __call__(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        k = np.searchsorted(self.moments, t)
        if t.size and (int(k.max()) >= len(self.moments) or not np.array_equal(self.moments[k], t)):
            raise ValueError("a union looked up at a moment it was not measured at")
        return self.values[k]


def row_measures(start: np.ndarray, end: np.ndarray, runs: np.ndarray, bits: np.ndarray, masks: list[int],
                 moments: np.ndarray) -> np.ndarray:
    """By the C loop, in one walk of the rows: for each of ``masks``, how much of the union of
    the rows whose ``bits`` (a byte per row) share a bit with it lies before each of the
    ascending ``moments`` (rows of no length left out, as :func:`union` does); an int64 array
    of ``len(masks)`` x ``len(moments)``. No union is made: 3M ops are 3M stretches, 48 MB."""
    values = _groupc.measures(start, end, runs, bits, bytes(masks), np.ascontiguousarray(moments, dtype=np.int64))
    return np.frombuffer(values, dtype=np.int64).reshape(len(masks), len(moments))


__all__ = ["AtMoments", "MAX_RUNS", "Measure", "compiled", "distinct", "measure", "measure_with", "merged", "row_measures",
           "start_runs", "union", "union_of_rows"]
