"""Healthy runs captured with tracebridge and TensorFlow's defaults (no BFC allocator variable):
``tracebridge doctor`` passes each one (exit status 0) on what its capture wrote and on
tracebridge's own ``.json`` of it, and what TF and Keras run by themselves (Keras's iterator
ops, tf.data's IteratorGetNext, a function's first tracing) is no finding. Each run is captured
in a process of its own (tests/helpers/doctor_captures.py), forked from one interpreter that
imported TensorFlow once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tracebridge
from tracebridge.analysis.findings import advise
from tracebridge.analysis.findings.run_measures import StepView, eager_ops, retracing
from tests.conftest import REPO, run_cli
from tests.helpers.preloaded import PreloadedPython

pytestmark = [pytest.mark.tf, pytest.mark.slow]

CAPTURES = Path(__file__).parent / "helpers" / "doctor_captures.py"
# TF1 session, TF2 tf.function (with and without XLA), Keras fit (with and without XLA)
HEALTHY = ("tf1", "tf2", "tf2_xla", "keras", "keras_xla")
# with-blocks around a first fit, without and with validation data; a function retraced each step
OTHERS = ("first_fit", "validation", "retrace")


@pytest.fixture(scope="module")
def captured(tf, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("healthy")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)  # TF's default: no CPU memory events
    with PreloadedPython(env) as python:
        for kind in HEALTHY + OTHERS:
            done = python.run(CAPTURES, REPO, timeout=300, args=(str(folder), kind))
            assert done.returncode == 0 and "done" in done.stdout, (kind, done.stderr[-3000:])
    return folder


def capture_files(folder: Path, kind: str) -> list[Path]:
    """What the capture wrote: TF1 RunMetadata files, or the TF2 profile logdir."""
    if kind == "tf1":
        return sorted(folder.glob("tf1.step-*.pb"))
    return sorted((folder / kind).glob("session-*"))


def test_doctor_passes_healthy_captures_and_their_json(captured):
    for kind in HEALTHY:
        paths = capture_files(captured, kind)
        assert paths, kind
        for path in paths + [captured / f"{kind}.json"]:
            done = run_cli("doctor", path)
            assert done.returncode == 0 and done.stderr == "", (path, done.stdout, done.stderr)
            assert "not checked" not in done.stdout  # tracebridge's own .json is checked as well
            report = json.loads(run_cli("doctor", path, "--json").stdout)
            assert report["ok"] and report["not_checked"] == [], (path, report)
            # a default capture records no CPU memory: said, with its fix, as a warning only
            assert {(p["code"], p["severity"]) for p in report["problems"]} <= {("no_memory_records", "warning")}


def test_framework_eager_ops_are_not_the_users(captured):
    """Keras 3 fit checks its step function's Optional eagerly after every step, and a TF2 loop
    takes its batch with an eager IteratorGetNext: TF's own eager ops, inside the steps."""
    keras = {"OptionalHasValue", "OptionalGetValue"}
    expected = {"keras": keras, "keras_xla": keras, "tf2": {"IteratorGetNext"}}
    for kind, framework in expected.items():
        (logdir,) = capture_files(captured, kind)
        trace = tracebridge.load(logdir)
        in_steps = {op.op_type for op in trace.records() if op.name.startswith("eager/") and op.step is not None}
        assert framework <= in_steps, (kind, in_steps)  # they are there, in every traced step
        for path in (logdir, captured / f"{kind}.json"):
            codes = [p.code for p in tracebridge.doctor(path).problems]
            assert "ops_without_time" not in codes, (path, codes)
            evidence = eager_ops(StepView(tracebridge.load(path)))
            assert evidence.ops_per_step == [0] * 3 and evidence.share == 0, (path, evidence)


def test_a_first_tracing_is_no_retracing(captured):
    """A with-block around a model's first fit holds Keras's tracing of its step function."""
    for path in capture_files(captured, "first_fit") + [captured / "first_fit.json"]:
        trace = tracebridge.load(path)
        assert "retracing" not in {f.kind for f in advise(trace)}, path
        evidence = retracing(StepView(trace))
        assert sum(evidence.graph_buildings_per_step) >= 1  # the first call's tracing is there
        assert sum(evidence.retracings_per_step) == 0 and evidence.functions == {} and evidence.sections == []


def test_keras_test_function_is_no_retracing_of_its_train_function(captured):
    """Keras 3 names its train and test step functions alike (multi_step_on_iterator): the
    first validation traces a new concrete function of that name. The profile's calls say
    that each tf.function was traced once (their tracing_count stat)."""
    (logdir,) = capture_files(captured, "validation")
    trace = tracebridge.load(logdir)
    names = {op.name for op in trace.records() if "__inference_multi_step_on_iterator_" in op.name}
    assert len(names) == 2  # the train function's and the test function's
    assert "retracing" not in {f.kind for f in advise(trace)}
    evidence = retracing(StepView(trace))
    assert sum(evidence.graph_buildings_per_step) >= 2 and sum(evidence.retracings_per_step) == 0, evidence


def test_retracing_counts_tracings_beyond_the_first_and_says_so(captured):
    for path in capture_files(captured, "retrace") + [captured / "retrace.json"]:
        trace = tracebridge.load(path)
        found = advise(trace)
        (finding,) = [f for f in found if f.kind == "retracing"]
        # the first call (inside the capture) traces train_on once, a one-time cost whose step
        # the steady state leaves out, and says so; each later call traces again, and the
        # summary's counts are the evidence's
        assert finding.summary == ("3 retracings (tracings beyond a function's first) in 3 of 3 steps "
                                   "(train_on: 4 concrete functions in the trace)"), finding.summary
        assert finding.to_dict()["evidence"]["retracings_per_step"] == [1, 1, 1]
        assert any("first-call tracing of train_on" in note for note in found.notes), found.notes
        # every step kept (--warmup 0): the first call's tracing is no retracing
        kept = [f for f in advise(trace, warmup=0) if f.kind == "retracing"][0]
        assert kept.to_dict()["evidence"]["retracings_per_step"] == [0, 1, 1, 1]
        evidence = retracing(StepView(trace))
        assert evidence.graph_buildings_per_step == [1, 1, 1, 1]
        assert evidence.retracings_per_step == [0, 1, 1, 1]
        (versions,) = evidence.functions.values()
        assert list(evidence.functions) == ["train_on"] and len(versions) == 4
        assert len(evidence.sections) == 3 and evidence.share > 0  # only the retracings' time
