"""Idiom: tf.layers.dense in a traced session step."""
import tensorflow as tf
from tensorflow.python.client import timeline

x = tf.placeholder(tf.float32, [None, 8])
y = tf.layers.dense(x, 4, activation=tf.nn.relu)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    run_metadata = tf.RunMetadata()
    sess.run(y, {x: [[1.0] * 8]}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
