"""Captures one small CNN as a TF1 session or as a TF2 port, with one porting mistake or none,
in a process of its own (the TensorFlow build, oneDNN on or off, is the one asked for).

    TF_ENABLE_ONEDNN_OPTS=0|1 TF_CPU_ALLOCATOR_USE_BFC=true python porting_worker.py VARIANT OUT.json

The model: two convolutions with bias and ReLU (Grappler fuses each into ``_FusedConv2D``),
max pooling, a dense layer with bias and ReLU (``_FusedMatMul``) and logits, trained by SGD.

Variants (the mistake each TF2 port makes is the only difference from ``tf2_good``):

- ``tf1``: a ``tf.Graph`` in a ``Session``, batches fed from numpy.
- ``tf1_noremap``: the same with Grappler's remapper off (no fused kernels).
- ``tf2_good``: a ``tf.function`` step reading a prefetched ``tf.data`` iterator.
- ``tf2_eager``: the step without ``tf.function`` (every op runs eagerly).
- ``tf2_retrace``: the learning rate passed as a Python float that changes every call.
- ``tf2_host``: the batch prepared in numpy, in Python, inside each step.
- ``tf2_input``: an expensive ``map`` without ``num_parallel_calls`` or ``prefetch``.
- ``tf2_noremap``: Grappler's remapper turned off (``set_experimental_options``).
- ``tf2_float64``: the model built in float64 (weights made from numpy's default dtype).
- ``tf2_hoard``: every step's activations kept in a Python list.

TF2 steps are ``t.step()`` blocks of one ``tracebridge.trace()``: what Python does inside a
step is part of it. Prints one JSON line: whether oneDNN was on.
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
WARMUP, STEPS = 2, 5
SHAPES = {"conv1/kernel": [3, 3, 3, 16], "conv1/bias": [16], "conv2/kernel": [3, 3, 16, 32],
          "conv2/bias": [32], "dense/kernel": [8 * 8 * 32, 256], "dense/bias": [256],
          "logits/kernel": [256, 10], "logits/bias": [10]}


def forward(x, w, keep=None):
    with tf.name_scope("conv1"):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv1/kernel"], 1, "SAME"), w["conv1/bias"]))
    if keep is not None:
        keep.append(h)
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


def data(dtype=np.float32):
    rng = np.random.default_rng(0)
    return rng.random((BATCH, 32, 32, 3)).astype(dtype), rng.integers(0, 10, BATCH)


def initial(name, dtype=np.float32):
    seed = list(SHAPES).index(name)
    return np.random.default_rng(seed).normal(0, 0.05, SHAPES[name]).astype(dtype)


def tf1(remapping: bool = True):
    from tensorflow.core.protobuf import rewriter_config_pb2
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, 32, 32, 3], name="x")
        y = v1.placeholder(tf.int64, [BATCH], name="y")
        w = {name: tf.Variable(initial(name), name=name) for name in SHAPES}
        loss = loss_of(forward(x, w), y)
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    config = v1.ConfigProto()
    if not remapping:
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    images, labels = data()
    with v1.Session(graph=graph, config=config) as session:
        session.run(init)
        with tracebridge.trace(session, warmup=WARMUP, steps=STEPS) as capture:
            for _ in range(WARMUP + STEPS):
                session.run(train, {x: images, y: labels})
    return capture.trace


def tf2(mistake: str = ""):
    dtype = np.float64 if mistake == "float64" else np.float32
    if mistake == "noremap":
        tf.config.optimizer.set_experimental_options({"remapping": False})
    w = {name: tf.Variable(initial(name, dtype), name=name) for name in SHAPES}
    images, labels = data(dtype)
    hoard: list = []

    def train(x, y, lr=0.01):
        activations = []
        with tf.GradientTape() as tape:
            loss = loss_of(forward(x, w, activations), y)
        for variable, grad in zip(w.values(), tape.gradient(loss, list(w.values()))):
            variable.assign_sub(lr * grad)
        return (loss, activations[0]) if mistake == "hoard" else loss

    def train_on(iterator, lr=0.01):
        x, y = next(iterator)
        return train(x, y, lr)

    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    if mistake == "input":
        def augment(x):  # numpy preprocessing that costs about half a step
            for _ in range(40):
                x = np.fft.irfft2(np.fft.rfft2(x, axes=(1, 2)), s=x.shape[1:3], axes=(1, 2)).astype(x.dtype)
            return x

        def expensive(x, y):
            x = tf.numpy_function(augment, [x], tf.float32, stateful=False)
            return tf.ensure_shape(x, images.shape), y
        dataset = dataset.map(expensive)
    else:
        dataset = dataset.prefetch(2)
    iterator = iter(dataset)
    step = train_on if mistake == "eager" else tf.function(train_on)
    step_xy = tf.function(train)
    rng = np.random.default_rng(1)
    with tracebridge.trace(warmup=WARMUP, steps=STEPS) as capture:
        for index in range(WARMUP + STEPS):
            with capture.step():
                if mistake == "retrace":
                    step(iterator, 0.01 / (index + 1))
                elif mistake == "host":
                    batch = np.stack([np.clip(image + rng.normal(0, 0.01, image.shape), 0, 1)
                                      for image in images for _ in range(12)][::12]).astype(np.float32)
                    step_xy(tf.constant(batch), tf.constant(labels))
                elif mistake == "hoard":
                    hoard.append(step(iterator)[1])  # keeps each step's conv1 activations alive
                else:
                    step(iterator)
    return capture.trace


def main() -> None:
    variant, out = sys.argv[1], sys.argv[2]
    if variant.startswith("tf1"):
        trace = tf1(remapping=variant != "tf1_noremap")
    else:
        trace = tf2(variant.partition("_")[2] if variant != "tf2_good" else "")
    trace.save(out, memory=True)
    print(json.dumps({"onednn": trace.metadata["onednn"], "steps": len(trace.steps)}), flush=True)


if __name__ == "__main__":
    main()
