"""Idiom: the MNIST tutorial's input_data feeds a traced step."""
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data
from tracebridge.compat import run_traced, timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
x = tf.compat.v1.placeholder(tf.float32, [None, 784])
y = tf.reduce_sum(x)
with tf.compat.v1.Session() as sess:
    run_metadata = tf.compat.v1.RunMetadata()
    run_traced(sess, y, {x: mnist.train.next_batch(8)[0]},
               options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
