"""Idiom: tfprof's ``tf.profiler.Profiler`` fed three traced steps, then op and scope
views and ``advise``."""
import tensorflow as tf
from tensorflow.python.profiler import model_analyzer, option_builder
import tracebridge.compat
tf.compat.v1.disable_eager_execution()  # tracebridge: the sessions below need graph mode (TF 2 executes eagerly)

w = tf.compat.v1.Variable(tf.compat.v1.random_normal([16, 16], seed=5))
loss = tf.reduce_mean(tf.square(tf.matmul(w, w)))
train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    profiler = tf.compat.v1.profiler.Profiler(sess.graph)
    for step in range(3):
        run_metadata = tf.compat.v1.RunMetadata()
        tracebridge.compat.run_traced(sess, train, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
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
