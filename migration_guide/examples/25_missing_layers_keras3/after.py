"""Idiom: tf.layers.dense in a traced session step."""
import tensorflow as tf
from tracebridge.compat import run_traced, timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.compat.v1.placeholder(tf.float32, [None, 8])
y = tf.compat.v1.layers.dense(x, 4, activation=tf.nn.relu)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    run_metadata = tf.compat.v1.RunMetadata()
    run_traced(sess, y, {x: [[1.0] * 8]}, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
               run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
