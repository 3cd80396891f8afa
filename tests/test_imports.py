"""The architecture, as imports: which rooms of the package may import which, which face
TensorFlow, and that reading, converting and summarizing never import it. The rule is
stated in ``tracebridge/__init__.py``; the tables here are that rule, and every import in
the package's source is checked against them, so a new crossing fails until it is named
here with its reason. Also: the public names are exactly the intended ones, and private
TensorFlow names appear in one adapter only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import tracebridge

PACKAGE = Path(tracebridge.__file__).parent
TENSORFLOW = ("tensorflow", "keras", "tensorboard", "xprof", "tensorboard_plugin_profile")

# The rooms that face TensorFlow and import it, by design: captures, the drop-in
# replacements of TF1-era APIs, the Keras callback and the demo.
TENSORFLOW_ROOMS = {"capture", "compat", "keras", "demo"}
# ... except compat's timeline.py, which replaces TF's module without it (compat's
# session-side shims import TF inside the functions that run sessions).
NO_TENSORFLOW_IN = {"compat/timeline.py", "compat/__init__.py"}
# The front doors import any room, the TensorFlow-facing ones only inside the functions
# that capture, so that ``import tracebridge`` and the CLI's reading commands stay TF-free.
FRONT_DOORS = {"__init__", "cli", "__main__"}

# Room -> the rooms its modules import (tracebridge's own; a room is a folder or a
# top-level module). Every other room's imports are exactly these: a new one fails, and
# one no longer used must be struck out, so the table stays the truth.
ROOM_IMPORTS = {
    # the foundations: errors, options, wire formats, file writing, forked workers
    "errors": set(),
    "_files": {"errors"},
    "_fork": set(),
    "options": {"_fork", "errors"},
    "protos": set(),
    "tfrecord": set(),
    "_wire": set(),
    # the model depends on nothing but itself and the error tree, not even lazily: a
    # trace's conveniences go through the Consumers (model/trace.py's contract) that
    # tracebridge.formats installs. Inside it, imports run one way, trace -> slicing ->
    # accelerator -> parts (Lane, Step, Op); slicing names Trace for annotations only
    "model": {"errors"},
    # readers produce the model, writers consume it, analysis computes on traces it is
    # handed: none imports another, and analysis does no file I/O (a host-by-host analysis
    # is handed a loader, tracebridge.formats.load_host, by its caller)
    "readers": {"model", "errors", "options", "protos", "tfrecord", "_fork", "_wire"},
    "writers": {"model", "errors", "options", "protos", "tfrecord", "_files", "_fork", "_wire"},
    # (options and _fork: a large summary's step breakdown runs in a thread of its own)
    "analysis": {"model", "errors", "options", "_fork"},
    # the table above readers and writers; writers and analyses are named as
    # "module:function" strings and imported on first use (see LAZY_ONLY)
    "formats": {"model", "readers", "writers", "analysis", "errors", "options", "_files"},
    # the codemod reads source text; it runs nothing
    "migrate": {"errors"},
    # TensorFlow-facing rooms
    "capture": {"model", "readers", "errors", "protos"},
    "compat": {"capture", "model", "readers", "writers", "errors", "protos", "_files"},
    "keras": {"capture", "model", "errors"},
    "demo": {"capture", "analysis", "writers", "_files"},
    # doctor: the checks over files (readers.layout) and over a trace (analysis.run.doctor)
    "diagnosis": {"analysis", "errors", "model", "readers", "formats"},
    # front doors
    "__init__": {"model", "formats", "readers", "analysis", "capture", "errors", "diagnosis"},
    "cli": {"formats", "readers", "writers", "analysis", "capture", "demo", "migrate", "errors", "options",
            "_files", "_fork", "tracebridge", "diagnosis", "view", "guide"},
    # `tracebridge view`: serves a file to the Perfetto UI or opens a page; reads nothing
    "view": {"errors"},
    # `tracebridge guide KIND`: the migration guide shipped as package data; reads nothing else
    "guide": {"errors"},
    "__main__": {"cli"},
}
# Imports that only run inside a function, never when the importing module loads.
LAZY_ONLY = {("formats", "writers"), ("formats", "analysis")} | {
    (door, room) for door in FRONT_DOORS for room in TENSORFLOW_ROOMS}
# Crossings outside the room table, each deliberate: (file, room) -> why.
CROSSINGS = {
    ("writers/html.py", "tracebridge"): "the page names the tracebridge version that wrote it (__version__)",
    ("capture/profiler.py", "analysis"): "a capture's note on missing memory events is the doctor's "
                                         "(analysis.run.doctor: one place says what is missing and why)",
    ("capture/script.py", "formats"): "`tracebridge run` writes what it caught in the format OUT's suffix names, "
                                      "and checks that name before the script runs (formats.output_format)",
    ("capture/step_hooks.py", "keras"): "`tracebridge run` adds the Keras room's TraceCallback to a script's fit: "
                                        "the one capture of fit, not a second",
}


def test_reading_converting_summarizing_import_no_tensorflow(tmp_path, corpus):
    xspace = sorted(str(p) for p in (corpus / "xspace").glob("*.xplane.pb") if "jax" not in p.name)
    code = f"""
