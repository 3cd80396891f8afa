"""Output paths: whatever a trace file says about itself, tracebridge writes only the paths the
user gave (a file, or under a logdir) and, while writing, temporary files beside them.

The inputs are crafted: host names, run names, device and op names full of ``../``, slashes,
NUL-free control characters and 300-character runs, which end up in file names if anything
builds a path from them. Every writer of the library and the CLI is run into a sandbox; the
whole tree around it and the temporary folder are compared before and after.

The other two promises have their own tests: pickles (tests/test_bad_input.py,
tests/test_compat_tfvis.py: crafted payloads, a canary file never created) and HTML (the
browser test tests/test_html.py::test_hostile_names_stay_text).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

import tracebridge
from tests.conftest import run_cli
from tracebridge import compare
from tracebridge.writers.compare_html import write_compare_html

ESCAPES = ["../../../escaped", "/tmp/absolute", "..", ".", "a/../../b", "~", "$HOME", "C:\\win",
           "x" * 300, "näme/ü", "line\nbreak"]


def crafted_chrome(path: Path) -> Path:
    """A Chrome trace whose metadata and names try to steer file names."""
    events = [{"ph": "M", "name": "process_name", "pid": i, "args": {"name": f"/job:{name}/device:CPU:{i}"}}
              for i, name in enumerate(ESCAPES)]
    events += [{"ph": "X", "name": name, "cat": "Op", "ts": 10 * i, "dur": 5, "pid": i, "tid": 0,
                "args": {"name": name, "op": "MatMul"}} for i, name in enumerate(ESCAPES)]
    document = {"traceEvents": events, "otherData": {"host": "../../../../escaped-host", "tf_version": "../x"}}
    path.write_text(json.dumps(document))
    return path


def snapshot(*roots: Path) -> set[str]:
    found = set()
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """``(inputs, outputs, temp)``: temp is this process's (and its children's) TMPDIR."""
    inputs, outputs, temp = tmp_path / "in", tmp_path / "deep" / "out", tmp_path / "tmp"
    for folder in (inputs, outputs, temp):
        folder.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return inputs, outputs, temp


def new_entries(before: set[str], tmp_path: Path) -> set[str]:
    return snapshot(tmp_path) - before


def test_library_writers_stay_inside_the_given_paths(sandbox, tmp_path):
    inputs, outputs, temp = sandbox
    trace = tracebridge.load(crafted_chrome(inputs / "crafted.json"))
    assert trace.metadata["host"] == "../../../../escaped-host"
    before = snapshot(tmp_path)
    files = ["t.json", "t.json.gz", "t.pb", "t.pbtxt", "t.xplane.pb", "t.html"]
    for name in files:
        trace.save(outputs / name)
    written = trace.to_tensorboard(outputs / "logdir")
    write_compare_html(compare(trace, trace), outputs / "compare.html")
    from tracebridge.compat.tfvis import Timeline
    legacy = Timeline.from_pickle(_pickle_of(trace, outputs / "tl.pickle"))
    legacy.visualize(str(outputs / "tfvis.html"))

    expected = {f"deep/out/{name}" for name in files + ["compare.html", "tl.pickle", "tfvis.html"]}
    added = new_entries(before, tmp_path)
    under_logdir = {p for p in added if p.startswith("deep/out/logdir")}
    assert added - under_logdir == expected and "deep/out/logdir" in added
    # the host from the file became one plain name: LOGDIR/plugins/profile/<run>/<host>.xplane.pb
    xspace = Path(written["xspace"])
    assert xspace.parents[3] == outputs / "logdir" and xspace.name == ".._.._.._.._escaped-host.xplane.pb"
    assert Path(written["events"]).parent == outputs / "logdir"
    assert not list(temp.iterdir()), "temporary files left behind"
    for name in files[:-1]:  # (the XSpace adds its step marker as a host event)
        again = tracebridge.load(outputs / name).column_strings("ops", "name")
        assert set(trace.column_strings("ops", "name")) <= set(again), name


def _pickle_of(trace, path: Path) -> Path:
    from tracebridge.compat.tfvis import Timeline
    Timeline(run_metadata=trace.to_run_metadata()).to_pickle(path)
    return path


@pytest.mark.parametrize("command", ["convert", "html", "tensorboard", "compare"])
def test_cli_writes_only_where_told(sandbox, tmp_path, command):
    inputs, outputs, temp = sandbox
    source = crafted_chrome(inputs / "crafted.json")
    before = snapshot(tmp_path)
    target = {"convert": outputs / "t.json.gz", "html": outputs / "t.html",
              "tensorboard": outputs / "logdir", "compare": outputs / "diff.html"}[command]
    if command == "compare":
        result = run_cli("compare", source, source, "--html", target, cwd=outputs.parent)
    else:
        result = run_cli(command, source, target, cwd=outputs.parent)
    assert result.returncode == 0, result.stderr
    added = new_entries(before, tmp_path)
    top = os.path.relpath(target, tmp_path)
    assert {p for p in added if not p.startswith(top)} == set(), added
    assert top in added
    assert not list(temp.iterdir())
