"""ResNet-50's shape under XLA (tests/models_resnet50.py: a max-pooling stem and bottleneck
blocks with projection shortcuts; one block a stage here, the shape that matters, at a
capture this shared 2-core machine can afford): a TF1 Session against its Keras port in a
``tf.function(jit_compile=True)`` and in ``fit(jit_compile=True)``. XLA rewrites every
filter gradient into a convolution or dot without metadata that feeds the optimizer; the
recorded TF graph places each on its ``Conv2DBackpropFilter`` (readers/hlo_made.py), so the
Session's filter gradients pair with their own layer's. Figures (coverage, share of matched
time paired within one unit) are printed for the closing note; they weigh live timing and
are not asserted."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models_resnet50 import BATCH, data, resnet50_fit, resnet50_tf1, resnet50_tf2, unit_of, units
from tests.test_compare import _run_tf1, _run_tf2
from tracebridge import compare
from tracebridge.analysis.common.xla import xla_instructions, xla_ops
from tracebridge.model.hlo import modules_of
from tracebridge.readers.hlo import hlo_op_map
from tracebridge.readers.hlo_made import FrameworkGraph

pytestmark = pytest.mark.slow
BLOCKS = (1, 1, 1, 1)
FILTER_GRADIENT = "Conv2DBackpropFilter"


@pytest.fixture(scope="module")
def session_run(tf):
    return _run_tf1(tf, resnet50_tf1(tf, BLOCKS), data(), steps=3)


@pytest.fixture(scope="module")
def jit_run(tf):
    return _run_tf2(tf, resnet50_tf2(tf, jit_compile=True, blocks=BLOCKS), data(), steps=3)


@pytest.fixture(scope="module")
def fit_jit_run(tf):
    from tracebridge.keras import TraceCallback
    x, y = data()
    callback = TraceCallback(warmup=2, steps=3)
    resnet50_fit(jit_compile=True, blocks=BLOCKS).fit(np.concatenate([x] * 6), np.concatenate([y] * 6),
                                                        batch_size=BATCH, epochs=1, callbacks=[callback],
                                                        verbose=0, shuffle=False)
    return callback.trace


def row_units(names, computed) -> set[str]:
    """The units a row's ops belong to: an XLA row by the op it is named or made for."""
    return {unit_of(computed[n][0] if n in computed else n) for n in names} - {None}


def figures(result, computed) -> dict[str, float]:
    matched = [r for r in result.rows if r.names.control and r.names.test and r.rule != "optimizer"]
    total = sum(r.median_ns.control + r.median_ns.test for r in matched) or 1
    right = sum(r.median_ns.control + r.median_ns.test for r in matched
                if row_units(r.names.control, computed) == row_units(r.names.test, computed))
    return {"coverage_control": result.coverage.control, "coverage_test": result.coverage.test,
            "right": right / total}


def made_instructions(run) -> list:
    """The instructions the run's XLA events ran that XLA made without metadata and that do
    a layer's arithmetic (a convolution or a dot), read with the graph the capture recorded."""
    hlo = hlo_op_map(modules_of(run.metadata), FrameworkGraph.parse(run.metadata["graph"]))
    ran = {name for names in xla_instructions(run).values() for name in names}
    rows, values = run.event_stat("hlo_module")  # (the profile lists every module the process compiled)
    modules = {id(m): m for name in set(values.tolist()) for m in hlo.module(run.strings[name])}
    return [op for module in modules.values() for name, op in module.ops.items()
            if name in ran and not op.op_name and op.opcode in ("convolution", "dot")]


@pytest.mark.parametrize("port", ["jit_run", "fit_jit_run"])
def test_filter_gradients_xla_rewrote_pair_with_their_layers(request, session_run, port):
    run = request.getfixturevalue(port)
    result = compare(session_run, run, warmup=1)
    computed = xla_ops(run)
    print(f"ResNet-50 shape, Session vs {port}: {figures(result, computed)}")
    report = "\n" + result.to_text(top=40)
    # every convolution XLA made without metadata computes one layer's filter gradient, each
    # its own: the graph's Conv2DBackpropFilter between its operands' ops and its users'
    made = made_instructions(run)
    assert made
    for op in made:
        assert len(op.tf_ops) == 1 and op.tf_ops[0][1] == FILTER_GRADIENT, (op.name, op.tf_ops)
    layers = [unit_of(op.tf_ops[0][0]) for op in made]
    convs = [u for u in units(BLOCKS) if u not in ("pool1", "predictions")]
    assert set(layers) <= set(convs) and len(set(layers)) == len(set(op.tf_ops[0][0] for op in made))
    # the Session's filter gradients all pair, each with XLA rows of its own unit
    gradients = [r for r in result.rows if any(n.endswith("/" + FILTER_GRADIENT) for n in r.names.control)]
    assert len(gradients) >= len(convs) - 1, report  # (the stem's is one of them; its input needs none)
    for row in gradients:
        assert row.names.test, (row.key, report)
        assert row_units(row.names.control, computed) == row_units(row.names.test, computed), (row.key, report)
    # an XLA row of one TF op (an instruction named for the op, or made for it) stands in one unit
    for name, ops in computed.items():
        if len(ops) == 1:
            assert len(row_units([name], computed)) <= 1, name
