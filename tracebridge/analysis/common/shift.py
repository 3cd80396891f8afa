"""How far one run's per-step times moved from another's, with an interval that says how
sure that is: the Hodges-Lehmann shift and its distribution-free (Mann-Whitney) bounds,
and for one run the order-statistic bounds of its median.

Timing on a shared machine is a distribution: one step can be twice another for reasons
that have nothing to do with the model. A decision taken on one sample (a run's fastest
step, an op's minimum) is vetoed by one lucky step and made by one unlucky one. These
statistics use every step and assume nothing about the noise's shape: the bounds hold for
any continuous distribution whose only change between runs is a shift.

The bounds are one-sided at ``level`` each (0.95: the shift is above ``low`` with 95%
confidence, below ``high`` with 95%). Where the steps are too few for that level (three a
side give at most 95%, with 1 in 20 orderings the most extreme), the bounds are the most
conservative the data give: the smallest and largest pairwise differences, so that a
decision needs every test step beyond every control step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class Shift:
    """``test - control`` per step: the Hodges-Lehmann estimate (the median of every
    test-control difference) and its bounds; the steps each side gave."""

    estimate_ns: float
    low_ns: float
    high_ns: float
    control_steps: int
    test_steps: int
    # the runs' own step-to-step spread: a robust standard deviation of one step's value
    # (1.4826 x the median absolute deviation, pooled over both runs)
    spread_ns: float = 0.0
    level: float = 0.95  # the one-sided confidence of each bound

    def above(self, margin: float) -> bool:
        """Slower beyond ``margin``, with the bounds' confidence."""
        return self.low_ns > margin

    def below(self, margin: float) -> bool:
        """Faster beyond ``margin``, with the bounds' confidence."""
        return self.high_ns < -margin

    def to_dict(self) -> dict:
        return {"estimate_ns": self.estimate_ns, "low_ns": self.low_ns, "high_ns": self.high_ns,
                "spread_ns": self.spread_ns, "control_steps": self.control_steps, "test_steps": self.test_steps,
                "confidence": self.level}


@dataclass(frozen=True)
class Bounds:
    """One run's per-step values: their median and its distribution-free bounds."""

    median: float
    low: float
    high: float
    steps: int
    level: float = 0.95  # the one-sided confidence of each bound

    def to_dict(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "steps": self.steps,
                "confidence": self.level}


