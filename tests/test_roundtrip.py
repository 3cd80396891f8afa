"""StepStats -> model -> StepStats keeps what TF fills, and TF's own tools accept the result."""

from __future__ import annotations

import json

import pytest

import tracebridge

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
