"""TF2 capture: ``trace(fn)`` and ``with trace() as t:`` over ``tf.profiler``.

Two ways to run a profiling session, chosen by the options:

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

Conflicts: tracebridge runs one capture at a time per process (a second concurrent one
gets :class:`CaptureError`); a profiler started by someone else gives a CaptureError too.
If the traced code raises, the profiler is stopped (its data kept when
``keep_on_error=True``) and the exception propagates unchanged.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import glob
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from ..errors import CaptureError
from ..model.trace import Trace
from .schedule import Schedule

# One capture at a time in this process: TF has a single profiler.
_CAPTURE_LOCK = threading.Lock()
_SERVER_PORT: int | None = None
# The server remembers a Terminate for a session id that is not running and applies it to
# the next capture with that id (ids are the start second): never reuse a terminated second.
_LAST_TERMINATED_SECOND: datetime.datetime | None = None
_LEVEL_OPTIONS = ("host_tracer_level", "python_tracer_level", "device_tracer_level")
_MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
MAX_SERVER_CAPTURE_MS = 3_600_000  # a server-side capture ends at this length at the latest


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


class ProfileTrace:
    """A TF2 capture: a context manager, and, given ``fn``, a traced callable.

    Options (keyword-only): ``warmup``, ``every``, ``steps`` (see :class:`Schedule`);
    ``step_name`` ("train"); ``host_tracer_level`` (1-3), ``python_tracer_level`` (0-1),
    ``device_tracer_level`` (0-1); ``include_dataset_ops`` (True); ``keep_on_error``
    (False); ``logdir`` (keep the raw profile there instead of a temporary folder).
    ``.trace`` is the captured :class:`Trace`.
    """

    def __init__(self, fn: Callable | None = None, *, warmup: int = 0, every: int = 1,
                 steps: int | None = None, step_name: str = "train",
                 host_tracer_level: int | None = None, python_tracer_level: int | None = None,
                 device_tracer_level: int | None = None, include_dataset_ops: bool = True,
                 keep_on_error: bool = False, logdir: str | None = None):
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
        self._user_logdir = logdir
        self._root: str | None = None
        self._session: _Session | None = None
        self._profiles: list[str] = []   # run folders with .xplane.pb files
        self._notes: list[str] = []
        self._index = 0
        self._in_block = False
        self._holds_lock = False
        self._marker = None
        self._current = -1
        self._trace: Trace | None = None
        self._whole_block = self._schedule == Schedule()
        if fn is not None:
            functools.update_wrapper(self, fn)

    # --- the with-block ---------------------------------------------------------------
    def __enter__(self) -> "ProfileTrace":
        self._acquire()
        self._in_block = True
        if self._whole_block:
            try:
                self._start_session()
            except BaseException:
                self._in_block = False
                self._release()
                raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._in_block = False
        try:
            self.end_step(failed=exc_type is not None) if self._marker is not None else None
            self._stop_session(save=exc_type is None or self._keep_on_error)
        finally:
            self._release()
        return None  # the user's exception, if any, propagates unchanged

    @contextlib.contextmanager
    def step(self, number: int | None = None):
        """Mark one step; profiled if the schedule selects it. Yields the step number."""
        number = self.begin_step(number)
        try:
            yield number
        except BaseException:
            self.end_step(failed=True)
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
        if marker is not None:
            marker.__exit__(None, None, None)
        if (self._in_block and self._whole_block) or self._session is None:
            return  # a with-block without a schedule profiles until the block ends
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

    # --- the traced callable --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any):
        if self._fn is None:
            raise CaptureError("this trace wraps no function; use it as a context manager")
        if self._session is None and not self._schedule.wants(self._index):
            self._index += 1  # an unselected call costs this and nothing more
            return self._fn(*args, **kwargs)
        self.begin_step()  # not self.step(): a generator context manager costs microseconds a call
        try:
            result = self._fn(*args, **kwargs)
        except BaseException:
            self.end_step(failed=True)
            raise
        self.end_step()
        return result

    # --- results --------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The captured trace; stops a session still open (a traced function)."""
        if self._session is not None and not self._in_block:
            self.finish()
        if self._trace is None:
            self._trace = self._build()
        return self._trace

    def _build(self) -> Trace:
        from ..readers.xspace import read_xspace_files
        files = []
        for folder in self._profiles:
            for path in sorted(glob.glob(os.path.join(folder, "*.xplane.pb"))):
                with open(path, "rb") as handle:
                    files.append((path, handle.read(), None))
        metadata = {"source_format": "tf2", "tf_version": self._tf.__version__,
                    "host": socket.gethostname(), "steps_seen": self._index,
                    "capture": "profiler server" if self._levels else "tf.profiler"}
        if not files:
            from ..model.builder import TraceBuilder
            return TraceBuilder({**metadata, "notes": "; ".join(self._notes or ["nothing was profiled"])}).build()
        trace = read_xspace_files(files, metadata)
        notes = list(self._notes)
        if trace.counters.rows == 0:
            notes.append(f"no memory events: TensorFlow records CPU allocations only with "
                         f"{_MEMORY_ENV}=true set before it starts "
                         "(tracebridge.capture.enable_cpu_memory_events())")
        if notes:
            previous = trace.metadata.get("notes")
            trace = trace.with_metadata(notes="; ".join(([previous] if previous else []) + notes))
        self._cleanup()
        return trace

    # --- sessions -------------------------------------------------------------------------
    def _acquire(self) -> None:
        if not _CAPTURE_LOCK.acquire(blocking=False):
            raise CaptureError("another tracebridge capture is running in this process; "
                               "captures are not nested or concurrent (TF has one profiler)")
        self._holds_lock = True

    def _release(self) -> None:
        if self._holds_lock:
            self._holds_lock = False
            _CAPTURE_LOCK.release()

    def _start_session(self) -> None:
        if not self._holds_lock:
            self._acquire()
        if self._root is None:
            self._root = self._user_logdir or tempfile.mkdtemp(prefix="tracebridge-")
        folder = os.path.join(self._root, f"session-{len(self._profiles) + 1}")
        os.makedirs(folder, exist_ok=True)
        session_type = _ServerSession if self._levels else _LocalSession
        session = session_type(self._tf, folder, self._levels, self._include_dataset_ops)
        try:
            session.start()
        except BaseException:
            if not self._in_block:
                self._release()
            raise
        self._session = session

    def _stop_session(self, save: bool) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        try:
            run = session.stop(save)
        finally:
            if not self._in_block:
                self._release()
        if run:
            self._profiles.append(run)
            self._trace = None

    def _cleanup(self) -> None:
        if self._user_logdir is None and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            self._profiles = []

    def __del__(self):
        with contextlib.suppress(Exception):
            if self._session is not None:
                self._stop_session(save=False)
            self._release()
            self._cleanup()


