"""The seeds' profiling examples under TF 2.21: as they stand, after ``tf_upgrade_v2`` and
after ``tracebridge migrate --write``.

Each folder of ``migration_guide/examples/`` holds ``before.py`` (a seed's example made
runnable as it stands) and ``expect.json``: the trace files it writes (``outputs``), text
it prints instead (``stdout``), event folders whose RunMetadata sits in a text summary
(``text_summaries``: folder -> tag), and the measured outcomes of running it unchanged
(``as_is``) and after TF's own upgrade script (``tf_upgrade_v2``) under TF 2.21. Those
two records measure TensorFlow, not tracebridge: the suite checks that the migration
guide's table and tallies say what they record, and re-measuring them is a tool, run when
the TensorFlow pin changes (``git diff`` then shows what changed)::

    python tests/test_migration_examples.py --record [EXAMPLE...]

Examples ``12_`` on are idioms of real legacy scripts (seed ``idiom``). Those that use what
TF 2.21 cannot run list it under ``missing``: for them, ``tracebridge migrate --check``
must fail and its report name each of those strings on a ``not in TF 2.21`` line.

What tracebridge does is run here: ``tracebridge migrate`` in this process, then the
migrated script with real TensorFlow in a subprocess, in its own temporary folder (the
scripts write relative paths). Each migrated script is a process of its own, forked from one
that has imported TensorFlow (tests/helpers/preloaded.py): the import cost most of the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracebridge
from tests.conftest import run_cli
from tests.helpers.preloaded import PreloadedPython

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO / "migration_guide" / "examples"
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*/before.py")) if EXAMPLES_DIR.is_dir() else []
TIMEOUT = 300
HTML_MARKER = 'class="tracebridge-trace"'  # tracebridge/writers/html.py: the page's trace metadata
HTML_META = re.compile(r'<script type="application/json" id="[^"]*-meta" class="tracebridge-trace">(.*?)</script>',
                       re.S)
GUIDE = REPO / "migration_guide" / "README.md"
# A row of the guide's table: | [`name`](examples/name/) | seed | writes | as-is | tf_upgrade_v2 | migrate |
GUIDE_ROW = re.compile(r"^\| \[`(?P<name>[^`]+)`\]\(examples/[^)]*\) \|(?P<cells>.*)\|$")


def _expect(example: Path) -> dict:
    return json.loads((example / "expect.json").read_text())


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, cwd=cwd, env=env or _env(), capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(args, None, expired.stdout or "", f"timeout after {TIMEOUT} s")


def _trim(line: str, workdir: Path) -> str:
    """A message without machine paths: the work folder as ``.``, other folders dropped."""
    line = line.replace(str(workdir), ".")
    return re.sub(r"(?<![\w.])/(?:[^\s/'\"]+/)+", "", line).strip()


def error_line(stderr: str, workdir: Path) -> str | None:
    """The ``Type: message`` line that ends the last traceback (first line of the message)."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if starts:
        for line in lines[starts[-1] + 1:]:
            if line.strip() and not line[0].isspace():
                return _trim(line, workdir)
    tail = [line for line in lines if line.strip()]
    return _trim(tail[-1], workdir) if tail else None


def error_type(error: str | None) -> str | None:
    return None if error is None else error.split(":", 1)[0].strip()


def outcome(process: subprocess.CompletedProcess, workdir: Path, outputs: list[str]) -> dict:
    """What expect.json records of one run: exit code, runs?, error line, outputs present."""
    runs = process.returncode == 0
    return {
        "runs": runs,
        "exit_code": process.returncode,
        "error": None if runs else error_line(process.stderr, workdir),
        "outputs_written": [name for name in outputs if (workdir / name).exists()],
    }


def run_as_is(example: Path, workdir: Path) -> dict:
    """``before.py`` unchanged under this Python's TensorFlow."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(example / "before.py", workdir / "before.py")
    process = _run([sys.executable, "before.py"], workdir)
    return outcome(process, workdir, _expect(example)["outputs"])


def tf_upgrade_v2_command() -> list[str]:
    script = Path(sys.executable).with_name("tf_upgrade_v2")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "tensorflow.tools.compatibility.tf_upgrade_v2_main"]


def run_tf_upgrade_v2(example: Path, workdir: Path) -> dict:
    """``tf_upgrade_v2 --infile before.py --outfile upgraded.py``, then ``upgraded.py``."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(example / "before.py", workdir / "before.py")
    upgrade = _run([*tf_upgrade_v2_command(), "--infile", "before.py", "--outfile", "upgraded.py"], workdir)
    assert upgrade.returncode == 0 and (workdir / "upgraded.py").is_file(), upgrade.stderr[-3000:]
    process = _run([sys.executable, "upgraded.py"], workdir)
    return outcome(process, workdir, _expect(example)["outputs"])


