"""`tracebridge demo` runs the same model as TF1 and TF2 code and writes both traces."""

from __future__ import annotations

import tracebridge
from tests.conftest import run_cli_process as run_cli  # the command a new user runs, TF and all
from tests.conftest import unmatched_compute


def test_demo_writes_both_runs(tmp_path, tf):
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    for run in ("tf1", "tf2"):
        trace = tracebridge.load(out / f"{run}_timeline.json")
        assert len(trace.steps) == 3
        # RunMetadata holds one run: one file per step, never the steps merged.
        step_files = sorted(out.glob(f"{run}_run_metadata.step-*.pb"))
        assert len(step_files) == 3 and not (out / f"{run}_run_metadata.pb").exists()
        assert all(len(tracebridge.load(path).steps) == 1 and len(tracebridge.load(path)) > 0 for path in step_files)
        assert "Top ops by total time" in (out / f"{run}_summary.txt").read_text()
        assert "tracebridge:first-draw" in (out / f"{run}_timeline.html").read_text()
    tf1 = tracebridge.load(sorted(out.glob("tf1_run_metadata.step-*.pb"))[0])
    tf2 = tracebridge.load(sorted(out.glob("tf2_run_metadata.step-*.pb"))[0])
    assert {o.name for o in tf1.records()} & {"dense/Relu", "loss"}
    assert any(o.name.startswith("gradient_tape/") for o in tf2.records())
    assert "wrote" in result.stdout
    assert "coverage: control" in (out / "comparison.txt").read_text()
    # The table shows the rows that changed most, which differ with the TF build: look at all.
    comparison = tracebridge.compare(out / "tf1_timeline.json", out / "tf2_timeline.json")
    rules = {r.rule for r in comparison.rows}  # the captures' graphs survive in the .json
    assert "exact" in rules and rules & {"gradient", "structure"} and "note: no graph" not in comparison.to_text()
    # every matmul matched (the bar was 90% of op time: a share of live time on a shared machine)
    assert not unmatched_compute(comparison), comparison.to_text(top=40)
    assert "tracebridge" in (out / "comparison.html").read_text()
