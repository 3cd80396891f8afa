"""xla_fusion, after: the port without XLA against the TF1 session, like for like."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
w = variables()
# the variables captured, not passed: XLA's HLO then has the instructions the run ran
step = tf.function(lambda x, y: train_step(w, x, y))  # AFTER: no XLA on either side
report(fn_run(step, *(tf.constant(a) for a in batch())), control)
