"""Idiom: tftracer (tfvis's sibling) collects a step with ``Timeline``, pickles it and
writes its HTML view."""
import tensorflow as tf
from tracebridge.compat.tfvis import Timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.compat.v1.random_normal([32, 32], seed=6)
y = tf.nn.relu(tf.matmul(x, x))
with tf.compat.v1.Session() as sess:
    with Timeline() as tl:
        sess.run(y, **tl.kwargs)
tl.to_pickle("tftracer.pickle")
Timeline.from_pickle("tftracer.pickle").visualize("tftracer.html")
