"""Issue 33's corpus pairs, captured live with TensorFlow 2.21 and traced from their first
step (tests/helpers/breakdown_worker.py, a process each): a small MLP as a TF1 session, as
its Keras 3 ``fit`` port, its ``fit(jit_compile=True)`` port and a ``tf.function`` loop, and
a CNN as a TF1 session and a ``fit`` port.

The parallel pass asserts structure: each step's parts add up to it and a run's median
step's parts to its median, a comparison's headline parts to its difference (2%, the
issue's bar; they add up exactly by construction); the step holding a first call is left
out and named, so the steady medians are those of ``--warmup 1``; nothing from the first
call becomes a retracing finding or an ``ops_without_time`` note; each run's API is known.
What rests on the time measured (the MLP fit pair's difference is mostly the framework's, a
finding naming ``steps_per_execution`` explains it; a TF1 session's slow first run) is
judged in the serial pass, by gross margins (tests/conftest.py, "live timing"). The exact
rules are tests/test_breakdown.py's and tests/test_detectors.py's, on synthetic traces.
Tools/breakdown_pairs.py measures the same pairs and prints the figures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tracebridge
from tracebridge.analysis.common.thresholds import Thresholds
from tracebridge.analysis.run.doctor import trace_notes

from tests.conftest import run_cli
from tests.helpers.preloaded import PreloadedPython

pytestmark = [pytest.mark.tf, pytest.mark.slow]

WORKER = Path(__file__).parent / "helpers" / "breakdown_worker.py"
RUNS = (("mlp", "tf1"), ("mlp", "fit"), ("mlp", "fit_jit"), ("mlp", "tf_function"), ("cnn", "tf1"), ("cnn", "fit"))
PAIRS = (("mlp", "fit"), ("mlp", "fit_jit"), ("mlp", "tf_function"), ("cnn", "fit"))
TF2 = tuple(run for run in RUNS if run[1] != "tf1")
APIS = {"tf1": "session", "fit": "keras_fit", "fit_jit": "keras_fit", "tf_function": "tf_function"}
WITHIN = 0.02  # the bar for parts adding up


@pytest.fixture(scope="module")
def files(tf, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("breakdown")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    found = {}
    with PreloadedPython(env) as python:  # one capture at a time, TensorFlow imported once
        for model, api in RUNS:
            path = folder / f"{model}_{api}.xplane.pb"
            done = python.run(WORKER, Path(__file__).parents[1], timeout=600, args=(model, api, path))
            assert done.returncode == 0, (model, api, done.stderr[-3000:])
            assert json.loads(done.stdout.strip().splitlines()[-1])["steps"] == 8
            found[model, api] = path
    return found


@pytest.fixture(scope="module")
def traces(files) -> dict:
    return {run: tracebridge.load(path) for run, path in files.items()}


def test_every_steps_parts_add_up_to_it(traces):
    for run, trace in traces.items():
        summary = trace.summary()
        for step in summary.steps:
            assert abs(sum(step["parts"].values()) - step["duration_ns"]) <= WITHIN * step["duration_ns"], (run, step)
        breakdown = summary.breakdown
        assert abs(sum(breakdown["parts"].values()) - breakdown["median_ns"]) <= WITHIN * breakdown["median_ns"]
        assert breakdown["api"] == APIS[run[1]], (run, breakdown["api"])


def test_the_headline_parts_add_up_to_the_difference(traces):
    for model, api in PAIRS:
        result = tracebridge.compare(traces[model, "tf1"], traces[model, api])
        head = result.headline()
        assert abs(sum(head.parts.values()) - head.delta_ns) <= WITHIN * abs(head.delta_ns), (model, api, head)
        for side, breakdown in result.breakdown.items():
            parts = result.to_dict()["steps"][side]["parts"]
            assert parts == breakdown.parts
            assert abs(sum(parts.values()) - getattr(result.steps, side).median_ns) <= \
                WITHIN * getattr(result.steps, side).median_ns
        lines = result.to_text().splitlines()
        assert lines[2].startswith("  parts (ms, control -> test): ops ") and \
            lines[3].startswith("  difference by part (ms): ")


def test_a_first_call_is_left_out_and_named(traces):
    """A TF2 run traced from its first step: step 0 holds the first call's tracing (and
    Keras's or the optimizer's variables), and only it is left out; the steady medians are
    then those of --warmup 1."""
    for run in TF2:
        trace = traces[run]
        default, warm = tracebridge.compare(trace, trace), tracebridge.compare(trace, trace, warmup=1)
        (left,) = default.steady.test.one_time
        assert left.number == trace.steps[0].number and "tracing" in left.causes, (run, left)
        function = "train_step" if run[1] == "tf_function" else "multi_step_on_iterator"
        assert function in left.causes["tracing"], (run, left.causes)
        if run[1] == "fit_jit":
            assert "compile" in left.causes, left.causes
        assert default.steps.test.median_ns == warm.steps.test.median_ns
        assert any("steady state: 1 of 8 steps left out" in note and "--warmup 0" in note for note in default.notes)


def test_nothing_of_the_first_call_is_a_finding_or_a_note(traces):
    for run in TF2:
        trace = traces[run]
        for warmup in (None, 0):  # with the first call's step kept too
            kinds = {f.kind for f in tracebridge.advise(trace, warmup=warmup)}
            assert not {"retracing", "xla_compile", "eager_ops"} & kinds, (run, warmup, kinds)
        assert not [note for note in trace_notes(trace) if note.startswith("ops_without_time")], run


def test_summary_json_gives_each_step_its_parts(files):
    done = run_cli("summary", files["mlp", "fit"], "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert all(set(step["parts"]) == {"ops", "framework", "input", "compile", "idle"} for step in summary["steps"])
    assert "tracing" in summary["steps"][0]["one_time"]
    assert summary["breakdown"]["steps"] == [step["number"] for step in summary["steps"][1:]]


# --- what rests on the time measured: gross effects, judged alone ------------------------------
@pytest.mark.serial
def test_the_mlp_fit_ports_difference_is_the_frameworks(traces):
    """Live timing: the small MLP's ops take about as long in both runs (0.4-0.7 ms a step),
    while fit's step spends 0.7-1 ms in the framework against the session's 0.1 ms of
    executor gaps (measured on a loaded 2-core machine): the framework is the largest part
    of the difference, and the framework_overhead finding, with its Keras advice, explains
    most of it (85% measured; asserted: half). Judged on the median step (confidence 0.5), as
    tests/test_performance_examples.py judges its timed examples: one step that a loaded
    machine stalls elsewhere would otherwise veto the finding (its intervals are tested on
    exact data, tests/test_detectors.py)."""
    result = tracebridge.compare(traces["mlp", "tf1"], traces["mlp", "fit"], thresholds=Thresholds(confidence=0.5))
    head, report = result.headline(), result.to_text(top=0)
    assert max(head.parts, key=head.parts.get) == "framework", report
    naming = [f for f in result.findings if "steps_per_execution" in f.advice]
    assert len(naming) == 1, report
    finding = naming[0]
    assert finding.kind == "framework_overhead"
    assert finding.share * result.steps.test.median_ns >= 0.5 * head.delta_ns, report
    assert head.explained >= 0.5, report


@pytest.mark.serial
def test_a_sessions_slow_first_run_is_left_out(traces):
    """Live timing: a TF1 session's first training run sets up its kernels and memory (30-50x
    the later runs measured) and no event says so: the first step is left out by its time."""
    chosen = tracebridge.compare(traces["mlp", "tf1"], traces["mlp", "tf1"]).steady.control
    assert [s.position for s in chosen.one_time] == [0] and "first_run" in chosen.one_time[0].causes
