"""tracebridge.compat.timeline gives TF's timeline.py output, character for character,
for real TF 2.21 and TF 1.x step stats, without importing TensorFlow."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys

import pytest

import tracebridge
from tracebridge import TraceFormatError, protos
from tracebridge.compat import timeline
from tests.test_roundtrip import TF1_GPU_DUMP

FLAGS = [(True, False), (False, False), (True, True), (False, True)]
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.fixture(scope="module")
def tf_timeline(tf):
    from tensorflow.python.client import timeline as tf_timeline
    return tf_timeline


@pytest.fixture(scope="module")
def tf_run_metadata(tf):
    from tensorflow.core.protobuf import config_pb2
    return config_pb2.RunMetadata


def theirs(tf_timeline, tf_run_metadata, message, **options):
    """TF's text for ``message`` (any RunMetadata), on a copy: TF rewrites thread_id."""
    copy = tf_run_metadata.FromString(message.SerializeToString())
    return tf_timeline.Timeline(copy.step_stats).generate_chrome_trace_format(**options)


def assert_same(ours: str, tf_text: str) -> None:
    assert json.loads(ours) == json.loads(tf_text)
    assert ours == tf_text  # formatting too: scripts diff these files


def node(dev_stats, name, start, duration, label, outputs=()):
    """A NodeExecStats; ``outputs``: (requested_bytes, allocator) per output, or None for
    an output without a tensor description."""
    stats = dev_stats.node_stats.add(node_name=name, all_start_micros=start, all_end_rel_micros=duration,
                                     timeline_label=label)
    for output in outputs:
        out = stats.output.add()
        if output is not None:
            description = out.tensor_description
            description.dtype = 1
            description.shape.dim.add(size=output[0] // 4)
            description.allocation_description.requested_bytes = output[0]
            description.allocation_description.allocator_name = output[1]
    return stats


def odd_step():
    """Every corner of timeline.py's rules in one StepStats (see the module docstring)."""
    md = protos.RunMetadata()
    cpu = md.step_stats.dev_stats.add(device=CPU)
    node(cpu, "a", 0, 5, "a = Const()", [(16, "cpu")])                                    # starts at 0: lane 1
    node(cpu, "b", 3, 10, "b = Add(a, c/_7, missing/_2, ^a)", [(16, "cpu"), (0, "cpu")])
    node(cpu, "RecvTensor", 4, 1, "[16B] [1.0Mb/s] edge_1_a from x to y")
    node(cpu, "odd", 6, 1, "no equals sign here", [None])
    node(cpu, "x = y", 7, 2, "x = y = Op(p, q(r)) trailing")                              # greedy groups
    node(cpu, "dup", 9, 3, "dup = Identity(b:1)", [(8, "cpu")])
    node(cpu, "ünï", 10, 1, 'ünï = Quote("a")', [(4, "cpu")])
    gpu = md.step_stats.dev_stats.add(device=GPU)
    node(gpu, "c", 2, 4, "c = MatMul(a, b)", [(64, "gpu_bfc")])
    node(gpu, "dup", 12, 2, "dup = Identity(c)", [(8, "gpu_bfc")])                        # tensor "dup" made twice
    node(gpu, "e", 12, 2, "e = Mul(dup, dup, b:1)", [(0, "gpu_bfc")])
    again = md.step_stats.dev_stats.add(device=CPU)                                       # a device named twice
    node(again, "late", 20, 1, "late = Sum(a, dup, ünï)")
    stream = md.step_stats.dev_stats.add(device="/device:GPU:0/stream:all")
    node(stream, "c:MatMul", 3, 2, "c")
    node(stream, "k", 5, 9, "kernel @@c:MatMul#id=1#")
    node(stream, "k2", 6, 1, "x # then @@b:Add#")                                         # '#' before '@@'
    node(stream, "b:Add:more", 4, 20, "b")
    memcpy = md.step_stats.dev_stats.add(device="/device:GPU:0/memcpy")
    node(memcpy, "edge_1_c:MEMCPYDtoH", 8, 3, "MEMCPYDtoH 64 bytes @@c#", [(64, "gpu_bfc")])
    return md


@pytest.mark.parametrize("show_dataflow, show_memory", FLAGS)
@pytest.mark.parametrize("with_graph", [False, True])
def test_real_tf_step_matches_timeline_py(tf_run, tf_timeline, tf_run_metadata, show_dataflow, show_memory,
                                          with_graph):
    md = tf_run["md"]
    before = md.SerializeToString()
    graph = {"graph": tf_run["graph"]} if with_graph else {}
    ours = timeline.Timeline(md.step_stats, **graph).generate_chrome_trace_format(show_dataflow, show_memory)
    assert_same(ours, theirs(tf_timeline, tf_run_metadata, md, show_dataflow=show_dataflow,
                             show_memory=show_memory))
    assert md.SerializeToString() == before  # TF would have rewritten every thread_id
    kinds = collections.Counter(e["ph"] for e in json.loads(ours)["traceEvents"])
    assert kinds["X"] == sum(len(d.node_stats) for d in md.step_stats.dev_stats)
    assert show_dataflow or not kinds["s"]  # arrows only between lanes: how many depends on timing
    assert (kinds["C"] > 0) == (kinds["O"] > 0) == show_memory


def test_graph_def_is_accepted_and_ignored(tf_run):
    md = tf_run["md"]
    plain = timeline.Timeline(md).generate_chrome_trace_format()
    assert timeline.Timeline(md, tf_run["graph"].as_graph_def()).generate_chrome_trace_format() == plain


@pytest.mark.parametrize("show_dataflow, show_memory", FLAGS)
def test_tf1_gpu_dump_matches_timeline_py(tf_timeline, tf_run_metadata, show_dataflow, show_memory):
    from google.protobuf import text_format
    md = text_format.Parse(TF1_GPU_DUMP, tf_run_metadata())
    ours = timeline.Timeline(md).generate_chrome_trace_format(show_dataflow=show_dataflow, show_memory=show_memory)
    assert_same(ours, theirs(tf_timeline, tf_run_metadata, md, show_dataflow=show_dataflow,
                             show_memory=show_memory))
    ops = {(e["args"]["name"], e["name"]) for e in json.loads(ours)["traceEvents"] if e["ph"] == "X"}
    assert ("MatMul/_1", "unknown") in ops  # the memcpy's @@ annotation names it


@pytest.mark.parametrize("op_time", ["schedule", "all", "gpu"])
@pytest.mark.parametrize("step", ["tf1_gpu", "odd"])
def test_op_time_matches_timeline_py(tf_timeline, tf_run_metadata, op_time, step):
    from google.protobuf import text_format
    md = text_format.Parse(TF1_GPU_DUMP, protos.RunMetadata()) if step == "tf1_gpu" else odd_step()
    ours = timeline.Timeline(md).generate_chrome_trace_format(show_memory=True, op_time=op_time)
    assert_same(ours, theirs(tf_timeline, tf_run_metadata, md, show_memory=True, op_time=op_time))


def test_op_time_stretches_ops_to_their_kernels():
    from google.protobuf import text_format
    md = text_format.Parse(TF1_GPU_DUMP, protos.RunMetadata())

    def matmul(op_time):
        events = json.loads(timeline.Timeline(md).generate_chrome_trace_format(op_time=op_time))["traceEvents"]
        return next((e["ts"], e["dur"]) for e in events if e["ph"] == "X" and e["args"]["name"] == "MatMul")
    # The op ran 45 us from ...400; its kernel on stream:all ran 30 us from ...420.
    assert matmul("schedule") == (1490280130949400, 45)
    assert matmul("all") == (1490280130949400, 50)
    assert matmul("gpu") == (1490280130949420, 30)
    with pytest.raises(ValueError, match="op_time"):
        timeline.Timeline(md).generate_chrome_trace_format(op_time="wall")


@pytest.mark.parametrize("show_dataflow, show_memory", FLAGS)
def test_timeline_py_quirks_are_mirrored(tf_timeline, tf_run_metadata, show_dataflow, show_memory):
    md = odd_step()
    ours = timeline.Timeline(md).generate_chrome_trace_format(show_dataflow, show_memory)
    assert_same(ours, theirs(tf_timeline, tf_run_metadata, md, show_dataflow=show_dataflow,
                             show_memory=show_memory))
    events = json.loads(ours)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    used = {e["pid"] for e in events if e["ph"] == "X"}
    # CPU is listed twice: both entries get processes, the later one gets all CPU ops.
    assert names[1] == names[5] == CPU + " Compute" and 1 not in used and 5 in used
    ops = {e["args"]["name"]: e for e in events if e["ph"] == "X" and e["pid"] == 5}
    assert ops["a"]["tid"] == 1                                   # nothing fits lane 0 at time 0
    # Greedy groups: the last " = " before the last "(" that a ")" follows somewhere.
    assert (ops["x = y"]["name"], ops["x = y"]["args"]["input0"]) == ("Op(p, q", "r)")
    assert ops["odd"]["name"] == "unknown"
    assert ops["b"]["args"]["input1"] == "c/_7"                   # args keep the raw input
    assert "\\u00fcn\\u00ef" in ours                               # ASCII-escaped, as json.dumps
    if show_memory:  # "dup" is made twice: it takes a new id, which the next tensor gets again
        ids = {(e["name"], e["id"]) for e in events if e["ph"] == "N"}
        assert {("dup", 4), ("dup", 7), ("e", 7)} <= ids
        assert {(e["name"], e["id"]) for e in events if e["ph"] == "D"} >= {("dup", 7), ("e", 7)}
    if show_dataflow:
        flows = {e["name"] for e in events if e["ph"] == "s"}
        assert "c" in flows and "missing" not in flows             # "/_7" dropped to find "c"


def test_analyze_step_stats_matches_timeline_py(tf_run, tf_timeline, tf_run_metadata):
    for md in (tf_run["md"], odd_step()):
        copy = tf_run_metadata.FromString(md.SerializeToString())
        reference = tf_timeline.Timeline(copy.step_stats).analyze_step_stats(show_dataflow=True, show_memory=True)
        analysis = timeline.Timeline(md).analyze_step_stats(show_dataflow=True, show_memory=True)
        assert isinstance(analysis, timeline.StepStatsAnalysis)
        assert analysis.chrome_trace.format_to_string() == reference.chrome_trace.format_to_string()
        assert analysis.chrome_trace.format_to_string(pretty=True) == \
            reference.chrome_trace.format_to_string(pretty=True)
        assert analysis.allocator_maximums == reference.allocator_maximums
        peaks = analysis.allocator_maximums.values()
        assert all(isinstance(peak, timeline.AllocationMaximum) for peak in peaks)
        assert any(peak.num_bytes > 0 and peak.tensors for peak in peaks)
    assert timeline.Timeline(md).analyze_step_stats(show_memory=False).allocator_maximums == {}


def test_every_input_form_gives_the_same_text(tf_run):
    md = tf_run["md"]  # TensorFlow's RunMetadata
    expected = timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True)
    ours = protos.RunMetadata.FromString(md.SerializeToString())
    ours_before = ours.SerializeToString()
    for source in (md, ours, ours.step_stats, md.SerializeToString(), md.step_stats.SerializeToString(),
                   bytearray(md.step_stats.SerializeToString()), memoryview(md.SerializeToString())):
        assert timeline.Timeline(source).generate_chrome_trace_format(show_memory=True) == expected
    assert ours.SerializeToString() == ours_before


