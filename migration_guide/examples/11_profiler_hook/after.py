"""Seed 004 (API docs of ``tf.train.ProfilerHook``; no code example): the usage it
documents, ``tf.train.ProfilerHook(save_steps=N, output_dir=...)`` as a hook of a
MonitoredTrainingSession training loop.

Trains a tiny linear model for 5 steps; the hook traces every 2nd step and writes
``timeline-<step>.json`` (Chrome trace) files and an event file with the run metadata to
``profiles/``.
"""
import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

features = tf.compat.v1.random_normal([8, 4], seed=1)
labels = tf.compat.v1.random_normal([8, 1], seed=2)
weights = tf.compat.v1.Variable(tf.zeros([4, 1]), name="weights")
loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
global_step = tf.compat.v1.train.get_or_create_global_step()
train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)

# Captures CPU profiling information every 2 steps, as timeline-<step>.json files.
profiler_hook = tracebridge.compat.ProfilerHook(save_steps=2, output_dir="profiles")

with tf.compat.v1.train.MonitoredTrainingSession(hooks=[profiler_hook]) as sess:
    for _ in range(5):
        sess.run(train_op)
