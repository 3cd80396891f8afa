"""Idiom: the graph is built at module level; a helper, called under ``if __name__ ==
"__main__":``, makes the session and writes the trace."""
import tensorflow as tf
from tensorflow.python.client import timeline

x = tf.placeholder(tf.float32, [None, 8], name="x")
w = tf.Variable(tf.random_normal([8, 4]), name="w")
y = tf.nn.relu(tf.matmul(x, w))


def profile(fetch, path):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        run_metadata = tf.RunMetadata()
        sess.run(fetch, feed_dict={x: [[1.0] * 8] * 2},
                 options=options, run_metadata=run_metadata)
    with open(path, "w") as handle:
        handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())


if __name__ == "__main__":
    profile(y, "timeline.json")
