"""Captures the migration guide's small CNN (migration_guide/examples/performance/_model.py)
as a TF1 session or as a TF2 port, with one porting mistake or none, in a process of its
own (so the TensorFlow build, oneDNN on or off, is the one asked for).

    TF_ENABLE_ONEDNN_OPTS=0|1 TF_CPU_ALLOCATOR_USE_BFC=true python porting_worker.py VARIANT OUT.json

Variants (the mistake each TF2 port makes is the only difference from ``tf2_good``):

- ``tf1``: a ``tf.Graph`` in a ``Session``, batches fed from numpy.
- ``tf1_noremap``: the same with Grappler's remapper off (no fused kernels).
- ``tf2_good``: a ``tf.function`` step reading a prefetched ``tf.data`` iterator.
- ``tf2_eager``: the step without ``tf.function`` (every op runs eagerly).
- ``tf2_retrace``: the learning rate passed as a Python float that changes every call.
- ``tf2_host``: the batch prepared in numpy, in Python, inside each step.
- ``tf2_input``: expensive numpy preprocessing in ``map``, without parallel calls or prefetch.
- ``tf2_noremap``: Grappler's remapper turned off (``set_experimental_options``).
- ``tf2_float64``: the model built in float64 (weights made from numpy's default dtype).
- ``tf2_hoard``: every step's outputs (activations, a copy of the weights) kept in a Python list.
- ``<variant>+python``: with the Python tracer on (``python_tracer_level=1``).

TF2 steps are ``t.step()`` blocks of one ``tracebridge.trace()``: what Python does inside a
step is part of it. Five steps are traced after two warm-up steps. (A TF1 and a TF2 run
cannot take turns in one process: the TF2 profiler records the session's ops too, and
``step_num`` markers of both join.) Prints one JSON line: whether oneDNN was on, and the
number of steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "migration_guide" / "examples" / "performance"))

from _model import batch, np, preprocess, tf, tf1_run, tf2_run, train_step, variables  # noqa: E402

STEPS = 5


def tf2_step(mistake: str):
    """The TF2 port's step, ``step(index)``, with ``mistake``."""
    dtype = np.float64 if mistake == "float64" else np.float32
    if mistake == "noremap":
        tf.config.optimizer.set_experimental_options({"remapping": False})
    w = variables(dtype)
    images, labels = batch(dtype)
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    dataset = dataset.map(preprocess) if mistake == "input" else dataset.prefetch(2)
    iterator = iter(dataset)

    def train_on(it, lr=0.01):
        return train_step(w, *next(it), lr)

    def hoarding(it):  # returns the loss, conv1's activations (1 MiB) and the dense weights (2 MiB)
        x, y = next(it)
        return train_step(w, x, y), tf.nn.relu(tf.nn.conv2d(x, w["conv1/kernel"], 1, "SAME")), \
            tf.identity(w["dense/kernel"])

    step = train_on if mistake == "eager" else tf.function(hoarding if mistake == "hoard" else train_on)
    step_xy = tf.function(lambda x, y: train_step(w, x, y))
    rng = np.random.default_rng(1)
    kept = []

    def one_step(index):
        if mistake == "retrace":
            step(iterator, 0.01 / (index + 1))
        elif mistake == "host":
            # 24 noisy copies an image, one kept: host work that stays most of the step even
            # when a test running beside this capture slows TF's kernels (tests run in parallel)
            noisy = np.stack([np.clip(image + rng.normal(0, 0.01, image.shape), 0, 1)
                              for image in images for _ in range(24)][::24]).astype(np.float32)
            step_xy(tf.constant(noisy), tf.constant(labels))
        elif mistake == "hoard":
            kept.append(step(iterator))  # keeps each step's tensors alive
        else:
            step(iterator)
    return one_step


def main() -> None:
    variant, out = sys.argv[1:3]
    variant, python = variant.removesuffix("+python"), variant.endswith("+python")
    if variant.startswith("tf1"):
        trace = tf1_run(remapping=variant != "tf1_noremap", steps=STEPS)
    else:
        one_step = tf2_step(variant.partition("_")[2] if variant != "tf2_good" else "")
        trace = tf2_run(one_step, steps=STEPS, **({"python_tracer_level": 1} if python else {}))
    trace.save(out, memory=True)
    print(json.dumps({"onednn": trace.metadata["onednn"], "steps": len(trace.steps)}), flush=True)


if __name__ == "__main__":
    main()
