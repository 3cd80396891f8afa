"""`make bench`'s pipeline, without timing anything: bench/run_all.py --quick end to end,
and the verdict logic of every bench script on made-up figures.

No assertion here is about how fast anything is. The quick run checks that every
benchmark runs against its anchor and reports, and that bench/RESULTS.md's format holds
(every row, every target, numbers that parse, ratios that are anchor / tracebridge); the
other tests feed figures to the row builders to check that each target is judged as its
issue states it, at the setup it is set for.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.browser import missing_browser

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"

# benchmark title -> rows the quick run gives (run_all.py's --quick sizes)
QUICK_ROWS = {
    "StepStats → Chrome JSON, dataflow + memory (issue 2)": 2,
    "compat.timeline → Chrome JSON, drop-in for timeline.py (issue 6)": 2,
    "XSpace → Chrome JSON (issue 3)": 1,
    "Capture overhead (issue 3)": 2,
    "HTML view (issue 4)": 6,
    "XSpace summary, one host (issue 18)": 1,
    "XSpace summary, 2 hosts (issue 18)": 1,
    "XSpace → .pftrace (issue 26)": 1,
    "multi-host logdir → .pftrace (host by host) (issue 26)": 1,
    "XSpace summary vs xprof-rs (issue 35)": 1,
    "XSpace summary vs xprof (issue 35)": 1,
    "convert → .pftrace vs → Chrome JSON (issue 35)": 1,
    "one large XSpace → .pftrace (issue 35)": 1,
    "advise of a long profile (issue 35)": 1,
    "compare of a long profile (issue 35)": 1,
}
COLUMNS = ["#", "benchmark", "input", "unit", "tracebridge", "peak MiB", "anchor", "anchor value",
           "anchor peak MiB", "anchor / tracebridge", "target", "met?"]


def load(name: str):
    """A bench script as a module (bench/ is not a package; its scripts import each other)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _cell_number(text: str) -> float | None:
    return None if text == "—" else float(text.replace(",", ""))


def _table(text: str, heading: str) -> list[dict]:
    """The first Markdown table after ``heading``, as dicts keyed by its header."""
    lines = text.split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, rule, *body = table
    assert set("".join(rule)) <= set("-|")
    return [dict(zip(header, cells, strict=True)) for cells in body]


