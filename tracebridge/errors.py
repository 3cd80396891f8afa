"""The one exception tree of tracebridge.

    TracebridgeError                 base; exit code 2 from the CLI
    ├── TraceFormatError             a file is not what it claims (names file and place)
    │   └── UnsafePickleError        a pickle asks for something other than RunMetadata
    ├── MissingDependencyError       an optional extra is needed (names the extra)
    ├── CaptureError                 profiling could not start, run or stop
    ├── OutputError                  an output could not be written
    └── MigrationError               the codemod could not read or rewrite a file

The CLI catches only ``TracebridgeError`` and prints its message on one line;
anything else is a bug and keeps its traceback.
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


class MigrationError(TracebridgeError):
    """The codemod could not read or rewrite a file."""
