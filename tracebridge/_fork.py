"""A job run in a second, forked process: how the reader and the Chrome writer share
large inputs between two CPUs; or in a second thread (:class:`ThreadedJob`), for work
whose loops release the GIL (numpy's, tracebridge's C loops). Whether they do is decided
at the API edge (:mod:`tracebridge.options`), not here."""

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


class ThreadedJob:
    """``job(*args)`` run in a thread of this process, while the caller does other work;
    ``result()`` waits for it and returns its value or raises what it raised. For work
    whose time is spent in loops that release the GIL, which then runs on a second CPU:
    it must only read what the caller also reads, and write nothing the caller reads."""

    def __init__(self, job, *args):
        import threading

        self._outcome: tuple = ()

        def run() -> None:
            try:
                self._outcome = (True, job(*args))
            except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
                self._outcome = (False, error)

        self._thread = threading.Thread(target=run, name="tracebridge-job", daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        done, value = self._outcome
        if not done:
            raise value
        return value

    def wait(self) -> None:
        """Wait for the job, whatever its outcome (which stays unread)."""
        self._thread.join()


# Rows from which in_halves uses a second thread: below, starting it costs about what it saves.
HALVES_MIN_ROWS = 50_000


def in_halves(count: int, part, threads: int) -> None:
    """``part(lo, hi)`` over the rows ``[0, count)``: the second half in a thread of its own
    while this one does the first, where ``threads`` > 1 and there are HALVES_MIN_ROWS rows
    or more (else one call with all rows). The halves must write rows of their own only."""
    if threads < 2 or count < max(2, HALVES_MIN_ROWS):
        part(0, count)
        return
    middle = count // 2
    job = ThreadedJob(part, middle, count)
    try:
        part(0, middle)
    except BaseException:
        job.wait()
        raise
    job.result()
