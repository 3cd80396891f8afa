"""The command line on real files: info, summary, convert with filters and formats.

In this process (``run_cli``: ``main(argv)``), except ``python -m tracebridge`` itself."""

from __future__ import annotations

import csv
import io
import json

import tracebridge
from tests.conftest import run_cli, run_cli_process


def test_info(corpus):
    result = run_cli("info", corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    assert result.returncode == 0, result.stderr
    assert "847 events in all" in result.stdout and "5 steps" in result.stdout and "/gpu:0/stream:all" in result.stdout
    data = json.loads(run_cli("info", "--json", corpus / "chrome" / "ikhlestov_gpu_timeline_01.json").stdout)
    assert data["events"] == 31 and data["ops"] == 9 and data["counted"] == "kernels" and {d["kind"] for d in data["devices"]} == {"compute", "stream", "memcpy"}


def test_summary_formats(tf1_files):
    text = run_cli("summary", tf1_files["pb"], "--top", "3")
    assert text.returncode == 0 and "Top ops by total time" in text.stdout
    data = json.loads(run_cli("summary", tf1_files["pb"], "--json", "--top", "3").stdout)
    assert len(data["by_op"]) == 3 and data["op_count"] == len(tracebridge.load(tf1_files["pb"]))
    rows = list(csv.DictReader(io.StringIO(run_cli("summary", tf1_files["pb"], "--csv").stdout)))
    assert {r["group"] for r in rows} == {"op", "op_type", "device"}


def test_convert_targets_and_filters(tf1_files, tmp_path):
    for name, fmt in (("a.json", "chrome"), ("a.json.gz", "chrome"), ("a.pb", "runmetadata"),
                      ("a.pbtxt", "pbtxt")):
        result = run_cli("convert", tf1_files["pb"], tmp_path / name)
        assert result.returncode == 0 and fmt in result.stdout, result.stderr
        assert len(tracebridge.load(tmp_path / name)) == len(tracebridge.load(tf1_files["pb"]))
    result = run_cli("convert", tf1_files["events_dir"], tmp_path / "one.json", "--step", "1",
                     "--name", "MatMul", "--no-dataflow", "--memory")
    assert result.returncode == 0, result.stderr
    trace = tracebridge.load(tmp_path / "one.json")
    assert [s.number for s in trace.steps] == [1] and all("MatMul" in o.name for o in trace.records())
    events = json.loads((tmp_path / "one.json").read_text())["traceEvents"]
    assert not [e for e in events if e["ph"] in "st"]
    result = run_cli("convert", tf1_files["pb"], tmp_path / "weird", "--to", "pbtxt")
    assert result.returncode == 0 and (tmp_path / "weird").read_text().startswith("step_stats")


def test_python_dash_m_and_version(tmp_path):
    """The real process: ``python -m tracebridge``'s exit statuses and its one error line."""
    result = run_cli_process("--version")
    assert result.returncode == 0 and result.stdout.startswith("tracebridge ")
    usage = run_cli_process("convert")  # argparse's usage error: status 2, no traceback
    assert usage.returncode == 2 and "usage:" in usage.stderr and "Traceback" not in usage.stderr
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x0a\xff")
    failed = run_cli_process("convert", bad, tmp_path / "out.json")
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1 and failed.stderr.startswith("error: ")
    assert str(bad) in failed.stderr and not (tmp_path / "out.json").exists()
