"""TF1 capture with real TensorFlow 2.21: plain sessions, MonitoredTrainingSession, a
ps + workers cluster on loopback, step selection, and a TF2 profiler running meanwhile."""

from __future__ import annotations

import numpy as np
import pytest

import tracebridge
from tracebridge import CaptureError
from tracebridge.capture.schedule import Schedule
from tests.conftest import build_mlp, loopback_cluster, mlp_feed


def test_schedule_is_a_pure_function_of_the_index():
    assert [i for i in range(12) if Schedule(warmup=2, every=3, steps=2).wants(i)] == [2, 5]
    assert [i for i in range(5) if Schedule().wants(i)] == [0, 1, 2, 3, 4]
    assert Schedule(warmup=1, steps=2).done(3) and not Schedule(warmup=1, steps=2).done(2)
    with pytest.raises(ValueError):
        Schedule(every=0)


def test_session_trace_selected_runs(tf, tf_build):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with v1.Session(graph=graph) as session:
        session.run(init)
        feed = mlp_feed(x, y)
        original_run = session.run
        with tracebridge.trace(session, warmup=1, every=2, steps=2) as capture:
            results = [session.run(loss, feed_dict=feed) for _ in range(7)]
        assert session.run == original_run  # the session is given back untouched
    assert all(np.isfinite(r) for r in results)
    trace = capture.trace
    assert [(s.number, s.name) for s in trace.steps] == [(1, "run 1"), (3, "run 3")]
    assert trace.metadata["runs_seen"] == 7 and trace.metadata["runs_traced"] == 2
    assert trace.metadata["trace_level"] == "SOFTWARE_TRACE"  # CPU only: same fields, no conflict
    assert trace.metadata["tf_version"] == tf.__version__
    assert trace.metadata["onednn"] is tf_build.onednn
    names = {o.name for o in trace.records()}
    assert {"dense/Relu", "loss", "_SOURCE"} <= names
    ops = {o.name: o for o in trace.filter(step=1).records()}
    assert ops["dense/Relu"].op_type == "Relu" and tf_build.computes(ops["dense/Relu"].kernel, "Relu")
    for step in trace.steps:
        mine = trace.filter(step=step.number)
        assert mine.start_ns >= step.start_ns and mine.end_ns <= step.end_ns


def test_user_options_and_metadata_are_respected(tf):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with v1.Session(graph=graph) as session:
        session.run(init)
        mine = v1.RunMetadata()
        options = v1.RunOptions(output_partition_graphs=True)
        with tracebridge.trace(session, trace_level="full") as capture:
            session.run(loss, feed_dict=mlp_feed(x, y), options=options, run_metadata=mine)
    assert mine.step_stats.dev_stats and mine.partition_graphs  # the caller's RunMetadata is filled
    assert options.trace_level == v1.RunOptions.NO_TRACE          # the caller's options are not changed
    assert capture.trace.metadata["trace_level"] == "FULL_TRACE"


def test_untraced_runs_pass_through(tf):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with v1.Session(graph=graph) as session:
        session.run(init)
        md = v1.RunMetadata()
        with tracebridge.trace(session, steps=0) as capture:
            session.run(loss, feed_dict=mlp_feed(x, y), run_metadata=md)
    assert not md.step_stats.dev_stats
    assert len(capture.trace) == 0 and capture.trace.steps == ()


def test_monitored_training_session(tf, tmp_path):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with graph.as_default():
        with v1.train.MonitoredTrainingSession(checkpoint_dir=None) as session:
            with tracebridge.trace(session, warmup=1, steps=2) as capture:
                for _ in range(4):
                    session.run(train_op, feed_dict=mlp_feed(x, y))
    trace = capture.trace
    assert [s.number for s in trace.steps] == [1, 2]
    assert any(o.op_type == "ResourceApplyGradientDescent" for o in trace.records())
    out = tmp_path / "mts.json"
    trace.save(out)
    assert len(tracebridge.load(out)) == len(trace)


def test_distributed_cluster_on_loopback(tf, tmp_path):
    """1 ps + 2 workers in one process (TF_FACTS B): one device per task, RecvTensor transfers."""
    v1 = tf.compat.v1
    servers, graph, x, loss, train_op, init = loopback_cluster(tf)
    with v1.Session(servers[1].target, graph=graph) as session:
        session.run(init)
        feed = {x: np.ones((16, 32), np.float32)}
        with tracebridge.trace(session, steps=2) as capture:
            for _ in range(2):
                session.run([loss, train_op], feed_dict=feed)
    trace = capture.trace
    tasks = {(d.job, d.task) for d in trace.devices}
    assert tasks == {("ps", 0), ("worker", 0), ("worker", 1)}
    assert len(trace.devices) == 3  # RPC and executor records of a task share one device
    transfers = trace.transfers
    assert transfers.rows > 0 and (transfers["bytes"] > 0).all()
    sources = set(trace.column_strings("transfers", "src"))
    destinations = set(trace.column_strings("transfers", "dst"))
    assert any("/job:ps/" in s for s in sources) and any("/job:worker/" in d for d in destinations)
    recv = [o for o in trace.records() if o.name == "RecvTensor"]
    assert len(recv) == transfers.rows and all(o.duration_ns >= 0 for o in recv)
    info = trace.info()
    assert info["transfers"]["bytes"] == int(transfers["bytes"].sum())
    out = tmp_path / "cluster.json"
    trace.save(out)
    again = tracebridge.load(out)
    assert again.transfers.rows == transfers.rows
    # The same cluster through MonitoredTrainingSession: its target is found through the wrappers.
    with graph.as_default():
        with v1.train.MonitoredTrainingSession(master=servers[1].target) as monitored:
            with tracebridge.trace(monitored, steps=1) as capture:
                monitored.run([loss, train_op], feed_dict=feed)
    assert capture.trace.metadata["trace_level"] == "FULL_TRACE"
    assert capture.trace.transfers.rows > 0
    del servers


def test_tf2_profiler_active_falls_back_to_software_trace(tf, tmp_path):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with v1.Session(graph=graph) as session:
        session.run(init)
        tf.profiler.experimental.start(str(tmp_path))
        try:
            with tracebridge.trace(session, trace_level="full") as capture:
                session.run(train_op, feed_dict=mlp_feed(x, y))
        finally:
            tf.profiler.experimental.stop()
    trace = capture.trace
    assert len(trace) > 0
    assert "SOFTWARE_TRACE was used instead of FULL_TRACE" in trace.metadata["notes"]


def test_capture_refuses_what_it_cannot_trace(tf):
    with pytest.raises(CaptureError, match="a TF1 session, a function or nothing"):
        tracebridge.trace(42)
    graph, *_ = build_mlp(tf)
    with tf.compat.v1.Session(graph=graph) as session:
        with pytest.raises(CaptureError, match="trace_level"):
            tracebridge.trace(session, trace_level="loud")
        with tracebridge.trace(session):
            with pytest.raises(CaptureError, match="already wrapped"):
                tracebridge.trace(session).__enter__()
