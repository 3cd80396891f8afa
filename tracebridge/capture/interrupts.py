"""Ctrl-C at the one moment Python gives a library no say.

As a ``with`` block ends, a KeyboardInterrupt can be raised on the very first instruction
of ``__exit__``, before any of its code runs: the profiler would be left running, the
capture turn held, a session's ``run`` left wrapped. (Everywhere else tracebridge cleans up
in ``except``/``finally`` clauses, where a second interrupt would be needed to get in the
way.) So while a capture's with-block is open in the main thread, tracebridge's SIGINT
handler stands in for Python's: an interrupt arriving while one of the ``__exit__``
methods marked with :func:`deferred_in` is the running frame waits until that
``__exit__`` has done its work, and is raised at its end; any other moment gets Python's
own handler, unchanged. A handler set by the user is left alone, and so is an ignored
SIGINT (``SIG_IGN``, which a background job of a shell script inherits): it stays ignored
during and after the capture.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable

_DEFERRED_IN: set = set()   # code objects of the __exit__ methods
_PENDING = [False]          # an interrupt arrived in one of them


def deferred_in(function: Callable) -> Callable:
    """Mark an ``__exit__``: an interrupt arriving while it is the running frame is
    raised by :func:`leave` at its end instead."""
    _DEFERRED_IN.add(function.__code__)
    return function


def _handler(signum, frame):
    if frame is not None and frame.f_code in _DEFERRED_IN:
        _PENDING[0] = True
        return
    signal.default_int_handler(signum, frame)


def enter() -> bool:
    """Stand in for Python's SIGINT handler if it is the one in place and this is the main
    thread (only it runs Python's signal handlers); returns whether this call did. Any
    other handler, ``SIG_IGN`` and ``SIG_DFL`` included, is kept as it is: the process
    asked for that, and :func:`leave` puts back only what this call replaced."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, _handler)
    except (ValueError, OSError):  # no signals here (embedded interpreters)
        return False
    return True


def leave(entered: bool) -> None:
    """At the end of an ``__exit__``: give Python's handler back if :func:`enter` put
    ours in place and it still is, then raise an interrupt that was held back."""
    if entered and signal.getsignal(signal.SIGINT) is _handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if _PENDING[0]:
        _PENDING[0] = False
        raise KeyboardInterrupt