import json, sys
import tracebridge
from tracebridge.cli import main
for path in {json.dumps([str(p) for p in sorted((corpus / 'chrome').glob('*.json'))])}:
    t = tracebridge.load(path)
    t.summary(); t.info()
    t.save({json.dumps(str(tmp_path))} + '/x.json', memory=True, dataflow=True)
    written = t.save({json.dumps(str(tmp_path))} + '/x.pb', split_steps=True)  # a .pb holds one step
    tracebridge.load(written[0])
main(['summary', path])
t.to_tensorboard({json.dumps(str(tmp_path / 'tb'))})
tracebridge.advise(t)
tracebridge.compare(t, t)
tracebridge.summarize_hosts({json.dumps(xspace)}, top=3)
import tracebridge.compat, tracebridge.compat.timeline
from tracebridge.migrate import migrate_source
migrate_source("import tensorflow as tf\\nsess = tf.Session()\\n")
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {TENSORFLOW!r})))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def _room(rel: str) -> str:
    """A file's room: its folder under the package, or its module's name at the top."""
    return rel.split("/")[0] if "/" in rel else rel.removesuffix(".py")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """``(module, lazy)`` for each import of a file: ``tracebridge.x`` names for relative
    imports (``from .. import protos`` is ``tracebridge.protos``; ``from .. import
    __version__`` the package itself), ``"module:function"`` strings that name a module of
    the package (imported on first use), and whether it sits inside a function."""
    tree = ast.parse(path.read_text())
    package = ".".join(("tracebridge",) + path.relative_to(PACKAGE).parent.parts)
    found: list[tuple[str, bool]] = []

    def module_of(base: str, name: str) -> str:
        candidate = PACKAGE.joinpath(*base.split(".")[1:], name)
        is_module = candidate.is_dir() or candidate.with_suffix(".py").exists()
        return f"{base}.{name}" if is_module else base

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, lazy) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if node.module is None:
                found.extend((module_of(base, alias.name), lazy) for alias in node.names)
            else:
                found.append((base, lazy))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.startswith("tracebridge.") and ":" in node.value and " " not in node.value):
            found.append((node.value.partition(":")[0], True))
        inside = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def _source_imports() -> dict[str, list[tuple[str, bool]]]:
    return {path.relative_to(PACKAGE).as_posix(): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _target_room(module: str) -> str | None:
    """The room of a ``tracebridge...`` module (None for outside modules)."""
    parts = module.split(".")
    if parts[0] != "tracebridge":
        return None
    return parts[1] if len(parts) > 1 else "tracebridge"


def test_only_the_tensorflow_rooms_import_tensorflow():
    importers = set()
    for rel, imports in _source_imports().items():
        if any(module.split(".")[0] in TENSORFLOW for module, _ in imports):
            importers.add(rel)
            assert _room(rel) in TENSORFLOW_ROOMS and rel not in NO_TENSORFLOW_IN, rel
    # the rule is not empty: each TensorFlow room does import it
    assert {_room(rel) for rel in importers} == TENSORFLOW_ROOMS


def test_rooms_import_only_what_the_table_allows():
    used: dict[str, set[str]] = {room: set() for room in ROOM_IMPORTS}
    crossings_used = set()
    for rel, imports in _source_imports().items():
        room = _room(rel)
        assert room in ROOM_IMPORTS, f"{rel}: a new room; give it a line in ROOM_IMPORTS"
        for module, lazy in imports:
            target = _target_room(module)
            if target is None or target == room:
                continue
            if (rel, target) in CROSSINGS:
                crossings_used.add((rel, target))
                continue
            assert target in ROOM_IMPORTS[room], f"{rel} imports {module}: not in ROOM_IMPORTS[{room!r}]"
            assert lazy or (room, target) not in LAZY_ONLY, f"{rel} imports {module} when it loads"
            used[room].add(target)
    stale = {room: allowed - used[room] for room, allowed in ROOM_IMPORTS.items() if allowed - used[room]}
    assert stale == {}, f"allowed but no longer used (strike them out): {stale}"
    assert crossings_used == set(CROSSINGS)


def test_the_table_keeps_tensorflow_behind_the_front_doors():
    """No room that reads, writes or analyses may reach a TensorFlow room, however
    indirectly: what ``import tracebridge`` and a reading command load stays TF-free."""
    reachable = {room for room in ROOM_IMPORTS if room not in TENSORFLOW_ROOMS | FRONT_DOORS}
    for room in reachable:
        assert not ROOM_IMPORTS[room] & TENSORFLOW_ROOMS, room
        assert not ROOM_IMPORTS[room] & FRONT_DOORS, room
    assert {"model", "readers", "writers", "analysis", "formats"} <= reachable


def test_nothing_imports_the_cli():
    for rel, imports in _source_imports().items():
        if rel != "__main__.py":
            assert not any(module == "tracebridge.cli" for module, _ in imports), rel


def test_the_import_walk_sees_every_kind_of_import():
    found = dict(_imports(PACKAGE / "formats.py"))
    assert found["tracebridge.readers.sources"] is False           # from .readers.sources import ...
    assert found["tracebridge.readers"] is False                   # from .readers import sources
    assert found["tracebridge.writers.chrome"] is True             # "tracebridge.writers.chrome:write_chrome"
    assert ("tracebridge.capture", True) in _imports(PACKAGE / "__init__.py")   # inside trace()
    assert ("tracebridge", True) in _imports(PACKAGE / "writers" / "html.py")  # from .. import __version__


def test_public_names():
    assert sorted(tracebridge.__all__) == sorted([
        "CaptureError", "Device", "Lane", "MigrationError", "MissingDependencyError", "Op",
        "OutputError", "Step", "Trace", "TraceFormatError", "TracebridgeError", "UnsafePickleError",
        "__version__", "advise", "capture_remote", "compare", "doctor", "load", "summarize_hosts", "trace"])
    for name in tracebridge.__all__:
        assert hasattr(tracebridge, name)


# --- private TensorFlow and xprof names live in one adapter -------------------------------

ADAPTER = "capture/tf_internals.py"
PRIVATE_ROOTS = ("tensorflow", "xprof", "tensorboard_plugin_profile", "keras")
# Private names of TF and xprof reached through objects rather than modules (a session's
# wrapped session, a step marker's keyword): named wherever they appear.
KNOWN_PRIVATE = {"_pywrap_profiler_plugin", "_profiler", "_sess", "_r", "_get_or_create_global_step_read"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_tf_names(source: str) -> list[str]:
    """Where ``source`` names a private TensorFlow/xprof attribute: an import of one, an
    attribute read through a name bound to one of their modules, a name of KNOWN_PRIVATE
    as an attribute, a keyword or a getattr/setattr/hasattr string. ``self``/``cls``
    attributes are the module's own, whatever their names."""
    tree = ast.parse(source)
    tf_names: set[str] = set()   # local names bound to TF/xprof modules or objects from them
    found = []

    def from_tf(module: str | None) -> bool:
        return bool(module) and module.split(".")[0] in PRIVATE_ROOTS

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if from_tf(alias.name):
                    tf_names.add((alias.asname or alias.name).split(".")[0])
                    found += [f"import {alias.name}"] if any(map(_is_private, alias.name.split("."))) else []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and from_tf(node.module):
            for alias in node.names:
                tf_names.add(alias.asname or alias.name)
                if any(map(_is_private, node.module.split("."))) or _is_private(alias.name):
                    found.append(f"from {node.module} import {alias.name}")

    def root(node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = root(node.value)
            if base in ("self", "cls"):
                continue
            if base in tf_names or node.attr in KNOWN_PRIVATE:
                found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in KNOWN_PRIVATE:
            found.append(f"line {node.value.lineno}: {node.arg}=")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            name = node.args[1].value
            if name in KNOWN_PRIVATE or (_is_private(name) and root(node.args[0]) in tf_names):
                found.append(f"line {node.lineno}: {node.func.id}(..., {name!r})")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and from_tf(node.value)
              and " " not in node.value and any(map(_is_private, node.value.split(".")))):
            found.append(f"line {node.lineno}: {node.value!r}")  # importlib.import_module("...")
    return found


def test_private_tensorflow_names_only_in_the_adapter():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != ADAPTER:
            found = private_tf_names(path.read_text())
            if found:
                offenders[rel] = found
    assert offenders == {}, f"private TF/xprof names outside {ADAPTER}: {offenders}"
    assert private_tf_names((PACKAGE / ADAPTER).read_text()), "the adapter names them (the check works)"


def test_private_tensorflow_names_check_is_precise():
    flagged = {
        "from tensorflow.python.profiler import profiler_v2\nprofiler_v2._profiler = None",
        "from xprof.convert import _pywrap_profiler_plugin as client",
        "import xprof.convert._pywrap_profiler_plugin",
        "import tensorflow as tf\ntf.profiler.experimental.Trace('train', step_num=1, _r=1)",
        "import tensorflow as tf\nx = tf.compat.v1._internal",
        "def target(session):\n    return session._sess.sess_str",
        "def target(session):\n    return getattr(session, '_sess', None)",
        "import importlib\nimportlib.import_module('tensorflow.python.profiler._pywrap_profiler')",
        "from tensorflow.python.training import training_util\ntraining_util._get_or_create_global_step_read()",
    }
    for source in flagged:
        assert private_tf_names(source), source
    ours = ("from .._files import write_bytes\nimport sys\nframe = sys._getframe(1)\n"
            "class A:\n    def f(self):\n        self._profile = self._session._session_slot[0]\n"
            "        return self._sess, cls._r\n"
            "import tensorflow as tf\nv = tf.__version__\nsession = tf.compat.v1.Session()\n"
            "print(session.sess_str, '/tensorflow.ProfilerService/Terminate')\n")
    assert private_tf_names(ours) == []


def test_a_summary_imports_no_comparison(corpus):
    """``tracebridge summary`` of an XSpace imports neither the comparison nor the capture
    package (the CLI's parser names compare --sort's choices and run's default steps itself)
    nor the HLO reader of a profile without XLA: imports are a fifth of a 3M-event summary's
    time (issue 35)."""
    from tracebridge import cli
    from tracebridge.analysis.compare.result import SORTS
    from tracebridge.capture.script import DEFAULT_STEPS
    assert cli.COMPARE_SORTS == tuple(SORTS)
    assert cli.RUN_DEFAULT_STEPS == DEFAULT_STEPS
    code = f"""
import io, contextlib, json, sys
from tracebridge import cli
with contextlib.redirect_stdout(io.StringIO()):
    cli.main(["summary", {str(corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")!r}, "--json"])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("tracebridge"))))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert not [m for m in loaded if m.startswith(("tracebridge.analysis.compare", "tracebridge.capture"))]
    assert "tracebridge.readers.hlo" not in loaded
