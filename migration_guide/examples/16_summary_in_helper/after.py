"""Idiom: a helper adds the summaries (``tf.summary.histogram``/``scalar``); the caller
merges them and writes them with the traced step's run metadata."""
import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)


def add_summaries(tensor):
    tf.compat.v1.summary.histogram("activations", tensor)
    tf.compat.v1.summary.scalar("mean", tf.reduce_mean(tensor))


x = tf.compat.v1.placeholder(tf.float32, [None, 4])
h = tf.nn.relu(x * 2.0)
add_summaries(h)
merged = tf.compat.v1.summary.merge_all()
with tf.compat.v1.Session() as sess:
    writer = tf.compat.v1.summary.FileWriter("logs", sess.graph)
    run_metadata = tf.compat.v1.RunMetadata()
    summary = tracebridge.compat.run_traced(sess, merged, feed_dict={x: [[1.0, -1.0, 2.0, 0.5]]},
                                            options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    tracebridge.compat.add_run_metadata(writer, run_metadata, "step_1")
    writer.add_summary(summary, 1)
    writer.close()
