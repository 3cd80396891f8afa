"""Idiom: TF1 APIs TF 2 moved or dropped but tf.compat.v1 keeps: ``from tensorflow import
gfile``, a queue-runner input pipeline, and a feedable iterator."""
import tensorflow as tf
from tensorflow.compat.v1 import gfile
from tracebridge.compat import run_traced, timeline
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

queue = tf.compat.v1.train.string_input_producer(["a", "b"], shuffle=False)
name = queue.dequeue()
dataset = tf.data.Dataset.range(3)
handle = tf.compat.v1.placeholder(tf.string, [])
iterator = tf.compat.v1.data.Iterator.from_string_handle(handle, tf.int64, tf.TensorShape([]))
value = iterator.get_next()
source = tf.compat.v1.data.make_one_shot_iterator(dataset)
with tf.compat.v1.Session() as sess:
    coordinator = tf.train.Coordinator()
    threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coordinator)
    run_metadata = tf.compat.v1.RunMetadata()
    fetched = run_traced(sess, [name, value], feed_dict={handle: sess.run(source.string_handle())},
                         options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    coordinator.request_stop()
    coordinator.join(threads)
print("fetched", fetched[0], fetched[1])
if not gfile.Exists("out"):
    gfile.MakeDirs("out")
with gfile.GFile("timeline.json", "w") as out:
    out.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
