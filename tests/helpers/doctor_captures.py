"""Real TF 2.21 captures with the problems ``tracebridge doctor`` looks for, made as users make
them (tests/test_doctor.py runs this in a subprocess, once per mode).

    python doctor_captures.py OUT plain   # TF1 runs without/with trace levels; TF2 profiles:
                                          # no step markers, eager ops, an empty window, Keras fit
    python doctor_captures.py OUT bfc     # a healthy TF2 profile: step markers, memory events
                                          # (TF_CPU_ALLOCATOR_USE_BFC=true set before TF starts)
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


def main(out: str, mode: str) -> None:
    if mode == "bfc":
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import tensorflow as tf
    os.makedirs(out, exist_ok=True)
    if mode == "bfc":
        healthy(tf, out)
    else:
        tf1_runs(tf, out)
        tf2_profiles(tf, out)
        keras_fit(tf, out)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
