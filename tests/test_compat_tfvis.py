"""tracebridge.compat.tfvis against tfvis's own definitions, with real TensorFlow 2.21:
the metrics (a plain reference loop over TF's RunMetadata, written from tfvis's
definitions) on hand-made, random and real runs, a ps + 2 workers cluster, the TF2 path of
the with-block, pickles (safe loading, files real tfvis loads) and the HTML view."""

from __future__ import annotations

import itertools
import json
import math
import os
import pickle
import re

import numpy as np
import pytest

import tracebridge
from tracebridge import CaptureError, OutputError, UnsafePickleError, protos
from tracebridge.capture.capture_lock import held as tracebridge_capture_active
from tracebridge.compat.tfvis import Timeline
from tests.conftest import build_mlp, loopback_cluster, mlp_feed

DEVICE_PATTERNS = (None, "", "worker", "task:1", "/job:ps", "GPU", "no such device")
EXCLUDE_PATTERNS = (None, "", "edge_1", "Horovod", "grad", "no such label")


# --- the reference: tfvis's definitions as plain loops over TF's message -----------------

def _ops(md, device_search_pattern):
    search = "" if device_search_pattern is None else device_search_pattern
    ops = [op for dev in md.step_stats.dev_stats if search in dev.device for op in dev.node_stats]
    return sorted(ops, key=lambda op: op.all_start_micros)


def _is_comm(op, comm_op_name, horovod):
    return " = HorovodAllreduce(" in op.timeline_label if horovod else op.node_name == comm_op_name


def _excluded(op, exclude_pattern):
    return exclude_pattern is not None and exclude_pattern in op.timeline_label


def ref_span(ops):
    low, high = math.inf, 0
    for op in ops:
        low = min(low, op.all_start_micros)
        high = max(high, op.all_start_micros + op.all_end_rel_micros)
    return high - low if low != math.inf else 0


def ref_covered(ops):
    last, total = -math.inf, 0
    for op in ops:
        end = op.all_start_micros + op.all_end_rel_micros
        if op.all_start_micros > last:
            total += op.all_end_rel_micros
        elif end > last:
            total += end - last
        last = max(last, end)
    return total


def reference(md, device=None, exclude=None, comm_op_name="RecvTensor", horovod=False):
    ops = _ops(md, device)
    comm = [op for op in ops if _is_comm(op, comm_op_name, horovod) and not _excluded(op, exclude)]
    return {
        "iteration_time": ref_span(ops),
        "communication_elapsed_time": ref_span(comm),
        "communication_time": ref_covered(comm),
        "computation_time": ref_covered([op for op in ops if not _excluded(op, exclude)]),
    }


def measured(timeline, device=None, exclude=None):
    return {
        "iteration_time": timeline.iteration_time(device),
        "communication_elapsed_time": timeline.communication_elapsed_time(device, exclude),
        "communication_time": timeline.communication_time(device, exclude),
        "computation_time": timeline.computation_time(device, exclude),
    }


def assert_same_as_tfvis(md, timeline_md=None, **timeline_options):
    """Every metric for every device and exclude pattern equals the reference; returns the
    reference values for all devices, no exclusion."""
    timeline = Timeline(run_metadata=timeline_md if timeline_md is not None else md, **timeline_options)
    for device, exclude in itertools.product(DEVICE_PATTERNS, EXCLUDE_PATTERNS):
        expected = reference(md, device, exclude, timeline.comm_op_name, timeline.horovod)
        assert measured(timeline, device, exclude) == expected, (device, exclude)
    return reference(md, comm_op_name=timeline.comm_op_name, horovod=timeline.horovod)


# --- hand-made and random runs -------------------------------------------------------------

def _node(dev, name, start, duration, label=None):
    node = dev.node_stats.add(node_name=name, all_start_micros=start, all_end_rel_micros=duration)
    node.timeline_label = label if label is not None else f"{name} = Op()"