def _short(result: dict) -> str:
    if result["runs"]:
        return "runs"
    return f"fails: {error_type(result['error'])}"


def _assert_same_outcome(measured: dict, recorded: dict, stderr_hint: str = "") -> None:
    assert (measured["runs"], error_type(measured["error"]), measured["outputs_written"]) == \
        (recorded["runs"], error_type(recorded["error"]), recorded["outputs_written"]), \
        f"measured {measured}, recorded {recorded}{stderr_hint}"


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.parent.name)
def example(request) -> Path:
    return request.param.parent


def test_examples_exist():
    assert EXAMPLES, f"no examples under {EXAMPLES_DIR}"
    for before in EXAMPLES:
        expect = _expect(before.parent)
        assert {"seed", "example", "outputs", "as_is", "tf_upgrade_v2"} <= expect.keys(), before.parent.name
        assert expect["outputs"] or expect.get("stdout") or expect.get("missing"), \
            f"{before.parent.name}: nothing to check"


def _guide_rows() -> dict[str, list[str]]:
    rows = {}
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        match = GUIDE_ROW.match(line)
        if match:
            rows[match["name"]] = [cell.strip() for cell in match["cells"].split(" | ")]
    return rows


def _says(cell: str, recorded: dict) -> bool:
    """Whether a table cell states a recorded outcome: ``runs``, or ``fails: `error```
    (the error line, cut with ``...`` where long)."""
    if recorded["runs"]:
        return cell == "runs"
    match = re.fullmatch(r"fails: `(.*)`", cell)
    return bool(match) and recorded["error"].startswith(match[1].removesuffix("..."))


def test_as_is_outcome(example):
    """The guide's table says what expect.json records of the script as it is."""
    row = _guide_rows().get(example.name)
    assert row, f"{example.name} has no row in {GUIDE.name}'s table"
    assert _says(row[-3], _expect(example)["as_is"]), (row[-3], _expect(example)["as_is"])


def test_tf_upgrade_v2_outcome(example):
    """The guide's table says what expect.json records of the script after tf_upgrade_v2."""
    row = _guide_rows()[example.name]
    assert _says(row[-2], _expect(example)["tf_upgrade_v2"]), (row[-2], _expect(example)["tf_upgrade_v2"])


