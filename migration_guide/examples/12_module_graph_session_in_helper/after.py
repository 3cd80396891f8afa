"""Idiom: the graph is built at module level; a helper, called under ``if __name__ ==
"__main__":``, makes the session and writes the trace."""
import tensorflow as tf
from tracebridge.compat import run_traced, timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
w = tf.compat.v1.Variable(tf.compat.v1.random_normal([8, 4]), name="w")
y = tf.nn.relu(tf.matmul(x, w))


def profile(fetch, path):
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        run_metadata = tf.compat.v1.RunMetadata()
        run_traced(sess, fetch, feed_dict={x: [[1.0] * 8] * 2},
                   options=options, run_metadata=run_metadata)
    with open(path, "w") as handle:
        handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())


if __name__ == "__main__":
    profile(y, "timeline.json")
