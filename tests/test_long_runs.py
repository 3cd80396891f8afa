"""Long runs with real TensorFlow 2.21: 1,000 traced steps (TF1 and TF2) and 1,000
sequential ``with tracebridge.trace():`` blocks leak no memory, threads, sockets, ports,
file descriptors or temporary files; and two threads tracing at once get the documented
behaviour (a clear CaptureError for TF2 captures, no conflict for TF1 traces).

The long runs go in a fresh process each (tests/helpers/long_run_worker.py): a clean
baseline, no other test's threads or servers, and a TMPDIR of their own in which every
leftover entry is a leaked temporary file. Their figures are printed (``pytest -s``).
No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge import CaptureError
from tracebridge.capture.capture_lock import held as tracebridge_capture_active
from tests.conftest import build_mlp, mlp_feed

WORKER = Path(__file__).parent / "helpers" / "long_run_worker.py"
COUNT = 1000  # the figure: steps per capture, and sequential contexts

# RSS bounds. A fresh process after warm-up is flat to within about 1 MB here (measured:
# +0.3 MB over 1,000 contexts, 0.0 MB for a repeated 1,000-step TF1 capture); allocator
# and TF pool noise stays below a few MB. What must be caught costs much more:
# keeping every context's capture alive grows RSS by 26 MB per 1,000 contexts, and
# keeping a 1,000-step capture's data (its trace and raw steps) by 15-20 MB per repeat.
FLAT_MB = 8.0


def _run_worker(mode: str, count: int, tmp_path: Path) -> dict:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(private_tmp), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(WORKER), mode, str(count)], capture_output=True,
                            text=True, env=env, timeout=900, cwd=str(Path(__file__).parents[1]))
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    leftovers = [p.name for p in private_tmp.iterdir() if not p.name.startswith("__autograph_generated_file")]
    assert leftovers == [], "temporary files left behind"
    assert figures["all_profile_traces_freed"]
    return figures


def _report(name: str, phase: dict) -> float:
    before, after = phase["before"], phase["after"]
    growth = after["rss_mb"] - before["rss_mb"]
    per = phase.get("steps") or phase.get("contexts") or COUNT
    print(f"\n[long run] {name}: RSS {before['rss_mb']:.1f} -> {after['rss_mb']:.1f} MB "
          f"(growth {growth:+.1f} MB, {growth * 1024 / per:+.2f} KB per step/context); "
          f"tasks {before['tasks']}->{after['tasks']}, fds {before['fds']}->{after['fds']}, "
          f"sockets {before['sockets']}->{after['sockets']}, listening {before['listening']}->{after['listening']}, "
          f"tmp {len(before['tmp'])}->{len(after['tmp'])}; {phase['seconds']} s; "
          + ", ".join(f"{k}={v}" for k, v in phase.items() if k not in ("before", "after", "seconds")))
    return growth


def _assert_no_leaks(phase: dict) -> None:
    before, after = phase["before"], phase["after"]
    assert after["python_threads"] == before["python_threads"]
    assert after["tasks"] == before["tasks"]        # native threads too (/proc/self/task)
    assert after["fds"] == before["fds"]
    assert after["sockets"] == before["sockets"]
    assert after["listening"] == before["listening"]
    assert after["tmp"] == before["tmp"] == []
    assert not after["capture_active"]


@pytest.mark.slow
def test_thousand_sequential_contexts(tf, tmp_path):
    figures = _run_worker("contexts", COUNT, tmp_path)
    phase = figures["contexts"]
    growth = _report("1,000 sequential with-trace contexts", phase)
    _assert_no_leaks(phase)
    assert phase["captures_still_alive"] == 0  # no capture object outlives its use
    assert growth < FLAT_MB


@pytest.mark.slow
def test_thousand_traced_tf2_steps(tf, tmp_path):
    figures = _run_worker("tf2-steps", COUNT, tmp_path)
    first, again, scheduled = (figures[k] for k in ("tf2_one_capture", "tf2_one_capture_again", "tf2_scheduled"))
    _report("TF2: one capture of 1,000 calls", first)
    growth_again = _report("TF2: the same capture again", again)
    growth_scheduled = _report("TF2: 1,000 calls, every 10th profiled (100 sessions)", scheduled)
    for phase in (first, again, scheduled):
        _assert_no_leaks(phase)
    assert first["steps"] == again["steps"] == COUNT and scheduled["steps"] == scheduled["sessions"] == 100
    # The first capture holds its data by design (the trace is built from it), and its
    # high-water mark stays with the allocator; doing it again must reuse that memory.
    assert growth_again < FLAT_MB and growth_scheduled < FLAT_MB
    # While capturing, what grows is TF's event buffer: bounded by a few times the XSpace it
    # becomes, not by anything kept per call on the Python side.
    assert first["rss_with_capture_mb"] - first["before"]["rss_mb"] < FLAT_MB + 4 * first["kept_bytes"] / 2**20


@pytest.mark.slow
def test_thousand_traced_tf1_steps(tf, tmp_path):
    figures = _run_worker("tf1-steps", COUNT, tmp_path)
    software, full, separate = (figures[k] for k in ("tf1_one_capture_software", "tf1_one_capture_full",
                                                     "tf1_separate_captures"))
    _report("TF1: one SessionTrace over 1,000 runs (SOFTWARE_TRACE)", software)
    growth_full = _report("TF1: the same with FULL_TRACE (a profiler session per run)", full)
    growth_separate = _report("TF1: 1,000 runs, each its own capture (run_traced)", separate)
    for phase in (software, full, separate):
        _assert_no_leaks(phase)
    assert software["steps"] == full["steps"] == COUNT
    assert full["trace_level"] == "FULL_TRACE"
    # Per traced run a SessionTrace keeps the run's serialized RunMetadata, nothing else.
    per_run = software["kept_bytes"] / COUNT
    print(f"\n[long run] TF1 keeps {per_run / 1024:.1f} KB per traced run until the trace is built")
    assert software["rss_with_capture_mb"] - software["before"]["rss_mb"] < FLAT_MB + 2 * software["kept_bytes"] / 2**20
    assert growth_full < FLAT_MB and growth_separate < FLAT_MB


@pytest.mark.slow
def test_server_route_contexts_leak_no_threads_or_ports(tf, tmp_path):
    """The tracer-level route: a profiler server (started once, kept: TF cannot stop it),
    a capture thread and a gRPC channel per capture. At about a second a capture, 10 of
    them show a per-capture leak of threads, sockets or folders as well as 1,000 would."""
    figures = _run_worker("server-contexts", 10, tmp_path)
    phase = figures["server_contexts"]
    growth = _report("10 server-route contexts", phase)
    _assert_no_leaks(phase)
    assert len(phase["after"]["listening"]) == 1  # the one profiler server
    assert growth < FLAT_MB


# --- two threads at once ------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_step(tf):
    @tf.function
    def step(a):
        return tf.nn.relu(tf.matmul(a, a))

    a = tf.random.normal([32, 32], seed=5)
    step(a)
    return lambda: step(a)


def test_two_threads_tf2_second_is_refused_then_both_work(tiny_step):
    """The rule for TF2: one capture at a time per process; the second gets CaptureError
    at once (not queued), from whichever thread; when the first ends, the next works."""
    inside, release = threading.Event(), threading.Event()
    outcome = {}

    def first():
        with tracebridge.trace() as capture:
            tiny_step()
            inside.set()
            release.wait(30)
            tiny_step()
        outcome["first"] = len(capture.trace)

    def second():
        try:
            with tracebridge.trace():
                tiny_step()
        except CaptureError as error:
            outcome["second"] = str(error)

    one = threading.Thread(target=first)
    one.start()
    assert inside.wait(30)
    two = threading.Thread(target=second)
    two.start()
    two.join(30)
    release.set()
    one.join(30)
    assert outcome["first"] > 0
    assert "another tracebridge capture is running" in outcome["second"]
    assert "\n" not in outcome["second"]
    assert not tracebridge_capture_active()
    results = []
    threads = [threading.Thread(target=lambda: results.append(_traced_len(tiny_step))) for _ in range(2)]
    for thread in threads:  # one after the other now: both work
        thread.start()
        thread.join(30)
    assert len(results) == 2 and all(n > 0 for n in results)


def _traced_len(step) -> int:
    with tracebridge.trace() as capture:
        step()
    return len(capture.trace)


def test_two_threads_traced_functions_race(tiny_step):
    """Both threads call traced functions in a loop: every call either runs profiled or
    raises CaptureError; the profiler ends free and each thread's trace holds its steps."""
    barrier = threading.Barrier(2)
    found = {}

    def worker(name):
        traced = tracebridge.trace(tiny_step, steps=1)
        barrier.wait(30)
        refused = 0
        for _ in range(50):
            try:
                traced()
            except CaptureError:  # the other thread's capture runs: try again shortly
                refused += 1
                traced = tracebridge.trace(tiny_step, steps=1)
                time.sleep(0.01)
                continue
            break
        found[name] = (len(traced.trace.steps), refused)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(found) == {"a", "b"}
    assert all(steps == 1 for steps, _ in found.values())
    assert not tracebridge_capture_active()


