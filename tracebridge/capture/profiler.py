"""TF2 capture: ``trace(fn)`` and ``with trace() as t:`` over ``tf.profiler``.

Two ways to run a profiling session (:mod:`.profiler_sessions`), chosen by the options:

* default: ``tf.profiler.experimental.start/stop`` into a private folder;
* with ``host_tracer_level``, ``python_tracer_level`` or ``device_tracer_level``: TF 2.21's
  ``start(options=...)`` drops every level (the log says ``host_tracer_level expects an i
  value``), so tracebridge starts a profiler server on loopback in this process and
  captures through xprof's client, which sends typed values. That client captures for a
  fixed duration; when the traced block ends, a ``Terminate`` call to the server ends the
  capture early. The levels applied are read back from the profile's recorded options
  (``trace.metadata["host_tracer_level"]``...).

Steps: each call of a traced function, or each ``t.step()`` block, is one step, marked
with ``tf.profiler.experimental.Trace(step_name, step_num=i, _r=1)`` as TF's tools expect.
With a schedule (``warmup``/``every``/``steps``) only selected steps are profiled;
consecutive selected steps share one profiling session.

Files: each profiling session writes into a folder of its own (a temporary one, or
``<logdir>/session-<n>``, a new ``n`` each time); when it stops, its XSpace files are read
into memory and a temporary folder is removed at once. A session that fails or is
discarded removes its folder, in the user's logdir too: no partial profile stays. The
profiler keeps its data in memory until it stops, so a folder deleted while the code runs
is simply written again (TF creates it); one that cannot be written raises
:class:`OutputError`, when the session starts if possible, else when it stops.

Conflicts and threads: TF has one profiler per process, so tracebridge runs one capture
at a time: a second one started meanwhile, from any thread or nested, gets
:class:`CaptureError` at once (captures are refused, not queued: waiting could deadlock a
step that waits for the other thread). A TF1 run traced with FULL_TRACE holds the same
turn while it runs (see :mod:`.session`). A profiler started by someone else
(``tf.profiler.experimental.start``, a remote capture) gives a CaptureError too and is left
running as it was.

Failures: if the traced code raises (KeyboardInterrupt included), the profiler is stopped
(its data kept when ``keep_on_error=True``) and the exception propagates unchanged; a
failure to stop is then only noted in ``trace.metadata["notes"]``. An interrupt landing in
tracebridge's own code is raised once the cleanup has run (see :mod:`.interrupts` for the
one moment that needs a SIGINT handler of tracebridge's while a with-block is open). Keras calls no callback
when ``fit`` raises: a callback's capture (see :meth:`ProfileTrace.tie_to_call`) is stopped
by the callback's step guard when the step raised, else within ``WATCH_INTERVAL_S`` by its
watch thread, which sees the call that drove it gone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable

from ..errors import CaptureError, OutputError
from ..model.trace import Trace
from . import interrupts
from .schedule import Schedule
from .profiler_sessions import LocalSession, ServerSession, Session, first_line

# One capture at a time in this process: TF has a single profiler. Held by a TF2 capture
# while its profiling sessions may run (a with-block: the whole block), and by a TF1 run
# traced with FULL_TRACE or HARDWARE_TRACE (they start a profiler session too).
_CAPTURE_LOCK = threading.Lock()
_HOLDER: "weakref.ref[ProfileTrace] | None" = None  # the TF2 capture holding it (weak: it may be dropped)
_LEVEL_OPTIONS = ("host_tracer_level", "python_tracer_level", "device_tracer_level")
_MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
WATCH_INTERVAL_S = 0.2  # how soon a callback's capture stops after the Keras call that drove it raised
ANOTHER_CAPTURE = ("another tracebridge capture is running in this process; captures are not "
                   "nested or concurrent (TF has one profiler)")


def enable_cpu_memory_events() -> None:
    """Make TensorFlow record CPU allocations (``MemoryAllocation`` events), which it does
    only with ``TF_CPU_ALLOCATOR_USE_BFC=true`` set before it starts. Call before
    ``import tensorflow``; raises :class:`CaptureError` if TensorFlow is already loaded."""
    if os.environ.get(_MEMORY_ENV) == "true":
        return
    if "tensorflow" in sys.modules:
        raise CaptureError(f"CPU memory events need {_MEMORY_ENV}=true before TensorFlow starts; "
                           "TensorFlow is already imported in this process (set the variable in "
                           "the environment, or call enable_cpu_memory_events() first)")
    os.environ[_MEMORY_ENV] = "true"


def tracebridge_capture_active() -> bool:
    return _CAPTURE_LOCK.locked()


def claim_profiler() -> bool:
    """Take the capture turn without waiting, for one TF1 FULL_TRACE run; False when a
    capture or another such run has it. Give it back with :func:`release_profiler`."""
    return _CAPTURE_LOCK.acquire(blocking=False)


def release_profiler() -> None:
    _CAPTURE_LOCK.release()


class ProfileTrace:
    """A TF2 capture: a context manager, and, given ``fn``, a traced callable.

    Options (keyword-only): ``warmup``, ``every``, ``steps`` (see :class:`Schedule`);
    ``step_name`` ("train"); ``host_tracer_level`` (1-3), ``python_tracer_level`` (0-1),
    ``device_tracer_level`` (0-1); ``include_dataset_ops`` (True); ``keep_on_error``
    (False); ``logdir`` (keep the raw profile there, in ``session-<n>`` folders, instead of
    a temporary folder). ``.trace`` is the captured :class:`Trace`.
    """

    def __init__(self, fn: Callable | None = None, *, warmup: int = 0, every: int = 1,
                 steps: int | None = None, step_name: str = "train",
                 host_tracer_level: int | None = None, python_tracer_level: int | None = None,
                 device_tracer_level: int | None = None, include_dataset_ops: bool = True,
                 keep_on_error: bool = False, logdir: str | os.PathLike | None = None):
        import tensorflow as tf  # captures are the one place that needs TensorFlow

        self._tf = tf
        self._step_marker = tf.profiler.experimental.Trace
        self._fn = fn
        self._schedule = Schedule(warmup=warmup, every=every, steps=steps)
        self._step_name = step_name
        levels = {"host_tracer_level": host_tracer_level, "python_tracer_level": python_tracer_level,
                  "device_tracer_level": device_tracer_level}
        self._levels = {k: int(v) for k, v in levels.items() if v is not None}
        for key, value in self._levels.items():
            if not 0 <= value <= 3:
                raise CaptureError(f"{key} must be between 0 and 3, not {value}")
        self._include_dataset_ops = include_dataset_ops
        self._keep_on_error = keep_on_error
        self._user_logdir = None if logdir is None else os.fspath(logdir)
        self._live: list[Session | None] = [None]  # the running session (see _session)
        self._orphan: weakref.finalize | None = None
        self._files: list[tuple[str, bytes]] = []   # the XSpace files of every stopped session
        self._notes: list[str] = []
        self._index = 0
        self._in_block = False
        self._holds_lock = False
        self._driver: tuple[int, int, Any] | None = None
        self._watcher: threading.Thread | None = None
        self._lock = threading.RLock()
        self._sigint = False  # whether this with-block put tracebridge's SIGINT handler in place
        self._marker = None
        self._current = -1
        self._trace: Trace | None = None
        self._whole_block = self._schedule == Schedule()
        if fn is not None:
            functools.update_wrapper(self, fn)

    @property
    def _session(self) -> "Session | None":
        """The running session, kept in a list the capture's finalizer shares (see _acquire)."""
        return self._live[0]

    @_session.setter
    def _session(self, session: "Session | None") -> None:
        self._live[0] = session

    # --- the with-block ---------------------------------------------------------------
    def __enter__(self) -> "ProfileTrace":
        self._sigint = interrupts.enter()
        try:
            self._acquire()
            self._in_block = True
            if self._whole_block:
                self._start_session()
        except BaseException:  # __exit__ will not run: undo everything here
            self._in_block = False
            with contextlib.suppress(Exception):
                self._stop_session(save=False)
            self._release()
            interrupts.leave(self._sigint)
            raise
        return self

    @interrupts.deferred_in
    def __exit__(self, exc_type, exc, tb) -> None:
        failed = exc_type is not None
        try:
            self._in_block = False
            try:
                if self._marker is not None:
                    self.end_step(failed=failed)
            finally:
                self._stop_session(save=not failed or self._keep_on_error)
        except Exception as error:
            if not failed:
                raise
            # The block's own exception propagates unchanged; this one is only noted.
            self._notes.append(f"stopping the profiler after the error failed too: {first_line(error)}")
        finally:
            self._release()
            interrupts.leave(self._sigint)
        return None

    @contextlib.contextmanager
    def step(self, number: int | None = None):
        """Mark one step; profiled if the schedule selects it. Yields the step number."""
        try:
            number = self.begin_step(number)
            yield number
        except BaseException:
            self._fail_step()
            raise
        self.end_step()

    def begin_step(self, number: int | None = None) -> int:
        """Open a step (for callers without a ``with``, such as the Keras callback)."""
        index = self._index
        self._index += 1
        self._current = index
        number = index if number is None else number
        if self._schedule.wants(index) and self._session is None:
            self._start_session()
        if self._session is not None:
            self._marker = self._step_marker(self._step_name, step_num=number, _r=1)
            self._marker.__enter__()
        return number

    def end_step(self, failed: bool = False) -> None:
        """Close the step opened by :meth:`begin_step`; stops profiling when the schedule
        selects no next step, or when the step failed (keeping its data if asked)."""
        marker, self._marker = self._marker, None
        try:
            if marker is not None:
                marker.__exit__(None, None, None)
        finally:
            if not ((self._in_block and self._whole_block) or self._session is None):
                if failed:
                    self._stop_session(save=self._keep_on_error)
                elif not self._schedule.wants(self._current + 1):
                    self._stop_session(save=True)

    def finish(self) -> None:
        """Stop a session left open (the end of a fit, or a traced function's last call)."""
        if self._marker is not None:
            self.end_step()
        if not self._in_block:
            self._stop_session(save=True)

    def pause(self) -> None:
        """Stop the running session between steps, keeping its data; the schedule starts a
        new one at the next selected step (Keras runs validation inside ``fit``, and TF has
        one profiler)."""
        if self._session is not None and self._marker is None and not self._in_block:
            self._stop_session(save=True)

    def abort(self) -> None:
        """Stop now, as after a failed step (data kept only with ``keep_on_error``): for a
        callback whose framework call ended by an exception. Never raises."""
        with self._lock:  # the watch thread may abort too
            marker, self._marker = self._marker, None
            try:
                self._stop_session(save=self._keep_on_error)
            except Exception as error:  # noted: the caller is cleaning up after another error
                self._notes.append(f"stopping the abandoned capture failed: {first_line(error)}")
            finally:
                if not self._in_block:
                    self._release()
            del marker  # dropped after the stop: the unfinished step is not recorded

    def tie_to_call(self) -> None:
        """Tie this capture to the framework call that drives it: the first frame above the
        callback methods (``on_*``) and tracebridge's own, a Keras ``fit`` for instance.
        Keras tells callbacks nothing when ``fit`` raises, and Ctrl-C often lands between
        the callbacks and the step. So while a session of a tied capture runs, a watch
        thread checks a few times a second that the call is still on its thread's stack,
        and stops the capture once it is gone; a later capture that finds it still holding
        the profiler stops it too instead of being refused."""
        frame = sys._getframe(1)
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        while frame is not None and (frame.f_code.co_name.startswith("on_")
                                     or os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep)):
            frame = frame.f_back
        with self._lock:
            self._driver = None if frame is None else (threading.get_ident(), id(frame), frame.f_code)

    def _watch(self) -> None:
        """Start the watch thread of a tied capture (see :meth:`tie_to_call`); it ends with
        the session, or once it has stopped the capture."""
        if self._driver is None or (self._watcher is not None and self._watcher.is_alive()):
            return
        capture_ref, driver = weakref.ref(self), self._driver

        def watch():
            while True:
                time.sleep(WATCH_INTERVAL_S)
                capture = capture_ref()
                if capture is None or capture._session is None or capture._driver is not driver:
                    return
                if not _call_running(driver):
                    with capture._lock:  # the call is gone for good: only a new tie changes this
                        if capture._driver is driver:
                            capture.abort()
                    return
                del capture

        self._watcher = threading.Thread(target=watch, name="tracebridge-watch", daemon=True)
        self._watcher.start()

    def _fail_step(self) -> None:
        """End the open step after the traced code raised. A failure to stop is noted, not
        raised: the code's own exception must propagate unchanged."""
        try:
            self.end_step(failed=True)
        except Exception as error:
            self._notes.append(f"stopping the profiler after the error failed too: {first_line(error)}")

    # --- the traced callable --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any):
        if self._fn is None:
            raise CaptureError("this trace wraps no function; use it as a context manager")
        if self._session is None and not self._schedule.wants(self._index):
            self._index += 1  # an unselected call costs this and nothing more
            return self._fn(*args, **kwargs)
        try:
            self.begin_step()  # not self.step(): a generator context manager costs microseconds a call
            result = self._fn(*args, **kwargs)
        except BaseException:
            self._fail_step()
            raise
        self.end_step()
        return result

    # --- results --------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The captured trace; stops a session still open (a traced function)."""
        if self._session is not None and not self._in_block:
            if self._driver is not None and not _call_running(self._driver):
                self.abort()  # left open by a Keras call that raised: a failed step
            else:
                self.finish()
        if self._trace is None:
            self._trace = self._build()
        return self._trace

    def _build(self) -> Trace:
        from ..readers.xspace import read_xspace_files
        metadata = {"source_format": "tf2", "tf_version": self._tf.__version__,
                    "host": socket.gethostname(), "steps_seen": self._index,
                    "capture": "profiler server" if self._levels else "tf.profiler"}
        if not self._files:
            from ..model.builder import TraceBuilder
            return TraceBuilder({**metadata, "notes": "; ".join(self._notes or ["nothing was profiled"])}).build()
        trace = read_xspace_files([(path, data, None) for path, data in self._files], metadata)
        notes = list(self._notes)
        if trace.counters.rows == 0:
            notes.append(f"no memory events: TensorFlow records CPU allocations only with "
                         f"{_MEMORY_ENV}=true set before it starts "
                         "(tracebridge.capture.enable_cpu_memory_events())")
        if notes:
            previous = trace.metadata.get("notes")
            trace = trace.with_metadata(notes="; ".join(([previous] if previous else []) + notes))
        return trace

    # --- sessions -------------------------------------------------------------------------
    def _acquire(self) -> None:
        global _HOLDER
        if not _CAPTURE_LOCK.acquire(blocking=False):
            holder = _HOLDER() if _HOLDER is not None else None
            if holder is None or holder._driver is None or _call_running(holder._driver):
                raise CaptureError(ANOTHER_CAPTURE)
            holder.abort()  # its Keras call raised and left it running
            if not _CAPTURE_LOCK.acquire(blocking=False):
                raise CaptureError(ANOTHER_CAPTURE)
        self._holds_lock = True
        _HOLDER = weakref.ref(self)
        # Dropped while holding the turn (a traced function whose trace is never read): its
        # session is stopped and the turn given back. A finalizer for that time only, not a
        # __del__: Python code run at garbage collection swallows a KeyboardInterrupt.
        self._orphan = weakref.finalize(self, _stop_orphan, self._live)

    def _release(self) -> None:
        global _HOLDER
        if self._holds_lock:
            self._holds_lock = False
            self._orphan.detach()
            if _HOLDER is not None and _HOLDER() is self:
                _HOLDER = None
            _CAPTURE_LOCK.release()

    def _start_session(self) -> None:
        try:
            if not self._holds_lock:
                self._acquire()
            folder, temporary = self._new_folder()
            session_type = ServerSession if self._levels else LocalSession
            session = session_type(self._tf, folder, temporary, self._levels, self._include_dataset_ops)
            try:
                session.start()
                self._session = session
                self._watch()
            except BaseException:  # an interrupt may land after the profiler started: undo it
                self._session = None
                session.abort()
                raise
        except BaseException:
            if not self._in_block:
                self._release()
            raise

    def _new_folder(self) -> tuple[str, bool]:
        """A new folder for one profiling session, and whether it is temporary. In the
        user's logdir: ``session-<n>`` with an ``n`` not used yet, so that an earlier
        capture's files are neither mixed in nor removed by a failed session."""
        temporary = self._user_logdir is None
        where = tempfile.gettempdir() if temporary else self._user_logdir
        try:
            if not temporary:
                os.makedirs(where, exist_ok=True)
            number = 0 if temporary else len(os.listdir(where))
            while True:
                number += 1
                name = f"tracebridge-{secrets.token_hex(5)}" if temporary else f"session-{number}"
                folder = os.path.abspath(os.path.join(where, name))
                try:
                    os.mkdir(folder, 0o700 if temporary else 0o777)
                except FileExistsError:
                    continue
                except BaseException:  # an interrupt just after mkdir: the folder must go too
                    with contextlib.suppress(OSError):
                        os.rmdir(folder)
                    raise
                return folder, temporary
        except OSError as error:
            raise OutputError(f"{where}: cannot create a profile folder there "
                              f"({error.strerror or error})") from None

    def _stop_session(self, save: bool) -> None:
        session = self._session
        if session is None:
            return
        try:
            files = session.finish(save)
        except BaseException:
            session.abort()  # an interrupt half-way: whatever still runs is stopped
            raise
        finally:
            self._session = None
            if not self._in_block:
                self._release()
        if files:
            self._files.extend(files)
            self._trace = None



