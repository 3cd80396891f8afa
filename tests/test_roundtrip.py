"""StepStats -> model -> StepStats keeps what TF fills, and TF's own tools accept the result;
the Chrome trace's threads hold events that nest as the viewers read the times."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tests.helpers import chrome_nesting

# A TF 1.x RunMetadata text dump with GPU compute, stream and memcpy devices, micros only,
# written from the format's fields as TF 1.x's GPU tracer and executor filled them.
TF1_GPU_DUMP = """
step_stats {
  dev_stats {
    device: "/job:localhost/replica:0/task:0/device:GPU:0"
    node_stats {
      node_name: "_SOURCE" all_start_micros: 1490280130949370 op_start_rel_micros: 1
      op_end_rel_micros: 2 all_end_rel_micros: 8 timeline_label: "_SOURCE = NoOp()" scheduled_micros: 1490280130949360
    }
    node_stats {
      node_name: "MatMul" all_start_micros: 1490280130949400 op_start_rel_micros: 3
      op_end_rel_micros: 40 all_end_rel_micros: 45 timeline_label: "MatMul = MatMul(a, b/read)"
      output { tensor_description { dtype: DT_FLOAT shape { dim { size: 64 } dim { size: 10 } }
        allocation_description { requested_bytes: 2560 allocated_bytes: 2560 allocator_name: "gpu_bfc" allocation_id: 7 ptr: 12345 } } }
      memory { allocator_name: "gpu_bfc" total_bytes: 2560 peak_bytes: 2560 live_bytes: 2560
        allocation_records { alloc_micros: 1490280130949403 alloc_bytes: 2560 } }
    }
    node_stats {
      node_name: "add" all_start_micros: 1490280130949460 op_end_rel_micros: 9 all_end_rel_micros: 12
      timeline_label: "add = Add(MatMul, bias/read, ^init)"
    }
    node_stats {
      node_name: "MatMul/_1" all_start_micros: 1490280130949480 all_end_rel_micros: 5
      timeline_label: "MatMul/_1 = _Send(add)"
    }
  }
  dev_stats {
    device: "/job:localhost/replica:0/task:0/device:CPU:0"
    node_stats {
      node_name: "_SOURCE" all_start_micros: 1490280130949365 all_end_rel_micros: 3 timeline_label: "_SOURCE = NoOp()"
    }
    node_stats {
      node_name: "out" all_start_micros: 1490280130949700 all_end_rel_micros: 20
      timeline_label: "out = Identity(MatMul/_1)"
    }
  }
  dev_stats {
    device: "/device:GPU:0/stream:all"
    node_stats { node_name: "MatMul:MatMul" all_start_micros: 1490280130949420 all_end_rel_micros: 30 timeline_label: "MatMul" }
    node_stats { node_name: "add:Add" all_start_micros: 1490280130949470 all_end_rel_micros: 4 timeline_label: "add" }
  }
  dev_stats {
    device: "/device:GPU:0/stream:14"
    node_stats { node_name: "MatMul:MatMul" all_start_micros: 1490280130949420 all_end_rel_micros: 30 timeline_label: "MatMul" thread_id: 14 }
  }
  dev_stats {
    device: "/device:GPU:0/memcpy"
    node_stats {
      node_name: "edge_22_MatMul:MEMCPYDtoH" all_start_micros: 1490280130949500
      all_end_rel_micros: 11 timeline_label: "MEMCPYDtoH 2560 bytes @@MatMul/_1#id=3#"
    }
  }
}
"""


def node_fields(node) -> dict:
    return {f.name: v for f, v in node.ListFields()}


def assert_step_stats_equal(original, written):
    assert [d.device for d in written.dev_stats] == [d.device for d in original.dev_stats]
    for dev_a, dev_b in zip(original.dev_stats, written.dev_stats):
        assert len(dev_a.node_stats) == len(dev_b.node_stats)
        for a, b in zip(dev_a.node_stats, dev_b.node_stats):
            fields_a, fields_b = node_fields(a), node_fields(b)
            assert set(fields_a) == set(fields_b), a.node_name
            for name in fields_a:
                assert str(fields_a[name]) == str(fields_b[name]), (a.node_name, name)


@pytest.fixture(scope="module")
def config_pb2(tf):
    from tensorflow.core.protobuf import config_pb2
    return config_pb2


def test_tf_capture_round_trips_field_by_field(tf_run, config_pb2):
    trace = tracebridge.load(tf_run["pb"])
    written = config_pb2.RunMetadata.FromString(trace.to_run_metadata().SerializeToString())
    original = tf_run["md"]
    filled = {f.name for d in original.step_stats.dev_stats for n in d.node_stats for f, _ in n.ListFields()}
    # What TF 2.21 fills (TF_FACTS A.2), all of it kept:
    assert {"node_name", "timeline_label", "all_start_micros", "all_start_nanos", "scheduled_nanos",
            "op_start_rel_nanos", "op_end_rel_nanos", "all_end_rel_nanos", "output", "memory",
            "memory_stats"} <= filled
    assert_step_stats_equal(original.step_stats, written.step_stats)
    assert written.step_stats == original.step_stats


def test_every_step_of_an_event_file_round_trips(tf_run, config_pb2):
    from tracebridge.writers.stepstats import run_metadata_per_step
    trace = tracebridge.load(tf_run["events_dir"])
    written = list(run_metadata_per_step(trace))
    assert len(written) == 2
    for (step, run_metadata), original in zip(written, tf_run["metadatas"]):
        back = config_pb2.RunMetadata.FromString(run_metadata.SerializeToString())
        assert back.step_stats == original.step_stats, step


def test_tf_timeline_accepts_what_tracebridge_writes(tf_run, config_pb2, tmp_path):
    from tensorflow.python.client import timeline
    trace = tracebridge.load(tf_run["timeline"])  # from Chrome JSON: labels are rebuilt
    path = tmp_path / "from_chrome.pb"
    trace.save(path)
    md = config_pb2.RunMetadata.FromString(path.read_bytes())
    chrome = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True))
    ops = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    assert len(ops) == len(trace)
    original = [e for e in json.loads(tf_run["timeline"].read_text())["traceEvents"] if e["ph"] == "X"]
    key = lambda e: (e["args"]["name"], e["name"], e["ts"], e["dur"],  # noqa: E731
                     tuple(sorted((k, v) for k, v in e["args"].items() if k.startswith("input"))))
    assert sorted(map(key, ops)) == sorted(map(key, original))


def test_text_dump_round_trips(tmp_path, config_pb2):
    from google.protobuf import text_format
    path = tmp_path / "tf1_gpu.pbtxt"
    path.write_text(TF1_GPU_DUMP)
    trace = tracebridge.load(path)
    original = text_format.Parse(TF1_GPU_DUMP, config_pb2.RunMetadata())
    written = config_pb2.RunMetadata.FromString(trace.to_run_metadata().SerializeToString())
    assert written.step_stats == original.step_stats
    out = tmp_path / "again.pbtxt"
    trace.save(out)
    assert text_format.Parse(out.read_text(), config_pb2.RunMetadata()).step_stats == original.step_stats


def test_tf1_gpu_dump_matches_timeline_py(tmp_path, config_pb2):
    """Same op events (device, name, op, node, ts, dur) as TF's timeline.py for a TF 1.x GPU dump."""
    from google.protobuf import text_format
    from tensorflow.python.client import timeline
    md = text_format.Parse(TF1_GPU_DUMP, config_pb2.RunMetadata())
    theirs = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    pid_names = {e["pid"]: e["args"]["name"] for e in theirs["traceEvents"] if e["ph"] == "M"}
    expected = sorted((pid_names[e["pid"]].removesuffix(" Compute"), e["name"], e["args"]["name"],
                       e["args"]["op"], e["ts"], e["dur"])
                      for e in theirs["traceEvents"] if e["ph"] == "X")
    path = tmp_path / "tf1_gpu.pbtxt"
    path.write_text(TF1_GPU_DUMP)
    out = tmp_path / "ours.json"
    tracebridge.load(path).save(out)
    ours = json.loads(out.read_text())
    our_pids = {e["pid"]: e["args"]["name"] for e in ours["traceEvents"]
                if e["ph"] == "M" and e["name"] == "process_name"}
    got = sorted((our_pids[e["pid"]], e["name"], e["args"]["name"], e["args"]["op"], e["ts"], e["dur"])
                 for e in ours["traceEvents"] if e["ph"] == "X" and e["cat"] == "Op")
    assert got == expected
    assert {d for d, *_ in got} >= {"/device:GPU:0/stream:all", "/device:GPU:0/memcpy"}
    # timeline.py reads an @@ annotation as the op's name, and then knows no op type.
    assert ("/device:GPU:0/memcpy", "unknown", "MatMul/_1") in {g[:3] for g in got}


