"""TensorBoard outputs: TF's event reader and xprof itself read what tracebridge writes."""

from __future__ import annotations

import json
import shutil

import tracebridge
from tracebridge.analysis.common.kernels import kernel_family
from tests.conftest import run_cli


def test_event_file_has_one_tagged_run_metadata_per_step(tf_run, tmp_path, tf):
    from tensorflow.core.protobuf import config_pb2
    trace = tracebridge.load(tf_run["events_dir"])
    paths = trace.to_tensorboard(tmp_path / "logs")
    tags = []
    for event in tf.compat.v1.train.summary_iterator(paths["events"]):
        if event.HasField("tagged_run_metadata"):
            md = config_pb2.RunMetadata.FromString(event.tagged_run_metadata.run_metadata)
            tags.append((event.tagged_run_metadata.tag, event.step, len(md.step_stats.dev_stats[0].node_stats)))
    assert [t[:2] for t in tags] == [("step_0", 0), ("step_1", 1)]
    originals = [sum(len(d.node_stats) for d in m.step_stats.dev_stats) for m in tf_run["metadatas"]]
    assert [t[2] for t in tags] == originals


def _xprof(path, tool):
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], tool, {})
    return json.loads(data)


def test_xprof_reads_the_xspace_of_a_tf1_capture(tf_run, tmp_path):
    trace = tracebridge.load(tf_run["pb"])
    paths = trace.to_tensorboard(tmp_path / "logs", run="tf1")
    assert paths["xspace"].endswith(".xplane.pb") and "/plugins/profile/tf1/" in paths["xspace"]
    copy = tmp_path / "copy" / "host.xplane.pb"  # xprof writes cache files beside its input
    copy.parent.mkdir()
    shutil.copy(paths["xspace"], copy)
    viewer = _xprof(copy, "trace_viewer@")
    # The step markers ("train", shown as "train <step>") are not ops.
    ops = [e for e in viewer["traceEvents"] if e.get("ph") == "X" and not e.get("name", "").startswith("train")]
    assert len(ops) == len(trace)
    # xprof names op events by type and shows them with the same durations (in us).
    expected = sorted((o.kernel, round(o.duration_ns / 1000, 3)) for o in trace.records())
    assert sorted((e["name"], round(e["dur"], 3)) for e in ops) == expected
    rows = _xprof(copy, "framework_op_stats")[0]["rows"]
    listed = {r["c"][3]["v"] for r in rows}
    # xprof leaves framework-internal ops (_SOURCE, _arg_*, _retval_*) out of its op statistics.
    assert {o.name for o in trace.records() if not o.name.startswith("_")} <= listed
    # And tracebridge reads its own XSpace back with the same ops.
    back = tracebridge.load(tmp_path / "logs")
    assert sorted((o.name, o.op_type, o.start_ns, o.end_ns) for o in back.filter(op_type=".").records()
                  if o.name != "train") == \
        sorted((o.name, o.kernel, o.start_ns, o.end_ns) for o in trace.records())


def test_cli_tensorboard_and_xplane_suffix(tf_run, tf_build, tmp_path):
    result = run_cli("tensorboard", tf_run["pb"], tmp_path / "logs", "--run", "r1")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "logs" / "plugins" / "profile" / "r1").is_dir()
    assert run_cli("convert", tf_run["pb"], tmp_path / "t.xplane.pb").returncode == 0
    kernels = [o.op_type for o in tracebridge.load(tmp_path / "t.xplane.pb").records()]
    assert any(tf_build.computes(k, "MatMul") for k in kernels)  # kernel types survive
    assert kernel_family(kernels) == tf_build.family
    bad = run_cli("tensorboard", tf_run["pb"], tmp_path / "logs", "--run", "../escape")
    assert bad.returncode == 2 and "plain folder name" in bad.stderr
