"""Idiom: ``build_and_profile`` enters its own graph and calls ``profile_in_session``,
which makes a session on the default graph. The file also has TF2 code."""
import tensorflow as tf
from tracebridge.compat import run_traced, timeline


def eager_mean(values):
    return tf.reduce_mean(tf.constant(values)).numpy()


def profile_in_session(fetch):
    sess = tf.compat.v1.Session()
    run_metadata = tf.compat.v1.RunMetadata()
    run_traced(sess, fetch, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    return timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()


def build_and_profile():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.random_normal([32, 32], seed=1)
        y = tf.matmul(x, x)
        return profile_in_session(y)


print("eager mean", eager_mean([1.0, 3.0]))
with open("timeline.json", "w") as handle:
    handle.write(build_and_profile())
