"""Real TF 2.21 captures with the problems ``tracebridge doctor`` looks for, made as users make
them (tests/test_doctor.py runs this in a subprocess, once per mode).

    python doctor_captures.py OUT plain   # TF1 runs without/with trace levels; TF2 profiles:
                                          # no step markers, eager ops, an empty window, Keras fit
    python doctor_captures.py OUT bfc     # a healthy TF2 profile: step markers, memory events
                                          # (TF_CPU_ALLOCATOR_USE_BFC=true set before TF starts)
    python doctor_captures.py OUT KIND    # one run captured with tracebridge, TF's defaults
                                          # (tests/test_doctor_healthy.py): KIND one of HEALTHY,
                                          # or of OTHERS (first fits, a function retraced)

Such a run is saved as what its capture wrote (TF1: a RunMetadata per step,
``KIND.step-N.pb``; TF2: the profile logdir, ``KIND/session-1``, kept with ``logdir=``) and as
tracebridge's Chrome JSON, ``KIND.json``. Small models; the healthy ones have one warm-up step
and three traced steps.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def tf1_runs(tf, out: str) -> None:
    import numpy as np
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [8, 4], name="x")
        w = tf.Variable(tf.ones([4, 4]), name="w")
        y = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)), name="y")
        init = v1.global_variables_initializer()
    session = v1.Session(graph=graph)
    session.run(init)
    feed = {x: np.ones((8, 4), np.float32)}
    runs = {
        "notrace.pb": None,                                               # run_metadata without options
        "partition_only.pb": v1.RunOptions(output_partition_graphs=True),  # options, but no trace_level
        "software.pb": v1.RunOptions(trace_level=v1.RunOptions.SOFTWARE_TRACE),
        "full.pb": v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
    }
    for name, options in runs.items():
        metadata = v1.RunMetadata()
        session.run(y, feed, options=options, run_metadata=metadata)
        with open(os.path.join(out, name), "wb") as handle:
            handle.write(metadata.SerializeToString())
    session.close()


def tf2_profiles(tf, out: str) -> None:
    @tf.function
    def step(a):
        return tf.reduce_sum(tf.nn.relu(tf.matmul(a, a)))

    a = tf.ones([32, 32])
    step(a)  # traced before any profile: no tracing inside the windows
    profiler = tf.profiler.experimental
    profiler.start(os.path.join(out, "nosteps"))  # a tf.function loop, no step markers
    for _ in range(3):
        step(a)
    profiler.stop()
    profiler.start(os.path.join(out, "eager"))    # step markers, ops run eagerly
    for number in range(3):
        with profiler.Trace("train", step_num=number, _r=1):
            tf.reduce_sum(tf.nn.relu(tf.matmul(a, a)))
    profiler.stop()
    profiler.start(os.path.join(out, "window"))   # stopped before the steps ran
    time.sleep(0.1)
    profiler.stop()
    for number in range(3):
        with profiler.Trace("train", step_num=number, _r=1):
            step(a)


def keras_fit(tf, out: str) -> None:
    import keras
    import numpy as np
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).random((64, 8), dtype=np.float32)
    y = np.random.default_rng(1).random((64, 1), dtype=np.float32)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    tf.profiler.experimental.start(os.path.join(out, "keras_fit"))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


def healthy(tf, out: str) -> None:
    @tf.function
    def step(a):
        return tf.reduce_sum(tf.nn.relu(tf.matmul(a, a)))

    a = tf.ones([32, 32])
    step(a)
    tf.profiler.experimental.start(os.path.join(out, "healthy"))
    for number in range(4):
        with tf.profiler.experimental.Trace("train", step_num=number, _r=1):
            step(a)
    tf.profiler.experimental.stop()


# --- healthy runs captured with tracebridge, as the README shows ---------------------------------
def tf1_session(tf, out: str, kind: str):
    import numpy as np

    import tracebridge
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [16, 8], name="x")
        w = tf.Variable(tf.ones([8, 4]), name="w")
        loss = tf.reduce_mean(tf.square(tf.nn.relu(tf.matmul(x, w))), name="loss")
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    session = v1.Session(graph=graph)
    session.run(init)
    feed = {x: np.ones((16, 8), np.float32)}
    with tracebridge.trace(session, warmup=1, steps=3) as capture:
        for _ in range(4):
            session.run(train_op, feed)
    capture.trace.save(os.path.join(out, f"{kind}.pb"), split_steps=True)  # TF1's own form
    session.close()
    return capture.trace


def _tf2_model(tf, jit_compile: bool):
    """A tf.data pipeline and a tf.function training step on it."""
    x = tf.random.stateless_uniform([64, 8], seed=(1, 2))
    dataset = tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1))).batch(16).repeat().prefetch(2)
    w = tf.Variable(tf.ones([8, 1]))

    @tf.function(jit_compile=jit_compile)
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(features, w)[:, 0] - labels))
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss
    return iter(dataset), train_step


def tf2_block(tf, out: str, kind: str):
    """A with-block that marks each step: the batch is taken inside it (``next(iterator)``
    runs tf.data's IteratorGetNext eagerly), as a training loop does."""
    import tracebridge
    iterator, train_step = _tf2_model(tf, jit_compile=False)
    with tracebridge.trace(warmup=1, steps=3, logdir=os.path.join(out, kind)) as capture:
        for _ in range(4):
            with capture.step():
                train_step(*next(iterator))
    return capture.trace


def tf2_function(tf, out: str, kind: str):
    """A traced function compiled with XLA (``jit_compile=True``)."""
    import tracebridge
    iterator, train_step = _tf2_model(tf, jit_compile=True)
    traced = tracebridge.trace(train_step, warmup=1, steps=3, logdir=os.path.join(out, kind))
    for _ in range(4):
        traced(*next(iterator))
    traced.stop()
    return traced.trace


def _keras_model(jit_compile: bool):
    import keras
    import numpy as np
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    x = np.random.default_rng(0).random((64, 8), dtype=np.float32)
    y = np.random.default_rng(1).random((64, 1), dtype=np.float32)
    return model, x, y


def keras_callback(tf, out: str, kind: str):
    """Keras 3 fit with TraceCallback (4 batches: 1 warm-up, 3 traced)."""
    from tracebridge.keras import TraceCallback
    model, x, y = _keras_model(jit_compile=kind == "keras_xla")
    callback = TraceCallback(modes=("train",), warmup=1, steps=3, logdir=os.path.join(out, kind))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[callback])
    return callback.trace


