"""A summary's per-key totals: the C loop (tracebridge/analysis/run/_groupc.c) and numpy's
scatter-adds give the same numbers (tests/test_corpus_outputs.py checks whole summaries)."""

from __future__ import annotations

import numpy as np
import pytest

from tracebridge.analysis.run import summary


@pytest.mark.parametrize("seed", range(6))
def test_compiled_totals_are_numpys(seed):
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    chance = np.random.default_rng(seed)
    rows, size = int(chance.integers(0, 5000)), int(chance.integers(1, 60))
    index = chance.integers(0, size, rows).astype(np.int32 if seed % 2 else np.int64)
    basis = chance.integers(-(1 << 40), 1 << 40, rows)
    counted = chance.random(rows) < (1.0 if seed % 3 == 0 else 0.6)
    host = basis if seed % 2 else chance.integers(0, 1 << 30, rows)
    device = None if seed % 4 == 1 else chance.integers(0, 1 << 30, rows)
    every_row = bool(counted.all())
    compiled = [np.frombuffer(column, dtype=np.int64) for column in summary._groupc.totals(
        index, size, basis, None if every_row else counted, None if host is basis else host, device)]
    expected = summary._totals_numpy(index, size, basis, counted, every_row, host, device)
    for ours, theirs in zip(compiled, expected):
        assert np.array_equal(ours, theirs)


def test_compiled_totals_refuse_keys_out_of_range():
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    with pytest.raises(ValueError):
        summary._groupc.totals(np.array([0, 3], dtype=np.int64), 3, np.zeros(2, dtype=np.int64), None, None, None)
    with pytest.raises(ValueError):
        summary._groupc.totals(np.array([-1], dtype=np.int32), 3, np.zeros(1, dtype=np.int64), None, None, None)


def test_compiled_totals_are_built_where_a_compiler_is():
    """CI machines have gcc: the benchmark figures assume the C loop (as for the decoder and
    the encoder), so its absence there must not go unnoticed."""
    import shutil
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: numpy's totals are the ones in use")
    assert summary._groupc is not None


@pytest.mark.parametrize("seed", range(8))
def test_compiled_busy_time_is_busy_ns(seed):
    """The union of intervals given as runs in start order (an XSpace's lines), merged by the
    C loop, against model.accelerator.busy_ns's sorted copies."""
    from tracebridge.model.accelerator import busy_ns
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    chance = np.random.default_rng(seed)
    runs = [np.sort(chance.integers(0, 10_000, int(chance.integers(0, 300)))) for _ in range(int(chance.integers(1, 6)))]
    start = np.concatenate(runs).astype(np.int64)
    end = start + chance.integers(0, 400, len(start))
    bounds = np.cumsum([0] + [len(run) for run in runs]).astype(np.int64)
    assert summary._groupc.busy(start, end, bounds) == busy_ns(start, end)
    assert summary._busy(start, end) == busy_ns(start, end)
    if len(start) > 1 and np.any(start[1:] != start[0]):
        with pytest.raises(ValueError):  # one run claimed, not in start order
            summary._groupc.busy(start[::-1].copy(), end[::-1].copy(), np.array([0, len(start)], dtype=np.int64))


def test_compiled_busy_time_of_some_rows():
    from tracebridge.model.accelerator import busy_ns
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    chance = np.random.default_rng(35)
    start = np.concatenate([np.sort(chance.integers(0, 10_000, 500)) for _ in range(3)]).astype(np.int64)
    end = start + chance.integers(0, 300, len(start))
    rows = chance.random(len(start)) < 0.5
    assert summary._busy(start, end, rows) == busy_ns(start[rows], end[rows])
    assert summary._busy(start, end, np.zeros(len(start), dtype=bool)) == 0


def test_compiled_totals_of_selected_rows_are_numpys_of_their_copies():
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    chance = np.random.default_rng(7)
    rows, size = 3000, 40
    index = chance.integers(0, size, rows).astype(np.int32)
    basis = chance.integers(0, 1 << 30, rows)
    counted = chance.random(rows) < 0.7
    selected = chance.random(rows) < 0.5
    compiled = [np.frombuffer(column, dtype=np.int64) for column in summary._groupc.totals(
        index, size, basis, counted, None, None, selected)]
    expected = summary._totals_numpy(index[selected], size, basis[selected], counted[selected], False,
                                     basis[selected], None)
    for ours, theirs in zip(compiled, expected):
        assert np.array_equal(ours, theirs)


def test_compiled_union_is_breakdowns_union():
    """The union of the rows of a few start-ordered runs (breakdown._union_of, by the C loop)
    against breakdown.union of their copies."""
    from tracebridge.analysis.run import breakdown
    if summary._groupc is None:
        pytest.skip("the C loop is not built here")
    chance = np.random.default_rng(11)
    for _ in range(5):
        start = np.concatenate([np.sort(chance.integers(0, 20_000, int(chance.integers(0, 800))))
                                for _ in range(int(chance.integers(1, 5)))]).astype(np.int64)
        end = start + chance.integers(-5, 200, len(start))  # some of no length, or ending before they start
        rows = chance.random(len(start)) < 0.7
        ours = breakdown._union_of(start, end, rows)
        theirs = breakdown.union(start[rows], end[rows])
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))


@pytest.mark.parametrize("seed", range(8))
def test_part_times_from_unions_are_the_segments(seed):
    """breakdown._part_times (each part what it adds to the union of those before it) against
    the segmentation the findings read (breakdown._part_timeline), on random parts and steps."""
    from types import SimpleNamespace

    from tracebridge.analysis.run import breakdown
    chance = np.random.default_rng(seed)

    def random_union():
        start = chance.integers(0, 10_000, int(chance.integers(0, 300))).astype(np.int64)
        return breakdown.union(start, start + chance.integers(0, 400, len(start)))

    spans = {name: random_union() for name in breakdown._PRIORITY}
    lows = np.sort(chance.integers(0, 10_000, 12))
    steps = [SimpleNamespace(start_ns=int(lo), end_ns=int(lo + chance.integers(0, 3000))) for lo in lows]
    starts = np.array([s.start_ns for s in steps], dtype=np.int64)
    ends = np.array([s.end_ns for s in steps], dtype=np.int64)
    timeline = breakdown._part_timeline(spans, None, None, steps)
    ours = breakdown._part_times(spans, starts, ends)
    for name in breakdown.PARTS:
        assert np.array_equal(ours[name], timeline.time(name, starts, ends)), name
