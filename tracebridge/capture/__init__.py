"""Captures: where tracebridge runs TensorFlow (one of the rooms that import it, with
``compat``, ``keras`` and ``demo``; see the package's docstring).

``trace(session)`` takes the TF1 path (:mod:`.session`); ``trace(fn)`` and
``with trace(**options):`` the TF2 path (:mod:`.profiler`); both give the same ``Trace``.
"""

from __future__ import annotations

import sys
from typing import Any

from .profiler import ProfileTrace, enable_cpu_memory_events
from .schedule import Schedule
from .session import SessionTrace, is_session

__all__ = ["ProfileTrace", "Schedule", "SessionTrace", "enable_cpu_memory_events", "trace"]


def trace(target: Any = None, **options: Any):
    """``trace(session, **options)``: a :class:`SessionTrace`;
    ``trace(fn, **options)``: a traced callable (a :class:`ProfileTrace`);
    ``trace(**options)``: a :class:`ProfileTrace` for a ``with`` block. A Keras model
    raises ``TypeError`` pointing to :class:`tracebridge.keras.TraceCallback`."""
    if target is not None and is_session(target):
        return SessionTrace(target, **options)
    if _is_keras_model(target):
        raise TypeError("trace() does not take a Keras model: its fit() would not be traced (the model is only "
                        "callable). Trace fit, evaluate or predict with tracebridge.keras.TraceCallback: "
                        "model.fit(x, y, callbacks=[TraceCallback(warmup=2, steps=3)]); or run the script "
                        "unchanged with `tracebridge run script.py`")
    if target is not None and not callable(target):
        from ..errors import CaptureError
        raise CaptureError(f"trace() takes a TF1 session, a function or nothing, not {type(target).__name__}")
    return ProfileTrace(target, **options)


def _is_keras_model(target: Any) -> bool:
    """A Keras 3 (or Keras 2, ``tf_keras``) model. Looked up among the modules already
    loaded: a model exists only once its Keras is imported, and trace() imports none."""
    for name in ("keras", "tf_keras"):
        model_class = getattr(sys.modules.get(name), "Model", None)
        if isinstance(model_class, type) and isinstance(target, model_class):
            return True
    return False
