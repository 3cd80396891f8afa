"""Seed 001 ("About tensorflow Metadata and RunOptions"), second example: Export a Trace
for Timeline Analysis (the classic snippet).

One traced 1000x1000 matmul; timeline.py writes it as a Chrome trace to
``timeline.json``. The seed's code as it stands (only this docstring added).
"""
import tensorflow as tf
from tensorflow.python.client import timeline

x = tf.random_normal([1000, 1000])
y = tf.random_normal([1000, 1000])
z = tf.matmul(x, y)

run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
run_metadata = tf.RunMetadata()

with tf.Session() as sess:
    sess.run(z, options=run_options, run_metadata=run_metadata)

    trace = timeline.Timeline(run_metadata.step_stats)
    chrome_trace = trace.generate_chrome_trace_format()

    with open("timeline.json", "w") as handle:
        handle.write(chrome_trace)
