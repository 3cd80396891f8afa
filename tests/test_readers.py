"""Every input form users have: the real corpus and real TF 2.21 captures saved each way.

Tests that read protobuf forms (RunMetadata, pbtxt, pickles, event files) run with each wire
decoder (``wire_decoder``: the C loop and numpy alone), except the one that drives a live TF
session and the one whose subject is the Chrome JSON it writes."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

import tracebridge
from tracebridge.formats import sniff

CHROME_FILES = ["blackbox_attacks_timeline_01.json", "ikhlestov_cpu_timeline_01.json",
                "ikhlestov_cpu_timeline_02_step_0.json", "ikhlestov_gpu_timeline_01.json",
                "ikhlestov_gpu_timeline_03_merged_5_runs.json"]


def x_events(path):
    data = json.loads(open(path, "rb").read())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X"]


def _process_names(path) -> dict:
    data = json.loads(open(path, "rb").read())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}


@pytest.mark.parametrize("name", CHROME_FILES)
def test_corpus_chrome_loads_summarizes_and_converts(corpus, tmp_path, name):
    path = corpus / "chrome" / name
    trace = tracebridge.load(path)
    source = x_events(path)
    assert len(trace) == len(source) > 0
    # Every op keeps its node name, op and time.
    expected = sorted((e["args"]["name"], e["args"]["op"], e["ts"] * 1000, e["dur"] * 1000) for e in source)
    got = sorted((o.name, o.kernel, o.start_ns, o.duration_ns) for o in trace.records())
    assert got == expected
    summary = trace.summary(top=5)
    # GPU files count their stream records (device time), each once; CPU files every op.
    on_streams = [e for e in source if "/stream:" in _process_names(path)[e["pid"]]
                  or "/memcpy" in _process_names(path)[e["pid"]]]
    if on_streams:
        assert summary.time == "device" and 0 < summary.op_count < len(on_streams)
    else:
        assert summary.time == "host" and summary.op_count == len(source)
    assert summary.by_op
    out = tmp_path / "back.json"
    trace.save(out)
    again = tracebridge.load(out)
    assert sorted((o.name, o.kernel, o.start_ns, o.duration_ns, o.inputs) for o in again.records()) == \
        sorted((o.name, o.kernel, o.start_ns, o.duration_ns, o.inputs) for o in trace.records())
    assert [d.name for d in again.devices] == [d.name for d in trace.devices]


def test_corpus_gpu_devices_and_streams(corpus):
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json")
    kinds = {d.name: d.kind for d in trace.devices}
    assert kinds["/gpu:0/stream:all"] == "stream"
    assert kinds["/gpu:0/memcpy"] == "memcpy"
    assert kinds["/job:localhost/replica:0/task:0/gpu:0"] == "compute"
    memcpy = trace.filter(device="memcpy")
    assert {o.kernel for o in memcpy.records()} >= {"MEMCPYDtoH"}


def test_corpus_merged_runs_become_steps(corpus):
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    assert [s.number for s in trace.steps] == [0, 1, 2, 3, 4]
    per_step = [len(trace.filter(step=s.number)) for s in trace.steps]
    assert sum(per_step) == len(trace) and min(per_step) > 100
    # Each run has its _SOURCE on both compute devices.
    for s in trace.steps:
        assert len(trace.filter(step=s.number, name="^_SOURCE$")) == 2


def test_chrome_gzip(corpus, tmp_path):
    raw = (corpus / "chrome" / "ikhlestov_cpu_timeline_01.json").read_bytes()
    path = tmp_path / "timeline.json.gz"
    path.write_bytes(gzip.compress(raw))
    assert len(tracebridge.load(path)) == 12


@pytest.mark.usefixtures("wire_decoder")
def test_tf_capture_every_form_gives_the_same_trace(tf1_files):
    from tracebridge import protos
    base = tracebridge.load(tf1_files["pb"])
    assert base.source_format == "runmetadata"
    md = protos.RunMetadata.FromString(tf1_files["pb"].read_bytes())
    nodes = sum(len(d.node_stats) for d in md.step_stats.dev_stats)
    assert len(base) == nodes
    for key, fmt in (("pbtxt", "pbtxt"), ("pickle", "pickle")):
        other = tracebridge.load(tf1_files[key])
        assert other.source_format == fmt
        assert other == base.with_metadata(source_format=fmt)


@pytest.mark.usefixtures("wire_decoder")
def test_tf_capture_content(tf_run, tf_build):
    trace = tracebridge.load(tf_run["pb"])
    assert [d.name for d in trace.devices] == ["/job:localhost/replica:0/task:0/device:CPU:0"]
    by_name = {o.name: o for o in trace.records()}
    assert by_name["_SOURCE"].kernel == "NoOp"
    relu = by_name["dense/Relu"]
    assert tf_build.computes(relu.kernel, "Relu") and "dense/kernel/read" not in relu.inputs
    assert any(i.startswith("^") for o in trace.records() for i in o.inputs)  # control inputs kept
    assert all(o.end_ns >= o.start_ns > 1e18 for o in trace.records())       # absolute ns
    assert trace.outputs.rows > 0 and trace.memory.rows > 0 and trace.allocations.rows > 0
    assert trace.counters.rows > 0
    # Lanes from timing: ops on one lane never overlap.
    ops = trace.ops
    for lane in set(ops["lane"].tolist()):
        mine = ops["lane"] == lane
        starts, ends = ops["start_ns"][mine], ops["end_ns"][mine]
        order = starts.argsort()
        assert (starts[order][1:] >= ends[order][:-1]).all()


@pytest.mark.usefixtures("wire_decoder")
def test_event_files_one_step_per_tag(tf1_files):
    trace = tracebridge.load(tf1_files["events_dir"])
    assert trace.source_format == "events"
    assert [(s.number, s.name) for s in trace.steps] == [(0, "step_0"), (1, "step_1")]
    single = tracebridge.load(next(tf1_files["events_dir"].iterdir()))
    assert len(single) == len(trace)


@pytest.mark.usefixtures("wire_decoder")
def test_event_file_truncated_last_record_is_tolerated(tf1_files, tmp_path):
    source = next(tf1_files["events_dir"].iterdir())
    data = source.read_bytes()
    cut = tmp_path / ("events.out.tfevents.1.cut")
    cut.write_bytes(data[:-200])
    trace = tracebridge.load(cut)
    assert [s.name for s in trace.steps] == ["step_0"]
    assert "truncated" in trace.metadata["warnings"]


def test_profiler_hook_outputs(tf, tmp_path):
    """tf.compat.v1.train.ProfilerHook's timeline-<step>.json files and events file."""
    from tests.conftest import build_mlp, mlp_feed
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with graph.as_default():
        hook = v1.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path), show_memory=True)
        with v1.train.MonitoredTrainingSession(hooks=[hook]) as session:
            feed = mlp_feed(x, y)
            for _ in range(4):
                session.run(train_op, feed)
        # The hook's FileWriter (from TF's FileWriterCache) writes on its own thread and is
        # never closed by the hook: flush it, or a loaded machine reads a file without it.
        v1.summary.FileWriterCache.get(str(tmp_path)).flush()
    timelines = sorted(tmp_path.glob("timeline-*.json"))
    assert [p.name for p in timelines] == ["timeline-2.json", "timeline-4.json"]
    for path in timelines:
        trace = tracebridge.load(path)
        assert len(trace) == len(x_events(path)) and trace.counters.rows > 0
    events = tracebridge.load(tmp_path)
    assert [s.name for s in events.steps][:1] == ["step_2"]


