"""Idiom: the trace options travel in a dict passed as ``**kwargs`` to ``sess.run``."""
import tensorflow as tf
from tensorflow.python.client import timeline

run_metadata = tf.RunMetadata()
trace_kwargs = {"options": tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), "run_metadata": run_metadata}
z = tf.matmul(tf.ones([8, 8]), tf.ones([8, 8]))
with tf.Session() as sess:
    sess.run(z, **trace_kwargs)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
