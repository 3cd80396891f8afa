"""fusion_gained, before: the TF1 baseline ran with a legacy ConfigProto that switched
Grappler's remapper off, so the TF2 port fuses what TF1 did not: a gain, not a port problem."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run(remapping=False)  # BEFORE: the baseline's config
w = variables()
x, y = (tf.constant(a) for a in batch())
step = tf.function(train_step)
report(tf2_run(lambda i: step(w, x, y)), control)
