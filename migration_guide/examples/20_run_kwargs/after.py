"""Idiom: the trace options travel in a dict passed as ``**kwargs`` to ``sess.run``."""
import tensorflow as tf
from tracebridge.compat import timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

run_metadata = tf.compat.v1.RunMetadata()
trace_kwargs = {"options": tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), "run_metadata": run_metadata}
z = tf.matmul(tf.ones([8, 8]), tf.ones([8, 8]))
with tf.compat.v1.Session() as sess:
    sess.run(z, **trace_kwargs)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
