"""Seed 003 (tfvis README, "TensorFlow Runtime Tracing Metadata Visualization"), "How to
use": 1. collect runtime metadata with ``Timeline().kwargs`` in a MonitoredTrainingSession,
2. visualize.

Traces one training step and writes tfvis's HTML timeline to ``example.html``.
Completed: ``import tensorflow as tf`` (the seed uses ``tf`` without it), a tiny linear
model for the first ``...``, and ``MonitoredTrainingSession()`` without arguments for
``MonitoredTrainingSession(...)``; the other bare ``...`` are kept (they are no-ops).
"""
import tensorflow as tf
from tracebridge.compat.tfvis import Timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

# (completed: a tiny linear model stands in for the seed's "...")
features = tf.compat.v1.random_normal([8, 4], seed=1)
labels = tf.compat.v1.random_normal([8, 1], seed=2)
weights = tf.compat.v1.Variable(tf.zeros([4, 1]), name="weights")
loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

with tf.compat.v1.train.MonitoredTrainingSession() as sess:
    ...
    with Timeline() as timeline:
        sess.run(train_op, **timeline.kwargs)
    ...

# 2. Visualize:
...
timeline.visualize("example.html")
...
