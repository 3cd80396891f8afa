"""Idiom: tfprof's ``tf.profiler.Profiler`` fed three traced steps, then op and scope
views and ``advise``."""
import tensorflow as tf
from tensorflow.python.profiler import model_analyzer, option_builder

w = tf.Variable(tf.random_normal([16, 16], seed=5))
loss = tf.reduce_mean(tf.square(tf.matmul(w, w)))
train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    profiler = tf.profiler.Profiler(sess.graph)
    for step in range(3):
        run_metadata = tf.RunMetadata()
        sess.run(train, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=run_metadata)
        profiler.add_step(step, run_metadata)
    quiet = option_builder.ProfileOptionBuilder(
        option_builder.ProfileOptionBuilder.time_and_memory()).with_empty_output().build()
    ops = profiler.profile_operations(options=quiet)
    scopes = profiler.profile_name_scope(options=quiet)
    advice = profiler.advise(options=model_analyzer.ALL_ADVICE)
    print("tfprof steps", len(ops.children) > 0, len(scopes.children) > 0, len(advice.checkers) > 0)
with open("run_metadata.pb", "wb") as handle:
    handle.write(run_metadata.SerializeToString())
