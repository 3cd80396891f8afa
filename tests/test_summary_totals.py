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