def test_chrome_output_is_deterministic(tf1_files, tmp_path):
    trace = tracebridge.load(tf1_files["pb"])
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    trace.save(a, memory=True)
    tracebridge.load(tf1_files["pb"]).save(b, memory=True)
    assert a.read_bytes() == b.read_bytes()


def test_chrome_events_follow_timeline_conventions(tf_run, tf_build, tmp_path):
    trace = tracebridge.load(tf_run["pb"])
    out = tmp_path / "t.json"
    trace.save(out, memory=True)
    events = json.loads(out.read_text())["traceEvents"]
    assert {"M", "X", "C"} <= {e["ph"] for e in events}
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "Op"]
    assert len(ops) == len(trace)
    for e in ops:
        assert e["name"] == e["args"]["op"] and e["dur"] >= 0
    # One flow (s + t with one id) per data edge that crosses lanes; none within a lane.
    from tracebridge.model.dataflow import dataflow_edges
    from tracebridge.writers.chrome_threads import pids_and_tids
    consumer, producer = dataflow_edges(trace)
    pid, tid, _ = pids_and_tids(trace)
    crossing = int(((pid[consumer] != pid[producer]) | (tid[consumer] != tid[producer])).sum())
    flows = [e for e in events if e["ph"] in "st"]
    assert len(flows) == 2 * crossing and len({e["id"] for e in flows}) == crossing
    assert {e["name"] for e in events if e["ph"] == "C"} == {tf_build.cpu_allocator}
    no_flow = tmp_path / "plain.json"
    trace.save(no_flow, dataflow=False)
    assert not [e for e in json.loads(no_flow.read_text())["traceEvents"] if e["ph"] in "st"]


