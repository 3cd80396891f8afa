"""The step breakdown's times by one C walk of the rows (breakdown._step_times_compiled, over
_groupc.measures) are numpy's, from the parts' unions and the findings' segmentation
(breakdown._step_times_numpy), number for number: on random rows, on exact synthetic traces
(tests/helpers/synthetic.py), on the corpus and on recorded TF 2.21 captures. The whole
outputs are tests/test_corpus_outputs.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge.analysis.run import breakdown, intervals
from tracebridge.analysis.run.breakdown import DEVICE_TIMES, PartRows

from tests.helpers.synthetic import call, eager, gap, host, input_wait, kernel, op, run, together

RECORDED = Path(__file__).parent / "data"

needs_c = pytest.mark.skipif(intervals._groupc is None, reason="the C loop is not built here")


def _both(trace, found: PartRows | None = None) -> tuple[dict, dict]:
    """The compiled and the numpy times of every step of ``trace``."""
    found = found or breakdown.part_rows(trace)
    starts = np.array([s.start_ns for s in trace.steps], dtype=np.int64)
    ends = np.array([s.end_ns for s in trace.steps], dtype=np.int64)
    runs = intervals.start_runs(trace.ops["start_ns"])
    assert runs is not None, "rows in too many runs for the C walk"
    return (breakdown._step_times_compiled(trace, found, runs, starts, ends),
            breakdown._step_times_numpy(trace, found, starts, ends))


def _assert_same(compiled: dict, expected: dict) -> None:
    assert sorted(compiled) == sorted(expected)
    for what in expected:
        assert compiled[what].dtype == np.int64, what
        assert np.array_equal(compiled[what], expected[what]), what


class _Rows:
    """The columns of random rows and their steps: what the two paths read of a trace."""

    def __init__(self, start: np.ndarray, end: np.ndarray, steps):
        self.ops = {"start_ns": start, "end_ns": end}
        self.steps = steps

    def __len__(self) -> int:
        return len(self.ops["start_ns"])


def _random_rows(chance: np.random.Generator, device: bool, session: bool):
    from types import SimpleNamespace
    runs = [np.sort(chance.integers(0, 20_000, int(chance.integers(0, 600))))
            for _ in range(int(chance.integers(1, 6)))]
    start = np.concatenate(runs).astype(np.int64)
    end = start + chance.integers(-20, 300, len(start))  # some of no length, or ending before they start

    def mask(share: float) -> np.ndarray:
        return chance.random(len(start)) < share

    def stretches(count: int) -> tuple[np.ndarray, np.ndarray]:
        lows = chance.integers(0, 20_000, count).astype(np.int64)
        return breakdown.union(lows, lows + chance.integers(0, 700, count))

    lows = np.sort(chance.integers(-500, 21_000, int(chance.integers(1, 15))))
    steps = [SimpleNamespace(start_ns=int(lo), end_ns=int(lo + chance.integers(0, 4000))) for lo in lows]
    on_device = mask(0.3) if device else None
    found = PartRows(input=mask(0.05), ops=mask(0.4) | (on_device if device else False),
                     framework=None if session else mask(0.3), compile=stretches(int(chance.integers(0, 4))),
                     framework_spans=stretches(len(steps)) if session else None, device=on_device,
                     host=mask(0.5) if device else None, notes=[])
    return _Rows(start, end, steps), found


@needs_c
@pytest.mark.parametrize("seed", range(24))
def test_compiled_step_times_are_numpys_on_random_rows(seed):
    chance = np.random.default_rng(seed)
    trace, found = _random_rows(chance, device=seed % 2 == 1, session=seed % 3 == 2)
    _assert_same(*_both(trace, found))



def _synthetic() -> dict:
    """Exact synthetic runs: every part, a tracing and an XLA compilation, eager ops, and a GPU."""
    return {
        "parts": run([[input_wait(100), gap(50), call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(200)]),
                       gap(70)]] * 4),
        "compile": run([[together(call("train_step", 5, [gap(500)], traced_us=400, compiled_us=150),
                                  [gap(100), op("dense/MatMul", "MatMul", 600)], [gap(500), input_wait(200)])]] * 3),
        "eager": run([[eager("MatMul", 80, n) for n in range(5)] + [host("EagerExecute", 30), gap(40)]] * 3,
                     sigma=0.3, seed=3),
        "gpu": run([[call("train_step", 7, [op("dense/MatMul", "MatMul", 50),
                                            together(kernel("volta_sgemm", "MatMul", 400),
                                                     [gap(100), input_wait(150)]), gap(30)]),
                     host("EagerExecute", 20)]] * 5, sigma=0.2, seed=1),
    }


@needs_c
@pytest.mark.parametrize("name", ["parts", "compile", "eager", "gpu"])
def test_compiled_step_times_are_numpys_on_synthetic_runs(name):
    trace = _synthetic()[name]
    compiled, expected = _both(trace)
    _assert_same(compiled, expected)
    assert (DEVICE_TIMES[0] in compiled) == (name == "gpu")


@needs_c
def test_compiled_step_times_are_numpys_on_the_corpus(corpus):
    seen = 0
    for path in sorted(corpus.glob("*/*")):
        if path.parent.name not in ("xspace", "chrome"):
            continue
        trace = tracebridge.load(path)
        if not trace.steps or intervals.start_runs(trace.ops["start_ns"]) is None:
            continue
        _assert_same(*_both(trace))
        seen += 1
    assert seen >= 8  # XSpaces of a GPU and of JAX on an H100; timeline.py JSON, a TF1 session's


@needs_c
def test_compiled_step_times_are_numpys_on_recorded_captures():
    """Real TF 2.21 captures (Keras fit, tf.function, TF1 sessions), recorded as Chrome JSON."""
    seen = 0
    for path in sorted((RECORDED / "recurrent").glob("*.json.gz")) + [RECORDED / "tf1_mlp" / "run_metadata.pb"]:
        trace = tracebridge.load(path)
        if trace.steps and intervals.start_runs(trace.ops["start_ns"]) is not None:
            _assert_same(*_both(trace))
            seen += 1
    assert seen >= 1


def test_the_summary_takes_the_c_walk_or_numpy_alike(corpus, monkeypatch):
    """A whole breakdown, the C loops on and off (TRACEBRIDGE_PURE_WIRE=1: numpy's unions)."""
    trace = tracebridge.load(corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")
    compiled = breakdown.step_breakdown(trace)
    monkeypatch.setenv("TRACEBRIDGE_PURE_WIRE", "1")
    pure = breakdown.step_breakdown(trace)
    assert compiled.steps == pure.steps and compiled.parts == pure.parts and compiled.device == pure.device
    # the findings' segmentation, made when asked, gives the same times
    starts = [s.start_ns for s in trace.steps]
    ends = [s.end_ns for s in trace.steps]
    assert compiled.timeline.time("ops", starts, ends).tolist() == [s.parts["ops"] for s in compiled.steps]


# --- the C walk itself ---------------------------------------------------------------------
@needs_c
@pytest.mark.parametrize("seed", range(8))
def test_measures_are_the_unions_measured(seed):
    """_groupc.measures against breakdown.union of each mask's rows, measured (intervals.measure)."""
    chance = np.random.default_rng(seed)
    runs = [np.sort(chance.integers(0, 10_000, int(chance.integers(0, 400))))
            for _ in range(int(chance.integers(1, 7)))]
    start = np.concatenate(runs).astype(np.int64)
    end = start + chance.integers(-10, 300, len(start))
    bounds = np.cumsum([0] + [len(r) for r in runs]).astype(np.int64)
    bits = chance.integers(0, 256, len(start)).astype(np.uint8)
    masks = [int(m) for m in chance.integers(0, 256, int(chance.integers(1, 17)))]
    moments = np.sort(chance.integers(-100, 10_500, int(chance.integers(0, 50)))).astype(np.int64)
    measured = intervals.row_measures(start, end, bounds, bits, masks, moments)
    for level, mask in enumerate(masks):
        rows = (bits & mask) != 0
        assert np.array_equal(measured[level], intervals.measure(breakdown.union(start[rows], end[rows]), moments))


@needs_c
def test_measures_refuse_what_they_cannot_walk():
    groupc = intervals._groupc
    start, end = np.array([5, 1, 9], dtype=np.int64), np.array([6, 4, 12], dtype=np.int64)
    bits, moments = np.ones(3, dtype=np.uint8), np.array([0, 10], dtype=np.int64)
    one_run = np.array([0, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="start order"):
        groupc.measures(start, end, one_run, bits, b"\x01", moments)
    runs = np.array([0, 1, 3], dtype=np.int64)  # two runs, each in order
    assert np.frombuffer(groupc.measures(start, end, runs, bits, b"\x01", moments), dtype=np.int64).tolist() == [0, 5]
    with pytest.raises(ValueError, match="ascend"):
        groupc.measures(start, end, runs, bits, b"\x01", moments[::-1].copy())
    with pytest.raises(ValueError, match="16"):
        groupc.measures(start, end, runs, bits, bytes(17), moments)
    with pytest.raises(ValueError, match="runs"):
        groupc.measures(start, end, np.array([0, 2], dtype=np.int64), bits, b"\x01", moments)
    with pytest.raises(ValueError, match="wrong type or length"):
        groupc.measures(start, end, runs, np.ones(2, dtype=np.uint8), b"\x01", moments)


def test_a_union_looked_up_off_its_moments_is_an_error():
    at = intervals.AtMoments(np.array([0, 10], dtype=np.int64), np.array([0, 4], dtype=np.int64))
    assert at([10, 0]).tolist() == [4, 0]
    with pytest.raises(ValueError):
        at([5])
    with pytest.raises(ValueError):
        at([11])


# --- the masks the breakdown reads -----------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 3, 16, 17, 40])
def test_rows_among_are_np_isins(count):
    from tracebridge.analysis.run.vocabulary import rows_among
    chance = np.random.default_rng(count)
    for values in (chance.integers(-5, 300, 5000).astype(np.int32), chance.integers(0, 9, 5000).astype(np.uint8)):
        ids = chance.integers(-5, 300, count).tolist()
        assert np.array_equal(rows_among(values, ids), np.isin(values, ids))
