"""xla_compile, before: a jit_compile function fed batches of changing size (the last,
partial batch of each epoch, or a data set whose batches are not cut to one size). It is
traced once (reduce_retracing=True), but XLA compiles it again for every new shape."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

images, labels = batch()
sizes = [BATCH - i for i in range(7)]  # BEFORE: a new batch size at every step
batches = [(tf.constant(images[:n]), tf.constant(labels[:n])) for n in sizes]
w = variables()
step = tf.function(dense_step, jit_compile=True, reduce_retracing=True)
report(tf2_run(lambda i: step(w, *batches[i])))