def test_flows_cross_lanes_and_devices(tmp_path):
    from tests.test_model import small_trace
    out = tmp_path / "small.json"
    small_trace().save(out)
    events = json.loads(out.read_text())["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "t"}
    assert starts.keys() == ends.keys() and len(starts) == 4  # a->b (lanes), b->c (devices), x2 steps
    for flow_id, start in starts.items():
        assert ends[flow_id]["bp"] == "e" and ends[flow_id]["name"] == start["name"]
    network = [e for e in events if e["ph"] == "X" and e["name"] == "RecvTensor"]
    assert network and all(e["args"]["bytes"] == 4096 and e["tid"] == 999_999 for e in network)


# --------------------------------------------------------------------------- threads as viewers read them


def _node(name: str, label: str, start_ns: int, dur_ns: int) -> str:
    return (f'node_stats {{ node_name: "{name}" all_start_micros: {start_ns // 1000} all_start_nanos: {start_ns} '
            f'op_start_rel_nanos: 1 op_end_rel_nanos: {dur_ns - 1} all_end_rel_nanos: {dur_ns} '
            f'all_end_rel_micros: {dur_ns // 1000} timeline_label: "{label}" }}')


# Neighbours on the one lane of live TF 2.21 FULL_TRACE steps of the MLP (tests/test_viewers.py's
# tf1_step), at their nanoseconds: 251 ns and 210 ns apart. As doubles the written starts
# (1795842827258095.787) are 0.25 us apart, and a viewer adds the duration to the rounded
# start: the first pair overlaps by 33 ns as Perfetto reads it (it dropped _arg_y_0_1:
# slice_drop_overlapping_complete_event, the failure of test_tf1_step[perfetto]), the second
# by 1 ns as speedscope reads it (it ended the wrong frame).
VIEWER_OVERLAPS = "step_stats { dev_stats { device: \"/job:localhost/replica:0/task:0/device:CPU:0\" " + " ".join([
    _node("_arg_x_0_0", "_arg_x_0_0 = _Arg()", 1795842827258095787, 801),
    _node("_arg_y_0_1", "_arg_y_0_1 = _Arg()", 1795842827258096839, 681),
    _node("_arg_x_0_0", "_arg_x_0_0 = _Arg()", 1795842827308187130, 751),
    _node("global_step", "global_step = VarHandleOp()", 1795842827308188091, 471),
]) + " } }\n"


def test_chrome_neighbours_that_overlap_as_viewers_read_them_take_two_threads(tmp_path):
    source = tmp_path / "neighbours.pbtxt"
    source.write_text(VIEWER_OVERLAPS)
    trace = tracebridge.load(source)
    assert len(trace.lanes) == 1  # apart at the nanosecond: one lane
    out = tmp_path / "neighbours.json"
    trace.save(out)
    events = chrome_nesting.events(out)
    assert chrome_nesting.overlaps_in_any_reading(events) == {}
    ops = {(e["args"]["name"], e["ts"]): e for e in events if e["ph"] == "X" and e.get("cat") == "Op"}
    first, second = ops[("_arg_x_0_0", "1795842827258095.787")], ops[("_arg_y_0_1", "1795842827258096.839")]
    third, fourth = ops[("_arg_x_0_0", "1795842827308187.130")], ops[("global_step", "1795842827308188.091")]
    assert first["tid"] != second["tid"] and third["tid"] != fourth["tid"]
    # both threads are the lane's (named as it, sorted after it), and read back as one lane
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == first["pid"]}
    assert names[first["tid"]] == names[second["tid"]] == "lane 0"
    again = tracebridge.load(out)
    assert len(again.lanes) == 1 and len(again) == 4


