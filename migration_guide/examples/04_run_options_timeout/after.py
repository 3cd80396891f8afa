"""Seed 001 ("About tensorflow Metadata and RunOptions"), first example: What RunOptions
Controls.

One ``sess.run`` with FULL_TRACE and a 5 s timeout; prints the result (7.0). The
RunMetadata it fills is never written: the script writes no file. The seed's code as it
stands (only this docstring added).
"""
import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.constant(3.0)
y = tf.constant(4.0)
z = x + y

run_options = tf.compat.v1.RunOptions(
    trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
    timeout_in_ms=5000,
)

run_metadata = tf.compat.v1.RunMetadata()

with tf.compat.v1.Session() as sess:
    result = tracebridge.compat.run_traced(
        sess, z,
        options=run_options,
        run_metadata=run_metadata,
    )
    print(result)
