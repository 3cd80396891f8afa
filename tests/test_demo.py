"""`tracebridge demo` runs the same model as TF1 and TF2 code and writes both traces."""

from __future__ import annotations

import tracebridge
from tests.conftest import run_cli


def test_demo_writes_both_runs(tmp_path, tf):
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    for run in ("tf1", "tf2"):
        trace = tracebridge.load(out / f"{run}_timeline.json")
        assert len(trace.steps) == 3
        assert len(tracebridge.load(out / f"{run}_run_metadata.pb")) > 0
        assert "Top ops by total time" in (out / f"{run}_summary.txt").read_text()
        assert "tracebridge:first-draw" in (out / f"{run}_timeline.html").read_text()
    tf1 = tracebridge.load(out / "tf1_run_metadata.pb")
    tf2 = tracebridge.load(out / "tf2_run_metadata.pb")
    assert {o.name for o in tf1.records()} & {"dense/Relu", "loss"}
    assert any(o.name.startswith("gradient_tape/") for o in tf2.records())
    assert "wrote" in result.stdout
    assert "coverage: control" in (out / "comparison.txt").read_text()
    # The table shows the rows that changed most, which differ with the TF build: look at all.
    comparison = tracebridge.compare(out / "tf1_timeline.json", out / "tf2_timeline.json")
    assert {"exact", "gradient"} <= {r.rule for r in comparison.rows}
    assert min(comparison.coverage.values()) >= 0.9, comparison.coverage
    assert "tracebridge" in (out / "comparison.html").read_text()
