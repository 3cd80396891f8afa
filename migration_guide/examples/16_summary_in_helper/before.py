"""Idiom: a helper adds the summaries (``tf.summary.histogram``/``scalar``); the caller
merges them and writes them with the traced step's run metadata."""
import tensorflow as tf


def add_summaries(tensor):
    tf.summary.histogram("activations", tensor)
    tf.summary.scalar("mean", tf.reduce_mean(tensor))


x = tf.placeholder(tf.float32, [None, 4])
h = tf.nn.relu(x * 2.0)
add_summaries(h)
merged = tf.summary.merge_all()
with tf.Session() as sess:
    writer = tf.summary.FileWriter("logs", sess.graph)
    run_metadata = tf.RunMetadata()
    summary = sess.run(merged, feed_dict={x: [[1.0, -1.0, 2.0, 0.5]]},
                       options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    writer.add_run_metadata(run_metadata, "step_1")
    writer.add_summary(summary, 1)
    writer.close()
