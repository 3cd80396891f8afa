"""The findings of single runs keep working on XLA runs (issue 24): ``host_gaps`` and
``input_wait`` on TF 2.21 ``tf.function(jit_compile=True)`` captures on this CPU, whose time
is on XLA thunks, and ``device_idle`` on real XLA GPU profiles (the corpus' H100 files),
where the device's busy time is its kernels' (inside CUDA graphs too), not the module's.

The runs train the small CNN of the guide's performance examples
(``migration_guide/examples/performance/_model.py``), as those examples do, with the step
compiled by XLA.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge.analysis.findings import advise
from tracebridge.analysis.common.thresholds import DEFAULT, Thresholds
from tracebridge.model.schema import Category
from tests.conftest import COMPUTE_OPS, TIMING_KINDS, gross_thresholds, timing_findings

pytestmark = [pytest.mark.tf, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[1] / "migration_guide" / "examples" / "performance"
SINGLE_RUN_KINDS = {"eager_ops", "retracing", "host_gaps", "input_wait", "xla_compile", "memory_growth"}


@pytest.fixture(scope="module")
def model(tf):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import _model
        yield _model
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.fixture(scope="module")
def runs(tf, model) -> dict:
    """Three XLA ports of the CNN, 5 steps traced after 2 of warm-up (XLA compiles then):
    a good one, one doing numpy work in each step, one waiting on a slow tf.data input."""
    w = model.variables()
    images, labels = model.batch()
    x, y = tf.constant(images), tf.constant(labels)
    step = tf.function(model.train_step, jit_compile=True)
    good = model.tf2_run(lambda i: step(w, x, y))
    rng = np.random.default_rng(1)

    def with_numpy(i):  # per-image numpy work while no TF op runs, as host_gaps/before.py
        noisy = np.stack([np.clip(image + rng.normal(0, 0.01, image.shape), 0, 1)
                          for image in images for _ in range(12)][::12]).astype(np.float32)
        step(w, tf.constant(noisy), y)

    host = model.tf2_run(with_numpy)
    iterator = iter(tf.data.Dataset.from_tensors((images, labels)).repeat().map(model.preprocess))
    input_wait = model.tf2_run(lambda i, it=iterator: step(w, *next(it)))
    del iterator  # TF 2.21 can hang at exit on a live iterator whose map calls Python
    return {"good": good, "host": host, "input": input_wait}


def _kinds(trace, thresholds: Thresholds = DEFAULT) -> dict:
    return {finding.kind: finding for finding in advise(trace, thresholds=thresholds)}


def _thunk_rows(trace):
    """The OP rows linked to an HLO instruction (XLA thunks)."""
    ops, stats = trace.ops, trace.table("event_stats")
    linked = np.unique(stats["op"][stats["key"] == trace.string_id("hlo_instruction")])
    return linked[ops["category"][linked] == Category.OP]


# The runs are live captures on a shared 2-core machine (tests/conftest.py, "live timing"): the
# tests that judge their time run alone (serial), with margins of 3x or more, and those that
# read only their structure with them, so that the fixture captures them once, in that pass.
@pytest.mark.serial
def test_the_runs_are_xla_runs(runs):
    # Every traced step ran the compiled step's thunks, and none of the model's convolutions or
    # matmuls ran as a TF op beside them. (What share of the op time the thunks hold is live
    # timing: with a slow input, 3% of it under load, the rest tf.data's map.)
    for name, trace in runs.items():
        thunks = _thunk_rows(trace)
        assert sorted(set(trace.ops["step"][thunks].tolist())) == list(range(len(trace.steps))), name
        ops, linked = trace.ops, set(thunks.tolist())
        outside = [trace.strings[t] for i, t in enumerate(ops["op_type"].tolist())
                   if i not in linked and ops["category"][i] == Category.OP and COMPUTE_OPS.search(trace.strings[t])]
        assert not outside, (name, outside[:10])


@pytest.mark.serial
def test_a_good_xla_port_gets_no_single_run_finding(runs):
    found = _kinds(runs["good"])
    structural = SINGLE_RUN_KINDS - set(TIMING_KINDS) | {"memory_growth"}  # bytes left behind, not time
    assert not structural & set(found), advise(runs["good"]).to_text()
    # the kinds that rest on measured time, with every threshold 3x its default
    timed = timing_findings(advise(runs["good"], thresholds=gross_thresholds()))
    assert not timed, [f.to_text() for f in timed.values()]


@pytest.mark.serial
def test_numpy_work_between_xla_steps_is_a_host_gap(runs):
    # live timing: the numpy work measured most of the step, the good port's gaps a few percent;
    # the finding is asked for at a third of its default bar
    third = Thresholds(host_gap_min_share=0.1)
    found = _kinds(runs["host"], third)
    assert "host_gaps" in found, advise(runs["host"], thresholds=third).to_text()
    evidence = found["host_gaps"].evidence
    assert len(evidence.gap_ns_per_step) == len(runs["host"].steps)
    # the thunks are op time: the good port's steps have no such gap
    assert "host_gaps" not in _kinds(runs["good"], gross_thresholds())


@pytest.mark.serial
def test_a_slow_input_pipeline_before_an_xla_step_is_input_wait(runs):
    # live timing, as above: asked for at a third of the default bar, absent at 3x it
    third = Thresholds(input_min_share=0.033, input_min_extra=0.017)
    found = _kinds(runs["input"], third)
    assert "input_wait" in found, advise(runs["input"], thresholds=third).to_text()
    assert "input_wait" not in _kinds(runs["good"], gross_thresholds())


@pytest.mark.parametrize("name", ["jax_h100_convnet_graphs", "jax_h100_mlp_nographs"])
def test_device_idle_on_an_xla_gpu_run_is_measured_on_its_kernels(corpus, name):
    """The GPU's busy time is the union of its kernels and copies, read here straight from the
    trace's device rows, and the module's host op adds nothing to it."""
    trace = tracebridge.load(corpus / "xspace" / f"{name}.xplane.pb")
    found = _kinds(trace)
    assert "device_idle" in found, advise(trace).to_text()
    evidence = found["device_idle"].evidence
    ops = trace.ops
    gpu = [i for i, d in enumerate(trace.devices) if d.name == evidence.device][0]
    rows = np.flatnonzero((ops["device"] == gpu) & np.isin(ops["category"], (Category.DEVICE, Category.MEMCPY)))
    busy = total = 0
    for step in trace.steps:
        spans = sorted((max(int(ops["start_ns"][r]), step.start_ns), min(int(ops["end_ns"][r]), step.end_ns))
                       for r in rows if ops["start_ns"][r] < step.end_ns and ops["end_ns"][r] > step.start_ns)
        covered, reach = 0, step.start_ns
        for start, end in spans:
            covered += max(0, end - max(start, reach))
            reach = max(reach, end)
        busy, total = busy + covered, total + step.duration_ns
    assert evidence.idle_share == pytest.approx(1 - busy / total, abs=1e-6)
