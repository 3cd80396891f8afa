"""tracebridge.compat.session with real TensorFlow 2.21: run_traced gives what session.run
gives and fills the caller's RunMetadata (Session, MonitoredSession, a TF2 profiler
running); add_run_metadata feeds both TensorBoard dashboards."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracebridge
from tracebridge.compat.session import add_run_metadata, run_traced
from tests.conftest import build_mlp, mlp_feed


def _names(md) -> set[str]:
    return {node.node_name for dev in md.step_stats.dev_stats for node in dev.node_stats}


@pytest.fixture
def mlp_session(tf):
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = tf.compat.v1.Session(graph=graph)
    session.run(init)
    yield session, graph, x, y, train_op, loss
    session.close()


def test_results_identical_and_run_metadata_filled(tf, mlp_session):
    v1 = tf.compat.v1
    session, graph, x, y, train_op, loss = mlp_session
    feed = mlp_feed(x, y)
    fetches = {"loss": loss, "hidden": [graph.get_tensor_by_name("dense/Relu:0")]}
    plain = session.run(fetches, feed_dict=feed)
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    md = v1.RunMetadata()
    traced = run_traced(session, fetches, feed_dict=feed, options=options, run_metadata=md)
    assert traced.keys() == plain.keys() and isinstance(traced["hidden"], list)
    assert traced["loss"] == plain["loss"]
    np.testing.assert_array_equal(traced["hidden"][0], plain["hidden"][0])
    assert {"dense/Relu", "loss"} <= _names(md)
    assert md.partition_graphs                                   # the caller's other options are kept
    assert options.trace_level == v1.RunOptions.FULL_TRACE       # and the caller's object is not changed
    assert "run" not in vars(session)                            # the session is given back untouched
    # Positional feed_dict, as session.run takes it.
    assert run_traced(session, loss, feed, options=options, run_metadata=v1.RunMetadata()) == plain["loss"]


def test_no_trace_is_a_plain_run(tf, mlp_session):
    v1 = tf.compat.v1
    session, graph, x, y, train_op, loss = mlp_session
    feed = mlp_feed(x, y)
    for options in (None, v1.RunOptions(trace_level=v1.RunOptions.NO_TRACE)):
        md = v1.RunMetadata()
        assert run_traced(session, loss, feed_dict=feed, options=options, run_metadata=md) == \
            session.run(loss, feed_dict=feed)
        assert not md.step_stats.dev_stats


def test_monitored_session(tf):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with graph.as_default():
        with v1.train.MonitoredTrainingSession() as session:
            md = v1.RunMetadata()
            step_before = session.run(v1.train.get_global_step())
            run_traced(session, train_op, feed_dict=mlp_feed(x, y),
                       options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE), run_metadata=md)
            assert session.run(v1.train.get_global_step()) == step_before + 1  # the step ran once
    assert any(node.timeline_label.startswith("GradientDescent/update_dense/kernel/")
               for dev in md.step_stats.dev_stats for node in dev.node_stats)


def test_works_while_a_tf2_profiler_runs(tf, mlp_session, tmp_path):
    v1 = tf.compat.v1
    session, graph, x, y, train_op, loss = mlp_session
    feed = mlp_feed(x, y)
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
    tf.profiler.experimental.start(str(tmp_path))
    try:
        with pytest.raises(tf.errors.AlreadyExistsError):
            session.run(loss, feed_dict=feed, options=options, run_metadata=v1.RunMetadata())
        md = v1.RunMetadata()
        result = run_traced(session, loss, feed_dict=feed, options=options, run_metadata=md)
    finally:
        tf.profiler.experimental.stop()
    assert result == session.run(loss, feed_dict=feed)
    assert {"dense/Relu", "loss"} <= _names(md)


def test_add_run_metadata_feeds_both_dashboards(tf, tmp_path):
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    logdir = tmp_path / "logs"
    md = v1.RunMetadata()
    with graph.as_default():
        with v1.Session(graph=graph) as session:
            session.run(init)
            session.run(train_op, feed_dict=mlp_feed(x, y),
                        options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE), run_metadata=md)
        writer = v1.summary.FileWriter(str(logdir), graph)
        xspace = add_run_metadata(writer, md, "step_3", global_step=3)
        writer.close()
    assert os.path.dirname(os.path.dirname(xspace)) == str(logdir / "plugins" / "profile")
    assert xspace.endswith(".xplane.pb")
    expected = _names(md)
    events = [f for f in os.listdir(logdir) if "tfevents" in f]
    assert len(events) == 1
    from_events = tracebridge.load(logdir / events[0])          # the legacy graph dashboard's data
    assert [(s.number, s.name) for s in from_events.steps] == [(3, "step_3")]
    assert {op.name for op in from_events.records()} == expected
    from_profile = tracebridge.load(logdir)                     # what TensorBoard 2's profile plugin reads
    assert from_profile.source_format == "xspace"
    # Every node, plus the step marker the XSpace's Steps line carries.
    assert {op.name for op in from_profile.records()} == expected | {"train"}
    assert [s.number for s in from_profile.steps] == [3]
    # A RunMetadata without step stats still reaches the writer; there is no profile to write.
    with graph.as_default():
        writer = v1.summary.FileWriter(str(tmp_path / "empty"))
        assert add_run_metadata(writer, v1.RunMetadata(), "nothing") is None
        writer.close()
    assert not (tmp_path / "empty" / "plugins").exists()
