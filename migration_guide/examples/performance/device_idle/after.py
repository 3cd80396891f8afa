"""device_idle, after: tf.data prepares the next batches while the device computes."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

w = variables()
images, labels = batch()
dataset = (tf.data.Dataset.from_tensors((images, labels)).repeat()
           .map(lambda x, y: (x + tf.random.normal(tf.shape(x), 0, 0.01), y), num_parallel_calls=tf.data.AUTOTUNE)
           .prefetch(tf.data.AUTOTUNE))  # AFTER: on a GPU, add tf.data.experimental.prefetch_to_device
iterator = iter(dataset)
step = tf.function(lambda it: train_step(w, *next(it)))
report(tf2_run(lambda i: step(iterator)))