def hand_made(tf):
    md = tf.compat.v1.RunMetadata()
    w0 = md.step_stats.dev_stats.add(device="/job:worker/replica:0/task:0/device:CPU:0")
    _node(w0, "a", 100, 50)                       # [100, 150]
    _node(w0, "nested", 110, 10)                  # inside a: adds nothing to the union
    _node(w0, "tail", 140, 30)                    # overlaps a's end: adds 20
    _node(w0, "RecvTensor", 200, 40, "[64B] [1.0Mb/s] edge_1_x from /job:ps/replica:0/task:0/device:CPU:0 "
                                     "to /job:worker/replica:0/task:0/device:CPU:0")
    _node(w0, "RecvTensor", 220, 60, "[64B] [1.0Mb/s] edge_2_y from /job:ps/replica:0/task:0/device:CPU:0 "
                                     "to /job:worker/replica:0/task:0/device:CPU:0")
    _node(w0, "zero", 300, 0)                     # a gap, then an op of no length
    _node(w0, "allreduce", 310, 25, "allreduce = HorovodAllreduce(grad/a)")
    w1 = md.step_stats.dev_stats.add(device="/job:worker/replica:0/task:1/device:CPU:0")
    _node(w1, "tie_long", 90, 100)                # starts first overall; ties with tie_short
    _node(w1, "tie_short", 90, 5)
    _node(w1, "RecvTensor", 95, 10, "[8B] [2.0Mb/s] edge_3_z from /job:ps/replica:0/task:0/device:CPU:0 "
                                    "to /job:worker/replica:0/task:1/device:CPU:0")
    _node(w1, "allreduce_1", 330, 40, "allreduce_1 = HorovodAllreduce(grad/b, ^ctrl)")
    _node(w1, "odd", 400, -3)                     # a negative length: the sweep's rules still apply
    ps = md.step_stats.dev_stats.add(device="/job:ps/replica:0/task:0/device:CPU:0")
    _node(ps, "RecvTensor", 500, 7, "")
    return md


def test_reference_loop_itself_on_a_tiny_case(tf):
    # The reference is the specification, so check it once by hand: [0,10] [5,15] [2,3] [20,21].
    md = tf.compat.v1.RunMetadata()
    dev = md.step_stats.dev_stats.add(device="/cpu:0")
    for name, start, duration in (("x", 0, 10), ("y", 5, 10), ("z", 2, 1), ("RecvTensor", 20, 1)):
        _node(dev, name, start, duration)
    assert reference(md) == {"iteration_time": 21, "communication_elapsed_time": 1,
                             "communication_time": 1, "computation_time": 16}
    assert measured(Timeline(run_metadata=md)) == reference(md)


def test_metrics_on_hand_made_overlapping_nested_and_horovod_ops(tf):
    md = hand_made(tf)
    values = assert_same_as_tfvis(md)
    assert values == {"iteration_time": 507 - 90, "communication_elapsed_time": 507 - 95,
                      "communication_time": 10 + 80 + 7, "computation_time": 244}
    horovod = assert_same_as_tfvis(md, horovod=True)
    assert horovod["communication_elapsed_time"] == 370 - 310 and horovod["communication_time"] == 60
    # A comm_op_name picks other nodes; exclude_pattern is a substring of the label.
    assert_same_as_tfvis(md, comm_op_name="allreduce")
    timeline = Timeline(run_metadata=md)
    assert timeline.communication_time(exclude_pattern="edge_1") == 10 + 60 + 7
    assert timeline.computation_time(exclude_pattern="") == 0   # "" is in every label, as in tfvis
    assert timeline.iteration_time("no such device") == 0


