"""eager_ops, before: the TF1 step ported without tf.function; every op runs eagerly."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
x, y = (tf.constant(a) for a in batch())
step = train_step  # BEFORE: a plain Python function
report(tf2_run(lambda i: step(w, x, y)))
