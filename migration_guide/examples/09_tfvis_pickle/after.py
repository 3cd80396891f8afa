"""Seed 003 (tfvis README), FAQ "Save for later?": ``timeline.to_pickle`` and
``Timeline.from_pickle``.

Traces one training step with ``Timeline(horovod=True)``, pickles its RunMetadata to
``example.pickle`` and loads it back. Completed: the snippet runs in the README's
MonitoredTrainingSession on a tiny linear model; the bare ``...`` is kept (a no-op).
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
        
timeline.to_pickle("example.pickle")
...
timeline.from_pickle("example.pickle", horovod=True)
