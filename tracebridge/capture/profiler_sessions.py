"""Profiling sessions, the unit a TF2 capture starts and stops (see :mod:`.profiler`).

* :class:`LocalSession`: ``tf.profiler.experimental.start/stop`` into a folder;
* :class:`ServerSession`: a profiler server on loopback in this process, captured through
  xprof's client (TF 2.21's ``start(options=...)`` drops every tracer level; the client
  sends typed values) and ended early with the server's ``Terminate`` call.

Either writes one folder and, on ``finish``, hands back its XSpace files read into memory
and removes the folder unless it is the user's and holds the profile. Every method copes
with an interrupt landing half-way: whatever was started is stopped again.
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import os
import shutil
import socket
import threading
import time

from ..errors import CaptureError, OutputError

ANOTHER_PROFILER = ("another profiler is already running (tf.profiler.experimental.start, a "
                    "profiler server capture, or a TF1 FULL_TRACE run); stop it first")
MAX_SERVER_CAPTURE_MS = 3_600_000  # a server-side capture ends at this length at the latest
_SERVER_PORT: int | None = None
# The server remembers a Terminate for a session id that is not running and applies it to
# the next capture with that id (ids are the start second): never reuse a terminated second.
_LAST_TERMINATED_SECOND: datetime.datetime | None = None


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class Session:
    """One profiling session into ``folder``; ``finish`` stops it and returns its files."""

    def __init__(self, tf, folder: str, temporary: bool, levels: dict, include_dataset_ops: bool):
        self.tf, self.folder, self.temporary = tf, folder, temporary
        self.levels, self.include_dataset_ops = levels, include_dataset_ops

    def finish(self, save: bool) -> list[tuple[str, bytes]]:
        """Stop; when ``save``, the XSpace files read into memory. The folder is removed
        unless it is in the user's logdir and holds the saved profile: a failed or discarded
        session leaves nothing, a partial file included."""
        files: list[tuple[str, bytes]] = []
        try:
            self.stop(save)
            if save:
                files = self._read()
        finally:
            if self.temporary or not files:
                _remove_folder(self.folder)
        return files

    def abort(self) -> None:
        """Undo a start that failed or was interrupted half-way. Never raises."""
        with contextlib.suppress(Exception):
            self.finish(save=False)

    def _read(self) -> list[tuple[str, bytes]]:
        files = []
        for path in sorted(glob.glob(os.path.join(self.folder, "plugins", "profile", "*", "*.xplane.pb"))):
            try:
                with open(path, "rb") as handle:
                    files.append((path, handle.read()))
            except OSError as error:
                raise CaptureError(f"{path}: the profile could not be read back "
                                   f"({error.strerror or error})") from None
        return files


class LocalSession(Session):
    """``tf.profiler.experimental.start/stop``."""

    native = None  # TF's session object once started: what profiler_v2._profiler holds
    idle = False   # no TF profiler object existed when this session started

    def start(self) -> None:
        from tensorflow.python.profiler import profiler_v2
        self.idle = getattr(profiler_v2, "_profiler", None) is None
        try:
            self.tf.profiler.experimental.start(self.folder)
        except self.tf.errors.AlreadyExistsError:
            # TF 2.21 keeps its module-level session object when the native start is refused,
            # which makes every later start() fail too: abort() puts it back as it was.
            raise CaptureError(ANOTHER_PROFILER) from None
        self.native = profiler_v2._profiler

    def stop(self, save: bool) -> None:
        from tensorflow.python.profiler import profiler_v2
        try:
            self.tf.profiler.experimental.stop(save=save)
        except self.tf.errors.UnavailableError:
            raise CaptureError("the profiler was stopped by someone else during the capture "
                               "(tf.profiler.experimental.stop)") from None
        except self.tf.errors.OpError as error:
            raise OutputError(f"{self.folder}: the profile could not be written "
                              f"({first_line(error)})") from None
        finally:
            # TF forgets its session only after the export returns: an interrupt in between
            # would leave it set, and every later start refused.
            if self.native is not None and profiler_v2._profiler is self.native:
                profiler_v2._profiler = None

    def abort(self) -> None:
        if self.native is None:
            from tensorflow.python.profiler import profiler_v2
            if self.idle:
                # Refused, or interrupted inside TF's start: any session object TF holds now
                # is this one's, and dropping it stops the native profiler.
                profiler_v2._profiler = None
            _remove_folder(self.folder)
            return
        super().abort()


class ServerSession(Session):
    """A loopback profiler server in this process, captured by xprof's client with typed
    options and ended early with the server's ``Terminate`` call."""

    START_DELAY_S = 0.25  # the client's Profile request reaching the server
    thread: threading.Thread | None = None

    def start(self) -> None:
        global _SERVER_PORT
        try:
            from xprof.convert import _pywrap_profiler_plugin as client
        except ImportError:
            from ..errors import MissingDependencyError
            raise MissingDependencyError("tracer levels (the xprof capture client)", "tf") from None
        from tensorflow.python.profiler import profiler_v2
        if getattr(profiler_v2, "_profiler", None) is not None:
            # The server would refuse too, but only say "no trace event was collected".
            raise CaptureError(ANOTHER_PROFILER)
        if _SERVER_PORT is None:
            port = _free_port()
            self.tf.profiler.experimental.server.start(port)
            _SERVER_PORT = port
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
                client.trace(self.address, self.folder, "", self.include_dataset_ops,
                             MAX_SERVER_CAPTURE_MS, 1, options)
            except BaseException as error:  # reported by stop()
                self.error = error

        self.thread = threading.Thread(target=capture, name="tracebridge-capture", daemon=True)
        self.thread.start()
        time.sleep(self.START_DELAY_S)  # interrupted here, abort() ends the capture
        if not self.thread.is_alive() and self.error is not None:
            raise CaptureError(f"the profiler server capture failed to start: {first_line(self.error)} "
                               "(is another profiler running?)")

    def stop(self, save: bool) -> None:
        if self.thread is None:
            return
        try:
            if self.thread.is_alive():
                _terminate(self.address, self.started)
            self.thread.join(timeout=60)
        except BaseException:  # interrupted: still end the capture, or it runs for an hour
            with contextlib.suppress(Exception):
                _terminate(self.address, self.started)
            raise
        if self.thread.is_alive():
            raise CaptureError("the profiler server capture did not stop")
        if self.error is not None:
            message = first_line(self.error)
            if "Another profiler" in message or "ALREADY_EXISTS" in message or "already" in message.lower():
                raise CaptureError(ANOTHER_PROFILER)
            raise CaptureError(f"the profiler server capture failed: {message}")


def _terminate(address: str, started: datetime.datetime) -> None:
    """End the server-side capture. Its session id is the run folder's name: the client's
    clock, to the second, when the capture began, which is ``started`` or, if the client's
    call crossed a second boundary, the next second."""
    global _LAST_TERMINATED_SECOND
    import grpc

    from .. import protos
    seconds = sorted({(started + datetime.timedelta(seconds=delay)).replace(microsecond=0)
                      for delay in (0, ServerSession.START_DELAY_S)})
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


def _remove_folder(path: str) -> None:
    """Remove a session folder, never half: an interrupt meanwhile is raised once the
    removal is done. (An interrupted close() inside shutil.rmtree can also come out as
    EBADF from its cleanup, with the KeyboardInterrupt only as its context.)"""
    interrupt = None
    for _ in range(3):
        try:
            shutil.rmtree(path, ignore_errors=True)
            break
        except BaseException as error:
            while isinstance(error, Exception) and error.__context__ is not None:
                error = error.__context__
            interrupt = interrupt or (None if isinstance(error, Exception) else error)
    if interrupt is not None:
        raise interrupt
