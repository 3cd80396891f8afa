"""op_regression, after: float32, as the TF1 graph's placeholders and variables were."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
w = variables(np.float32)  # AFTER
x, y = (tf.constant(a) for a in batch(np.float32))
step = tf.function(train_step)
report(tf2_run(lambda i: step(w, x, y)), control)
