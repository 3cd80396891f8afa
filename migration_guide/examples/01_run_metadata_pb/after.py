"""Seed 000 ("How do I utilize tf.RunMetadata with tf.contrib.learn's writers?"),
Example 1: Basic Metadata Capture and Serialization.

Traces one training step with FULL_TRACE and writes the serialized RunMetadata to
``run_metadata.pb``. Completed: the seed's ``# ... estimator definition ...`` is a tiny
linear model here; ``estimator`` holds its train and summary ops.
"""
import types

import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

# Assuming a simple tf.contrib.learn estimator (replace with tf.estimator equivalent)
# ... estimator definition ...
# (completed: a tiny linear model stands in for the estimator)
features = tf.compat.v1.random_normal([8, 4], seed=1)
labels = tf.compat.v1.random_normal([8, 1], seed=2)
weights = tf.compat.v1.get_variable("weights", [4, 1], initializer=tf.compat.v1.zeros_initializer())
loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
estimator = types.SimpleNamespace(
    train_op=tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss),
    summary_op=tf.compat.v1.summary.scalar("loss", loss),
)

with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    run_metadata = tf.compat.v1.RunMetadata()

    # Run a training step with metadata capture
    _, summary = tracebridge.compat.run_traced(sess, [estimator.train_op, estimator.summary_op],
                                               options=run_options, run_metadata=run_metadata)


    # Serialize the RunMetadata
    serialized_metadata = run_metadata.SerializeToString()

    #Write the serialized metadata to a file.  This requires custom handling,
    #it won't be automatically handled by the SummaryWriter.
    with open('run_metadata.pb', 'wb') as f:
        f.write(serialized_metadata)

    #Write the standard summaries as usual.  These are separate from the metadata.
    #... standard summary writing using estimator.summary_op ...