def keras_first_fit(tf, out: str, kind: str):
    """A with-block around a model's first fit: Keras traces its step function in it (and,
    with validation data, its test function, a tf.function of the same Python name)."""
    import tracebridge
    model, x, y = _keras_model(jit_compile=False)
    validation = {"validation_data": (x[:32], y[:32])} if kind == "validation" else {}
    with tracebridge.trace(logdir=os.path.join(out, kind)) as capture:
        model.fit(x, y, batch_size=16, epochs=2 if validation else 1, verbose=0, **validation)
    return capture.trace


def retraced(tf, out: str, kind: str):
    """Not healthy: a tf.function called with a new Python float each step (traced anew on
    every call), first called inside the capture."""
    import tracebridge
    iterator, _ = _tf2_model(tf, jit_compile=False)
    w = tf.Variable(tf.ones([8, 1]))

    @tf.function
    def train_on(features, labels, rate):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(features, w)[:, 0] - labels))
        w.assign_sub(rate * tape.gradient(loss, w))
        return loss
    with tracebridge.trace(logdir=os.path.join(out, kind)) as capture:
        for step in range(4):
            with capture.step():
                train_on(*next(iterator), 0.01 / (step + 1))
    return capture.trace


HEALTHY = {"tf1": tf1_session, "tf2": tf2_block, "tf2_xla": tf2_function, "keras": keras_callback,
           "keras_xla": keras_callback}
OTHERS = {"first_fit": keras_first_fit, "validation": keras_first_fit, "retrace": retraced}


def main(out: str, mode: str) -> None:
    if mode == "bfc":
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import tensorflow as tf
    os.makedirs(out, exist_ok=True)
    if mode in HEALTHY or mode in OTHERS:
        trace = {**HEALTHY, **OTHERS}[mode](tf, out, mode)
        trace.save(os.path.join(out, f"{mode}.json"))
    elif mode == "bfc":
        healthy(tf, out)
    else:
        tf1_runs(tf, out)
        tf2_profiles(tf, out)
        keras_fit(tf, out)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
