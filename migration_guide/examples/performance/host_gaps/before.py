"""host_gaps, before: each batch augmented in numpy, in Python, inside the step."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = batch()
rng = np.random.default_rng(1)
step = tf.function(train_step)


def one_step(i):  # BEFORE: per-image numpy work while no TF op runs
    noisy = np.stack([np.clip(image + rng.normal(0, 0.01, image.shape), 0, 1)
                      for image in images for _ in range(12)][::12]).astype(np.float32)
    step(w, tf.constant(noisy), tf.constant(labels))


report(tf2_run(one_step))
