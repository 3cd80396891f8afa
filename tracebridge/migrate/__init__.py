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

from ..errors import MigrationError, MissingDependencyError, one_line

__all__ = ["Migration", "migrate_path", "migrate_source", "python_sources"]

# Folders a project tree walk never enters: environments, caches, VCS metadata.
_SKIPPED_DIRS = {"__pycache__", "site-packages", "node_modules", ".ipynb_checkpoints"}


@dataclass
class Migration:
    """The codemod's result for one file. ``report``: (line, message) pairs; in a notebook
    the message names the cell and the line in it, and the line is 0. ``missing``: the
    report's lines about what TF 2.21 cannot run (``migrate --check`` fails on them)."""

    path: str
    original: str
    code: str
    report: list[tuple[int, str]] = field(default_factory=list)
    missing: list[tuple[int, str]] = field(default_factory=list)

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
    _check_nesting(code, filename)
    _check_syntax(code, filename)
    try:
        result = codemod.rewrite_module(code, notebook=notebook)
    except libcst.ParserSyntaxError as error:
        raise MigrationError(f"{filename}:{error.raw_line}:{error.raw_column}: not valid Python: "
                             f"{one_line(error.message)}") from None
    except RecursionError:  # LibCST's visitors recurse once per nesting level, in Python
        raise MigrationError(f"{filename}: code nested too deeply for the codemod") from None
    except UnicodeEncodeError as error:  # a lone surrogate (a notebook's JSON can hold "\ud800")
        line = code.count("\n", 0, error.start) + 1
        raise MigrationError(f"{filename}:{line}: not valid text ({error.reason})") from None
    return Migration(filename, code, result.code, result.report, result.missing)


def _check_syntax(code: str, filename: str) -> None:
    """Python's own parser places a syntax error where it is: LibCST's reports the token
    after it, a line too low when the error ends a line (an unclosed bracket)."""
    import ast
    try:  # a notebook may await at top level
        compile(code, filename, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as error:
        raise MigrationError(f"{filename}:{error.lineno}:{error.offset}: not valid Python: "
                             f"{one_line(error.msg)}") from None
    except (ValueError, RecursionError, MemoryError):  # null bytes, deep nesting: LibCST says
        return


# LibCST's native parser recurses once per nesting level on the C stack, and past a few
# thousand levels the process dies (SIGSEGV), without even an exception: at 1,500 nested
# brackets, or 10,000 chained operators or elif branches (2,500 are fine). A bracket
# counts 2 against the limit, an operator 1: 1,000 brackets (CPython allows 200) or 2,000
# operators in a chain (a sum of 1,000 products) pass.
_MAX_NESTING = 2000
_MAX_ELIF = 2500
_SEPARATORS = {",", ";", "=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=",
               "**=", "->"}
_CHAINING = {"not", "and", "or", "if", "else", "lambda", "await", "in", "is"}


def _check_nesting(code: str, filename: str) -> None:
    """Refuse code nested deeper than LibCST parses without crashing, before it sees it.

    The depth is estimated from the tokens, whether or not the code is valid (a syntax
    error after 100k chained attributes does not stop LibCST from recursing into them):
    inside each open bracket, the operators, chaining keywords and brackets since the last
    comma or assignment, summed over the open brackets; and the elif branches of the
    if statements in progress."""
    import io
    import tokenize
    chains, depth = [0], 0     # per open bracket; depth = sum(chains)
    elifs, branches = [0], 0   # per indentation level; branches = sum(elifs)
    at_start = True
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            kind, text = token.type, token.string
            if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                chains, depth, at_start = [0], 0, True
                if kind == tokenize.INDENT:
                    elifs.append(0)
                elif kind == tokenize.DEDENT and len(elifs) > 1:
                    branches -= elifs.pop()
                continue
            if kind in (tokenize.NL, tokenize.COMMENT):
                continue
            if at_start:
                at_start = False
                if text == "elif":
                    elifs[-1] += 1
                    branches += 1
                elif text != "else":
                    branches -= elifs[-1]
                    elifs[-1] = 0
            if kind == tokenize.OP:
                if text in ("(", "[", "{"):
                    chains[-1] += 2
                    depth += 2
                    chains.append(0)
                elif text in (")", "]", "}"):
                    if len(chains) > 1:
                        depth -= chains.pop()
                elif text in _SEPARATORS:
                    depth -= chains[-1]
                    chains[-1] = 0
                else:
                    chains[-1] += 1
                    depth += 1
            elif kind == tokenize.NAME and text in _CHAINING:
                chains[-1] += 1
                depth += 1
            if depth > _MAX_NESTING or branches > _MAX_ELIF:
                what = f"more than {_MAX_ELIF} elif branches" if branches > _MAX_ELIF else \
                    f"more than {_MAX_NESTING} levels"
                raise MigrationError(f"{filename}:{token.start[0]}: code nested too deeply for the codemod "
                                     f"({what})")
    except (tokenize.TokenError, SyntaxError):  # LibCST reports these itself, with their place
        return


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
