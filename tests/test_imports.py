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
    t.save({json.dumps(str(tmp_path))} + '/x.pb')
    tracebridge.load({json.dumps(str(tmp_path))} + '/x.pb')
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
        "__version__", "capture_remote", "compare", "load", "trace"])
    for name in tracebridge.__all__:
        assert hasattr(tracebridge, name)
