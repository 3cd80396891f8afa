"""``tracebridge demo``: one small real model traced both ways, written out.

The same two-layer MLP (dense ReLU layer, logits layer, softmax cross-entropy, SGD) is
trained once as TF1 code (a ``tf.Graph`` in a ``tf.compat.v1.Session``) and once as a TF2
``tf.function`` training step with a ``GradientTape``. Each traces three steps after one
warm-up step. The output folder gets, for ``tf1`` and ``tf2``:

    <run>_timeline.json     Chrome trace (open in https://ui.perfetto.dev or chrome://tracing)
    <run>_timeline.html     the standalone timeline view (any browser, no network)
    <run>_run_metadata.step-N.pb   each traced step as RunMetadata, for TF's own tools
    <run>_summary.txt       where the time went
    comparison.txt          TF1 (control) against TF2 (test): aligned ops, deltas, coverage
    comparison.html         the same as a diff view: both timelines and the sortable table
"""

from __future__ import annotations

import os

from ._files import write_bytes
from .capture.profiler import ProfileTrace
from .capture.session import SessionTrace


def build_mlp(tf, *, batch: int = 64, features: int = 32, hidden: int = 64, classes: int = 10):
    """A dense ReLU layer, a logits layer, softmax cross-entropy and plain SGD, as TF1 code."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [batch, features], name="x")
        y = v1.placeholder(tf.int32, [batch], name="y")
        w1 = tf.Variable(v1.random_normal([features, hidden], stddev=0.1, seed=1), name="dense/kernel")
        b1 = tf.Variable(tf.zeros([hidden]), name="dense/bias")
        h = tf.nn.relu(tf.matmul(x, w1) + b1, name="dense/Relu")
        w2 = tf.Variable(v1.random_normal([hidden, classes], stddev=0.1, seed=2), name="logits/kernel")
        b2 = tf.Variable(tf.zeros([classes]), name="logits/bias")
        logits = tf.add(tf.matmul(h, w2), b2, name="logits/BiasAdd")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        global_step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        init = v1.global_variables_initializer()
    return graph, x, y, train_op, loss, init


def build_mlp_tf2(tf, *, features: int = 32, hidden: int = 64, classes: int = 10):
    """The same MLP as TF2 code: variables and a ``tf.function`` training step."""
    init = tf.random.stateless_normal
    with tf.name_scope("dense"):
        w1 = tf.Variable(init([features, hidden], seed=(1, 0), stddev=0.1), name="kernel")
        b1 = tf.Variable(tf.zeros([hidden]), name="bias")
    with tf.name_scope("logits"):
        w2 = tf.Variable(init([hidden, classes], seed=(2, 0), stddev=0.1), name="kernel")
        b2 = tf.Variable(tf.zeros([classes]), name="bias")
    variables = [w1, b1, w2, b2]

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, w1) + b1, name="dense/Relu")
            logits = tf.add(tf.matmul(h, w2), b2, name="logits/BiasAdd")
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        for variable, gradient in zip(variables, tape.gradient(loss, variables)):
            variable.assign_sub(0.1 * gradient)
        return loss

    return train_step


def run_demo(out: str, *, steps: int = 3) -> None:
    import numpy as np
    import tensorflow as tf

    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    shape = {"batch": 256, "features": 128, "hidden": 256}
    features = rng.random((shape["batch"], shape["features"]), dtype=np.float32)
    labels = rng.integers(0, 10, shape["batch"]).astype(np.int32)

    graph, x, y, train_op, loss, init = build_mlp(tf, **shape)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        with SessionTrace(session, warmup=1, steps=steps) as capture:
            for _ in range(1 + steps):
                session.run([train_op, loss], feed_dict={x: features, y: labels})
    traces = {"tf1": capture.trace}

    train_step = build_mlp_tf2(tf, features=shape["features"], hidden=shape["hidden"])
    traced = ProfileTrace(train_step, warmup=1, steps=steps)
    for _ in range(1 + steps):
        traced(tf.constant(features), tf.constant(labels))
    traces["tf2"] = traced.trace

    written = []
    for run, trace in traces.items():
        paths = {kind: os.path.join(out, f"{run}_{kind}") for kind in
                 ("timeline.json", "timeline.html", "run_metadata.pb", "summary.txt")}
        trace.save(paths["timeline.json"], memory=True)
        trace.to_html(paths["timeline.html"], title=f"tracebridge demo: {run}")
        step_files = trace.save(paths.pop("run_metadata.pb"), split_steps=True)
        summary = trace.summary(top=10).to_text()
        write_bytes(paths["summary.txt"], (summary + "\n").encode())
        print(f"== {run}: {trace}")
        print(summary)
        print()
        written += [*paths.values(), *step_files]
    from .analysis.compare import compare
    from .analysis.findings import comparison_findings
    from .writers.compare_html import write_compare_html
    comparison = compare(traces["tf1"], traces["tf2"], find=comparison_findings)
    text = comparison.to_text(top=20)
    paths = [os.path.join(out, "comparison.txt"), os.path.join(out, "comparison.html")]
    write_bytes(paths[0], (text + "\n").encode())
    write_compare_html(comparison, paths[1], title="tracebridge demo: TF1 session vs TF2 tf.function")
    print("== comparison: TF1 (control) vs TF2 (test)")
    print(text)
    print()
    for path in written + paths:
        print(f"wrote {path}")
