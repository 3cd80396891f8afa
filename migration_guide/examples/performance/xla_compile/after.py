"""xla_compile, after: every batch padded to one size (or cut to it: drop_remainder=True),
so XLA compiles the function once, in the warm-up, and never inside the steps."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

images, labels = batch()
sizes = [BATCH - i for i in range(7)]
# AFTER: each batch padded to BATCH; the padded rows get no weight in the loss
batches = [(tf.constant(np.pad(images[:n], [(0, BATCH - n), (0, 0), (0, 0), (0, 0)])),
            tf.constant(np.pad(labels[:n], [(0, BATCH - n)])),
            tf.constant((np.arange(BATCH) < n).astype(np.float32))) for n in sizes]
w = variables()
step = tf.function(dense_step, jit_compile=True, reduce_retracing=True)
report(tf2_run(lambda i: step(w, *batches[i])))