def test_metrics_on_random_runs_equal_the_reference(tf):
    rng = np.random.default_rng(7)
    labels = ("", "x = Op(a)", "y = HorovodAllreduce(grad/q)", "edge_1 from ps", "grad/w = Mul(a)")
    for _ in range(3):
        md = tf.compat.v1.RunMetadata()
        for device in ("/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0",
                       "/job:worker/replica:0/task:1/device:GPU:0", "/job:worker/replica:0/task:1/device:CPU:0"):
            dev = md.step_stats.dev_stats.add(device=device)
            for _ in range(int(rng.integers(0, 400))):
                # Few distinct starts, so that ties are common; a few negative lengths.
                _node(dev, str(rng.choice(["RecvTensor", "MatMul", "allreduce"])), int(rng.integers(0, 300)),
                      int(rng.integers(-2, 60)), str(rng.choice(labels)))
        assert_same_as_tfvis(md)
        assert_same_as_tfvis(md, horovod=True)


def test_metrics_on_a_real_capture_and_on_tracebridges_own_message(tf_run):
    md = tf_run["md"]
    values = assert_same_as_tfvis(md)
    assert 0 < values["computation_time"] <= values["iteration_time"]
    assert values["communication_time"] == 0  # one local CPU: no RecvTensor
    # The same bytes in tracebridge's own schema (what from_pickle gives) measure the same.
    assert_same_as_tfvis(md, timeline_md=protos.RunMetadata.FromString(md.SerializeToString()))


# --- collecting with real TensorFlow -----------------------------------------------------------

def test_cluster_run_with_recvtensor_ops(tf, tmp_path):
    """1 ps + 2 workers on loopback; the with-block starts in eager mode, so it starts a TF2
    capture that tl.kwargs must discard before the FULL_TRACE run."""
    v1 = tf.compat.v1
    servers, graph, x, loss, train_op, init = loopback_cluster(tf)
    # Not "with Session() as session": that makes the session's graph the default one
    # (graph mode), where the Timeline starts no TF2 capture.
    session = v1.Session(servers[1].target, graph=graph)
    try:
        session.run(init)
        feed = {x: np.ones((16, 32), np.float32)}
        session.run(train_op, feed_dict=feed)
        with Timeline() as tl:
            assert tracebridge_capture_active()      # eager at the start: TF2 capture running
            kwargs = tl.kwargs
            assert not tracebridge_capture_active()  # ... until a session is about to run
            session.run([loss, train_op], feed_dict=feed, **kwargs)
    finally:
        session.close()
    md = tl.run_metadata
    assert kwargs["options"].trace_level == v1.RunOptions.FULL_TRACE and md.partition_graphs
    names = {node.node_name for dev in md.step_stats.dev_stats for node in dev.node_stats}
    assert "RecvTensor" in names and "h" in names
    values = assert_same_as_tfvis(md)
    # One device's communication time covers its longest receive. Which devices record the
    # RecvTensor rows varies from run to run, and on loopback a receive can take under a
    # microsecond (it rounds to 0), so the device is the one with the longest receive.
    longest = {dev.device: max(node.all_end_rel_micros for node in dev.node_stats if node.node_name == "RecvTensor")
               for dev in md.step_stats.dev_stats if any(node.node_name == "RecvTensor" for node in dev.node_stats)}
    device = max(longest, key=longest.get)
    assert Timeline(run_metadata=md).communication_time(device) >= longest[device]
    assert values["communication_time"] >= longest[device]
    assert tl.wall_clock_elapsed > 0
    trace = tl.trace
    assert {(d.job, d.task) for d in trace.devices} == {("ps", 0), ("worker", 0), ("worker", 1)}
    assert trace.transfers.rows > 0
    page = tmp_path / "cluster.html"
    assert tl.visualize(str(page), device_pattern="job:ps") is None
    meta = _meta(page.read_text())
    assert [d["name"] for d in meta["devices"]] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert meta["hidden_devices"] == 2
    del servers


