"""Idiom: an Estimator trained with tf.train.ProfilerHook."""
import tensorflow as tf
import tracebridge.compat


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.reduce_mean(tf.square(logits - labels))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    return tf.data.Dataset.from_tensors(({"x": tf.ones([4, 2])}, tf.ones([4, 1]))).repeat()


hook = tracebridge.compat.ProfilerHook(save_steps=2, output_dir="profiles")
estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=4, hooks=[hook])