def _session(tf):
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = tf.compat.v1.Session(graph=graph)
    session.run(init)
    return session, train_op, mlp_feed(x, y)


def test_two_threads_tf1_full_trace_never_conflict(tf):
    """TF1 rule: traces of different sessions may run at once. FULL_TRACE runs start a
    profiler session each, and two at once fail after the step ran (measured: 85 of 400
    runs raised AlreadyExistsError); tracebridge gives each FULL_TRACE run the capture
    turn, and a run that cannot have it uses SOFTWARE_TRACE (same fields on CPU)."""
    sessions = [_session(tf) for _ in range(2)]
    errors, captures = [], {}
    barrier = threading.Barrier(2)

    def worker(index):
        session, train_op, feed = sessions[index]
        barrier.wait(30)
        try:
            with tracebridge.trace(session, trace_level="full") as capture:
                for _ in range(150):
                    session.run(train_op, feed)
        except Exception as error:  # the test fails below with it
            errors.append(repr(error))
        captures[index] = capture

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    for capture in captures.values():
        trace = capture.trace
        assert trace.metadata["runs_traced"] == 150  # every run traced, none failed
        notes = trace.metadata.get("notes", "")
        assert trace.metadata["trace_level"] == "FULL_TRACE" or "SOFTWARE_TRACE was used" in notes
    notes = [c.trace.metadata.get("notes", "") for c in captures.values()]
    print(f"\n[threads] TF1 FULL_TRACE in two threads: notes {notes}")
    assert not tracebridge_capture_active()
    for session, *_ in sessions:
        session.close()


