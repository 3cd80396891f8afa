"""eager_ops, after: the step wrapped in tf.function runs as one graph."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step)  # AFTER
report(tf2_run(lambda i: step(w, x, y)))
