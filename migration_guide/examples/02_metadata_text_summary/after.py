"""Seed 000 ("How do I utilize tf.RunMetadata with tf.contrib.learn's writers?"),
Example 2: Embedding Metadata in a Custom Summary.

Traces one training step with FULL_TRACE and writes the serialized RunMetadata as a text
summary (tag ``run_metadata``), with the loss summary, to an event file in
``path/to/logs``. Completed: a tiny linear model stands in for the seed's
``# ... estimator definition ...``, and ``global_step`` (undefined in the seed) is 0.
Seed fix: ``summary.text`` gets ``tf.constant(metadata_str)``, not the bytes.
"""
import types

import tensorflow as tf
import numpy as np
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

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
global_step = 0

def create_metadata_summary(metadata):
    #Convert the metadata proto to a string representation suitable for the summary.
    metadata_str = metadata.SerializeToString()
    # seed fix: summary.text needs a string Tensor (bytes raise in TF 1.x and 2.x alike)
    return tf.compat.v1.summary.text('run_metadata', tf.constant(metadata_str))

with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    run_metadata = tf.compat.v1.RunMetadata()

    _, summary = tracebridge.compat.run_traced(sess, [estimator.train_op, estimator.summary_op],
                                               options=run_options, run_metadata=run_metadata)

    #Create the custom summary op
    metadata_summary_op = create_metadata_summary(run_metadata)

    #Merge the custom summary with the existing summaries (potentially using tf.summary.merge_all)
    merged_summary = tf.compat.v1.summary.merge([estimator.summary_op, metadata_summary_op])

    #Write the merged summaries to the writer
    summary_writer = tf.compat.v1.summary.FileWriter("path/to/logs", sess.graph)
    summary_writer.add_summary(sess.run(merged_summary), global_step)
    summary_writer.close()
