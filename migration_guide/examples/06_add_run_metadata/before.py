"""Seed 002 ("Why aren't all TensorBoard operations reporting runtime and memory
usage?"), Example 1: Graph Execution with Profiling.

Times one run, then traces one with FULL_TRACE and writes it with
``FileWriter.add_run_metadata`` (tag ``run_1``) to an event file in
``logs/graph_example``. The seed's code as it stands (only this docstring added); it
already disables eager execution. (The seed's Examples 2 and 3 profile nothing.)
"""
import tensorflow as tf
import time

tf.compat.v1.disable_eager_execution()  # Explicitly disable eager execution

with tf.compat.v1.Session() as sess:
    a = tf.constant([1.0, 2.0, 3.0], name='a')
    b = tf.constant([4.0, 5.0, 6.0], name='b')
    c = a + b
    
    # Run the operation and time it
    start_time = time.time()
    sess.run(c)
    end_time = time.time()
    print(f"Time taken: {end_time - start_time} seconds")


    # Write to a log directory for TensorBoard
    run_metadata = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    sess.run(c, options=options, run_metadata=run_metadata)
    
    summary_writer = tf.compat.v1.summary.FileWriter('./logs/graph_example', graph=sess.graph)
    summary_writer.add_run_metadata(run_metadata, 'run_1')
    summary_writer.close()
