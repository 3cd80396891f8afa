"""The small CNN every "Performance after porting" example trains, as a TF1 session and as
TF2 code, and how each example reports what tracebridge finds.

Each example folder holds ``before.py`` (the port with one mistake) and ``after.py`` (the
fix). Both print tracebridge's findings and end with one JSON line: the finding kinds.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracebridge  # noqa: E402

BATCH = 16
SHAPES = {"conv1/kernel": [3, 3, 3, 16], "conv1/bias": [16], "conv2/kernel": [3, 3, 16, 32],
          "conv2/bias": [32], "dense/kernel": [8 * 8 * 32, 256], "dense/bias": [256],
          "logits/kernel": [256, 10], "logits/bias": [10]}


def forward(x, w):
    with tf.name_scope("conv1"):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv1/kernel"], 1, "SAME"), w["conv1/bias"]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID", name="pool1")
    with tf.name_scope("conv2"):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w["conv2/kernel"], 1, "SAME"), w["conv2/bias"]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID", name="pool2")
    h = tf.reshape(h, [BATCH, -1])
    with tf.name_scope("dense"):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, w["dense/kernel"]), w["dense/bias"]))
    with tf.name_scope("logits"):
        return tf.nn.bias_add(tf.matmul(h, w["logits/kernel"]), w["logits/bias"])


def loss_of(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def batch(dtype=np.float32):
    rng = np.random.default_rng(0)
    return rng.random((BATCH, 32, 32, 3)).astype(dtype), rng.integers(0, 10, BATCH)


def augment(x):
    """Numpy preprocessing of a batch (a blur by FFT, 40 times): about half a training step."""
    for _ in range(40):
        x = np.fft.irfft2(np.fft.rfft2(x, axes=(1, 2)), s=x.shape[1:3], axes=(1, 2)).astype(x.dtype)
    return x


def preprocess(x, y):
    """A tf.data map function that runs :func:`augment` (Python, through numpy_function)."""
    return tf.ensure_shape(tf.numpy_function(augment, [x], tf.float32), [BATCH, 32, 32, 3]), y


def initial(name, dtype=np.float32):
    return np.random.default_rng(list(SHAPES).index(name)).normal(0, 0.05, SHAPES[name]).astype(dtype)


def variables(dtype=np.float32) -> dict:
    return {name: tf.Variable(initial(name, dtype), name=name) for name in SHAPES}


def train_step(w, x, y, lr=0.01):
    """One SGD step of the model: the function a TF2 port wraps in tf.function."""
    with tf.GradientTape() as tape:
        loss = loss_of(forward(x, w), y)
    for variable, grad in zip(w.values(), tape.gradient(loss, list(w.values()))):
        variable.assign_sub(lr * grad)
    return loss


def dense_step(w, x, y, weights=None, lr=0.01):
    """One SGD step of the model's dense layers on the flattened, pooled image, for any
    batch size (the xla_compile example feeds several); ``weights`` per example, if any."""
    with tf.GradientTape() as tape:
        h = tf.reshape(tf.nn.avg_pool2d(x, 4, 4, "VALID"), [-1, 8 * 8 * 3])
        h = tf.nn.relu(tf.matmul(h, w["dense/kernel"][:8 * 8 * 3]) + w["dense/bias"])
        logits = tf.matmul(h, w["logits/kernel"]) + w["logits/bias"]
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.reduce_mean(losses) if weights is None else tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
    names = ["dense/kernel", "dense/bias", "logits/kernel", "logits/bias"]
    for name, grad in zip(names, tape.gradient(loss, [w[n] for n in names])):
        w[name].assign_sub(lr * grad)
    return loss


def tf1_session(remapping: bool = True):
    """The TF1 original: a tf.Graph in a Session; returns the session, its training op and
    the feed of one batch."""
    from tensorflow.core.protobuf import rewriter_config_pb2
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, 32, 32, 3])
        y = v1.placeholder(tf.int64, [BATCH])
        w = variables()
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss_of(forward(x, w), y))
        init = v1.global_variables_initializer()
    config = v1.ConfigProto()
    if not remapping:  # a legacy config that switched Grappler's fusions off
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    session = v1.Session(graph=graph, config=config)
    session.run(init)
    images, labels = batch()
    return session, train, {x: images, y: labels}


def tf1_run(remapping: bool = True, steps: int = 5):
    """The TF1 original, ``steps`` traced after 2 warm-up runs."""
    session, train, feed = tf1_session(remapping)
    with session, tracebridge.trace(session, warmup=2, steps=steps) as capture:
        for _ in range(2 + steps):
            session.run(train, feed)
    return capture.trace


def tf2_run(step, steps: int = 5, **options) -> "tracebridge.Trace":
    """``step(index)`` run ``2 + steps`` times, the last ``steps`` traced; each call is one
    step. ``options``: more options of ``tracebridge.trace`` (``python_tracer_level=1``)."""
    with tracebridge.trace(warmup=2, steps=steps, **options) as capture:
        for index in range(2 + steps):
            with capture.step():
                step(index)
    return capture.trace


def fn_run(step, *args, steps: int = 5) -> "tracebridge.Trace":
    """``step(*args)`` called once (tracing it, and compiling it with XLA), then ``steps``
    times under ``tracebridge.trace(step)``, which records the graph that ran and, for a
    ``jit_compile`` function, its HLO."""
    step(*args)
    traced = tracebridge.trace(step)
    for _ in range(steps):
        traced(*args)
    traced.stop()
    return traced.trace


def small_mlp():
    """A small Keras MLP (64-128-128-10): a fraction of a millisecond of ops a step."""
    import keras
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                             keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])


def fit_run(model, steps_per_execution: int = 1, steps: int = 5, batch_size: int = 32) -> "tracebridge.Trace":
    """``model.fit`` on random data for ``2 + steps`` calls into the framework (each
    ``steps_per_execution`` batches), the last ``steps`` traced (tracebridge.keras.TraceCallback:
    each call is one step)."""
    from tracebridge.keras import TraceCallback
    rng = np.random.default_rng(0)
    count = (2 + steps) * steps_per_execution * batch_size
    x, y = rng.random((count, 64), dtype=np.float32), rng.integers(0, 10, count)
    callback = TraceCallback(warmup=2, steps=steps)
    model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    return callback.trace


def report(trace, control=None) -> None:
    """Print the findings (against ``control`` when given), then their kinds as JSON."""
    findings = tracebridge.compare(control, trace).findings if control is not None else tracebridge.advise(trace)
    print(findings.to_text())
    print(json.dumps({"kinds": [f.kind for f in findings]}))
    sys.stdout.flush()
