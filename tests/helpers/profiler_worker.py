"""A TF2 worker for remote-capture tests: a profiler server and a training-like loop.

    python profiler_worker.py PORT SECONDS [STEP_SLEEP]
prints "ready" once the server is up, then runs marked steps until SECONDS have passed;
STEP_SLEEP seconds of sleep inside each step make this worker a straggler."""

import sys
import time

import tensorflow as tf

port, seconds = int(sys.argv[1]), float(sys.argv[2])
step_sleep = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
tf.profiler.experimental.server.start(port)


@tf.function
def step(x):
    return tf.nn.relu(tf.matmul(x, x) * 0.01)


x = tf.random.normal([64, 64])
step(x)
print("ready", flush=True)
deadline = time.time() + seconds
i = 0
while time.time() < deadline:
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        step(x)
        if step_sleep:
            time.sleep(step_sleep)
    i += 1
    time.sleep(0.002)
