"""xla_fusion, before: the TF1 session against the port compiled with XLA
(tf.function(jit_compile=True)): XLA computes layers in fused kernels that the session ran
op by op, so the comparison is not like for like; the finding shows what XLA fused."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

control = tf1_run()
w = variables()
# the variables captured, not passed: XLA's HLO then has the instructions the run ran
step = tf.function(lambda x, y: train_step(w, x, y), jit_compile=True)  # BEFORE: XLA on one side only
report(fn_run(step, *(tf.constant(a) for a in batch())), control)
