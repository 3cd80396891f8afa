"""The one exception tree of tracebridge.

    TracebridgeError                 base; exit code 2 from the CLI
    ├── TraceFormatError             a file is not what it claims (names file and place)
    │   └── UnsafePickleError        a pickle asks for something other than RunMetadata
    ├── MissingDependencyError       an optional extra is needed (names the extra)
    ├── CaptureError                 profiling could not start, run or stop
    ├── OutputError                  an output could not be written
    ├── OptionError                  an option the format or call does not take
    └── MigrationError               the codemod could not read or rewrite a file

The CLI catches only ``TracebridgeError`` and prints its message on one line;
anything else is a bug and keeps its traceback. :func:`one_line` makes foreign text
(a parser's message, a name from a file) fit for such a line.
"""

from __future__ import annotations

import os


class TracebridgeError(Exception):
    """Base class of every error tracebridge raises on purpose."""

    exit_code = 2


class TraceFormatError(TracebridgeError, ValueError):
    """An input is malformed. ``path`` and ``where`` say which file and which place."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None,
                 where: str | None = None):
        self.path = None if path is None else os.fspath(path)
        self.where = where
        self.reason = message
        parts = [p for p in (self.path, where) if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message)


class UnsafePickleError(TraceFormatError):
    """A pickle carries an object other than a RunMetadata; nothing was executed."""


class MissingDependencyError(TracebridgeError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, what: str, extra: str):
        self.extra = extra
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'tracebridge[{extra}]'")


class CaptureError(TracebridgeError, RuntimeError):
    """Profiling could not be started, run or stopped."""


class OutputError(TracebridgeError, OSError):
    """An output file could not be written; no partial file is left behind."""


class OptionError(TracebridgeError, TypeError):
    """An option that the chosen format (or the call) does not take, or a value it cannot
    use; nothing was written."""


class MigrationError(TracebridgeError):
    """The codemod could not read or rewrite a file."""


def one_line(text: str, limit: int = 300) -> str:
    """Foreign text (a parser's message quoting the input, a name from the file) made fit
    for a one-line error: cut at ``limit`` characters, and characters that are not
    printable (newlines, U+2028, NUL, terminal escapes...) escaped, so that the message
    shows what the input holds and nothing in it can break the line or the terminal."""
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