def _check_html(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert HTML_MARKER in text, f"{path.name} is not a tracebridge timeline page"
    meta = json.loads(HTML_META.search(text).group(1))
    assert meta["op_count"] >= 1, f"{path.name}: timeline page without ops"


def _text_summary_trace(folder: Path, tag: str, scratch: Path) -> tracebridge.Trace:
    """The RunMetadata an event file holds as a string tensor (``summary.text``) under ``tag``."""
    from tensorflow.core.util import event_pb2  # TF only for this example

    from tracebridge.readers.events import read_records
    blobs = []
    for name in sorted(folder.glob("*tfevents*")):
        records, _ = read_records(name.read_bytes(), name)
        for _, payload in records:
            event = event_pb2.Event.FromString(payload)
            blobs += [v.tensor.string_val[0] for v in event.summary.value
                      if v.tag == tag and v.tensor.string_val]
    assert blobs, f"no text summary {tag!r} in {folder}"
    scratch.write_bytes(blobs[-1])
    return tracebridge.load(scratch)


def check_outputs(workdir: Path, expect: dict, stdout: str) -> None:
    """Every expected output exists and holds a trace with ops; expected text was printed."""
    embedded = expect.get("text_summaries", {})
    for name in expect["outputs"]:
        path = workdir / name
        assert path.exists(), f"{name} was not written"
        if path.suffix == ".html":
            _check_html(path)
            continue
        if name in embedded:
            trace = _text_summary_trace(path, embedded[name], workdir / "_embedded_run_metadata.pb")
        else:
            trace = tracebridge.load(path)
        assert len(trace) >= 1, f"{name}: trace without ops ({trace!r})"
    for text in expect.get("stdout", []):
        assert text in stdout, f"{text!r} not printed; stdout ends with {stdout[-1000:]!r}"


def _script_env() -> dict[str, str]:
    return _env(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


@pytest.fixture(scope="module")
def python():
    """The migrated scripts' interpreter, with TensorFlow imported once for all of them."""
    with PreloadedPython(_script_env()) as preloaded:
        yield preloaded


@pytest.mark.tf
@pytest.mark.slow
def test_migrated_script_runs_and_writes_its_trace(example, python, tmp_path):
    """``tracebridge migrate before.py --write``, then the script runs and writes its trace;
    or, for a script using what TF 2.21 lacks, ``--check`` fails and names exactly that."""
    expect = _expect(example)
    shutil.copy(example / "before.py", tmp_path / "before.py")
    if expect.get("missing"):
        check = run_cli("migrate", "before.py", "--check", cwd=tmp_path)
        assert check.returncode == 1, f"--check: exit {check.returncode}\n{check.stderr[-3000:]}"
        named = [line for line in check.stderr.splitlines() if ": not in TF 2.21: " in line]
        for what in expect["missing"]:
            assert any(what in line for line in named), f"{what!r} not named in the report:\n{check.stderr}"
        return
    migrate = run_cli("migrate", "before.py", "--write", cwd=tmp_path)
    assert migrate.returncode == 0, f"migrate: exit {migrate.returncode}\n{migrate.stdout}\n{migrate.stderr[-3000:]}"
    process = python.run("before.py", tmp_path, timeout=TIMEOUT)
    measured = outcome(process, tmp_path, expect["outputs"])
    assert process.returncode == 0, (f"migrated script: {measured['error']}\n--- migrated code:\n"
                                     f"{(tmp_path / 'before.py').read_text()}\n--- stderr:\n{process.stderr[-3000:]}")
    check_outputs(tmp_path, expect, process.stdout)


def test_after_file_is_the_codemods_output(example):
    """``after.py``, when present, is exactly what ``migrate_source(before.py)`` returns."""
    after = example / "after.py"
    if not after.is_file():
        pytest.skip(f"{example.name}/after.py not generated yet: write migrate_source(before.py).code "
                    "there once the codemod lands, then review it")
    from tracebridge.migrate import migrate_source
    result = migrate_source((example / "before.py").read_text(), filename="before.py")
    assert result.code == after.read_text()


def test_summary_table():
    """The guide's table has a row per example, whose tracebridge column is what
    test_migrated_script_runs_and_writes_its_trace checks, and the tallies in the guide and
    the README are the records' ("Of all 26 scripts: 1, 2 and 21")."""
    rows = _guide_rows()
    names = [before.parent.name for before in EXAMPLES]
    assert sorted(rows) == names
    expects = [_expect(before.parent) for before in EXAMPLES]
    for name, expect in zip(names, expects):
        wanted = "`--check` fails, names what TF 2.21 lacks" if expect.get("missing") else "runs, writes its trace"
        assert rows[name][-1] == wanted, name
    as_is = sum(e["as_is"]["runs"] for e in expects)
    upgraded = sum(e["tf_upgrade_v2"]["runs"] for e in expects)
    migrated = sum(not e.get("missing") for e in expects)
    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert f"Of all {len(expects)} scripts: {as_is}, {upgraded} and {migrated}." in guide
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (f"Of the {len(expects)} seed examples and idiom scripts in `migration_guide/examples/`, measured under "
            f"TF 2.21, {as_is} runs as it is, {upgraded} after `tf_upgrade_v2` and {migrated} after "
            f"`tracebridge migrate`") in readme


def _record(names: list[str]) -> None:
    """Re-measure ``as_is`` and ``tf_upgrade_v2`` of the examples named (all by default)
    into their expect.json."""
    import tempfile
    for before in EXAMPLES:
        example = before.parent
        if names and example.name not in names:
            continue
        expect = _expect(example)
        with tempfile.TemporaryDirectory() as scratch:
            expect["as_is"] = run_as_is(example, Path(scratch) / "as_is")
            expect["tf_upgrade_v2"] = run_tf_upgrade_v2(example, Path(scratch) / "tf_upgrade_v2")
        (example / "expect.json").write_text(json.dumps(expect, indent=2) + "\n")
        print(example.name, "as-is:", _short(expect["as_is"]), "| tf_upgrade_v2:", _short(expect["tf_upgrade_v2"]),
              flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--record"]:
        sys.exit("usage: python tests/test_migration_examples.py --record [EXAMPLE...]")
    _record(sys.argv[2:])
