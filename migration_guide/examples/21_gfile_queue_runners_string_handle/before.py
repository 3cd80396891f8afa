"""Idiom: TF1 APIs TF 2 moved or dropped but tf.compat.v1 keeps: ``from tensorflow import
gfile``, a queue-runner input pipeline, and a feedable iterator."""
import tensorflow as tf
from tensorflow import gfile
from tensorflow.python.client import timeline

queue = tf.train.string_input_producer(["a", "b"], shuffle=False)
name = queue.dequeue()
dataset = tf.data.Dataset.range(3)
handle = tf.placeholder(tf.string, [])
iterator = tf.data.Iterator.from_string_handle(handle, tf.int64, tf.TensorShape([]))
value = iterator.get_next()
source = tf.data.make_one_shot_iterator(dataset)
with tf.Session() as sess:
    coordinator = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coordinator)
    run_metadata = tf.RunMetadata()
    fetched = sess.run([name, value], feed_dict={handle: sess.run(source.string_handle())},
                       options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    coordinator.request_stop()
    coordinator.join(threads)
print("fetched", fetched[0], fetched[1])
if not gfile.Exists("out"):
    gfile.MakeDirs("out")
with gfile.GFile("timeline.json", "w") as out:
    out.write(timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format())
