"""Drop-in stand-ins for TensorFlow modules that legacy profiling scripts import.

The codemod rewrites ``from tensorflow.python.client import timeline`` to
``from tracebridge.compat import timeline``. Each module here is imported on its own;
this package imports none of them, so importing it costs nothing.

* :mod:`.timeline`: ``Timeline``, for ``tensorflow.python.client.timeline``;
* :mod:`.tfvis`: ``Timeline``, for ``from tfvis import Timeline``;
* :mod:`.profiler_hook`: ``ProfilerHook``, for ``tf.compat.v1.train.ProfilerHook`` (a
  ``SessionRunHook`` and, the same object, a Keras callback);
* :mod:`.session`: ``run_traced`` and ``add_run_metadata``, what the codemod rewrites
  ``session.run(..., options=FULL_TRACE)`` and ``writer.add_run_metadata`` into.

``tracebridge.compat.ProfilerHook`` (and the other names in ``__all__``) resolve on first
use, through ``__getattr__``.
"""

from __future__ import annotations

import importlib

_SUBMODULES = ("profiler_hook", "session", "tfvis", "timeline")
_NAMES = {"ProfilerHook": "profiler_hook", "run_traced": "session", "add_run_metadata": "session"}

__all__ = sorted([*_NAMES, *_SUBMODULES])


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