def shift(control, test, level: float = 0.95) -> Shift:
    """The shift of ``test`` against ``control`` (per-step values, any units)."""
    c = np.asarray(control, dtype=np.float64).ravel()
    t = np.asarray(test, dtype=np.float64).ravel()
    if not len(c) or not len(t):
        return Shift(0.0, -math.inf, math.inf, len(c), len(t), level=level)
    k = _rank_of_bound(len(c), len(t), 1.0 - level)
    count = len(c) * len(t)
    ranks = [k, count - k + 1, (count + 1) // 2, count // 2 + 1]  # the bounds; the median's one or two
    if count > _SORTED_UP_TO and _whole(c) and _whole(t):
        low, high, below, above = _ranked_differences(np.sort(c), np.sort(t), ranks)
    else:
        differences = np.sort(np.subtract.outer(t, c).ravel())
        low, high, below, above = (float(differences[rank - 1]) for rank in ranks)
    deviations = np.concatenate([np.abs(c - np.median(c)), np.abs(t - np.median(t))])
    return Shift((below + above) / 2, low, high, len(c), len(t), float(1.4826 * np.median(deviations)), level)


# Up to this many test-control differences they are sorted; beyond, steps in their thousands
# (1,500 a side: 2.25M differences, 0.05 s a row, 2 min for a 2,000-op comparison), the
# ranks are found by counting (:func:`_ranked_differences`).
_SORTED_UP_TO = 100_000
_EXACT = 2.0 ** 52  # below this, float64 holds every whole number and their differences exactly


def _whole(values: np.ndarray) -> bool:
    """Whole numbers (nanoseconds, counts), small enough that their differences are exact."""
    return bool(np.all(values == np.floor(values)) and np.all(np.abs(values) < _EXACT / 2))


def _ranked_differences(c: np.ndarray, t: np.ndarray, ranks: list[int]) -> list[float]:
    """The ``ranks``-th smallest (1-based) of the differences ``t[j] - c[i]``, for sorted
    whole-number ``c`` and ``t``, without making them: each rank's value is bisected over the
    whole numbers, counting the differences at most a value with one sorted search per test
    value, until few differences lie between the bounds; those few are made and ranked."""
    found = []
    for rank in ranks:
        low, high = float(t[0] - c[-1]) - 1, float(t[-1] - c[0])  # count(low) < rank <= count(high)
        below, within = 0, len(c) * len(t)
        while high - low > 1 and within > 4 * (len(c) + len(t)):
            middle = float((low + high) // 2)
            at_most = _at_most(c, t, middle)
            if at_most >= rank:
                high, within = middle, at_most - below
            else:
                low, below, within = middle, at_most, within - (at_most - below)
        if high - low <= 1:
            found.append(high)
            continue
        # the differences in (low, high]: for each test value, a run of control values
        first = np.searchsorted(c, t - high, side="left")
        last = np.searchsorted(c, t - low, side="left")
        lengths = last - first
        rows = np.repeat(np.arange(len(t)), lengths)
        columns = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(first, lengths)
        between = np.sort(t[rows] - c[columns])
        found.append(float(between[rank - below - 1]))
    return found


def _at_most(c: np.ndarray, t: np.ndarray, value: float) -> int:
    """How many differences ``t[j] - c[i]`` are at most ``value`` (exact for whole numbers)."""
    return int(len(c) * len(t) - np.searchsorted(c, t - value, side="left").sum())


def median_bounds(values, level: float = 0.95) -> Bounds:
    """The median of ``values`` and its one-sided bounds: order statistics whose chance of
    lying above (below) the true median is at most ``1 - level`` (binomial, p = 1/2), or
    the extremes where the values are too few for that."""
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if not len(v):
        return Bounds(0.0, -math.inf, math.inf, 0, level)
    n = len(v)
    k = max(_order_statistic_rank(n, 1.0 - level), 1)
    return Bounds(float(np.median(v)), float(v[k - 1]), float(v[n - k]), n, level)


def _order_statistic_rank(n: int, alpha: float) -> int:
    """How many ``j`` have P(Binomial(n, 1/2) <= j) <= alpha: the rank of the lower bound.
    In integers (the float 2.0 ** n overflows past n = 1023 steps, a long profile's count),
    against ``alpha`` as the exact fraction its float is."""
    alpha_over = Fraction(alpha)
    limit = alpha_over.numerator << n  # alpha * 2**n, times the denominator
    count, term = 0, 1                  # sum of C(n, i) for i < j; C(n, j)
    for j in range(n + 1):
        count += term
        if count * alpha_over.denominator > limit:
            return j
        term = term * (n - j) // (j + 1)
    return n + 1


def _rank_of_bound(m: int, n: int, alpha: float) -> int:
    """The rank ``k`` (1-based) of the pairwise difference that bounds the shift: the
    largest ``k`` with P(U <= k - 1) <= alpha for the Mann-Whitney U of ``m`` and ``n``
    values, at least 1 (the extreme difference) where even U = 0 is likelier than alpha."""
    if m * n > 2_500:  # the normal approximation, with continuity correction, is exact enough here
        z = _normal_quantile(1.0 - alpha)
        k = math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0) + 0.5)
        return max(k, 1)
    cumulative = np.cumsum(_u_distribution(min(m, n), max(m, n)))
    return max(int(np.searchsorted(cumulative, alpha, side="right")), 1)


@functools.lru_cache(maxsize=256)
def _u_distribution(m: int, n: int) -> np.ndarray:
    """P(U = u) for u = 0..m*n under no shift: the coefficients of the Gaussian binomial
    coefficient [m+n choose m] in q, over the C(m+n, m) orderings. Computed in integers
    (exact) as power series cut at degree m*n, which the polynomial does not exceed."""
    size = m * n + 1
    counts = [1] + [0] * (size - 1)
    # prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), one factor at a time (each division is exact)
    for i in range(1, m + 1):
        for u in range(size - 1, n + i - 1, -1):    # * (1 - q^(n+i))
            counts[u] -= counts[u - n - i]
        for u in range(i, size):                    # / (1 - q^i) = * (1 + q^i + q^2i + ...)
            counts[u] += counts[u - i]
    total = math.comb(m + n, m)
    return np.array([c / total for c in counts])


def _normal_quantile(p: float) -> float:
    """The standard normal's ``p`` quantile (bisection on erf: called rarely, no SciPy)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


__all__ = ["Bounds", "Shift", "median_bounds", "shift"]
