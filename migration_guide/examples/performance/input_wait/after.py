"""input_wait, after: the pipeline runs ahead of the step (parallel calls, cache, prefetch)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = batch()
# AFTER: parallel calls, the deterministic result cached (computed once), batches prefetched
dataset = (tf.data.Dataset.from_tensors((images, labels))
           .map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).cache().repeat().prefetch(tf.data.AUTOTUNE))
iterator = iter(dataset)
step = tf.function(lambda it: train_step(w, *next(it)))
for _ in range(4):  # let the pipeline fill its buffer before the traced steps
    step(iterator)
report(tf2_run(lambda i: step(iterator)))
del step, iterator, dataset  # TF 2.21 can hang at exit on a live iterator whose map calls Python
