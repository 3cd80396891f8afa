"""Idiom: tfprof's one-shot ``tf.profiler.profile`` over a traced step's run metadata."""
import tensorflow as tf
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

x = tf.compat.v1.random_normal([64, 64], seed=4)
y = tf.matmul(x, x, name="product")
with tf.compat.v1.Session() as sess:
    run_metadata = tf.compat.v1.RunMetadata()
    tracebridge.compat.run_traced(sess, y, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    options = tf.compat.v1.profiler.ProfileOptionBuilder(tf.compat.v1.profiler.ProfileOptionBuilder.time_and_memory()
                                               ).with_empty_output().build()
    result = tf.compat.v1.profiler.profile(sess.graph, run_meta=run_metadata, cmd="op", options=options)
    print("tfprof nodes", len(result.children) > 0)
with open("run_metadata.pb", "wb") as handle:
    handle.write(run_metadata.SerializeToString())
