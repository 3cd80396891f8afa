"""Accelerator time on the real GPU and TPU files: kernels credited to their TF ops, derived
lines and duplicated records never counted, checked against xprof and the raw streams."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

import numpy as np
import pytest

import tracebridge
from tracebridge import protos
from tracebridge.analysis.compare import PerSide
from tracebridge.model.schema import Category, OpFlag

GPU = "tfprofiler_gpu_multi_worker.xplane.pb"
TPU = "xprof_tpu_inference_2.xplane.pb"
TF1_GPU = ["ikhlestov_gpu_timeline_01.json", "ikhlestov_gpu_timeline_03_merged_5_runs.json",
           "blackbox_attacks_timeline_01.json"]


def xprof_device_self_time(path) -> dict[str, float]:
    """xprof's own framework_op_stats: device self time (ns) per op, IDLE left out."""
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "framework_op_stats", {})
    table = json.loads(data)[0]
    columns = [c["id"] for c in table["cols"]]
    where, name, self_us = (columns.index(c) for c in ("host_or_device", "operation", "total_self_time"))
    return {row["c"][name]["v"]: row["c"][self_us]["v"] * 1000 for row in table["rows"]
            if row["c"][where]["v"] == "Device" and row["c"][name]["v"] != "IDLE"}


def test_tpu_device_self_time_matches_xprof(corpus, tmp_path):
    copy = tmp_path / TPU  # xprof writes cache files beside its input
    shutil.copy(corpus / "xspace" / TPU, copy)
    theirs = xprof_device_self_time(copy)
    summary = tracebridge.load(corpus / "xspace" / TPU).summary()
    assert summary.time == "device"
    ours = {row["key"]: row["device_ns"] for row in summary.by_op}
    top = sorted(theirs, key=theirs.get, reverse=True)[:7]
    assert top[0].startswith("copy-done") and "jit(f)/jit(main)/add" in top
    for op in top:
        assert ours[op] == pytest.approx(theirs[op], rel=0.02), op
    # Device time is the XLA Ops line's, not the modules that contain them nor async spans.
    assert summary.total_ns == pytest.approx(sum(theirs.values()), rel=0.01)
    for row in summary.by_device:
        assert 0 < row["busy_ns"] <= summary.total_span_ns
        assert row["idle_ns"] == summary.total_span_ns - row["busy_ns"]


def _stream_lines_by_op(path) -> tuple[dict[str, int], dict[str, int]]:
    """Our own reading of the GPU planes' stream lines: time per TF op (the annotation's
    op, else the kernel's name) and per device."""
    space = protos.XSpace.FromString(path.read_bytes())
    by_op, by_device = defaultdict(int), defaultdict(int)
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("Stream"):
                continue
            for event in line.events:
                stats = {stat_names[s.metadata_id]: s.str_value or stat_names.get(s.ref_value, "")
                         for s in event.stats}
                annotation = stats.get("annotation", "").split("#")[0]
                op = annotation.rpartition(":")[0] or annotation or plane.event_metadata[event.metadata_id].name
                nanos = (event.offset_ps + event.duration_ps) // 1000 - event.offset_ps // 1000
                by_op[op] += nanos
                by_device[plane.name] += nanos
    return by_op, by_device


def test_gpu_xspace_device_time_is_the_streams(corpus):
    trace = tracebridge.load(corpus / "xspace" / GPU)
    summary = trace.summary()
    by_op, by_device = _stream_lines_by_op(corpus / "xspace" / GPU)
    assert summary.time == "device" and len(by_op) > 600
    assert {row["key"]: row["device_ns"] for row in summary.by_op if row["device_ns"]} == dict(by_op)
    assert {row["key"]: row["device_ns"] for row in summary.by_device if row["device_ns"]} == dict(by_device)
    # The derived lines are kept, as what they are, and never counted.
    derived = {trace.lanes[lane].name for lane in trace.ops["lane"][trace.ops["category"] == Category.DERIVED].tolist()}
    assert derived == {"TensorFlow Ops", "TensorFlow Name Scope", "Steps"}
    # The host's own op time sits beside the device time of the same op.
    cast = next(row for row in summary.by_op if row["key"].endswith("word_embeddings/GatherV2/Cast"))
    assert cast["device_ns"] > 0 and cast["host_ns"] > 0
    kernels = summary.by_kernel
    assert sum(row["total_ns"] for row in kernels) == summary.total_ns
    assert any(row["key"].startswith("void tensorflow::functor::FillPhiloxRandomKernelLaunch")
               and row["op"].endswith("RandomUniform") for row in kernels)
    for row in summary.by_device:
        assert row["busy_ns"] <= summary.total_span_ns
    # The device Steps lines give the step.
    assert [step.number for step in trace.steps] == [0]


