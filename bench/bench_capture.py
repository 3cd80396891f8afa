"""Capture overhead: the same tf.function for N steps, four ways.

* ``none``: no profiling;
* ``bare``: ``tf.profiler.experimental.start`` / ``stop`` around the loop (the anchor);
* ``traced``: ``tracebridge.trace(fn)``, every call a step (markers included), then stop;
* ``skipped``: ``tracebridge.trace(fn, warmup=N)``: no call selected.

Targets (issue 3, T4 and T5 in bench/targets.py): traced <= 5% more wall time than bare;
skipped <= 1% more than none. They are judged at the issue's 100 steps only (with fewer,
the profiler's start and stop weigh more; with more, less). Timed: the loop plus starting
and stopping the profiler, not reading the profile afterwards. Each pair (none/skipped,
bare/traced) runs interleaved in its own processes, so noise on a shared 2-core machine
hits both sides alike; figures are medians over several fresh processes. Both sides of a
pair share a process, so peak memory is the process's, not one side's.

    python bench/bench_capture.py [--steps 100] [--rounds 7] [--processes 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, python, run_once  # noqa: E402
from targets import result_row, verdict, write_rows  # noqa: E402

TARGET_TRACED = 0.05
TARGET_SKIPPED = 0.01
TARGET_STEPS = 100

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
    capture.stop()
    return capture

def skipped():
    capture = tracebridge.trace(step, warmup=steps)
    for _ in range(steps):
        capture(x)
    capture.stop()
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=TARGET_STEPS)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--json", help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)
    samples: dict[str, list[float]] = {}
    peaks: dict[str, list[float]] = {"idle": [], "profiling": []}
    for _ in range(args.processes):
        for pair in ("idle", "profiling"):
            run = run_once(python("-c", WORKLOAD, str(args.steps), str(args.rounds), pair))
            if run.returncode:
                raise SystemExit(run.output[-2000:])
            peaks[pair].append(run.peak_rss_mb)
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
    rows = result_rows({"steps": args.steps, "rounds": args.rounds, "processes": args.processes,
                        "runs": len(samples["none"]), "median_s": median,
                        "peak_rss_mib": {pair: statistics.median(values) for pair, values in peaks.items()}})
    judged = (lambda line: verdict(line["met"]).upper()) if args.steps == TARGET_STEPS else (
        lambda line: f"not judged: set for {TARGET_STEPS} steps")
    print(f"traced vs bare start/stop: {traced_overhead * 100:+.1f}% ({judged(rows[0])}, target <= +5%)")
    print(f"unselected steps vs no tracing: {skipped_overhead * 100:+.1f}% ({judged(rows[1])}, target <= +1%)")
    if args.json:
        write_rows(args.json, rows)


def result_rows(measured: dict) -> list[dict]:
    """Two rows, in ms per loop of ``steps`` steps: traced against bare start/stop (T4),
    and unselected steps against no tracing (T5); judged at the issue's 100 steps only."""
    median, judged = measured["median_s"], measured["steps"] == TARGET_STEPS
    common = {"benchmark": "Capture overhead", "issue": 3, "unit": "ms"}
    setup = (f"{measured['steps']} steps of a 200-op tf.function, medians of {measured['runs']} runs "
             f"({measured['processes']} processes × {measured['rounds']} interleaved rounds)")
    rows = []
    for ours, anchor, anchor_name, pair, target, limit in (
            ("traced", "bare", "bare tf.profiler start/stop", "profiling", "T4", TARGET_TRACED),
            ("skipped", "none", "no tracing", "idle", "T5", TARGET_SKIPPED)):
        overhead = median[ours] / median[anchor] - 1
        what = ("`tracebridge.trace(fn)`, every call a step" if ours == "traced" else
                "`tracebridge.trace(fn, warmup=steps)`: no call selected")
        rows.append(result_row(
            **common, input=f"{what}; {measured['steps']} steps",
            tracebridge=median[ours] * 1000, anchor_name=anchor_name, anchor=median[anchor] * 1000,
            target=target if judged else None, met=overhead <= limit if judged else None,
            figure=f"{overhead * 100:+.1f}%",
            notes=f"{setup}; timed: the loop plus profiler start/stop, not reading the profile; both sides "
                  f"interleaved in the same processes, so no peak RSS per side (the processes': "
                  f"{measured['peak_rss_mib'][pair]:,.0f} MiB)",
            details=measured))
    return rows


if __name__ == "__main__":
    main()
