"""fusion_lost, after: Grappler's defaults: Conv2D+BiasAdd+Relu run as one kernel, as in TF1."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step)  # AFTER: no optimizer options
report(tf2_run(lambda i: step(w, x, y)), control)