def test_sniffing():
    assert sniff("x.json", b"{}") == "chrome"
    assert sniff("x", b"  [ {") == "chrome"
    assert sniff("events.out.tfevents.1.host", b"\x00") == "events"
    assert sniff("x.pickle", b"\x80\x04") == "pickle"
    assert sniff("x", b"step_stats {\n") == "pbtxt"
    assert sniff("x", b"\n\x12\n\x10") == "runmetadata"


def test_chrome_with_nanoseconds_round_trips_exactly(tf1_files, tmp_path):
    trace = tracebridge.load(tf1_files["pb"])
    out = tmp_path / "ns.json"
    trace.save(out)
    again = tracebridge.load(out)
    assert sorted((o.name, o.start_ns, o.end_ns) for o in again.records()) == \
        sorted((o.name, o.start_ns, o.end_ns) for o in trace.records())


@pytest.mark.usefixtures("wire_decoder")
def test_directory_copy_of_events(tf1_files, tmp_path):
    copy = tmp_path / "logs"
    shutil.copytree(tf1_files["events_dir"], copy)
    assert len(tracebridge.load(copy).steps) == 2


@pytest.mark.usefixtures("wire_decoder")
def test_a_recv_tensor_record_and_an_op_of_that_name(tmp_path):
    """A node named ``RecvTensor`` is the RPC layer's record of a tensor received when its
    label says so (bytes, rate, edge); an op that happens to have that name keeps its own
    kernel and inputs (found by the event-file round-trip property)."""
    from tracebridge import protos
    metadata = protos.RunMetadata()
    device = metadata.step_stats.dev_stats.add(device="/job:worker/replica:0/task:0/device:CPU:0")
    for start, label in ((100, "[64B] [1.0Mb/s] edge_1_x from /job:ps/replica:0/task:0/device:CPU:0 to "
                               "/job:worker/replica:0/task:0/device:CPU:0"),
                         (200, "RecvTensor = MatMul(a, b)")):
        device.node_stats.add(node_name="RecvTensor", all_start_micros=start, op_start_rel_micros=0,
                              op_end_rel_micros=5, all_end_rel_micros=5, timeline_label=label)
    path = tmp_path / "run_metadata.pb"
    path.write_bytes(metadata.SerializeToString())
    trace = tracebridge.load(path)
    record, op = sorted(trace.records(), key=lambda o: o.start_ns)
    assert (record.name, record.kernel, record.inputs) == ("RecvTensor", "RecvTensor", ())
    assert (op.name, op.kernel, op.inputs) == ("RecvTensor", "MatMul", ("a", "b"))
    assert trace.transfers.rows == 1 and trace.transfers["bytes"].tolist() == [64]


