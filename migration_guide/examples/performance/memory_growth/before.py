"""memory_growth, before: every step's activations kept in a Python list.
Run with TF_CPU_ALLOCATOR_USE_BFC=true: TF records CPU memory only then."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
x, y = (tf.constant(a) for a in batch())
kept = []


@tf.function
def step(x, y):  # the loss, conv1's activations and the updated dense weights
    activations = tf.nn.relu(tf.nn.conv2d(x, w["conv1/kernel"], 1, "SAME"))
    return train_step(w, x, y), activations, tf.identity(w["dense/kernel"])


report(tf2_run(lambda i: kept.append(step(x, y))))  # BEFORE: the list holds every step's tensors
