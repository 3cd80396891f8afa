"""Idiom: tftracer's live TracingServer, fed by a hook."""
import tensorflow as tf
from tftracer import TracingServer

server = TracingServer()
step = tf.train.get_or_create_global_step()
train_op = tf.assign_add(step, 1)
with tf.train.MonitoredTrainingSession(hooks=[server.hook]) as sess:
    for _ in range(3):
        sess.run(train_op)
server.join()
