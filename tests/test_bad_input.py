"""Bad inputs: one clear line, exit status 2, no output file, nothing executed."""

from __future__ import annotations

import os
import pickle

import pytest

import tracebridge
from tracebridge import TraceFormatError, UnsafePickleError
from tests.conftest import run_cli


class Boom:
    """Unpickling this would create a file: the canary for code execution."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_pickles(marker):
    evil = pickle.dumps(Boom(marker))
    return {
        "os.system": evil,
        "in a list": pickle.dumps([Boom(marker)]),
        "eval": pickle.dumps(type("E", (), {"__reduce__": lambda s: (eval, (f"open('{marker}','w')",))})()),
        "protocol 0": pickle.dumps(Boom(marker), protocol=0),
    }


def bad_inputs(tmp_path, tf_pb_bytes=None):
    cases = {
        "empty.pb": b"",
        "random.pb": os.urandom(4096),
        "not_a_trace.json": b'{"hello": [1, 2, 3]}',
        "broken.json": b'{"traceEvents": [',
        "events_wrong_ts.json": b'{"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1, "pid": 1}]}',
        "nan.json": b'{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1, "pid": 1}]}',
        "deep.json": b"[" * 100000 + b"]" * 100000,
        "text.pbtxt": b"step_stats { dev_stats { device: 3 } }",
        "corrupt.json.gz": b"\x1f\x8b\x08\x00garbage",
        "events.out.tfevents.1.bad": b"\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00hello\x00\x00\x00\x00",
    }
    if tf_pb_bytes:
        cases["truncated.pb"] = tf_pb_bytes[: len(tf_pb_bytes) // 3]
    paths = {}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        paths[name] = path
    return paths


def test_library_raises_typed_errors(tmp_path, tf1_files):
    for name, path in bad_inputs(tmp_path, tf1_files["pb"].read_bytes()).items():
        with pytest.raises(TraceFormatError) as info:
            tracebridge.load(path)
        assert str(path) in str(info.value), name
        assert "\n" not in str(info.value), name
    with pytest.raises(TraceFormatError, match="no such file"):
        tracebridge.load(tmp_path / "missing.pb")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="directory"):
        tracebridge.load(empty)


def test_malicious_pickles_run_nothing(tmp_path):
    marker = tmp_path / "pwned"
    for name, data in malicious_pickles(marker).items():
        path = tmp_path / f"{name.replace(' ', '_')}.pickle"
        path.write_bytes(data)
        with pytest.raises(UnsafePickleError) as info:
            tracebridge.load(path)
        assert "nothing was run" in str(info.value) or "refused" in str(info.value), name
        assert not marker.exists(), name


def test_cli_bad_inputs_one_line_exit_2_no_output(tmp_path, tf1_files):
    marker = tmp_path / "pwned"
    paths = bad_inputs(tmp_path, tf1_files["pb"].read_bytes())
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(malicious_pickles(marker)["os.system"])
    paths["evil.pickle"] = evil
    paths["a directory"] = tmp_path / "empty_dir"
    paths["a directory"].mkdir()
    paths["missing"] = tmp_path / "missing.pb"
    for name, path in paths.items():
        out = tmp_path / f"out_{abs(hash(name))}.json"
        result = run_cli("convert", path, out)
        assert result.returncode == 2, (name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, result.stderr)
        assert "Traceback" not in result.stderr
        assert not out.exists(), name
    assert not marker.exists()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".tracebridge-")]
    assert leftovers == []


def test_cli_usage_errors(tmp_path, tf1_files):
    result = run_cli("convert", tf1_files["pb"], tmp_path / "out.unknown")
    assert result.returncode == 2 and "cannot tell the output format" in result.stderr
    result = run_cli("summary", tf1_files["pb"], "--device", "([")
    assert result.returncode == 2 and "bad regular expression" in result.stderr
    result = run_cli("convert", tf1_files["pb"], tmp_path / "x.json", "--step", "99")
    assert result.returncode == 2 and "no such step" in result.stderr
    result = run_cli("convert", tf1_files["pb"], tmp_path / "no_such_dir" / "x.json")
    assert result.returncode == 2 and result.stderr.startswith("error: ")


def test_interrupted_write_leaves_nothing(tmp_path, tf1_files):
    trace = tracebridge.load(tf1_files["pb"])
    out = tmp_path / "partial.json"
    calls = []

    def interrupt(done, total):
        calls.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trace.to_chrome(out, progress=interrupt)
    assert calls and not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []
