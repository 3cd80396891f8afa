"""tracebridge: one step-stats model for TensorFlow 1 and TensorFlow 2 profiles.

    trace = tracebridge.load("run_metadata.pb")       # or .pbtxt, .json, events, pickles
    trace.summary()                                   # where the time went
    trace.save("timeline.json")                       # Chrome trace for Perfetto
    with tracebridge.trace(session) as t:             # capture TF1 session.run calls
        session.run(train_op)
    t.trace

Reading, converting and summarizing never import TensorFlow; only captures do.
"""

from __future__ import annotations

from .errors import (CaptureError, MigrationError, MissingDependencyError, OutputError,
                     TraceFormatError, TracebridgeError, UnsafePickleError)
from .model import Device, Lane, Op, Step, Trace
from .readers import load

__version__ = "0.1.0"

__all__ = [
    "CaptureError", "Device", "Lane", "MigrationError", "MissingDependencyError", "Op",
    "OutputError", "Step", "Trace", "TraceFormatError", "TracebridgeError", "UnsafePickleError",
    "__version__", "load", "trace",
]


def trace(target=None, **options):
    """Capture a profile. ``trace(session)`` traces the ``session.run`` calls made inside
    ``with``; see :class:`tracebridge.capture.session.SessionTrace` for the options
    (``every``, ``warmup``, ``steps``, ``trace_level``). Imports TensorFlow."""
    from .capture import trace as _trace
    return _trace(target, **options)