# What Perfetto v52's trace processor made of the writer's decimals, slice by slice (ts or
# dur as written -> its integer nanoseconds): a double with no fraction times 1000 as an
# integer, any other one times 1000 as a double.
PERFETTO_MEASURED = [("1795842827258081.977", 1795842827258082000), ("1795842827258087.425", 1795842827258087424),
                     ("1795842827258091.571", 1795842827258091520), ("1795842827258095.116", 1795842827258095000),
                     ("1795842827258095.787", 1795842827258095872), ("1795842827258101.245", 1795842827258101248),
                     ("1.011", 1011), ("8.413", 8413), ("129.622", 129622)]


def test_json_readings_are_the_viewers_times():
    from decimal import Decimal

    from tracebridge.writers.chrome_threads import json_readings
    ns = np.array([int(Decimal(text) * 1000) for text, _ in PERFETTO_MEASURED], dtype=np.int64)
    (perfetto, perfetto_end), (double, double_end) = json_readings(ns, ns + 7)
    assert perfetto.tolist() == [seen for _, seen in PERFETTO_MEASURED]
    assert (perfetto_end - perfetto).tolist() == [7] * len(ns)
    assert perfetto.tolist() == [chrome_nesting.perfetto_ns(text) for text, _ in PERFETTO_MEASURED]
    # the double nearest the decimal, to the nanosecond: 0.25 us apart at these times
    assert double.tolist() == [round(Fraction(float(text)) * 1000) for text, _ in PERFETTO_MEASURED]
    assert double[0] == 1795842827258082000 and double[4] == 1795842827258095750
    # negative and small times: the written text's value, read as a parser does
    small = np.array([-1500, -1, 0, 1, 570, 2_047_999, 2_048_001, (1 << 53) + 1001], dtype=np.int64)
    texts = [f"{'-' if n < 0 else ''}{abs(n) // 1000}.{abs(n) % 1000:03d}" for n in small.tolist()]
    (perfetto, _), (double, _) = json_readings(small, small)
    assert perfetto.tolist() == [chrome_nesting.perfetto_ns(t) for t in texts]
    assert double.tolist() == [round(Fraction(float(t)) * 1000) for t in texts]


