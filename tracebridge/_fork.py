"""A job run in a second, forked process: how the reader and the Chrome writer share
large inputs between two CPUs. Whether they do is decided at the API edge
(:mod:`tracebridge.options`), not here."""

from __future__ import annotations

import os


def cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class ChildFailed(Exception):
    """The forked child raised or died; the message says how."""


class ForkedJob:
    """``job()`` run in a forked child process.

    The child runs the job with SIGINT left to the parent, reports on a pipe (``b"ok"`` and
    the bytes the job returned, or the traceback), and leaves through ``os._exit`` (no
    atexit handlers, no second flush of inherited stdio buffers). ``wait()`` returns the
    job's bytes or raises :class:`ChildFailed`; leaving the ``with`` block before that kills
    the child. Use from one thread; the job should only compute and write files.
    """

    def __init__(self):
        self.pid: int | None = None
        self._report = None

    @classmethod
    def start(cls, job) -> "ForkedJob | None":
        """The running child, or None if none could be started (then do the work here)."""
        import signal
        import traceback
        import warnings

        forked = cls()
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns about fork() while threads are alive (numpy's BLAS
                # pool); the child only computes and leaves through os._exit.
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                forked.pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if forked.pid == 0:  # the child: never returns
            status = 1
            try:
                os.close(read_end)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                try:
                    message = b"ok" + (job() or b"")
                    status = 0
                except BaseException:  # noqa: BLE001 - everything is reported to the parent
                    message = traceback.format_exc().encode("utf-8", "replace")[-4000:]
                os.write(write_end, message)
            finally:
                os._exit(status)
        os.close(write_end)
        forked._report = os.fdopen(read_end, "rb")
        return forked

    def __enter__(self) -> "ForkedJob":
        return self

    def wait(self) -> bytes:
        message = self._report.read()  # EOF when the child exits
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if status != 0 or not message.startswith(b"ok"):
            detail = message.decode("utf-8", "replace").strip() or _status_text(status)
            raise ChildFailed(detail)
        return message[2:]

    def __exit__(self, *exc) -> None:
        import contextlib
        import signal
        if self.pid:  # still running: leaving on an error or an interrupt
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
            self.pid = None
        if self._report is not None:
            self._report.close()
            self._report = None


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status) if os.WIFEXITED(status) else status}"