def test_tf2_code_in_the_block_is_traced(tf):
    a = tf.random.stateless_normal([128, 128], seed=(1, 2))

    @tf.function
    def step(m):
        return tf.reduce_sum(tf.nn.relu(tf.matmul(m, m)))

    step(a)  # trace the function before the block
    with Timeline() as tl:
        result = step(a)
    assert np.isfinite(result.numpy())
    assert not tracebridge_capture_active()
    trace = tl.trace
    assert trace.source_format == "tf2"
    assert {"MatMul", "Relu", "Sum"} <= {op.name for op in trace.records()}
    # The StepStats written from the trace is what the metrics measure.
    md = tl.run_metadata
    assert type(md).__module__ == "tensorflow.core.protobuf.config_pb2"
    names = {node.node_name for dev in md.step_stats.dev_stats for node in dev.node_stats}
    assert {"MatMul", "Relu"} <= names
    values = assert_same_as_tfvis(md)
    assert 0 < values["computation_time"] <= values["iteration_time"]
    assert values["iteration_time"] <= tl.wall_clock_elapsed * 1e6


def test_tf1_graph_in_tf2_program_the_session_wins(tf):
    v1 = tf.compat.v1
    from tensorflow.python.profiler import profiler_v2
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = v1.Session(graph=graph)
    try:
        session.run(init)
        assert tf.executing_eagerly()
        with Timeline() as tl:
            assert tracebridge_capture_active()
            tf.constant(1.0) + 1.0  # eager work before the session: discarded with the capture
            session.run(train_op, feed_dict=mlp_feed(x, y), **tl.kwargs)  # FULL_TRACE: no conflict
            assert profiler_v2._profiler is None and not tracebridge_capture_active()
    finally:
        session.close()
    md = tl.run_metadata
    assert md.step_stats.dev_stats and md.partition_graphs
    trace = tl.trace
    assert trace.source_format == "tfvis"
    assert "dense/Relu" in {op.name for op in trace.records()}
    assert "ResourceApplyGradientDescent" in {op.op_type for op in trace.records()}
    assert_same_as_tfvis(md)


def test_inside_another_capture_the_session_still_traces(tf):
    """A TF2 profiler someone else runs: the block cannot trace TF2 code (a warning says so),
    and kwargs asks for SOFTWARE_TRACE, since FULL_TRACE would fail after the step ran."""
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = v1.Session(graph=graph)
    try:
        session.run(init)
        with tracebridge.trace():
            with pytest.warns(RuntimeWarning, match="not traced"):
                with Timeline() as tl:
                    with pytest.warns(RuntimeWarning, match="SOFTWARE_TRACE"):
                        kwargs = tl.kwargs
                    session.run(loss, feed_dict=mlp_feed(x, y), **kwargs)
    finally:
        session.close()
    assert kwargs["options"].trace_level == v1.RunOptions.SOFTWARE_TRACE
    assert len(tl.notes) == 2
    assert {"dense/Relu", "loss"} <= {op.name for op in tl.trace.records()}


def test_graph_mode_starts_no_profiler(tf):
    with tf.Graph().as_default():
        assert not tf.executing_eagerly()
        with Timeline() as tl:
            assert not tracebridge_capture_active()
    assert not tl.run_metadata.step_stats.dev_stats
    assert len(tl.trace) == 0 and tl.iteration_time() == 0
    # "with Session() as s:" makes the session's graph the default: graph mode too.
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        with Timeline() as tl:
            assert not tracebridge_capture_active()
            session.run(loss, feed_dict=mlp_feed(x, y), **tl.kwargs)
    assert {"dense/Relu", "loss"} <= {op.name for op in tl.trace.records()}


def test_an_exception_in_the_block_propagates_and_stops_the_profiler(tf, tmp_path):
    class Boom(Exception):
        pass

    error = Boom("from the block")
    with pytest.raises(Boom) as caught:
        with Timeline() as tl:
            assert tracebridge_capture_active()
            tf.matmul(tf.ones([4, 4]), tf.ones([4, 4]))
            raise error
    assert caught.value is error
    assert not tracebridge_capture_active()
    assert not tl.run_metadata.step_stats.dev_stats  # a failed block keeps nothing
    tf.profiler.experimental.start(str(tmp_path))   # TF's profiler is free again
    tf.profiler.experimental.stop()


