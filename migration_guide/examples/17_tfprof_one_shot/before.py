"""Idiom: tfprof's one-shot ``tf.profiler.profile`` over a traced step's run metadata."""
import tensorflow as tf

x = tf.random_normal([64, 64], seed=4)
y = tf.matmul(x, x, name="product")
with tf.Session() as sess:
    run_metadata = tf.RunMetadata()
    sess.run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    options = tf.profiler.ProfileOptionBuilder(tf.profiler.ProfileOptionBuilder.time_and_memory()
                                               ).with_empty_output().build()
    result = tf.profiler.profile(sess.graph, run_meta=run_metadata, cmd="op", options=options)
    print("tfprof nodes", len(result.children) > 0)
with open("run_metadata.pb", "wb") as handle:
    handle.write(run_metadata.SerializeToString())
