"""``tracebridge migrate``: rewrite legacy TF1 profiling scripts and notebooks for TF 2.

``migrate_source(code)`` returns a :class:`Migration` (the new code, a report line per change
or per thing left for a human, a unified diff); ``migrate_path(path)`` does the same for a
``.py`` file or a notebook. What the codemod changes, and why, is in :mod:`.codemod`. It needs
LibCST (``pip install 'tracebridge[migrate]'``); nothing here imports TensorFlow.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MigrationError, MissingDependencyError

__all__ = ["Migration", "migrate_path", "migrate_source", "python_sources"]

# Folders a project tree walk never enters: environments, caches, VCS metadata.
_SKIPPED_DIRS = {"__pycache__", "site-packages", "node_modules", ".ipynb_checkpoints"}


@dataclass
class Migration:
    """The codemod's result for one file. ``report``: (line, message) pairs; in a notebook
    the message names the cell and the line in it, and the line is 0."""

    path: str
    original: str
    code: str
    report: list[tuple[int, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.code != self.original

    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            self.original.splitlines(keepends=True), self.code.splitlines(keepends=True),
            fromfile=f"a/{self.path}", tofile=f"b/{self.path}"))

    def report_lines(self) -> list[str]:
        return [f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}"
                for line, message in self.report]


def _codemod():
    try:
        from . import codemod
    except ImportError as error:
        if "libcst" not in str(error):
            raise
        raise MissingDependencyError("tracebridge migrate", "migrate") from None
    return codemod


def migrate_source(code: str, filename: str = "<string>", *, notebook: bool = False) -> Migration:
    """Migrate one Python module's source text. ``notebook``: the code is a notebook's cells
    joined (graph mode is switched on after the TensorFlow import: a block cannot span cells)."""
    codemod = _codemod()
    import libcst
    try:
        result = codemod.rewrite_module(code, notebook=notebook)
    except libcst.ParserSyntaxError as error:
        raise MigrationError(f"{filename}:{error.raw_line}:{error.raw_column}: not valid Python: "
                             f"{error.message}") from None
    return Migration(filename, code, result.code, result.report)


def migrate_path(path: str | os.PathLike) -> Migration:
    """Migrate a ``.py`` file or an ``.ipynb`` notebook (read, not written)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise MigrationError(f"{path}: byte {error.start}: not UTF-8 text") from None
    except OSError as error:
        raise MigrationError(f"{path}: cannot read: {error.strerror}") from None
    if path.suffix == ".ipynb":
        from .notebooks import migrate_notebook
        return migrate_notebook(text, str(path))
    return migrate_source(text, str(path))


def python_sources(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """The ``.py`` and ``.ipynb`` files named or inside the folders named, in a stable order.
    Hidden folders, virtualenvs and caches are skipped."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS
                                 and not (Path(folder, d) / "pyvenv.cfg").exists())
                for name in sorted(files):
                    if name.endswith((".py", ".ipynb")):
                        yield Path(folder, name)
        elif path.exists():
            yield path
        else:
            raise MigrationError(f"{path}: no such file or folder")
