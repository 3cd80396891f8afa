"""Idiom: the script sets environment variables before it imports TensorFlow."""
import os
import tracebridge.compat
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import tensorflow as tf
from tracebridge.compat import timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

a = tf.compat.v1.random_normal([64, 64], seed=3)
b = tf.reduce_sum(tf.matmul(a, a))
sess = tf.compat.v1.Session()
run_metadata = tf.compat.v1.RunMetadata()
tracebridge.compat.run_traced(sess, b, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
