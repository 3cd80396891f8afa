"""Capture overhead: the same tf.function for N steps, four ways.

* ``none``: no profiling;
* ``bare``: ``tf.profiler.experimental.start`` / ``stop`` around the loop (the anchor);
* ``traced``: ``tracebridge.trace(fn)``, every call a step (markers included), then stop;
* ``skipped``: ``tracebridge.trace(fn, warmup=N)``: no call selected.

Targets: traced <= 5% more wall time than bare; skipped <= 1% more than none. Timed: the
loop plus starting and stopping the profiler, not reading the profile afterwards. Each pair
(none/skipped, bare/traced) runs interleaved in its own processes, so noise on a shared
2-core machine hits both sides alike; figures are medians over several fresh processes.

    python bench/bench_capture.py [--steps 100] [--rounds 7] [--processes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, python, run_once  # noqa: E402

WORKLOAD = r"""
import json, os, sys, tempfile, time, shutil
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
import tracebridge
import tracebridge.capture  # imported before timing: a start-up cost, not a per-step one
steps, rounds, pair = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

@tf.function
def step(x):
    for i in range(200):
        x = tf.add(x, 1.0) if i % 2 else tf.multiply(x, 0.5)
    return x

x = tf.ones([64, 64])
for _ in range(5):
    step(x)  # trace and warm up before timing

def none():
    for _ in range(steps):
        step(x)

def bare():
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    for _ in range(steps):
        step(x)
    tf.profiler.experimental.stop()
    return logdir

def traced():
    capture = tracebridge.trace(step)
    for _ in range(steps):
        capture(x)
    capture.finish()
    return capture

def skipped():
    capture = tracebridge.trace(step, warmup=steps)
    for _ in range(steps):
        capture(x)
    capture.finish()
    return capture

# Each process runs one pair: a profiling session leaves work behind in TF (export,
# freeing buffers) that would slow whatever ran next and blur a 1% comparison.
modes = (none, skipped) if pair == "idle" else (bare, traced)
results = {f.__name__: [] for f in modes}
keep = []
for _ in range(rounds):
    for f in modes:
        start = time.perf_counter()
        leftover = f()
        results[f.__name__].append(time.perf_counter() - start)
        keep.append(leftover)  # cleaned up after the timing, not inside it
print(json.dumps(results))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--processes", type=int, default=3)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    for _ in range(args.processes):
        for pair in ("idle", "profiling"):
            run = run_once(python("-c", WORKLOAD, str(args.steps), str(args.rounds), pair))
            if run.returncode:
                raise SystemExit(run.output[-2000:])
            for mode, values in json.loads(run.output.strip().splitlines()[-1]).items():
                samples.setdefault(mode, []).extend(values)
    median = {m: statistics.median(v) for m, v in samples.items()}
    traced_overhead = median["traced"] / median["bare"] - 1
    skipped_overhead = median["skipped"] / median["none"] - 1
    print(f"machine: {machine()}")
    print(f"{args.steps} steps of a 200-op tf.function; medians of {len(samples['none'])} runs "
          f"({args.processes} processes x {args.rounds} interleaved rounds)")
    for mode, value in median.items():
        print(f"  {mode:8} {value * 1000:8.1f} ms")
    print(f"traced vs bare start/stop: {traced_overhead * 100:+.1f}% "
          f"({'MET' if traced_overhead <= 0.05 else 'NOT MET'}, target <= +5%)")
    print(f"unselected steps vs no tracing: {skipped_overhead * 100:+.1f}% "
          f"({'MET' if skipped_overhead <= 0.01 else 'NOT MET'}, target <= +1%)")


if __name__ == "__main__":
    main()
