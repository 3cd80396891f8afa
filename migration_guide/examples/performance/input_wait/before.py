"""input_wait, before: expensive preprocessing in tf.data, without parallel calls or prefetch."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = batch()
dataset = tf.data.Dataset.from_tensors((images, labels)).repeat().map(preprocess)  # BEFORE
iterator = iter(dataset)
step = tf.function(lambda it: train_step(w, *next(it)))
report(tf2_run(lambda i: step(iterator)))
del step, iterator, dataset  # TF 2.21 can hang at exit on a live iterator whose map calls Python
