"""What a new user hits first (issue 25): crashes, piped output, the --top type, help text."""

from __future__ import annotations

import contextlib
import os
import sys

from tests.conftest import run_cli


def test_tensorboard_on_an_empty_trace_is_one_line_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    result = run_cli("tensorboard", empty, tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "no ops" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_closed_pipe_ends_quietly(corpus):
    """``summary T --top 1000 | head -2``: the reader is gone before the tables are written."""
    from tracebridge.cli import main
    read, write = os.pipe()
    os.close(read)
    stdout = os.fdopen(write, "w", buffering=1)
    try:
        with contextlib.redirect_stdout(stdout):
            code = main(["summary", str(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"),
                         "--top", "1000"])
    finally:
        with contextlib.suppress(OSError):
            stdout.close()
    assert code == 141


def test_top_takes_positive_row_counts_only(corpus):
    trace = corpus / "chrome" / "ikhlestov_gpu_timeline_01.json"
    for command in (("summary", trace), ("compare", trace, trace)):
        for bad in ("-3", "0", "x"):
            result = run_cli(*command, "--top", bad)
            assert result.returncode == 2 and "--top" in result.stderr, (command, bad, result.stderr)
        assert run_cli(*command, "--top", "2").returncode == 0


def _written_five_times(source, target):
    """One real run written again under four more pids with the same timestamps: the shape
    of tp-nscan/SharedIpynb's timeline_02.json (five pids, one device name, one _SOURCE each)."""
    import json
    events = json.loads(source.read_text())["traceEvents"]
    pids = sorted({e["pid"] for e in events if "pid" in e})
    copies = []
    for copy in range(5):
        copies += [{**e, "pid": e["pid"] + copy * (max(pids) + 1)} for e in events if "pid" in e]
    target.write_text(json.dumps({"traceEvents": copies}))
    return target


def test_one_run_written_under_five_pids_is_one_step(corpus, tmp_path):
    import tracebridge
    source = corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json"
    once = tracebridge.load(source)
    assert len(once.steps) == 1
    five = tracebridge.load(_written_five_times(source, tmp_path / "five.json"))
    durations = [s.duration_ns for s in five.steps]
    assert durations == [once.steps[0].duration_ns], durations
    shared = corpus / "chrome" / "tp-nscan_SharedIpynb_timeline_02.json"
    if shared.exists():  # the file issue 25 names, where the corpus has it
        steps = tracebridge.load(shared).steps
        assert len(steps) == 1 and abs(steps[0].duration_ns / 1e6 - 1071.121) < 0.01
