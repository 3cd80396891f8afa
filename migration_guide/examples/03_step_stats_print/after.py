"""Seed 000 ("How do I utilize tf.RunMetadata with tf.contrib.learn's writers?"),
Example 3: Extracting Specific Metadata Fields.

Traces one training step with FULL_TRACE and prints every device and node of
``run_metadata.step_stats`` with its execution time; it writes no file. Completed: the
seed's ``# ... metadata capture as in Example 1 ...`` is Example 1's capture (a tiny
linear model stands in for the estimator).
"""
import types

import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

# ... metadata capture as in Example 1 ...
# (completed with Example 1's capture)
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
    _, summary = tracebridge.compat.run_traced(sess, [estimator.train_op, estimator.summary_op],
                                               options=run_options, run_metadata=run_metadata)

#Parse the run metadata to access specific fields like the step statistics.
step_stats = run_metadata.step_stats

for dev_stats in step_stats.dev_stats:
  print(f"Device: {dev_stats.device}")
  for node_stats in dev_stats.node_stats:
    print(f"  Node: {node_stats.node_name}, Exec time: {node_stats.all_end_rel_micros}")

#Further processing and potentially writing specific fields into separate summaries
#would require custom logic for extracting and presenting the relevant data.