class _Session:
    def __init__(self, tf, logdir: str, levels: dict, include_dataset_ops: bool):
        self.tf, self.logdir, self.levels, self.include_dataset_ops = tf, logdir, levels, include_dataset_ops

    def _run_folder(self) -> str | None:
        runs = sorted(glob.glob(os.path.join(self.logdir, "plugins", "profile", "*", "*.xplane.pb")))
        return os.path.dirname(runs[-1]) if runs else None


class _LocalSession(_Session):
    """``tf.profiler.experimental.start/stop``."""

    def start(self) -> None:
        from tensorflow.python.profiler import profiler_v2
        stale = getattr(profiler_v2, "_profiler", None) is None
        try:
            self.tf.profiler.experimental.start(self.logdir)
        except self.tf.errors.AlreadyExistsError:
            # TF 2.21 keeps its module-level session object when the native start is refused,
            # which makes every later start() fail too: put it back as it was.
            if stale:
                profiler_v2._profiler = None
            raise CaptureError("another profiler is already running (tf.profiler.experimental.start, "
                               "a profiler server capture, or a TF1 FULL_TRACE run); stop it first") from None

    def stop(self, save: bool) -> str | None:
        try:
            self.tf.profiler.experimental.stop(save=save)
        except self.tf.errors.OpError as error:
            raise CaptureError(f"the profiler could not save its data to {self.logdir}: "
                               f"{error.message.splitlines()[0]}") from None
        return self._run_folder() if save else None


