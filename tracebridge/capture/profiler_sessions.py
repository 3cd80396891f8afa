"""Profiling sessions, the unit a TF2 capture starts and stops (see :mod:`.profiler`).

* :class:`LocalSession`: ``tf.profiler.experimental.start/stop`` into a folder;
* :class:`ServerSession`: a profiler server on loopback in this process, captured through
  xprof's client (TF 2.21's ``start(options=...)`` drops every tracer level; the client
  sends typed values) and ended early with the server's ``Terminate`` call.

Either writes one folder (:func:`new_session_folder`) and, on ``stop_and_collect``, hands
back its XSpace files read into memory and removes the folder unless it is the user's and
holds the profile. Every method copes with an interrupt landing half-way: whatever was started is
stopped again. TensorFlow's and xprof's private parts are reached through
:mod:`.tf_internals`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time

from ..errors import CaptureError, OutputError
from . import tf_internals

ANOTHER_PROFILER = ("another profiler is already running (tf.profiler.experimental.start, a "
                    "profiler server capture, or a TF1 FULL_TRACE run); stop it first")
MAX_SERVER_CAPTURE_MS = 3_600_000  # a server-side capture ends at this length at the latest
_SERVER_PORT: int | None = None


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class Session:
    """One profiling session into ``folder``; ``stop_and_collect`` stops it and returns its files."""

    def __init__(self, tf, folder: str, temporary: bool, levels: dict, include_dataset_ops: bool):
        self.tf, self.folder, self.temporary = tf, folder, temporary
        self.levels, self.include_dataset_ops = levels, include_dataset_ops

    def stop_and_collect(self, save: bool) -> list[tuple[str, bytes]]:
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
            self.stop_and_collect(save=False)

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

    native = None  # TF's session object once started (tf_internals.tf2_profiler_session)
    idle = False   # no TF profiler object existed when this session started

    def start(self) -> None:
        self.idle = tf_internals.tf2_profiler_session() is None
        try:
            self.tf.profiler.experimental.start(self.folder)
        except self.tf.errors.AlreadyExistsError:
            # TF 2.21 keeps its module-level session object when the native start is refused,
            # which makes every later start() fail too: abort() puts it back as it was.
            raise CaptureError(ANOTHER_PROFILER) from None
        self.native = tf_internals.tf2_profiler_session()

    def stop(self, save: bool) -> None:
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
            if self.native is not None:
                tf_internals.forget_tf2_profiler(self.native)

    def abort(self) -> None:
        if self.native is None:
            if self.idle:
                # Refused, or interrupted inside TF's start: any session object TF holds now
                # is this one's, and dropping it stops the native profiler.
                tf_internals.forget_tf2_profiler()
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
        capture_client = tf_internals.xprof_capture("tracer levels (the xprof capture client)")
        if tf_internals.tf2_profiler_session() is not None:
            # The server would refuse too, but only say "no trace event was collected".
            raise CaptureError(ANOTHER_PROFILER)
        if _SERVER_PORT is None:
            port = _free_port()
            self.tf.profiler.experimental.server.start(port)
            _SERVER_PORT = port
        self.address = f"localhost:{_SERVER_PORT}"
        self.session_id = tf_internals.server_session_id()
        options = {**{"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1},
                   **self.levels, "session_id": self.session_id}
        self.error: BaseException | None = None

        def capture():
            try:
                capture_client(self.address, self.folder, self.include_dataset_ops,
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
                self._terminate()
            self.thread.join(timeout=60)
        except BaseException:  # interrupted: still end the capture, or it runs for an hour
            with contextlib.suppress(Exception):
                self._terminate()
            raise
        if self.thread.is_alive():
            raise CaptureError("the profiler server capture did not stop")
        if self.error is not None:
            message = first_line(self.error)
            if "Another profiler" in message or "ALREADY_EXISTS" in message or "already" in message.lower():
                raise CaptureError(ANOTHER_PROFILER)
            raise CaptureError(f"the profiler server capture failed: {message}")

    def _terminate(self) -> None:
        tf_internals.end_server_capture(self.address, self.session_id)


def new_session_folder(logdir: str | None) -> tuple[str, bool]:
    """A new folder for one profiling session, and whether it is temporary (``logdir``
    None). In the user's logdir: ``session-<n>`` with an ``n`` not used yet, so that an
    earlier capture's files are neither mixed in nor removed by a failed session."""
    temporary = logdir is None
    where = tempfile.gettempdir() if temporary else logdir
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
