"""Idiom: a model built with tf.contrib.slim, one step traced."""
import tensorflow as tf
import tensorflow.contrib.slim as slim
from tensorflow.python.client import timeline

x = tf.placeholder(tf.float32, [None, 8])
y = slim.fully_connected(x, 4)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    run_metadata = tf.RunMetadata()
    sess.run(y, {x: [[1.0] * 8]}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
