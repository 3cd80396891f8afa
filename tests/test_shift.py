"""The step statistics findings decide on (analysis/common/shift.py): a median's bounds are
order statistics, and a shift's estimate and bounds the ranked test - control differences, at
any number of steps. Exact arithmetic, no timing."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tracebridge.analysis.common import shift as shift_module
from tracebridge.analysis.common.shift import median_bounds, shift


def _rank_by_definition(n: int, level: float) -> int:
    """The largest k with P(Binomial(n, 1/2) <= k - 1) <= 1 - level, in exact fractions."""
    alpha = Fraction(1.0 - level)
    cumulative, k = Fraction(0), 0
    for j in range(n + 1):
        cumulative += Fraction(math.comb(n, j), 2 ** n)
        if cumulative > alpha:
            break
        k += 1
    return max(k, 1)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("n", [1, 2, 5, 6, 9, 20, 63, 64, 65, 100, 257])
def test_median_bounds_are_the_order_statistics_the_binomial_gives(n, level):
    """The bounds are the k-th smallest and largest of the steps, k by the definition. (At
    64 and 66 steps the cumulative counts overflowed int64, and the bounds were out of range.)"""
    values = np.arange(n, dtype=np.float64)[::-1] * 3.0  # any order: the bounds sort them
    k = _rank_by_definition(n, level)
    bounds = median_bounds(values, level)
    assert (bounds.low, bounds.high) == (3.0 * (k - 1), 3.0 * (n - k)) and bounds.steps == n
    assert bounds.low <= bounds.median <= bounds.high


def test_median_bounds_of_a_long_profile():
    """1,500 steps (a long profile; 2.0 ** n overflowed past 1,023): about the median plus or
    minus 1.645 of the binomial's standard deviations, sqrt(n) / 2 (one-sided 95%)."""
    n = 1500
    bounds = median_bounds(np.arange(n, dtype=np.float64), 0.95)
    half_width = 1.645 * math.sqrt(n) / 2
    assert bounds.median == (n - 1) / 2
    assert abs((bounds.median - bounds.low) - half_width) <= 2
    assert bounds.high - bounds.median == bounds.median - bounds.low


def test_median_bounds_of_too_few_steps_are_the_extremes():
    bounds = median_bounds([4.0, 1.0, 2.0], 0.95)
    assert (bounds.low, bounds.median, bounds.high) == (1.0, 2.0, 4.0)


def _sorted_shift(control, test, level: float = 0.95) -> tuple[float, float, float]:
    """The shift by its definition: every test - control difference, sorted."""
    differences = np.sort(np.subtract.outer(np.asarray(test, float), np.asarray(control, float)).ravel())
    k = shift_module._rank_of_bound(len(control), len(test), 1.0 - level)
    return float(np.median(differences)), float(differences[k - 1]), float(differences[-k])


@pytest.mark.parametrize("scale", [3, 1_000, 10 ** 6, 10 ** 11])
def test_shift_by_counting_is_the_shift_by_sorting(monkeypatch, scale):
    """Past 100,000 differences (long profiles: 1,500 steps a side) the estimate and bounds
    are ranked by counting; they are the very differences sorting gives, ties included."""
    rng = np.random.default_rng(scale)
    monkeypatch.setattr(shift_module, "_SORTED_UP_TO", 0)
    for _ in range(40):
        m, n = (int(x) for x in rng.integers(1, 300, 2))
        control = rng.integers(0, scale, m).astype(float)
        test = (rng.integers(0, scale, n) + rng.integers(-scale // 10 - 1, scale // 5 + 1)).astype(float)
        found = shift(control, test)
        assert (found.estimate_ns, found.low_ns, found.high_ns) == _sorted_shift(control, test)


def test_shift_of_fractions_is_sorted(monkeypatch):
    """Values that are not whole numbers (shares) take the sorting path, whatever their count."""
    monkeypatch.setattr(shift_module, "_SORTED_UP_TO", 0)
    control, test = np.linspace(0.1, 0.5, 50), np.linspace(0.2, 0.7, 60)
    found = shift(control, test)
    assert (found.estimate_ns, found.low_ns, found.high_ns) == _sorted_shift(control, test)


@pytest.mark.parametrize("cells", [64, 1 << 22])
def test_per_step_medians_are_each_names_median_step_sum(monkeypatch, cells):
    """The findings' per-op medians (a table summed a block of names at a time: here a few
    names, or all) are, name by name, the median over the steps of the op's summed time, on
    a recorded TF1 LSTM run."""
    import tracebridge
    from tracebridge.analysis.findings import pair_measures
    from tracebridge.analysis.findings.pair_measures import per_step_medians, shared_times
    from tracebridge.model.schema import Category

    monkeypatch.setattr(pair_measures, "_CELLS", cells)
    trace = tracebridge.load(Path(__file__).parent / "data" / "recurrent" / "lm_tf1.json.gz")
    ops, positions = trace.ops, list(range(1, len(trace.steps)))
    values = shared_times(trace)
    sums: dict[str, list[float]] = {}
    for row in np.flatnonzero(np.isin(ops["step"], positions) & (ops["category"] == Category.OP)).tolist():
        per_step = sums.setdefault(trace.strings[int(ops["name"][row])], [0.0] * len(positions))
        per_step[positions.index(int(ops["step"][row]))] += values[row]
    assert len(sums) > 1000
    assert per_step_medians(trace, values, positions) == {name: float(np.median(v)) for name, v in sums.items()}
