"""Captures: where tracebridge runs TensorFlow (one of the rooms that import it, with
``compat``, ``keras`` and ``demo``; see the package's docstring).

``trace(session)`` takes the TF1 path (:mod:`.session`); ``trace(fn)`` and
``with trace(**options):`` the TF2 path (:mod:`.profiler`); both give the same ``Trace``.
"""

from __future__ import annotations

from typing import Any

from .profiler import ProfileTrace, enable_cpu_memory_events
from .schedule import Schedule
from .session import SessionTrace, is_session

__all__ = ["ProfileTrace", "Schedule", "SessionTrace", "enable_cpu_memory_events", "trace"]


def trace(target: Any = None, **options: Any):
    """``trace(session, **options)``: a :class:`SessionTrace`;
    ``trace(fn, **options)``: a traced callable (a :class:`ProfileTrace`);
    ``trace(**options)``: a :class:`ProfileTrace` for a ``with`` block."""
    if target is not None and is_session(target):
        return SessionTrace(target, **options)
    if target is not None and not callable(target):
        from ..errors import CaptureError
        raise CaptureError(f"trace() takes a TF1 session, a function or nothing, not {type(target).__name__}")
    return ProfileTrace(target, **options)
