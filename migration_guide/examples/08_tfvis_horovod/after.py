"""Seed 003 (tfvis README), FAQ "Horovod Support?": pass ``horovod=True`` to ``Timeline``.

Traces one training step with ``Timeline(horovod=True)`` and writes tfvis's HTML timeline
to ``example.html``. Completed: the FAQ snippet is the README's step 1 with
``horovod=True``, so it runs in step 1's MonitoredTrainingSession on a tiny linear model,
and ends with step 2's ``timeline.visualize("example.html")``. (Horovod itself is not
needed: ``horovod=True`` only changes which ops tfvis counts as communication.)
"""
import tensorflow as tf
from tracebridge.compat.tfvis import Timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

# (completed: a tiny linear model and the README's session around the FAQ snippet)
features = tf.compat.v1.random_normal([8, 4], seed=1)
labels = tf.compat.v1.random_normal([8, 1], seed=2)
weights = tf.compat.v1.Variable(tf.zeros([4, 1]), name="weights")
loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

with tf.compat.v1.train.MonitoredTrainingSession() as sess:
    with Timeline(horovod=True) as timeline:
            sess.run(train_op, **timeline.kwargs)

# (completed: the README's step 2)
timeline.visualize("example.html")
