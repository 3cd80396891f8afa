"""Seed 003 (tfvis README), FAQ "Collect Runtime Metadata Natively?": its three snippets,
collect (RunOptions/RunMetadata in a MonitoredTrainingSession), store (pickle) and load and
visualize (``Timeline.from_pickle``).

Traces one training step, pickles the RunMetadata to ``example.pickle`` and writes
tfvis's HTML timeline of it to ``example.html``. Completed: ``import tensorflow as tf``
(the seed uses ``tf`` without it), a tiny linear model for the first ``...`` and
``MonitoredTrainingSession()`` for ``MonitoredTrainingSession(...)``; the other bare ``...``
are kept (no-ops), and so is the seed's tab indentation of the first snippet.
"""
import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

# (completed: a tiny linear model stands in for the seed's "...")
features = tf.compat.v1.random_normal([8, 4], seed=1)
labels = tf.compat.v1.random_normal([8, 1], seed=2)
weights = tf.compat.v1.Variable(tf.zeros([4, 1]), name="weights")
loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

with tf.compat.v1.train.MonitoredTrainingSession() as sess:
	...
	run_metadata = tf.compat.v1.RunMetadata()
	options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
	tracebridge.compat.run_traced(sess, train_op, run_metadata=run_metadata, options=options)
...

# Store:
import pickle

with open("example.pickle", "wb") as fp:
        # seed fix: the seed calls pickle.load(run_metadata, fp); storing needs pickle.dump
        pickle.dump(run_metadata, fp)

# Load and Visualize:
from tracebridge.compat.tfvis import Timeline
Timeline.from_pickle("example.pickle").visualize("example.html")