def _transfer_trace(spans_ns, lanes: int = 1):
    """Overlapping RecvTensor transfers on one device (as a TF1 cluster's RPC records are),
    and ``lanes`` ops that all overlap on it."""
    from tracebridge.model.builder import TraceBuilder
    builder = TraceBuilder({"source_format": "test"})
    device = builder.device("/job:worker/replica:0/task:1/device:CPU:0")
    step = builder.step(0)
    base = 1_700_000_000_000_000_000
    for k in range(lanes):
        builder.add_op(name=f"op{k}", op_type="MatMul", start_ns=base + k, end_ns=base + 5000 + k, device=device,
                       step=step)
    for i, (start, end) in enumerate(spans_ns):
        recv = builder.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=base + start, end_ns=base + end,
                              device=device, step=step)
        builder.add_row("transfers", op=recv, bytes=4096, rate_bps=8e6, src="/job:ps/task:0",
                        dst="/job:worker/task:1", tensor=f"t{i}")
    return builder.build()


def test_chrome_overlapping_transfers_take_network_threads(tmp_path):
    # A TF1 cluster's RecvTensor records overlap (37 of 40 live steps of tests/conftest.py's
    # loopback cluster had two on one device at once): all on one network thread, Perfetto
    # dropped one of each pair.
    trace = _transfer_trace([(100, 500), (300, 800), (900, 1000)])
    out = tmp_path / "network.json"
    trace.save(out)
    events = chrome_nesting.events(out)
    assert chrome_nesting.overlaps_in_any_reading(events) == {}
    recv = [e for e in events if e["ph"] == "X" and e["name"] == "RecvTensor"]
    assert recv[0]["tid"] == recv[2]["tid"] == "999999" != recv[1]["tid"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    sort_index = {e["tid"]: int(e["args"]["sort_index"]) for e in events if e.get("name") == "thread_sort_index"}
    assert all(names[e["tid"]] == "network" for e in recv)
    assert sort_index["999999"] < sort_index[recv[1]["tid"]]  # the network thread, then its sub-row
    again = tracebridge.load(out)
    assert again.transfers.rows == 3 and op_spans(again) == op_spans(trace)


def test_chrome_no_thread_of_a_device_has_its_pid_as_tid(tmp_path):
    # Perfetto's JSON importer takes tid 0 for the process's main thread, whose tid is the
    # pid: lane 2 of the first device (pid 2) shared a track with lane 0 there.
    trace = _transfer_trace([(100, 500), (300, 800)], lanes=4)
    out = tmp_path / "lanes.json"
    trace.save(out)
    events = chrome_nesting.events(out)
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") == "Op"]
    assert {e["pid"] for e in ops} == {"2"}
    lanes = {e["tid"] for e in ops if e["name"] != "RecvTensor"}
    network = {e["tid"] for e in ops if e["name"] == "RecvTensor"}
    assert len(lanes) == 4 and len(network) == 2 and "2" not in lanes | network
    named = {e["tid"] for e in events if e.get("name") == "thread_name" and e["pid"] == "2"}
    assert lanes | network <= named and "2" not in named
    assert chrome_nesting.overlaps_in_any_reading(events) == {}


def test_chrome_overlapping_steps_take_step_rows(tmp_path):
    from tracebridge.model.builder import TraceBuilder
    builder = TraceBuilder({"source_format": "test"})
    device = builder.device("/job:localhost/replica:0/task:0/device:CPU:0")
    base = 1_700_000_000_000_000_000
    for number, (start, end) in enumerate([(0, 1000), (500, 1500), (1500, 2000)]):
        step = builder.step(number, start_ns=base + start, end_ns=base + end)
        builder.add_op(name=f"op{number}", op_type="NoOp", start_ns=base + start + 10, end_ns=base + start + 20,
                       device=device, step=step)
    out = tmp_path / "steps.json"
    builder.build().save(out)
    events = chrome_nesting.events(out)
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "Step"]
    assert [e["tid"] for e in steps] == ["0", "1", "0"]
    assert {e["tid"] for e in events if e.get("name") == "thread_name" and e["pid"] == "0"} == {"0", "1"}
    assert chrome_nesting.overlaps_in_any_reading(events) == {}
    assert [s.number for s in tracebridge.load(out).steps] == [0, 1, 2]


