"""retracing, before: a Python float that changes each call makes tf.function trace again."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step)
report(tf2_run(lambda i: step(w, x, y, 0.01 / (i + 1))))  # BEFORE: a new float, a new trace
