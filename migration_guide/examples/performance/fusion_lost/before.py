"""fusion_lost, before: a port that turned Grappler's remapper off: no fused kernels."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
tf.config.optimizer.set_experimental_options({"remapping": False})  # BEFORE
w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step)
report(tf2_run(lambda i: step(w, x, y)), control)
