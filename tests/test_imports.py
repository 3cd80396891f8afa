"""Import hygiene: reading and converting never import TensorFlow; the folders' data flow
holds (readers and captures produce the model; writers and analysis consume it); nothing
imports the CLI; the public names are exactly the intended ones."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import tracebridge

PACKAGE = Path(tracebridge.__file__).parent


def test_reading_converting_summarizing_import_no_tensorflow(tmp_path, corpus):
    code = f"""
import json, sys
import tracebridge
from tracebridge.cli import main
for path in {json.dumps([str(p) for p in sorted((corpus / 'chrome').glob('*.json'))])}:
    t = tracebridge.load(path)
    t.summary(); t.info()
    t.save({json.dumps(str(tmp_path))} + '/x.json', memory=True)
    written = t.save({json.dumps(str(tmp_path))} + '/x.pb', split_steps=True)  # a .pb holds one step
    tracebridge.load(written[0])
main(['summary', path])
import tracebridge.compat, tracebridge.compat.timeline
from tracebridge.migrate import migrate_source
migrate_source("import tensorflow as tf\\nsess = tf.Session()\\n")
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tensorboard', 'xprof'))))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def _imports(path: Path) -> set[str]:
    """Modules a file imports, resolved to ``tracebridge.x`` names for relative imports."""
    tree = ast.parse(path.read_text())
    package = ".".join(("tracebridge",) + path.relative_to(PACKAGE).parent.parts)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
    return found


def test_layering():
    files = {p: _imports(p) for p in PACKAGE.rglob("*.py")}
    for path, imports in files.items():
        rel = path.relative_to(PACKAGE).as_posix()
        assert not any(i == "tracebridge.cli" or i.endswith(".cli") for i in imports) or rel == "__main__.py", rel
        # compat's session-side shims import TF inside the functions that run sessions; its
        # timeline.py replaces TF's module without it.
        if not rel.startswith(("capture/", "demo.py", "keras.py", "compat/")) or rel == "compat/timeline.py":
            assert not any(i.split(".")[0] in ("tensorflow", "keras") for i in imports), rel
        if rel.startswith("model/"):
            # The model depends on nothing but itself and the error tree, not even lazily:
            # a trace's conveniences go through what tracebridge.formats installs.
            above = {i for i in imports if i == "tracebridge" or i.startswith("tracebridge.") and
                     not i.startswith("tracebridge.model")}
            assert above <= {"tracebridge.errors"}, (rel, above)
        if rel.startswith("readers/"):  # readers produce the model; they consume nothing of it
            assert not any(i.startswith(("tracebridge.writers", "tracebridge.analysis", "tracebridge.formats"))
                           for i in imports), rel
        if rel.startswith(("readers/", "writers/", "analysis/", "model/")):
            assert not any(i.startswith(("tracebridge.capture", "tracebridge.compat", "tracebridge.migrate"))
                           for i in imports), rel
        if rel.startswith("migrate/"):  # the codemod reads source text; it runs nothing
            assert not any(i.startswith(("tracebridge.capture", "tracebridge.compat")) for i in imports), rel


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
            "class A:\n    def f(self):\n        self._profile = self._session._live[0]\n"
            "        return self._sess, cls._r\n"
            "import tensorflow as tf\nv = tf.__version__\nsession = tf.compat.v1.Session()\n"
            "print(session.sess_str, '/tensorflow.ProfilerService/Terminate')\n")
    assert private_tf_names(ours) == []
