"""retracing, after: the changing value passed as a tensor; one trace serves every call."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step, reduce_retracing=True)
report(tf2_run(lambda i: step(w, x, y, tf.constant(0.01 / (i + 1)))))  # AFTER: a tensor