def op_spans(trace) -> list[tuple[str, int, int]]:
    return sorted((o.name, o.start_ns, o.end_ns) for o in trace.records())


NESTING_FILES = ["chrome/ikhlestov_cpu_timeline_01.json", "chrome/ikhlestov_cpu_timeline_02_step_0.json",
                 "chrome/ikhlestov_gpu_timeline_01.json", "chrome/blackbox_attacks_timeline_01.json",
                 "chrome/ikhlestov_gpu_timeline_03_merged_5_runs.json",
                 "xspace/tfprofiler_gpu_multi_worker.xplane.pb", "xspace/xprof_tpu_inference_2.xplane.pb",
                 "xspace/jax_h100_mlp_nographs.xplane.pb", "xspace/jax_h100_convnet_graphs.xplane.pb"]
RECORDED_FILES = ["tf1_mlp/run_metadata.pb", "xla/jax_cpu_mlp.xplane.pb", "recurrent/bilstm_tf1.json.gz",
                  "recurrent/seq2seq_fit.json.gz"]


@pytest.mark.parametrize("name", NESTING_FILES + RECORDED_FILES)
def test_chrome_threads_nest_as_viewers_read_them(corpus, tmp_path, name):
    """Real traces (the corpus, recorded TF 2.21 and JAX captures): every thread's X events
    nest or are disjoint as written, as Perfetto reads them and as a reader of doubles does.
    Before the writer placed ops by the viewers' times, Perfetto dropped ops of all but the
    smallest of these (155 of bilstm_tf1's 26,796, 2,859 of the TPU file's 25,817)."""
    source = corpus / name if name in NESTING_FILES else Path(__file__).parent / "data" / name
    trace = tracebridge.load(source)
    out = tmp_path / "out.json"
    trace.save(out, memory=True)
    events = chrome_nesting.events(out)
    assert chrome_nesting.overlaps_in_any_reading(events) == {}
    device_processes = {e["pid"] for e in events if e.get("name") == "process_name"} - {"0", "1"}
    assert not [e for e in events if e.get("ph") == "X" and e["pid"] in device_processes and e["tid"] == e["pid"]]


def test_chrome_threads_of_live_tf1_steps_nest_as_viewers_read_them(tf, tmp_path):
    """Live TF 2.21 FULL_TRACE steps, as test_viewers.py's tf1_step captures one: an MLP in a
    Session (one step in ten overlapped as Perfetto reads it, one in 400 as speedscope
    does), and the loopback cluster's steps with their RecvTensor transfers."""
    from tests.conftest import loopback_cluster
    from tests.helpers.tf1_capture import build_mlp, mlp_feed

    v1 = tf.compat.v1
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)

    def traced_steps(session, fetches, feed, count: int) -> list:
        session.run(fetches, feed)
        metadatas = []
        for _ in range(count):
            metadatas.append(v1.RunMetadata())
            session.run(fetches, feed, options=options, run_metadata=metadatas[-1])
        return metadatas

    graph, x, y, train_op, loss, init = build_mlp(tf)
    with v1.Session(graph=graph) as session:
        session.run(init)
        steps = traced_steps(session, [train_op, loss], mlp_feed(x, y), 100)
    servers, graph, x, loss, train_op, init = loopback_cluster(tf)
    with v1.Session(servers[1].target, graph=graph) as session:
        session.run(init)
        steps += traced_steps(session, [loss, train_op], {x: np.ones((16, 32), np.float32)}, 10)
    del servers
    found = {}
    for index, metadata in enumerate(steps):
        source, out = tmp_path / f"step{index}.pb", tmp_path / f"step{index}.json"
        source.write_bytes(metadata.SerializeToString())
        tracebridge.load(source).save(out, memory=True)
        overlaps = chrome_nesting.overlaps_in_any_reading(chrome_nesting.events(out))
        if overlaps:
            found[index] = {reading: [(a["name"], a["ts"], a["dur"], b["name"], b["ts"], b["dur"]) for _, a, b in pairs]
                            for reading, pairs in overlaps.items()}
    assert not found, found
