"""Comparing runs: a trace with itself, TF1 against TF2 for an MLP and a CNN, batch sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracebridge
from tracebridge.analysis.compare import RULE_CONFIDENCE, PerSide, TimeBasis
from tracebridge import compare
from tracebridge.errors import OptionError
from tests.conftest import run_cli, unmatched_compute
from tests.test_model import small_trace


def test_a_trace_against_itself():
    trace = small_trace()
    result = compare(trace, trace)
    assert result.coverage == PerSide(1.0, 1.0)
    assert all(r.change == "=" and r.delta_ns == 0 for r in result.rows)
    assert {r.rule for r in result.rows} == {"exact"}
    assert result.step_pairs == [(5, 5), (6, 6)]
    assert {g.key for g in result.groups.device} == {d.name for d in trace.devices}
    assert all(g.delta_ns == 0 for g in result.groups.device + result.groups.op_type)


def test_self_time_subtracts_nested_rows():
    from tracebridge.analysis.compare import self_times
    from tracebridge.model.builder import TraceBuilder
    b = TraceBuilder({})
    d = b.device("/host:CPU")
    lane = b.lane(d, "python")
    b.add_op(name="EagerExecute", op_type="EagerExecute", start_ns=0, end_ns=100, device=d, lane=lane)
    b.add_op(name="MatMul", op_type="MatMul", start_ns=10, end_ns=40, device=d, lane=lane)
    b.add_op(name="inner", op_type="X", start_ns=15, end_ns=20, device=d, lane=lane)
    b.add_op(name="Relu", op_type="Relu", start_ns=50, end_ns=70, device=d, lane=lane)
    assert self_times(b.build()).tolist() == [50, 25, 5, 20]


def _mlp_tf1(tf, batch, features, hidden):
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [batch, features], name="x")
        y = v1.placeholder(tf.int32, [batch], name="y")
        w1 = tf.Variable(v1.random_normal([features, hidden], seed=1), name="dense/kernel")
        b1 = tf.Variable(tf.zeros([hidden]), name="dense/bias")
        w2 = tf.Variable(v1.random_normal([hidden, 10], seed=2), name="logits/kernel")
        h = tf.nn.relu(tf.matmul(x, w1) + b1, name="dense/Relu")
        logits = tf.matmul(h, w2, name="logits/MatMul")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    return graph, x, y, train, init


def _cnn_tf1(tf, batch):
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [batch, 32, 32, 3], name="x")
        y = v1.placeholder(tf.int32, [batch], name="y")
        k = tf.Variable(v1.random_normal([3, 3, 3, 16], seed=1), name="conv/kernel")
        w = tf.Variable(v1.random_normal([16 * 16 * 16, 10], seed=2), name="dense/kernel")
        c = tf.nn.relu(tf.nn.conv2d(x, k, 1, "SAME"), name="conv/Relu")
        p = tf.nn.max_pool2d(c, 2, 2, "VALID", name="pool/MaxPool")
        logits = tf.matmul(tf.reshape(p, [batch, -1]), w, name="dense/MatMul")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    return graph, x, y, train, init


def _run_tf1(tf, built, feed_values, steps=4):
    graph, x, y, train, init = built
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        feed = {x: feed_values[0], y: feed_values[1]}
        session.run(train, feed)
        with tracebridge.trace(session, steps=steps) as capture:
            for _ in range(steps):
                session.run(train, feed)
    return capture.trace


def _run_tf2(tf, step_fn, feed_values, steps=4):
    x, y = tf.constant(feed_values[0]), tf.constant(feed_values[1])
    step_fn(x, y)
    traced = tracebridge.trace(step_fn)
    for _ in range(steps):
        traced(x, y)
    traced.stop()
    return traced.trace


def _mlp_tf2(tf, features, hidden):
    w1 = tf.Variable(tf.random.normal([features, hidden], seed=1), name="dense/kernel")
    b1 = tf.Variable(tf.zeros([hidden]), name="dense/bias")
    w2 = tf.Variable(tf.random.normal([hidden, 10], seed=2), name="logits/kernel")
    variables = [w1, b1, w2]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, w1) + b1, name="dense/Relu")
            logits = tf.matmul(h, w2, name="logits/MatMul")
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
                                  name="loss")
        for v, g in zip(variables, tape.gradient(loss, variables)):
            v.assign_sub(0.01 * g)
        return loss
    return step


def _cnn_tf2(tf, batch):
    k = tf.Variable(tf.random.normal([3, 3, 3, 16], seed=1), name="conv/kernel")
    w = tf.Variable(tf.random.normal([16 * 16 * 16, 10], seed=2), name="dense/kernel")

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            c = tf.nn.relu(tf.nn.conv2d(x, k, 1, "SAME"), name="conv/Relu")
            p = tf.nn.max_pool2d(c, 2, 2, "VALID", name="pool/MaxPool")
            logits = tf.matmul(tf.reshape(p, [batch, -1]), w, name="dense/MatMul")
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
                                  name="loss")
        for v, g in zip([k, w], tape.gradient(loss, [k, w])):
            v.assign_sub(0.01 * g)
        return loss
    return step


def _report(result):
    return "\n" + result.to_text(top=60)


def test_mlp_tf1_against_tf2(tf):
    rng = np.random.default_rng(0)
    values = (rng.random((256, 128), dtype=np.float32), rng.integers(0, 10, 256).astype(np.int32))
    tf1 = _run_tf1(tf, _mlp_tf1(tf, 256, 128, 256), values)
    tf2 = _run_tf2(tf, _mlp_tf2(tf, 128, 256), values)
    result = compare(tf1, tf2, warmup=1)
    # The bar was >= 90% of op time matched, a share of live op time on a shared 2-core machine:
    # what carries the time (every matmul, forward and gradient) is matched, by structure.
    assert not unmatched_compute(result), _report(result)
    rules = {r.rule for r in result.rows}
    # gradients pair by the recorded graphs' structure (names alone: the gradient rule)
    assert {"exact", "optimizer"} <= rules and rules & {"gradient", "structure"}, _report(result)
    relu = next(r for r in result.rows if r.key == "dense/Relu")
    assert relu.rule == "exact" and relu.count.control == relu.count.test == 3
    # Per rule shares add up to the coverage; confidence falls from names to position.
    for side, covered in result.coverage.items():
        assert sum(getattr(share, side) for share in result.rule_shares.values()) == pytest.approx(covered)
    assert "matched by rule" in result.to_text()
    for row in result.rows:
        if row.names.control and row.names.test:
            assert 0 < row.confidence <= RULE_CONFIDENCE[row.rule]
            # keys are the real names: one when they agree, both when they differ
            if len(row.names.control) == len(row.names.test) == 1 and row.rule != "fusion":
                c, t = row.names.control[0], row.names.test[0]
                assert row.key == (c if c == t else f"{c} ~ {t}")
        else:
            assert row.confidence == 0 and row.key in row.names.control + row.names.test
    for side, rows in result.unmatched.items():  # every unmatched op is listed with its time
        for row in rows:
            assert getattr(row.total_ns, side) >= 0 and row.rule == "unmatched"
    print(f"MLP coverage: control {result.coverage.control:.1%}, test {result.coverage.test:.1%}")


def test_cnn_tf1_against_tf2(tf):
    rng = np.random.default_rng(1)
    values = (rng.random((32, 32, 32, 3), dtype=np.float32), rng.integers(0, 10, 32).astype(np.int32))
    tf1 = _run_tf1(tf, _cnn_tf1(tf, 32), values)
    tf2 = _run_tf2(tf, _cnn_tf2(tf, 32), values)
    result = compare(tf1, tf2, warmup=1)
    assert not unmatched_compute(result), _report(result)  # (by structure, as above)
    types = {r.op_type for r in result.rows if r.names.control and r.names.test}
    assert any("Conv2D" in t for t in types) and any("MaxPool" in t for t in types), _report(result)
    print(f"CNN coverage: control {result.coverage.control:.1%}, test {result.coverage.test:.1%}")


@pytest.mark.serial  # live timing, alone: 32x the rows make the ReLU more than 2x slower
def test_batch_size_growth_shows(tf):
    rng = np.random.default_rng(2)
    small = (rng.random((32, 128), dtype=np.float32), rng.integers(0, 10, 32).astype(np.int32))
    large = (rng.random((1024, 128), dtype=np.float32), rng.integers(0, 10, 1024).astype(np.int32))
    step = _mlp_tf2(tf, 128, 256)
    result = compare(_run_tf2(tf, step, small), _run_tf2(tf, _mlp_tf2(tf, 128, 256), large), warmup=1)
    relu = next(r for r in result.rows if r.key == "dense/Relu")
    assert relu.change == "+" and relu.ratio > 2, _report(result)


def test_user_rules_and_cli(tmp_path):
    control = small_trace()
    control.save(tmp_path / "a.json")
    from tracebridge.model.builder import TraceBuilder
    b = TraceBuilder({"source_format": "test"})
    device = b.device("/job:worker/replica:0/task:0/device:CPU:0")
    step = b.step(5)
    b.add_op(name="model/a_renamed", op_type="MatMul", start_ns=0, end_ns=400, device=device, step=step)
    b.build().save(tmp_path / "b.json")
    result = tracebridge.compare(tmp_path / "a.json", tmp_path / "b.json", rules=[r"^model/(\w+)_renamed$=\1"])
    assert any(r.rule == "user" and r.key == "a ~ model/a_renamed" for r in result.rows)
    out = run_cli("compare", tmp_path / "a.json", tmp_path / "b.json", "--json")
    data = json.loads(out.stdout)
    assert set(data["coverage"]) == {"control", "test"} and data["rows"] and "steps" in data
    assert run_cli("compare", tmp_path / "a.json", tmp_path / "b.json", "--csv").stdout.startswith("key,")
    bad = run_cli("compare", tmp_path / "a.json", tmp_path / "b.json", "--rule", "([=x")
    assert bad.returncode == 2 and "bad regular expression" in bad.stderr


def test_noise_ns_decides_what_is_noise(corpus):
    """``compare(noise_ns=...)`` is the floor below which a row's change is noise, whatever
    its share: two real TF1 timelines of the corpus (a CPU matmul run and an MLP step) share
    ops whose medians moved by a few to tens of microseconds."""
    control = tracebridge.load(corpus / "chrome" / "ikhlestov_cpu_timeline_01.json")
    test = tracebridge.load(corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json")
    changed = {}
    for noise_ns in (0, 2_000, 20_000):
        result = compare(control, test, noise_ns=noise_ns)
        assert result.noise_ns == noise_ns
        matched = [r for r in result.rows if r.names.control and r.names.test]
        for row in matched:  # changed: beyond both the threshold's share and the noise floor
            beyond = abs(row.delta_ns) > max(result.threshold * row.median_ns.control, noise_ns)
            assert (row.change != "=") == beyond, row
        changed[noise_ns] = sum(r.change != "=" for r in matched)
    assert changed[0] > changed[2_000] > changed[20_000], changed


def test_time_option_is_typed(corpus):
    """``time`` takes a :class:`TimeBasis` or its text; anything else is an OptionError, and
    the comparison keeps the time it resolved ``auto`` to."""
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json")
    assert compare(trace, trace, time="auto").time is TimeBasis.DEVICE
    assert compare(trace, trace, time=TimeBasis.HOST).time is TimeBasis.HOST
    assert compare(trace, trace, time="host").to_dict()["time"] == "host"
    with pytest.raises(OptionError, match="time='fast'"):
        compare(trace, trace, time="fast")
