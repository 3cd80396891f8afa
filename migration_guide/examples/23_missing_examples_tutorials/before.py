"""Idiom: the MNIST tutorial's input_data feeds a traced step."""
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data
from tensorflow.python.client import timeline

mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
x = tf.placeholder(tf.float32, [None, 784])
y = tf.reduce_sum(x)
with tf.Session() as sess:
    run_metadata = tf.RunMetadata()
    sess.run(y, {x: mnist.train.next_batch(8)[0]},
             options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
