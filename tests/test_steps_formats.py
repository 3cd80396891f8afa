"""Steps survive every format: a 3-step TF1 trace written to each output format reads back
with 3 steps, or the write is refused naming the formats that keep steps (and
``split_steps`` writes one file per step). ``compare --warmup`` applies to both sides."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tracebridge
from tracebridge import formats
from tracebridge.analysis.compare import PerSide
from tracebridge.errors import OutputError
from tests.conftest import run_cli
from tests.test_compare import _mlp_tf1, _run_tf1


@pytest.fixture(scope="module")
def three_step_tf1(tf):
    rng = np.random.default_rng(3)
    values = (rng.random((64, 32), dtype=np.float32), rng.integers(0, 10, 64).astype(np.int32))
    trace = _run_tf1(tf, _mlp_tf1(tf, 64, 32, 64), values, steps=3)
    assert len(trace.steps) == 3
    return trace


def _ops_by_step(trace):
    return [(op.step, op.name) for op in trace.records()]


def test_every_output_format_keeps_steps_or_refuses(three_step_tf1, tmp_path):
    trace = three_step_tf1
    for fmt in formats.FORMATS:
        if not fmt.write:
            continue
        path = tmp_path / f"run{fmt.suffixes[0]}"
        if fmt.keeps_steps:
            assert trace.save(path) == [str(path)]
            if fmt.read:
                again = tracebridge.load(path)
                assert len(again.steps) == 3, fmt.name
                # every op, in its own step (XSpace adds its step markers as events)
                assert not Counter(_ops_by_step(trace)) - Counter(_ops_by_step(again)), fmt.name
            continue
        with pytest.raises(OutputError) as refused:
            trace.save(path)
        message = str(refused.value)
        assert "holds one step and this trace has 3" in message and ".json" in message and ".xplane.pb" in message
        assert not path.exists()
        written = trace.save(path, split_steps=True)
        assert [f.rsplit("/", 1)[-1] for f in written] == [
            f"run.step-{s.number}{fmt.suffixes[0]}" for s in trace.steps]
        per_step = [tracebridge.load(f) for f in written]
        assert all(len(t.steps) == 1 for t in per_step)
        assert sum(len(t) for t in per_step) == len(trace)


def test_cli_convert_refuses_or_splits(three_step_tf1, tmp_path):
    source = tmp_path / "run.json"
    three_step_tf1.save(source)
    refused = run_cli("convert", source, tmp_path / "run.pb")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "holds one step" in refused.stderr and not (tmp_path / "run.pb").exists()
    split = run_cli("convert", source, tmp_path / "run.pb", "--split-steps")
    assert split.returncode == 0, split.stderr
    assert "one per step" in split.stdout
    assert len(list(tmp_path.glob("run.step-*.pb"))) == 3
    info = run_cli("info", tmp_path / "run.json")
    assert "3 steps" in info.stdout


def test_compare_warmup_applies_to_both_sides_and_warns(three_step_tf1, tmp_path):
    trace = three_step_tf1
    both = tracebridge.compare(trace, trace, warmup=1)
    assert both.steps.control.count == both.steps.test.count == 2
    # 2 steps a side after the warm-up: too few to judge timing by, which is the only note
    assert [note for note in both.notes if "too few steps" not in note] == []
    assert any("too few steps to judge timing (control 2, test 2" in note for note in both.notes)
    assert both.warmup == PerSide(1, 1)
    assert len(both.step_pairs) == 2
    one_step = trace.filter(step=trace.steps[-1].number)
    short = tracebridge.compare(one_step, trace, warmup=1)
    assert short.steps.control.count == 1 and short.steps.test.count == 2
    assert short.warmup == PerSide(0, 1)  # the warm-up each side used, kept for the findings
    assert any("control has only 1 step" in note for note in short.notes)
    assert "note: warmup 1: control has only 1 step" in short.to_text()
    # Warm-up changes statistics, never pairings.
    assert {(r.names.control, r.names.test) for r in both.rows} == \
        {(r.names.control, r.names.test) for r in tracebridge.compare(trace, trace).rows}
