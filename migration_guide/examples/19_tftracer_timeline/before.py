"""Idiom: tftracer (tfvis's sibling) collects a step with ``Timeline``, pickles it and
writes its HTML view."""
import tensorflow as tf
from tftracer import Timeline

x = tf.random_normal([32, 32], seed=6)
y = tf.nn.relu(tf.matmul(x, x))
with tf.Session() as sess:
    with Timeline() as tl:
        sess.run(y, **tl.kwargs)
tl.to_pickle("tftracer.pickle")
Timeline.from_pickle("tftracer.pickle").visualize("tftracer.html")
