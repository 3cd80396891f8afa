"""The capture turn: TF has one profiler per process, so tracebridge runs one capture at a time.

A TF2 capture holds the turn while its profiling sessions may run (a with-block: the whole
block); a TF1 run traced with FULL_TRACE or HARDWARE_TRACE holds it while it runs, since
those start a profiler session too. The turn is taken without waiting: a second capture is
refused, not queued, because waiting could deadlock a step that waits for the other thread.

The TF2 capture holding the turn is remembered weakly, so that a later capture can find it
and stop it when the framework call that drove it has ended by an exception (see
:meth:`~tracebridge.capture.profiler.ProfileTrace.tie_to_call`), and so that dropping it
does not keep it alive.
"""

from __future__ import annotations

import threading
import weakref

_lock = threading.Lock()
_holder: "weakref.ref | None" = None


def held() -> bool:
    """Whether some capture, of any kind, has the turn."""
    return _lock.locked()


def try_take(holder: object | None = None) -> bool:
    """Take the turn if it is free; False if someone has it. ``holder``: the TF2 capture
    taking it (None for a TF1 run)."""
    global _holder
    if not _lock.acquire(blocking=False):
        return False
    _holder = None if holder is None else weakref.ref(holder)
    return True


def holder() -> object | None:
    """The TF2 capture that has the turn, if one has it and is still alive."""
    ref = _holder
    return None if ref is None else ref()


def held_by(capture: object) -> bool:
    return _lock.locked() and holder() is capture


def give_back(capture: object | None = None) -> None:
    """Give the turn back: by the capture that took it, by a TF1 run (None), or by the
    finalizer of a capture dropped while holding it (None too: its reference is dead)."""
    global _holder
    if _holder is not None and _holder() in (capture, None):
        _holder = None
    _lock.release()
