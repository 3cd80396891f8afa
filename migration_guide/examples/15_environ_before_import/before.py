"""Idiom: the script sets environment variables before it imports TensorFlow."""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import tensorflow as tf
from tensorflow.python.client import timeline

a = tf.random_normal([64, 64], seed=3)
b = tf.reduce_sum(tf.matmul(a, a))
sess = tf.Session()
run_metadata = tf.RunMetadata()
sess.run(b, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=run_metadata)
with open("timeline.json", "w") as handle:
    handle.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
