"""Generate a large real XSpace: a tf.function of N tiny ops (add/mul/maximum on
4-element tensors) profiled for S steps. 2000 ops x 1500 steps gives about 46 MB and
3M events (TF_FACTS E.2).

    python bench/gen_xspace.py OUT.xplane.pb [OPS] [STEPS]
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile


def main(argv: list[str]) -> None:
    out = argv[1]
    ops = int(argv[2]) if len(argv) > 2 else 2000
    steps = int(argv[3]) if len(argv) > 3 else 1500
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    @tf.function
    def chain(x):
        for i in range(ops):
            kind = i % 3
            x = tf.add(x, 1.0) if kind == 0 else tf.multiply(x, 0.5) if kind == 1 else tf.maximum(x, 0.0)
        return x

    x = tf.ones([4])
    chain(x)
    logdir = tempfile.mkdtemp(prefix="gen-xspace-")
    try:
        tf.profiler.experimental.start(logdir)
        for step in range(steps):
            with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                chain(x)
        tf.profiler.experimental.stop()
        (path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
        shutil.move(path, out)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    print(f"{out}: {os.path.getsize(out) / 1e6:.1f} MB ({ops} ops x {steps} steps)")


if __name__ == "__main__":
    main(sys.argv)