def test_large_files_are_read_whole_by_the_c_loop(tmp_path):
    """Files from 8 MB on are read by _wirec.read_file (into huge pages): the same bytes as a
    plain read; a size past the end gives what there is, one short of it that many bytes; a
    file that grew after its size was taken is read to its new end; a read that fails is an
    OSError (here: a folder), which read_file turns into a TraceFormatError."""
    import os
    import random

    from tracebridge.errors import TraceFormatError
    from tracebridge.readers import sources
    if sources._wirec is None:
        pytest.skip("the C loops are not built here")
    data = random.Random(35).randbytes(sources._HUGE_READ_MIN + 12345)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert sources.read_file(str(path)) == data
    with open(path, "rb", buffering=0) as handle:
        assert sources._wirec.read_file(handle.fileno(), len(data) + 100) == data
    with open(path, "rb", buffering=0) as handle:
        assert sources._wirec.read_file(handle.fileno(), len(data) - 100) == data[:-100]
    with open(path, "rb", buffering=0) as handle:
        with open(path, "ab") as more:
            more.write(b"grown")
        # the size was taken before the file grew: what follows is read as well
        assert sources._wirec.read_file(handle.fileno(), len(data)) + handle.read() == data + b"grown"
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            sources._wirec.read_file(folder, 10)
    finally:
        os.close(folder)
    with pytest.raises(TraceFormatError, match="cannot read"):
        sources.read_file(str(tmp_path))
