"""device_idle, before: each step's batch made in Python and copied to the device at the
step's start; the accelerator waits. (Needs a GPU to show the finding; on CPU it runs all the same.)"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = batch()
step = tf.function(train_step)
rng = np.random.default_rng(1)


def one_step(i):  # BEFORE: host work, then the copy, then the device computes
    noisy = np.stack([image + rng.normal(0, 0.01, image.shape) for image in images]).astype(np.float32)
    step(w, tf.constant(noisy), tf.constant(labels))


report(tf2_run(one_step))