def test_a_trace_gives_the_events_of_its_run_metadata(tf_run, corpus, tf_timeline, tf_run_metadata):
    captured = tracebridge.load(tf_run["pb"])
    for trace in (captured, tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json")):
        written = trace.to_run_metadata()
        for show_dataflow, show_memory in FLAGS:
            text = timeline.Timeline(trace).generate_chrome_trace_format(show_dataflow, show_memory)
            assert text == timeline.Timeline(written).generate_chrome_trace_format(show_dataflow, show_memory)
    # A TF 2.21 capture survives the model field by field, so its Trace gives TF's own text.
    assert timeline.Timeline(captured).generate_chrome_trace_format(show_memory=True) == \
        theirs(tf_timeline, tf_run_metadata, tf_run["md"], show_memory=True)


def test_each_analysis_starts_afresh():
    """TF's Timeline appends a second call's events to the first's; this one does not."""
    line = timeline.Timeline(odd_step())
    first = line.generate_chrome_trace_format(show_memory=True)
    assert line.generate_chrome_trace_format(show_memory=False) != first
    assert line.generate_chrome_trace_format(show_memory=True) == first


def test_corpus_timelines(corpus, tf_timeline, tf_run_metadata):
    """TF 1.x timeline.py files -> Trace -> StepStats: this module and TF's agree on it, and
    the op events and processes are the original file's. The flow arrows are not: timeline.py
    draws them from node outputs, which a Chrome file does not record, so the StepStats
    written from it has none (and so no tensors, flows or memory)."""
    paths = sorted((corpus / "chrome").glob("*.json"))
    assert paths
    for path in paths:
        md = tracebridge.load(path).to_run_metadata()
        for show_dataflow, show_memory in FLAGS:
            ours = timeline.Timeline(md).generate_chrome_trace_format(show_dataflow, show_memory)
            assert_same(ours, theirs(tf_timeline, tf_run_metadata, md, show_dataflow=show_dataflow,
                                     show_memory=show_memory))
        events = json.loads(timeline.Timeline(md).generate_chrome_trace_format())["traceEvents"]
        original = json.loads(path.read_text())
        original = original["traceEvents"] if isinstance(original, dict) else original
        assert [e for e in events if e["ph"] == "M"] == [e for e in original if e.get("ph") == "M"], path.name
        names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}

        def ops(evs):
            return collections.Counter((names[e["pid"]], e["tid"], e["name"], e["ts"], e["dur"],
                                        json.dumps(e["args"], sort_keys=True)) for e in evs if e.get("ph") == "X")
        assert ops(events) == ops(original), path.name
        assert not [e for e in events if e["ph"] in "st"]


def test_generating_a_trace_imports_no_tensorflow(corpus):
    code = f"""
import json, sys
from google.protobuf import text_format
import tracebridge
from tracebridge import protos
from tracebridge.compat import timeline
md = text_format.Parse({TF1_GPU_DUMP!r}, protos.RunMetadata())
text = timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True)
trace = tracebridge.load({str(corpus / "chrome" / "ikhlestov_cpu_timeline_01.json")!r})
timeline.Timeline(trace).analyze_step_stats()
assert json.loads(text)["traceEvents"]
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tensorboard'))))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("bad", [
    "run_metadata.pb", 3, None, b"", random.Random(0).randbytes(4096), b"\x0a\x03\x0a\x01\x01",
    protos.GraphDef(), protos.XSpace(),
], ids=["path", "int", "none", "empty-bytes", "random-bytes", "unprintable-device", "graphdef", "xspace"])
def test_bad_input_raises_trace_format_error(bad):
    with pytest.raises(TraceFormatError) as info:
        timeline.Timeline(bad)
    assert "\n" not in str(info.value)
