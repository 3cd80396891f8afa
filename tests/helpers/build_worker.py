"""Captures one small CNN in a process of its own, so that the TensorFlow build it runs
(oneDNN on or off, set by TF_ENABLE_ONEDNN_OPTS before TF starts) is the one asked for.

    TF_ENABLE_ONEDNN_OPTS=0|1 python build_worker.py tf1|tf2 OUT.json

The model is the same code in both worlds (raw ops under name scopes): a convolution with
bias and ReLU, fused batch norm with ReLU, max pooling, a convolution without bias,
average pooling, a dense layer with ReLU and logits, trained by plain SGD. Those are the
patterns Grappler and oneDNN fuse differently. TF1 runs it in a Session, TF2 as a
``tf.function`` with a GradientTape. Three steps are traced after two warm-up runs.

Prints one JSON line: whether TF reported oneDNN on (as the capture recorded it), and the
kernel types it ran.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracebridge  # noqa: E402

BATCH = 16
SHAPES = {"conv1/kernel": [3, 3, 3, 16], "conv1/bias": [16], "bn1/gamma": [16], "bn1/beta": [16],
          "conv2/kernel": [3, 3, 16, 32], "dense/kernel": [8 * 8 * 32, 64], "dense/bias": [64],
          "logits/kernel": [64, 10], "logits/bias": [10]}


def forward(x, w):
    with tf.name_scope("conv1"):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv1/kernel"], 1, "SAME"), w["conv1/bias"]))
    with tf.name_scope("bn1"):
        h, _, _ = tf.compat.v1.nn.fused_batch_norm(h, w["bn1/gamma"], w["bn1/beta"], is_training=True)
        h = tf.nn.relu(h)
    h = tf.nn.max_pool2d(h, 2, 2, "VALID", name="pool1")
    with tf.name_scope("conv2"):
        h = tf.nn.conv2d(h, w["conv2/kernel"], 1, "SAME")
    h = tf.nn.avg_pool2d(h, 2, 2, "VALID", name="pool2")
    h = tf.reshape(h, [BATCH, -1])
    with tf.name_scope("dense"):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, w["dense/kernel"]), w["dense/bias"]))
    with tf.name_scope("logits"):
        return tf.nn.bias_add(tf.matmul(h, w["logits/kernel"]), w["logits/bias"])


def loss_of(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def data():
    rng = np.random.default_rng(0)
    return rng.random((BATCH, 32, 32, 3), dtype=np.float32), rng.integers(0, 10, BATCH)


def initial(name):
    seed = list(SHAPES).index(name)
    return np.random.default_rng(seed).normal(0, 0.05, SHAPES[name]).astype(np.float32)


def tf1():
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, 32, 32, 3], name="x")
        y = v1.placeholder(tf.int64, [BATCH], name="y")
        w = {name: tf.Variable(initial(name), name=name) for name in SHAPES}
        loss = loss_of(forward(x, w), y)
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    images, labels = data()
    with v1.Session(graph=graph) as session:
        session.run(init)
        with tracebridge.trace(session, warmup=2, steps=3) as capture:
            for _ in range(5):
                session.run(train, {x: images, y: labels})
    return capture.trace


def tf2():
    w = {name: tf.Variable(initial(name), name=name) for name in SHAPES}

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(forward(x, w), y)
        for variable, grad in zip(w.values(), tape.gradient(loss, list(w.values()))):
            variable.assign_sub(0.01 * grad)
        return loss

    images, labels = (tf.constant(a) for a in data())
    traced = tracebridge.trace(train_step, warmup=2, steps=3)
    for _ in range(5):
        traced(images, labels)
    return traced.trace


def main() -> None:
    world, out = sys.argv[1], sys.argv[2]
    trace = {"tf1": tf1, "tf2": tf2}[world]()
    trace.save(out)
    kernels = sorted({o.kernel for o in trace.records()})
    print(json.dumps({"onednn": trace.metadata["onednn"], "kernels": kernels}), flush=True)


if __name__ == "__main__":
    main()
