"""Tying a capture to the framework call that drives it, for Keras callbacks.

Keras tells callbacks nothing when ``fit`` (``evaluate``, ``predict``) raises, and Ctrl-C
often lands between the callbacks and the step. So a callback's capture remembers the call
that drives it (:class:`CallTie`), and can tell when that call has left its thread's stack,
that is, ended by an exception: its watch thread then stops it, and a later capture that
finds it still holding the profiler stops it instead of being refused. A step that raises is
caught sooner, by a :class:`StepGuard` around the model's step function.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class CallTie:
    """One frame of one thread: the framework call a capture was tied to."""

    def __init__(self, frame):
        self.thread, self.frame_id, self.code = threading.get_ident(), id(frame), frame.f_code

    @classmethod
    def above(cls, frame) -> "CallTie | None":
        """The first frame from ``frame`` up that is neither a callback method (``on_*``)
        nor tracebridge's own: a Keras ``fit``, say. None if there is none."""
        while frame is not None and (frame.f_code.co_name.startswith("on_")
                                     or os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)):
            frame = frame.f_back
        return None if frame is None else cls(frame)

    def running(self) -> bool:
        """Whether the call is still on its thread's stack (an id reused by the same code
        counts as running: refusing is safe)."""
        frame = sys._current_frames().get(self.thread)
        while frame is not None:
            if id(frame) == self.frame_id and frame.f_code is self.code:
                return True
            frame = frame.f_back
        return False


class StepGuard:
    """``owner.<name>`` (a Keras model's ``train_function``...) wrapped while a traced
    call runs: when it raises, ``on_error()`` runs, then the same exception goes on. Keras
    calls no callback when a step raises (a model error, or Ctrl-C, which nearly always
    lands in a step), so this is where a callback's capture can stop at once.
    ``remove()`` puts the original back; a guard left by an earlier call is replaced.
    ``on_return(function, args, kwargs)``, if given, runs after each call that returned."""

    def __init__(self, owner: Any, name: str, on_error: Callable[[], None],
                 on_return: Callable[[Callable, tuple, dict], None] | None = None):
        self.owner, self.name, self.on_error, self.on_return = owner, name, on_error, on_return
        inner = getattr(owner, name, None)
        while isinstance(inner, StepGuard):  # left by a call that raised elsewhere
            inner = inner.inner
        self.inner = inner
        if callable(inner):
            with contextlib.suppress(Exception):  # an object that refuses it keeps its function
                setattr(owner, name, self)

    def __call__(self, *args: Any, **kwargs: Any):
        try:
            result = self.inner(*args, **kwargs)
        except BaseException:
            self.remove()
            self.on_error()
            raise
        if self.on_return is not None:
            self.on_return(self.inner, args, kwargs)
        return result

    def remove(self) -> None:
        if getattr(self.owner, self.name, None) is self:
            with contextlib.suppress(Exception):
                setattr(self.owner, self.name, self.inner)
