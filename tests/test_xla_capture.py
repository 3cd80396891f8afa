"""Captures of Keras 3 ``fit`` and XLA-compiled functions (real TF 2.21 runs on this CPU):
the graph ``TraceCallback`` records, and XLA compilations found inside traced steps.
Figures are printed for the issue's closing note (``pytest -s``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracebridge
from tests.models_structure import BATCH, resnet_data, resnet_fit, resnet_tf1
from tests.test_compare import _run_tf1
from tests.test_compare_models import RESNET_LAYERS, assert_done, quality
from tracebridge.analysis.compare import compare

FIT_BATCHES = 6  # 2 warm-up batches, 3 traced, 1 after


def fit_trace(jit_compile: bool):
    """The Keras port trained by ``fit`` (one epoch of FIT_BATCHES batches) under
    TraceCallback, 3 batches traced after 2 of warm-up."""
    from tracebridge.keras import TraceCallback
    x, y = resnet_data()
    model = resnet_fit(jit_compile=jit_compile)
    callback = TraceCallback(warmup=2, steps=3)
    model.fit(np.concatenate([x] * FIT_BATCHES), np.concatenate([y] * FIT_BATCHES), batch_size=BATCH, epochs=1,
              callbacks=[callback], verbose=0, shuffle=False)
    return callback.trace


@pytest.fixture(scope="module")
def session_run(tf):
    return _run_tf1(tf, resnet_tf1(tf), resnet_data(), steps=3)


@pytest.fixture(scope="module")
def fit_run(tf):
    return fit_trace(jit_compile=False)


def test_fit_records_the_graph_that_ran(fit_run):
    graph = json.loads(fit_run.metadata["graph"])
    names = {node[0] for node in graph["nodes"]}
    # Keras runs multi_step_on_iterator, which calls one_step_on_data: the callee's nodes
    # are recorded under the call, as the trace names the ops it ran.
    convs = [name for name in fit_run.column_strings("ops", "name") if name.endswith("/convolution")]
    assert convs and all(name in names for name in convs)
    # the model's variables, by Keras's paths, reach the call through its arguments
    assert {"stem/kernel", "dense/bias"} <= {v[0] for v in graph["variables"].values()}


def test_fit_compares_with_the_session_model_by_structure(session_run, fit_run):
    result = compare(session_run, fit_run, warmup=1)
    figures = quality(result, RESNET_LAYERS)
    print(f"ResNet-style, Session vs Keras fit: {figures}")
    report = "\n" + result.to_text(top=40) + f"\n{figures}"
    assert "structure" in result.rule_shares, report
    assert_done(result, figures, report, RESNET_LAYERS)