class _ServerSession(_Session):
    """A loopback profiler server in this process, captured by xprof's client with typed
    options and ended early with the server's ``Terminate`` call."""

    START_DELAY_S = 0.25  # the client's Profile request reaching the server

    def start(self) -> None:
        global _SERVER_PORT
        try:
            from xprof.convert import _pywrap_profiler_plugin as client
        except ImportError:
            from ..errors import MissingDependencyError
            raise MissingDependencyError("tracer levels (the xprof capture client)", "tf") from None
        if _SERVER_PORT is None:
            _SERVER_PORT = _free_port()
            self.tf.profiler.experimental.server.start(_SERVER_PORT)
        self.address = f"localhost:{_SERVER_PORT}"
        options = {**{"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1},
                   **self.levels}
        self.error: BaseException | None = None
        if _LAST_TERMINATED_SECOND is not None:
            wait = (_LAST_TERMINATED_SECOND + datetime.timedelta(seconds=1) - datetime.datetime.now()).total_seconds()
            if wait > 0:
                time.sleep(wait)
        self.started = datetime.datetime.now()

        def capture():
            try:
                client.trace(self.address, self.logdir, "", self.include_dataset_ops,
                             MAX_SERVER_CAPTURE_MS, 1, options)
            except BaseException as error:  # reported by stop()
                self.error = error

        self.thread = threading.Thread(target=capture, name="tracebridge-capture", daemon=True)
        self.thread.start()
        time.sleep(self.START_DELAY_S)
        if not self.thread.is_alive() and self.error is not None:
            raise CaptureError(f"the profiler server capture failed to start: {self.error}")

    def stop(self, save: bool) -> str | None:
        _terminate(self.address, self.started)
        self.thread.join(timeout=60)
        if self.thread.is_alive():
            raise CaptureError("the profiler server capture did not stop")
        if self.error is not None:
            message = str(self.error).splitlines()[0] if str(self.error) else type(self.error).__name__
            if "Another profiler" in message or "ALREADY_EXISTS" in message or "already" in message.lower():
                raise CaptureError("another profiler is already running; stop it first")
            raise CaptureError(f"the profiler server capture failed: {message}")
        run = self._run_folder()
        if not save and run:
            shutil.rmtree(run, ignore_errors=True)
            return None
        return run


def _terminate(address: str, started: datetime.datetime) -> None:
    """End the server-side capture. Its session id is the run folder's name: the client's
    clock, to the second, when the capture began, which is ``started`` or, if the client's
    call crossed a second boundary, the next second."""
    global _LAST_TERMINATED_SECOND
    import grpc

    from .. import protos
    seconds = sorted({(started + datetime.timedelta(seconds=delay)).replace(microsecond=0)
                      for delay in (0, _ServerSession.START_DELAY_S)})
    channel = grpc.insecure_channel(address)
    try:
        call = channel.unary_unary("/tensorflow.ProfilerService/Terminate",
                                   request_serializer=lambda message: message.SerializeToString(),
                                   response_deserializer=lambda data: data)
        for second in seconds:
            request = protos.TerminateRequest(session_id=second.strftime("%Y_%m_%d_%H_%M_%S"))
            with contextlib.suppress(grpc.RpcError):
                call(request, timeout=10)
    finally:
        channel.close()
        _LAST_TERMINATED_SECOND = seconds[-1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