def _stop_orphan(live: list) -> None:
    """A capture was dropped while holding the capture turn: stop its session, give the
    turn back."""
    global _HOLDER
    session, live[0] = live[0], None
    if session is not None:
        session.abort()
    if _HOLDER is not None and _HOLDER() is None:
        _HOLDER = None
    _CAPTURE_LOCK.release()


def _call_running(driver: tuple[int, int, Any]) -> bool:
    """Whether the frame recorded by :meth:`ProfileTrace.tie_to_call` is still on its
    thread's stack (an id reused by the same code counts as running: refusing is safe)."""
    thread, frame_id, code = driver
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if id(frame) == frame_id and frame.f_code is code:
            return True
        frame = frame.f_back
    return False


class StepGuard:
    """``owner.<name>`` (a Keras model's ``train_function``...) wrapped while a traced
    call runs: when it raises, ``on_error()`` runs, then the same exception goes on. Keras
    calls no callback when a step raises (a model error, or Ctrl-C, which nearly always
    lands in a step), so this is where a callback's capture can stop at once.
    ``remove()`` puts the original back; a guard left by an earlier call is replaced."""

    def __init__(self, owner: Any, name: str, on_error: Callable[[], None]):
        self.owner, self.name, self.on_error = owner, name, on_error
        inner = getattr(owner, name, None)
        while isinstance(inner, StepGuard):  # left by a call that raised elsewhere
            inner = inner.inner
        self.inner = inner
        if callable(inner):
            with contextlib.suppress(Exception):  # an object that refuses it keeps its function
                setattr(owner, name, self)

    def __call__(self, *args: Any, **kwargs: Any):
        try:
            return self.inner(*args, **kwargs)
        except BaseException:
            self.remove()
            self.on_error()
            raise

    def remove(self) -> None:
        if getattr(self.owner, self.name, None) is self:
            with contextlib.suppress(Exception):
                setattr(self.owner, self.name, self.inner)