def _steps_lines(path) -> dict[str, list[tuple[int, int]]]:
    """Our own reading of each GPU plane's ``Steps`` line: its events' spans, in ns."""
    space = protos.XSpace.FromString(path.read_bytes())
    spans = {}
    for plane in space.planes:
        for line in plane.lines:
            if plane.name.startswith("/device:") and line.name == "Steps":
                spans[plane.name] = sorted((line.timestamp_ns + e.offset_ps // 1000,
                                            line.timestamp_ns + (e.offset_ps + e.duration_ps) // 1000)
                                           for e in line.events)
    return spans


def test_gpu_xspace_steps_are_per_device(corpus):
    """Two GPUs of the job have a Steps line, their step 0 starts 650 ms apart: each
    device keeps its own step, and the trace's step is not a merge of the two."""
    from tracebridge.model.accelerator import device_steps
    path = corpus / "xspace" / GPU
    trace = tracebridge.load(path)
    lines = _steps_lines(path)
    assert len(lines) == 2
    per_device = device_steps(trace)
    # The same spans, on the trace's clock (shifted by one constant from the file's).
    shift = {per_device[device][0].start_ns - spans[0][0] for device, spans in lines.items()}
    assert len(shift) == 1
    assert {device: [(s.start_ns, s.end_ns) for s in steps] for device, steps in per_device.items()} == \
        {device: [(lo + min(shift), hi + min(shift)) for lo, hi in spans] for device, spans in lines.items()}
    (step,) = trace.steps
    # The trace's step 0 lasts as long as the longest device's (xprof's step time, 21.3 ms).
    assert step.duration_ns == max(s.duration_ns for steps in per_device.values() for s in steps)
    assert step.duration_ns < 25_000_000
    # Each device's ops are in the step where its own step 0 holds them.
    ops = trace.ops
    for device, (own,) in per_device.items():
        mine = np.array([trace.devices[d].name == device for d in ops["device"].tolist()])
        in_step = mine & (ops["step"] == 0)
        assert in_step.sum() > 3000
        assert np.all((ops["start_ns"][in_step] >= own.start_ns) & (ops["start_ns"][in_step] <= own.end_ns))


def test_gpu_correlation_id_links_kernels_without_annotation(corpus, tmp_path):
    """The same file with every annotation removed: kernels are linked through their
    correlation_id to the host launch and the TF op that enclosed it."""
    space = protos.XSpace.FromString((corpus / "xspace" / GPU).read_bytes())
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                kept = [s for s in event.stats if names.get(s.metadata_id) not in ("annotation", "tf_op")]
                del event.stats[:]
                event.stats.extend(kept)
    stripped = tmp_path / "stripped.xplane.pb"
    stripped.write_bytes(space.SerializeToString())
    annotated = tracebridge.load(corpus / "xspace" / GPU)
    linked = tracebridge.load(stripped)
    device = np.isin(annotated.ops["category"], (Category.DEVICE, Category.MEMCPY))
    assert np.array_equal(device, np.isin(linked.ops["category"], (Category.DEVICE, Category.MEMCPY)))
    rows = np.flatnonzero(device)
    by_annotation = annotated.ops["name"][rows]
    by_launch = linked.ops["name"][rows]
    via_launch = by_launch != linked.ops["kernel"][rows]
    assert via_launch.sum() > 500  # most launches ran inside a TF op on the host
    agree = [annotated.strings[a] == linked.strings[b] for a, b in
             zip(by_annotation[via_launch].tolist(), by_launch[via_launch].tolist())]
    assert sum(agree) / len(agree) > 0.99
    # Per op, exactly our own reading of the stripped file's streams and host launches.
    by_op = {row["key"]: row["device_ns"] for row in linked.summary().by_op if row["device_ns"]}
    assert by_op == _device_time_by_launching_op(space)


def _device_time_by_launching_op(space) -> dict[str, int]:
    """Device time per TF op read straight from an XSpace: a stream event's host launch
    (same correlation_id) lies inside TF op events (``name:Type``) on its host line; the
    innermost one (latest start) is the op; a kernel without one counts as itself."""
    launch_at, host_ops = {}, defaultdict(list)
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                start, end = event.offset_ps, event.offset_ps + event.duration_ps
                name = plane.event_metadata[event.metadata_id].name
                op, colon, op_type = name.rpartition(":")
                if colon and op and op_type and "::" not in name and " " not in name:
                    host_ops[line.id].append((start, end, op))
                for stat in event.stats:
                    if names.get(stat.metadata_id) == "correlation_id":
                        launch_at[stat.int64_value or stat.uint64_value] = (line.id, start, end)
    by_op = defaultdict(int)
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("Stream"):
                continue
            for event in line.events:
                ids = [s.int64_value or s.uint64_value for s in event.stats
                       if names.get(s.metadata_id) == "correlation_id"]
                op = plane.event_metadata[event.metadata_id].name
                if ids and ids[0] in launch_at:
                    host_line, start, end = launch_at[ids[0]]
                    around = [(s, o) for s, e, o in host_ops[host_line] if s <= start and end <= e]
                    if around:
                        op = max(around)[1]
                by_op[op] += (event.offset_ps + event.duration_ps) // 1000 - event.offset_ps // 1000
    return dict(by_op)


def _tf1_records(path):
    data = json.loads(path.read_bytes())
    events = data["traceEvents"] if isinstance(data, dict) else data
    pids = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    return [(pids[e["pid"]].removesuffix(" Compute"), e["args"]["name"], e["ts"], e["dur"])
            for e in events if e.get("ph") == "X"]


@pytest.mark.parametrize("name", TF1_GPU)
def test_tf1_gpu_timeline_counts_each_record_once(corpus, name):
    path = corpus / "chrome" / name
    trace = tracebridge.load(path)
    summary = trace.summary()
    records = _tf1_records(path)
    # Expected: each op's stream:all records, plus records on a numbered stream that
    # stream:all does not repeat (old tracers put some copies only there); memcpy never.
    on_all = {(gpu, op, ts, dur) for device, op, ts, dur in records
              for gpu in [device.split("/stream:")[0]] if device.endswith("/stream:all")}
    expected = defaultdict(int)
    for device, op, ts, dur in records:
        gpu = device.split("/stream:")[0]
        if device.endswith("/stream:all") or ("/stream:" in device and (gpu, op, ts, dur) not in on_all):
            expected[op] += dur * 1000
    assert summary.time == "device"
    assert {row["key"]: row["device_ns"] for row in summary.by_op if row["device_ns"]} == dict(expected)
    assert summary.total_ns == sum(expected.values())
    # Nothing twice: every counted record is distinct, the rest are flagged duplicates.
    ops = trace.ops
    counted = np.isin(ops["category"], (Category.DEVICE, Category.MEMCPY)) & \
        ((ops["flags"] & OpFlag.DUPLICATE) == 0)
    keys = list(zip(ops["name"][counted].tolist(), ops["start_ns"][counted].tolist(), ops["end_ns"][counted].tolist()))
    assert len(keys) == len(set(keys))
    # The host-side dispatch records on the GPU device are the op's host time.
    assert any(row["host_ns"] > 0 and row["device_ns"] > 0 for row in summary.by_op)
    assert summary.by_op[0]["device_ns"] >= summary.by_op[-1]["device_ns"]
    for row in summary.by_device:
        assert row["busy_ns"] <= summary.total_span_ns


def test_summary_json_fields(corpus):
    summary = json.loads(tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json").summary().to_json())
    assert summary["total_span_ns"] > 0 and summary["by_kernel"]
    for table in ("by_op", "by_type"):
        assert all({"device_ns", "host_ns"} <= set(row) for row in summary[table])
    assert all({"busy_ns", "idle_ns"} <= set(row) for row in summary["by_device"])
    matmul = next(row for row in summary["by_op"] if row["key"] == "MatMul")
    # One kernel (4.085 ms on stream:all, again on stream:12) and one copy of 1 us.
    assert matmul["device_ns"] == 4_086_000 and matmul["count"] == 2


def test_xprof_attributes_the_tf1_gpu_kernels_tracebridge_writes(corpus, tmp_path):
    """The XSpace written for a TF1 GPU run: kernels on stream lines, each annotated with
    its TF op, once; xprof's own op statistics then give each op the device time
    tracebridge does."""
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    written = trace.to_tensorboard(tmp_path / "logs", run="tf1")["xspace"]
    copy = tmp_path / "copy" / "host.xplane.pb"
    copy.parent.mkdir()
    shutil.copy(written, copy)
    theirs = xprof_device_self_time(copy)
    ours = {row["key"]: row["device_ns"] for row in trace.summary().by_op if row["device_ns"]}
    assert len(theirs) > 20 and set(theirs) == set(ours)
    for op, nanos in ours.items():
        assert theirs[op] == pytest.approx(nanos, abs=1), op


def test_compare_tf1_gpu_run_with_its_tf2_xspace_on_device_time(corpus, tmp_path):
    """A TF1 GPU timeline against the TF2 XSpace tracebridge writes for it (kernels on
    stream lines, annotated): device time aligns op for op."""
    from tracebridge import compare
    tf1 = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    tf2 = tracebridge.load(tf1.to_tensorboard(tmp_path / "logs", run="tf2")["xspace"])
    assert tf2.source_format == "xspace" and len(tf2.steps) == len(tf1.steps) == 5
    comparison = compare(tf1, tf2, warmup=0)  # every step, as the summary's totals count them
    assert comparison.time == "device"
    assert comparison.coverage == PerSide(1.0, 1.0)
    device_by_op = {row["key"]: row["device_ns"] for row in tf1.summary().by_op if row["device_ns"]}
    assert sum(row.total_ns.control for row in comparison.rows) == sum(device_by_op.values())
    for row in comparison.rows:
        assert row.total_ns.control == row.total_ns.test == row.device_ns.control == row.device_ns.test
    # The dispatch's host time is shown beside each kernel's op (copies, edge_*, have none).
    assert all(row.host_ns.control > 0 for row in comparison.rows if row.op_type != "MEMCPYHtoD"
               and not row.key.startswith("edge_"))
    host = compare(tf1, tf2, time="host")
    kernels_of_ops = {row.key for row in comparison.rows if not row.key.startswith("edge_")}
    assert host.time == "host" and {row.key for row in host.rows} >= kernels_of_ops
    assert host.coverage == PerSide(1.0, 1.0)


def test_compare_gpu_xspace_with_itself(corpus):
    from tracebridge import compare
    trace = tracebridge.load(corpus / "xspace" / GPU)
    comparison = compare(trace, trace, time="device")
    assert comparison.coverage == PerSide(1.0, 1.0)
    total = trace.filter(step=trace.steps[0].number).summary().total_ns  # compare counts steps' ops
    assert sum(row.total_ns.control for row in comparison.rows) == total
    assert all(row.change == "=" and row.device_ns.control == row.device_ns.test for row in comparison.rows)


def test_compare_device_time_needs_device_activity(corpus):
    from tests.conftest import run_cli
    cpu = corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
    gpu = corpus / "chrome" / "ikhlestov_gpu_timeline_01.json"
    failed = run_cli("compare", cpu, gpu, "--time", "device")
    assert failed.returncode != 0 and "no device activity" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    auto = run_cli("compare", gpu, gpu, "--json")
    assert auto.returncode == 0 and json.loads(auto.stdout)["time"] == "device"


def test_chrome_output_has_a_flow_from_each_launch_to_its_kernel(corpus, tmp_path):
    path = corpus / "xspace" / GPU
    space = protos.XSpace.FromString(path.read_bytes())
    launched, started = set(), []
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                ids = [s.int64_value or s.uint64_value for s in event.stats
                       if names.get(s.metadata_id) == "correlation_id"]
                if not ids:
                    continue
                if plane.name.startswith("/host:"):
                    launched.add(ids[0])
                elif line.name.startswith("Stream"):
                    started.append(ids[0])
    expected = sum(1 for correlation in started if correlation in launched)
    out = tmp_path / "gpu.json"
    tracebridge.load(path).save(out)
    events = json.loads(out.read_text())["traceEvents"]
    pids = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    to_kernels = [e for e in events if e.get("ph") == "t" and "GPU" in pids[e["pid"]]
                  and "host" in pids[starts[e["id"]]["pid"]].lower()]
    assert expected > 1000 and len(to_kernels) == expected


def test_html_view_ranks_by_device_time_and_labels_derived_lanes(corpus, tmp_path):
    import re
    trace = tracebridge.load(corpus / "xspace" / GPU)
    out = tmp_path / "gpu.html"
    trace.to_html(out)
    text = out.read_text()
    meta = json.loads(re.search(r'id="tb0-meta"[^>]*>(.*?)</script>', text, re.S).group(1))
    summary = meta["summary"]
    assert summary["time"] == "device"
    assert summary["by_op"][0]["total_ns"] == summary["by_op"][0]["device_ns"] == trace.summary().by_op[0]["device_ns"]
    lanes = {(meta["devices"][lane["device"]]["name"], lane["name"]) for lane in meta["lanes"]}
    assert ("/device:GPU:4", "TensorFlow Name Scope (derived)") in lanes
    assert ("/device:GPU:4", "Stream #134(Compute)") in lanes
