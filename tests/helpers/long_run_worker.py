"""Long runs of real captures in a fresh process, measured from /proc (tests/test_long_runs.py).

    python long_run_worker.py MODE COUNT

MODE: ``tf1-steps`` (one SessionTrace over COUNT runs, then COUNT captures of one run each),
``tf2-steps`` (a traced tf.function called COUNT times in one capture, then COUNT calls
with a schedule), ``contexts`` (COUNT sequential ``with tracebridge.trace():`` blocks) or
``server-contexts`` (the same through the profiler-server route). The process's TMPDIR
should be a folder of its own: every entry left in it counts as a leaked temporary file.

Prints one JSON line: per phase, snapshots before and after (RSS, threads, fds, sockets,
listening ports, temporary entries), the seconds it took, and the bytes the capture keeps.
A fresh process gives a clean baseline (no other test's threads, servers or caches).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import threading
import time
import weakref

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracebridge  # noqa: E402
from tracebridge.capture.capture_lock import held as tracebridge_capture_active  # noqa: E402
from tracebridge.capture.profiler import ProfileTrace  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the fd of listdir itself, closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def listening_ports(inodes: set[str]) -> list[int]:
    """TCP ports in LISTEN state (0A) whose socket belongs to this process."""
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def snapshot() -> dict:
    gc.collect()
    inodes = socket_inodes()
    return {
        "rss_mb": round(rss_mb(), 1),
        "python_threads": sorted(t.name for t in threading.enumerate()),
        "tasks": len(os.listdir("/proc/self/task")),
        "fds": len(os.listdir("/proc/self/fd")),
        "sockets": len(inodes),
        "listening": listening_ports(inodes),
        "tmp": sorted(name for name in os.listdir(tempfile.gettempdir())
                      if not name.startswith("__autograph_generated_file")),
        "capture_active": tracebridge_capture_active(),
    }


def phase(results: dict, name: str, run) -> None:
    before = snapshot()
    started = time.perf_counter()
    extra = run() or {}
    seconds = time.perf_counter() - started
    results[name] = {"before": before, "after": snapshot(), "seconds": round(seconds, 2), **extra}


def tf1_steps(count: int, results: dict) -> None:
    from tracebridge.compat.session import run_traced
    from tracebridge.demo import build_mlp
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    rng = np.random.default_rng(0)
    feed = {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}
    session = v1.Session(graph=graph)
    session.run(init)
    for level in ("software", "full"):  # warm-up: kernels, allocator pools, one trace built
        with tracebridge.trace(session, steps=20, trace_level=level) as warm:
            for _ in range(20):
                session.run(train_op, feed)
        len(warm.trace)
    del warm

    def one_capture(level: str):
        def run():
            started = time.perf_counter()
            with tracebridge.trace(session, trace_level=level) as capture:
                for _ in range(count):
                    session.run(train_op, feed)
            captured = time.perf_counter()
            kept = sum(len(data) for _, _, data in capture._runs)
            rss_all_kept = rss_mb()
            trace = capture.trace
            return {"steps": len(trace.steps), "ops": len(trace), "kept_bytes": kept,
                    "rss_with_capture_mb": round(rss_all_kept, 1), "rss_with_trace_mb": round(rss_mb(), 1),
                    "trace_level": trace.metadata["trace_level"],
                    "capture_seconds": round(captured - started, 2),
                    "build_seconds": round(time.perf_counter() - captured, 2)}
        return run

    phase(results, "tf1_one_capture_software", one_capture("software"))
    phase(results, "tf1_one_capture_full", one_capture("full"))

    def separate_runs():
        options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
        for _ in range(count):
            metadata = v1.RunMetadata()
            run_traced(session, train_op, feed_dict=feed, options=options, run_metadata=metadata)
        return {"last_run_nodes": sum(len(d.node_stats) for d in metadata.step_stats.dev_stats)}

    phase(results, "tf1_separate_captures", separate_runs)
    session.close()


def tiny_function():
    @tf.function
    def step(a):
        return tf.nn.relu(tf.matmul(a, a))

    a = tf.random.normal([16, 16], seed=1)
    step(a)
    return step, a


def tf2_steps(count: int, results: dict) -> None:
    step, a = tiny_function()
    warm = tracebridge.trace(step)
    for _ in range(20):
        warm(a)
    warm.stop()
    len(warm.trace)
    del warm

    def one_capture():
        started = time.perf_counter()
        traced = tracebridge.trace(step)
        for _ in range(count):
            traced(a)
        rss_open = rss_mb()
        captured = time.perf_counter()
        traced.stop()
        kept = sum(len(data) for _, data in traced._files)
        trace = traced.trace
        return {"steps": len(trace.steps), "ops": len(trace), "kept_bytes": kept,
                "rss_with_capture_mb": round(rss_open, 1), "rss_with_trace_mb": round(rss_mb(), 1),
                "capture_seconds": round(captured - started, 2),
                "build_seconds": round(time.perf_counter() - captured, 2)}

    def scheduled():
        traced = tracebridge.trace(step, warmup=5, every=10)  # a session of its own per selected call
        for _ in range(count):
            traced(a)
        trace = traced.trace
        return {"steps": len(trace.steps), "ops": len(trace), "sessions": len(traced._files)}

    phase(results, "tf2_one_capture", one_capture)
    phase(results, "tf2_one_capture_again", one_capture)  # the same again: must not grow
    phase(results, "tf2_scheduled", scheduled)


def contexts(count: int, results: dict, **options) -> None:
    step, a = tiny_function()
    alive: list[weakref.ref] = []

    def run_contexts(n: int, keep_refs: bool):
        sizes = []
        for _ in range(n):
            with tracebridge.trace(**options) as capture:
                step(a)
            trace = capture.trace
            sizes.append(sum(len(data) for _, data in capture._files))
            assert len(trace) > 0
            if keep_refs:
                alive.append(weakref.ref(capture))
        return sizes

    run_contexts(2 if options else 20, False)  # warm-up (a server-route context takes a second)
    timings = []

    def run():
        started = time.perf_counter()
        sizes = run_contexts(count, True)
        timings.append(time.perf_counter() - started)
        gc.collect()
        return {"contexts": count, "xspace_bytes_per_context": int(np.mean(sizes)),
                "captures_still_alive": sum(ref() is not None for ref in alive)}

    phase(results, "server_contexts" if options else "contexts", run)


def main() -> None:
    mode, count = sys.argv[1], int(sys.argv[2])
    results: dict = {"mode": mode, "count": count, "rss_after_import_mb": round(rss_mb(), 1)}
    if mode == "tf1-steps":
        tf1_steps(count, results)
    elif mode == "tf2-steps":
        tf2_steps(count, results)
    elif mode == "contexts":
        contexts(count, results)
    elif mode == "server-contexts":
        contexts(count, results, host_tracer_level=2)
    else:
        raise SystemExit(f"unknown mode {mode}")
    results["all_profile_traces_freed"] = not any(isinstance(o, ProfileTrace) for o in gc.get_objects())
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
