"""``tracebridge demo``: a small real model traced in a TF1 session, written out.

It builds a two-layer MLP in a ``tf.Graph``, trains it in a ``tf.compat.v1.Session``,
traces three steps after one warm-up step, and writes to the output folder:

    tf1_timeline.json     Chrome trace (open in https://ui.perfetto.dev or chrome://tracing)
    tf1_run_metadata.pb   the traced steps as RunMetadata, for TF's own tools
    tf1_summary.txt       where the time went
"""

from __future__ import annotations

import os

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


def run_demo(out: str, *, steps: int = 3) -> None:
    import numpy as np
    import tensorflow as tf

    os.makedirs(out, exist_ok=True)
    graph, x, y, train_op, loss, init = build_mlp(tf)
    rng = np.random.default_rng(0)
    feed = {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        with SessionTrace(session, warmup=1, steps=steps) as capture:
            for _ in range(1 + steps):
                session.run([train_op, loss], feed_dict=feed)
    trace = capture.trace
    paths = {name: os.path.join(out, name) for name in
             ("tf1_timeline.json", "tf1_run_metadata.pb", "tf1_summary.txt")}
    trace.save(paths["tf1_timeline.json"], memory=True)
    trace.save(paths["tf1_run_metadata.pb"])
    summary = trace.summary(top=10).to_text()
    with open(paths["tf1_summary.txt"], "w", encoding="utf-8") as handle:
        handle.write(summary + "\n")
    print(summary)
    print()
    for path in paths.values():
        print(f"wrote {path}")
