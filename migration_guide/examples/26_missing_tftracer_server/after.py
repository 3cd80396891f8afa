"""Idiom: tftracer's live TracingServer, fed by a hook."""
import tensorflow as tf
from tftracer import TracingServer
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

server = TracingServer()
step = tf.compat.v1.train.get_or_create_global_step()
train_op = tf.compat.v1.assign_add(step, 1)
with tf.compat.v1.train.MonitoredTrainingSession(hooks=[server.hook]) as sess:
    for _ in range(3):
        sess.run(train_op)
server.join()
