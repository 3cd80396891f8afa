"""The "Performance after porting" examples of the migration guide, run as they stand under
TF 2.21: each ``before.py`` makes one porting mistake and tracebridge names it; its
``after.py`` applies the fix and the finding is gone.

Real TensorFlow in subprocesses, one script at a time, each in a temporary folder, as
tests/test_migration_examples.py runs the guide's other examples (each a process of its own,
forked from one that has imported TensorFlow: tests/helpers/preloaded.py). The scripts end with one
JSON line, ``{"kinds": [...]}``: the kinds of the findings they printed. ``device_idle``
needs an accelerator to show; here its scripts must run and report no false finding.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.preloaded import PreloadedPython

pytestmark = [pytest.mark.tf, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "migration_guide" / "examples" / "performance"
KINDS = sorted(p.name for p in EXAMPLES.iterdir() if (p / "before.py").is_file()) if EXAMPLES.is_dir() else []


@pytest.fixture(scope="module")
def python():
    """The scripts' interpreter, with TensorFlow imported once for all of them."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CPU_ALLOCATOR_USE_BFC="true",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with PreloadedPython(env) as preloaded:
        yield preloaded


def _kinds(python: PreloadedPython, script: Path, cwd: Path) -> list[str]:
    done = python.run(script, cwd, timeout=300)
    assert done.returncode == 0, (script, done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])["kinds"]


def test_every_finding_kind_has_an_example():
    from tracebridge.analysis.findings import KINDS as FINDING_KINDS
    assert sorted(FINDING_KINDS) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_before_shows_the_finding_and_after_fixes_it(tf_build, python, kind, tmp_path):
    before = _kinds(python, EXAMPLES / kind / "before.py", tmp_path)
    after = _kinds(python, EXAMPLES / kind / "after.py", tmp_path)
    # device_idle: no accelerator here, the CPU run shows no device to idle. op_regression
    # without oneDNN: float64 costs Eigen's kernels 1.2-3x with the machine's load, and the
    # finding appears only when the ops grew beyond noise (tests/test_findings.py checks that).
    if kind != "device_idle" and not (kind == "op_regression" and not tf_build.onednn):
        assert kind in before, before
    if not (kind == "fusion_gained" and tf_build.onednn):
        # (oneDNN fuses a filter gradient with its bias gradient in TF2 only: a true gain
        # left after the fix too; tests/test_findings.py checks it is the only one)
        assert kind not in after, after
    assert not {"eager_ops", "retracing", "host_gaps"} & set(after), after
