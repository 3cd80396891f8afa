"""Seed 001 ("About tensorflow Metadata and RunOptions"), second example: Export a Trace
for Timeline Analysis (the classic snippet).

One traced 1000x1000 matmul; timeline.py writes it as a Chrome trace to
``timeline.json``. The seed's code as it stands (only this docstring added).
"""
import tensorflow as tf
from tracebridge.compat import run_traced, timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.compat.v1.random_normal([1000, 1000])
y = tf.compat.v1.random_normal([1000, 1000])
z = tf.matmul(x, y)

run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
run_metadata = tf.compat.v1.RunMetadata()

with tf.compat.v1.Session() as sess:
    run_traced(sess, z, options=run_options, run_metadata=run_metadata)

    trace = timeline.Timeline(run_metadata.step_stats)
    chrome_trace = trace.generate_chrome_trace_format()

    with open("timeline.json", "w") as handle:
        handle.write(chrome_trace)