def test_tf1_trace_while_another_thread_runs_a_tf2_capture(tf, tiny_step):
    session, train_op, feed = _session(tf)
    inside, release = threading.Event(), threading.Event()

    def tf2():
        with tracebridge.trace():
            inside.set()
            while not release.is_set():
                tiny_step()

    thread = threading.Thread(target=tf2)
    thread.start()
    assert inside.wait(30)
    try:
        with tracebridge.trace(session, trace_level="full") as capture:
            for _ in range(5):
                session.run(train_op, feed)
    finally:
        release.set()
        thread.join(30)
    trace = capture.trace
    assert trace.metadata["runs_traced"] == 5
    assert "SOFTWARE_TRACE was used instead of FULL_TRACE" in trace.metadata["notes"]
    # The same session cannot be traced twice at once; another session can.
    other, other_op, other_feed = _session(tf)
    with tracebridge.trace(session):
        with pytest.raises(CaptureError, match="already wrapped"):
            tracebridge.trace(session).__enter__()
        with tracebridge.trace(other) as second:
            other.run(other_op, other_feed)
    assert len(second.trace.steps) == 1
    with tracebridge.trace() as after:  # and the next TF2 capture works
        tiny_step()
    assert len(after.trace) > 0
    session.close()
    other.close()


def test_results_unchanged_by_tracing_in_threads(tf):
    """What session.run returns is the same traced or not, in threads too."""
    session, train_op, feed = _session(tf)
    loss = session.graph.get_tensor_by_name("loss:0")
    plain = session.run(loss, feed)
    values = []

    def worker():
        with tracebridge.trace(session, trace_level="full"):
            values.append(session.run(loss, feed))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(30)
    assert np.isclose(values[0], plain)
    session.close()
