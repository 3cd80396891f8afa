"""Captures: the only part of tracebridge that imports TensorFlow.

``trace(session)`` takes the TF1 path (:mod:`.session`). Tracing TF2 code
(``trace(fn)``, ``with trace():``) is not part of this release yet and says so.
"""

from __future__ import annotations

from typing import Any

from ..errors import CaptureError
from .schedule import Schedule
from .session import SessionTrace, is_session

__all__ = ["Schedule", "SessionTrace", "trace"]


def trace(target: Any = None, **options: Any):
    """``trace(session, *, warmup=0, every=1, steps=None, trace_level="auto")``."""
    if target is not None and is_session(target):
        return SessionTrace(target, **options)
    raise CaptureError("tracebridge.trace() captures TF1 sessions (an object with run() and "
                       "graph) in this release; TF2 functions and code blocks are not supported yet")
