"""Captures one run of issue 33's corpus pairs, traced from its first step (no warm-up), in
a process of its own, and writes TF's own file: a TF2 run's raw XSpace (event stats kept),
a TF1 session's steps as tracebridge writes them (``.xplane.pb``).

    python breakdown_worker.py MODEL API OUT.xplane.pb [STEPS]

MODEL: ``mlp`` (64-128-128-10, Adam, batch 32: a fraction of a millisecond of ops, where
the framework's overhead dominates a TF2 step) or ``cnn`` (two 3x3 convolutions on 32x32x3
images, batch 32: ops dominate). API: ``tf1`` (a ``tf.compat.v1.Session`` fed with
``feed_dict``), ``fit`` (Keras 3 ``fit``, traced with ``tracebridge.keras.TraceCallback``),
``fit_jit`` (the same with ``jit_compile=True``), ``tf_function`` (a custom loop: a
``tf.function`` step on a prefetched ``tf.data`` iterator, each call one ``t.step()``).
Prints one JSON line: the steps traced.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

BATCH = 32
STEPS = 8


def data(model: str, steps: int):
    rng = np.random.default_rng(0)
    shape = (64,) if model == "mlp" else (32, 32, 3)
    x = rng.random((BATCH * steps,) + shape, dtype=np.float32)
    return x, rng.integers(0, 10, BATCH * steps).astype(np.int32)


def keras_model(model: str):
    import keras
    if model == "mlp":
        return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu", name="dense"),
                                 keras.layers.Dense(128, activation="relu", name="dense_1"),
                                 keras.layers.Dense(10, name="logits")])
    return keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, activation="relu", name="conv"),
                             keras.layers.MaxPooling2D(name="pool"),
                             keras.layers.Conv2D(64, 3, activation="relu", name="conv_1"),
                             keras.layers.MaxPooling2D(name="pool_1"), keras.layers.Flatten(name="flatten"),
                             keras.layers.Dense(10, name="logits")])


def tf1_run(model: str, steps: int):
    """The model as TF1 code, traced from the session's first training run."""
    import tensorflow as tf

    import tracebridge
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        init = v1.glorot_uniform_initializer(seed=1)

        def dense(h, n, name, relu=True):
            with tf.name_scope(name):
                w = tf.Variable(init([h.shape[-1], n]), name="kernel")
                z = tf.nn.bias_add(tf.matmul(h, w), tf.Variable(tf.zeros([n]), name="bias"))
                return tf.nn.relu(z) if relu else z

        def conv(h, n, name):
            with tf.name_scope(name):
                k = tf.Variable(init([3, 3, h.shape[-1], n]), name="kernel")
                b = tf.Variable(tf.zeros([n]), name="bias")
                return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, k, 1, "VALID"), b))

        if model == "mlp":
            x = v1.placeholder(tf.float32, [BATCH, 64], name="x")
            logits = dense(dense(dense(x, 128, "dense"), 128, "dense_1"), 10, "logits", relu=False)
        else:
            x = v1.placeholder(tf.float32, [BATCH, 32, 32, 3], name="x")
            h = tf.nn.max_pool2d(conv(x, 32, "conv"), 2, 2, "VALID", name="pool")
            h = tf.nn.max_pool2d(conv(h, 64, "conv_1"), 2, 2, "VALID", name="pool_1")
            logits = dense(tf.reshape(h, [BATCH, -1], name="flatten"), 10, "logits", relu=False)
        y = v1.placeholder(tf.int32, [BATCH], name="y")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = v1.train.AdamOptimizer(1e-3).minimize(loss)
        initialize = v1.global_variables_initializer()
    xs, ys = data(model, steps)
    with v1.Session(graph=graph) as session:
        session.run(initialize)
        with tracebridge.trace(session, steps=steps) as capture:
            for i in range(steps):
                session.run(train, {x: xs[i * BATCH:(i + 1) * BATCH], y: ys[i * BATCH:(i + 1) * BATCH]})
    return capture.trace, None


def fit_run(model: str, steps: int, jit: bool, logdir: str):
    import keras

    from tracebridge.keras import TraceCallback
    net = keras_model(model)
    net.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    xs, ys = data(model, steps)
    callback = TraceCallback(steps=steps, logdir=logdir)
    net.fit(xs, ys, batch_size=BATCH, epochs=1, verbose=0, shuffle=False, callbacks=[callback])
    return callback.trace, logdir


def tf_function_run(model: str, steps: int, logdir: str):
    import keras
    import tensorflow as tf

    import tracebridge
    net = keras_model(model)
    optimizer = keras.optimizers.Adam(1e-3)
    loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(y, net(x, training=True))
        gradients = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(gradients, net.trainable_variables))
        return loss

    xs, ys = data(model, steps)
    batches = iter(tf.data.Dataset.from_tensor_slices((xs, ys)).batch(BATCH, drop_remainder=True).prefetch(2))
    with tracebridge.trace(steps=steps, logdir=logdir) as capture:
        for _ in range(steps):
            with capture.step():
                train_step(*next(batches))
    return capture.trace, logdir


def main() -> None:
    model, api, out = sys.argv[1:4]
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else STEPS
    logdir = tempfile.mkdtemp(prefix="breakdown-")
    try:
        if api == "tf1":
            trace, _ = tf1_run(model, steps)
        elif api in ("fit", "fit_jit"):
            trace, _ = fit_run(model, steps, api == "fit_jit", logdir)
        elif api == "tf_function":
            trace, _ = tf_function_run(model, steps, logdir)
        else:
            raise SystemExit(f"unknown API {api!r}")
        raw = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
        if api == "tf1":
            trace.save(out)
        else:  # TF's own file, every event stat kept
            if len(raw) != 1:
                raise SystemExit(f"expected one XSpace in the logdir, found {raw}")
            shutil.copyfile(raw[0], out)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    print(json.dumps({"steps": len(trace.steps)}), flush=True)


if __name__ == "__main__":
    main()
