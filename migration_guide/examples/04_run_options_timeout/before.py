"""Seed 001 ("About tensorflow Metadata and RunOptions"), first example: What RunOptions
Controls.

One ``sess.run`` with FULL_TRACE and a 5 s timeout; prints the result (7.0). The
RunMetadata it fills is never written: the script writes no file. The seed's code as it
stands (only this docstring added).
"""
import tensorflow as tf

x = tf.constant(3.0)
y = tf.constant(4.0)
z = x + y

run_options = tf.RunOptions(
    trace_level=tf.RunOptions.FULL_TRACE,
    timeout_in_ms=5000,
)

run_metadata = tf.RunMetadata()

with tf.Session() as sess:
    result = sess.run(
        z,
        options=run_options,
        run_metadata=run_metadata,
    )
    print(result)