def test_kwargs_needs_the_with_block():
    with pytest.raises(CaptureError, match="context manager"):
        Timeline().kwargs
    with pytest.raises(CaptureError, match="collected"):
        Timeline().to_pickle("never-written.pickle")
    assert not os.path.exists("never-written.pickle")


# --- pickles ----------------------------------------------------------------------------------

def test_pickles_round_trip_and_load_in_real_tfvis_style(tf_run, tmp_path):
    md = tf_run["md"]
    path = tmp_path / "run.pickle"
    Timeline(run_metadata=md).to_pickle(path)
    # What real tfvis does with the file: pickle.load, with TensorFlow installed.
    with open(path, "rb") as handle:
        loaded = pickle.load(handle)
    assert type(loaded) is type(md) and loaded == md
    again = Timeline.from_pickle(path, comm_op_name="RecvTensor")
    assert again.run_metadata.SerializeToString() == md.SerializeToString()
    assert measured(again) == reference(md)
    # A file written from tracebridge's own message is the same pickle of TF's class.
    again.to_pickle(tmp_path / "again.pickle")
    assert (tmp_path / "again.pickle").read_bytes() == path.read_bytes()
    # tfvis's own files (pickle.dump(run_metadata)) load too.
    from_tf = Timeline.from_pickle(tf_run["pickle"], horovod=True)
    assert from_tf.horovod and from_tf.run_metadata.SerializeToString() == md.SerializeToString()
    assert [f for f in os.listdir(tmp_path) if f.startswith(".tracebridge-")] == []


def test_a_crafted_pickle_runs_nothing(tmp_path):
    canary = tmp_path / "canary"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {canary}",)

    for protocol in (0, 2, 4):
        path = tmp_path / f"evil{protocol}.pickle"
        path.write_bytes(pickle.dumps(Payload(), protocol=protocol))
        with pytest.raises(UnsafePickleError, match="system"):
            Timeline.from_pickle(path)
        # Inside a list, where a tfvis pickle could hold several messages: still refused.
        path.write_bytes(pickle.dumps([Payload()], protocol=protocol))
        with pytest.raises(UnsafePickleError):
            Timeline.from_pickle(path)
    assert not canary.exists()


def test_to_pickle_is_atomic(tf1_files, tmp_path):
    md = protos.RunMetadata.FromString(tf1_files["pb"].read_bytes())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputError):
        Timeline(run_metadata=md).to_pickle(blocker / "run.pickle")
    target = tmp_path / "folder.pickle"
    target.mkdir()  # the target is a folder: refused, nothing left beside it
    with pytest.raises(OutputError):
        Timeline(run_metadata=md).to_pickle(target)
    assert sorted(os.listdir(tmp_path)) == ["a-file", "folder.pickle"]


# --- the view ---------------------------------------------------------------------------------

def _meta(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="tb0-meta"[^>]*>(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def test_visualize_returns_or_writes_the_page(tf1_files, tmp_path):
    md = protos.RunMetadata.FromString(tf1_files["pb"].read_bytes())
    timeline = Timeline(run_metadata=md)
    page = timeline.visualize()
    assert page.startswith("<!DOCTYPE html>") or page.lstrip().lower().startswith("<!doctype html>")
    meta = _meta(page)
    assert meta["op_count"] == sum(len(d.node_stats) for d in md.step_stats.dev_stats)
    out = tmp_path / "view.html"
    assert timeline.visualize(out) is None
    assert _meta(out.read_text())["op_count"] == meta["op_count"]
    assert _meta(timeline.visualize(device_pattern="GPU"))["devices"] == []
