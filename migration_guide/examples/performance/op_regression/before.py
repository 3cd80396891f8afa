"""op_regression, before: weights and data made from numpy's default float64."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
w = variables(np.float64)  # BEFORE: every kernel computes in double precision
x, y = (tf.constant(a) for a in batch(np.float64))
step = tf.function(train_step)
report(tf2_run(lambda i: step(w, x, y)), control)
