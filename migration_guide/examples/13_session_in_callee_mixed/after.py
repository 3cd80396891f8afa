"""Idiom: ``main`` builds the graph and calls ``trace_step``, which makes the session. The
file also holds TF2 code (a ``tf.function`` run eagerly), so eager execution stays on."""
import tensorflow as tf
import tracebridge.compat


@tf.function
def tf2_check(v):
    return tf.reduce_sum(v * 2.0)


def trace_step(fetch):
    run_metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        tracebridge.compat.run_traced(sess, fetch, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                                      run_metadata=run_metadata)
    return run_metadata


def main():
    with tf.compat.v1.Graph().as_default():  # tracebridge: TF1 graph code runs in a graph (TF 2 executes eagerly)
        a = tf.compat.v1.Variable(tf.ones([16, 16]), name="a")
        b = tf.matmul(a, a, name="square")
        run_metadata = trace_step(b)
        with open("run_metadata.pb", "wb") as handle:
            handle.write(run_metadata.SerializeToString())


if __name__ == "__main__":
    print("tf2 part:", float(tf2_check(tf.constant([1.0, 2.0]))))
    main()
