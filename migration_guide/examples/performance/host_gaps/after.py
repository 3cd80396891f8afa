"""host_gaps, after: the augmentation is TF ops in the step's graph."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = (tf.constant(a) for a in batch())


@tf.function
def step(x, y):  # AFTER: the same noise, as graph ops
    return train_step(w, tf.clip_by_value(x + tf.random.normal(tf.shape(x), 0, 0.01), 0, 1), y)


report(tf2_run(lambda i: step(images, labels)))