@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.browser
@pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or "")
def test_quick_run_reports_every_benchmark(tmp_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("xprof")
    committed = BENCH / "RESULTS.md"
    before = _digest(committed)
    results = tmp_path / "RESULTS-quick.md"
    run = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--quick", "--results", str(results),
                          "--work", str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert _digest(committed) == before, "a quick run must never touch bench/RESULTS.md"
    text = results.read_text()

    # the header: what ran, when, where, how
    assert text.startswith("# Benchmarks\n")
    assert "**Quick smoke run**" in text
    assert re.search(r"\*\*Date:\*\* \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    machine = re.search(r"\*\*Machine:\*\* (.+)", text).group(1)
    for part in ("cores", "GiB", "Python", "tensorflow", "xprof", "Chromium"):
        assert part in machine
    assert re.search(r"\*\*Command:\*\* `\S*python\S* bench/run_all.py --quick", text)

    # the results table: every benchmark's rows, numbers that parse, ratios = anchor / tracebridge
    rows = _table(text, "## Results")
    assert list(rows[0]) == COLUMNS
    titles = [row["benchmark"] for row in rows]
    assert {title: titles.count(title) for title in QUICK_ROWS} == QUICK_ROWS
    assert len(rows) == sum(QUICK_ROWS.values())
    assert [row["#"] for row in rows] == [str(i) for i in range(1, len(rows) + 1)]
    for row in rows:
        ours, anchor, ratio = (_cell_number(row[key]) for key in ("tracebridge", "anchor value",
                                                                   "anchor / tracebridge"))
        assert ours is not None and ours > 0, row
        assert row["unit"] in {"s", "ms", "MB"}, row
        for key in ("peak MiB", "anchor peak MiB"):
            value = _cell_number(row[key])
            assert value is None or value > 0, row
        if anchor is None:
            assert ratio is None, row
        else:
            # both printed to 3 significant digits, so each is within 0.5%
            assert ratio == pytest.approx(anchor / ours, rel=0.016), row
        assert row["target"] == "—" and row["met?"] == "—", "a quick run judges no target"
    assert any(row["anchor"] == "timeline.py, no memory" for row in rows)  # the --tf-memory-max path ran
    assert "runs **without** `show_memory`" in text

    # every target of the earlier issues, quoted, with its verdict (none in a quick run)
    targets = load("targets")
    listed = _table(text, "## Targets")
    assert [line["target"] for line in listed] == [target.id for target in targets.TARGETS]
    for line, target in zip(listed, targets.TARGETS):
        assert line["as the issue states it"] == f"“{target.text}”"
        assert line["issue"] == str(target.issue)
        assert line["met?"] == "not judged: quick run"

    # the rows as JSON: the same rows, and the ratio exactly anchor / tracebridge
    data = json.loads(results.with_suffix(".json").read_text())
    assert len(data) == len(rows)
    for row, line in zip(data, rows):
        assert f"{row['benchmark']} (issue {row['issue']})" == line["benchmark"]
        if row["anchor"] is None:
            assert row["ratio"] is None
        else:
            assert math.isclose(row["ratio"], row["anchor"] / row["tracebridge"], rel_tol=1e-12)
    compat = [row for row in data if row["issue"] == 6]
    assert all("output identical to TF's: yes" in row["notes"] for row in compat)
    assert all("TensorFlow imported: no" in row["notes"] for row in compat)
    for name in ("stepstats", "compat_timeline", "xspace", "capture", "html", "hosts"):
        assert (tmp_path / "work" / f"{name}.log").stat().st_size > 0


def test_quick_and_partial_runs_never_write_the_committed_results():
    run_all = load("run_all")
    for flags in (["--quick"], ["--only", "xspace"]):
        with pytest.raises(SystemExit) as raised:
            run_all.main([*flags, "--results", str(BENCH / "RESULTS.md")])
        assert raised.value.code == 2


# The verdicts, on made-up figures (the earlier closing notes' ones, and worse).

def test_stepstats_targets_at_1m_and_100k():
    bench = load("bench_stepstats")

    def result(size, wall, rss, generate=None, failed=None, memory=True):
        tb = {"wall_s": wall, "peak_rss": rss, "load_s": wall / 2, "write_s": wall / 3, "output_bytes": 1e9}
        out = {"size": size, "input_bytes": 2.4e8, "tracebridge": tb}
        if generate or failed:
            out["timeline"] = {"wall_s": 74.0, "peak_rss": 13.8e9, "show_memory": memory,
                               **({"failed": failed} if failed else {"generate_s": generate})}
        return out

    met, slow, fat, small = bench.result_rows([
        result(1_000_000, 6.71, 967e6, generate=68.0, memory=False), result(1_000_000, 10.5, 967e6),
        result(1_000_000, 6.71, 2.1 * 1024**3), result(20_000, 0.5, 70e6, generate=1.0)])
    assert (met["target"], met["met"]) == ("T1", True)
    assert met["ratio"] == pytest.approx(68.0 / 6.71)
    assert met["anchor_name"] == "timeline.py, no memory" and "WITHOUT show_memory" in met["notes"]
    assert slow["met"] is False and fat["met"] is False
    assert small["target"] is None and small["met"] is None

    fast, close, failed = bench.result_rows([
        result(100_000, 0.71, 129e6, generate=11.3), result(100_000, 0.71, 129e6, generate=6.0),
        result(100_000, 0.71, 129e6, failed="exit status -9")])
    assert (fast["target"], fast["met"], fast["figure"].split("×")[0]) == ("T2", True, "15.9")
    assert close["met"] is False
    assert failed["met"] is None and failed["anchor"] is None and failed["ratio"] is None
    assert "FAILED" in failed["notes"]


def test_xspace_target_on_the_issues_file_only():
    bench = load("bench_xspace")
    measured = {"ops": 2000, "steps": 1500, "input_mb": 48.7, "events": 3_034_500, "repeat": 3,
                "tracebridge_s": 3.44, "tracebridge_mib": 548.0, "json_mb": 403.0, "xprof_s": 9.14,
                "xprof_mib": 1899.0}
    (good,) = bench.result_rows(measured)
    assert (good["target"], good["met"], good["figure"]) == ("T3", True, "0.38× time, 0.29× memory")
    assert good["ratio"] == pytest.approx(9.14 / 3.44)
    (heavy,) = bench.result_rows({**measured, "tracebridge_mib": 1000.0})
    assert heavy["met"] is False  # time alone is not enough
    (small,) = bench.result_rows({**measured, "ops": 30, "steps": 20})
    assert small["target"] is None and small["met"] is None


def test_capture_targets_at_100_steps_only():
    bench = load("bench_capture")
    measured = {"steps": 100, "rounds": 9, "processes": 3, "runs": 27,
                "median_s": {"none": 0.0577, "skipped": 0.0578, "bare": 0.0860, "traced": 0.0868},
                "peak_rss_mib": {"idle": 600.0, "profiling": 700.0}}
    traced, skipped = bench.result_rows(measured)
    assert (traced["target"], traced["met"], traced["figure"]) == ("T4", True, "+0.9%")
    assert (skipped["target"], skipped["met"], skipped["figure"]) == ("T5", True, "+0.2%")
    assert traced["unit"] == "ms" and traced["tracebridge"] == pytest.approx(86.8)
    worse = {**measured, "median_s": {"none": 0.0577, "skipped": 0.0590, "bare": 0.0860, "traced": 0.0910}}
    assert [row["met"] for row in bench.result_rows(worse)] == [False, False]
    assert [row["met"] for row in bench.result_rows({**measured, "steps": 200})] == [None, None]


def test_html_targets_at_1m_ops():
    bench = load("bench_html")
    size = {"n": 1_000_000, "build_s": 3.0, "html_mb": 16.6, "write_s": 0.79, "first_ms": 649.0,
            "zoom_ms": 5.0, "pan_ms": 12.0, "ready_ms": 910.0, "tf_mb": 594.0, "tf_note": " (est. from 100,000)"}
    first, redraw, file = bench.result_rows([size], repeat=3, browser="1")
    assert (first["target"], first["met"], first["figure"]) == ("T6", True, "0.65 s")
    assert (redraw["target"], redraw["met"], redraw["tracebridge"]) == ("T7", True, 12.0)
    assert file["target"] is None and file["ratio"] == pytest.approx(594.0 / 16.6)
    assert file["anchor_name"].endswith("estimated") and "estimated from 100,000 ops" in file["notes"]
    slow = bench.result_rows([{**size, "first_ms": 2100.0, "pan_ms": 40.0}], repeat=3, browser="1")
    assert [row["met"] for row in slow[:2]] == [False, False]
    small = bench.result_rows([{**size, "n": 10_000, "tf_note": ""}], repeat=3, browser="1")
    assert [row["met"] for row in small] == [None, None, None]
    assert small[2]["anchor_name"] == "timeline.py JSON"


def test_results_list_failures_and_every_target():
    run_all, targets = load("run_all"), load("targets")
    judged = targets.result_row(benchmark="XSpace → Chrome JSON", issue=3, input="file", unit="s", tracebridge=3.44,
                         tracebridge_peak_mib=548.0, anchor_name="xprof", anchor=9.14, anchor_peak_mib=1899.0,
                         target="T3", met=True, figure="0.38× time, 0.29× memory")
    ran = [{"name": "xspace", "command": "bench/bench_xspace.py --repeat 3", "seconds": 40.0, "rows": [judged],
            "failed": None, "tail": ""},
           {"name": "stepstats", "command": "bench/bench_stepstats.py", "seconds": 5.0, "rows": [],
            "failed": "exit status 1", "tail": "Traceback (most recent call last):\nMemoryError\n"}]
    text = run_all.render(ran, quick=False, partial=False, command="`make bench`", machine="2 cores", seconds=45,
                          started=datetime.datetime(2025, 1, 2, 3, 4, tzinfo=datetime.timezone.utc))
    assert "**Date:** 2025-01-02 03:04 UTC" in text
    (row,) = [line for line in _table(text, "## Results") if line["#"] != "—"]
    assert (row["tracebridge"], row["anchor value"], row["anchor / tracebridge"]) == ("3.44", "9.14", "2.66")
    assert row["met?"] == "**met**"
    assert "**stepstats FAILED** (exit status 1)" in text and "MemoryError" in text
    listed = {line["target"]: line for line in _table(text, "## Targets")}
    assert listed["T3"]["figure"] == "0.38× time, 0.29× memory" and listed["T3"]["met?"] == "**met**"
    assert listed["T1"]["met?"] == "not measured: bench_stepstats.py failed"
    assert listed["T6"]["met?"] == "not measured: bench_html.py not run"


def test_peers_targets_on_the_issues_files_only():
    """Issue 35's targets (bench_peers.py), judged as the issue states them: ratios are the
    medians of paired runs' ratios."""
    bench = load("bench_peers")
    assert bench.median_ratio([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]) == 0.5
    assert bench.median_ratio([1.0, 9.0, 1.2], [2.0, 3.0, 4.0]) == 0.5  # the pairs' ratios, not the medians'
    with pytest.raises(ValueError):
        bench.median_ratio([1.0], [1.0, 2.0])
    assert bench.met_vs_xprof_rs(0.35, 0.30, True) is True
    assert bench.met_vs_xprof_rs(0.36, 0.20, True) is False and bench.met_vs_xprof_rs(0.20, 0.31, True) is False
    assert bench.met_vs_xprof_rs(0.1, 0.1, False) is None
    assert bench.met_vs_xprof(0.12, True) is True and bench.met_vs_xprof(0.13, True) is False
    assert bench.met_pftrace(0.40, True) is True and bench.met_pftrace(0.41, True) is False
    assert bench.met_large(953.0, True) is True and bench.met_large(955.0, True) is False  # 1 GB = 953.7 MiB
    assert bench.met_pftrace(0.1, False) is None and bench.met_large(1.0, False) is None
    targets = load("targets")
    assert {t.id for t in targets.TARGETS if t.issue == 35} == {"T12", "T13", "T14", "T15"}
    assert all(t.bench == "bench_peers.py" for t in targets.TARGETS if t.issue == 35)
    run_all = load("run_all")
    assert "peers" in run_all.BY_NAME
