"""Run Python scripts, each in a process of its own, without paying TensorFlow's import for
each one.

A script run as ``python script.py`` spends about 4 s of CPU importing TensorFlow before
its first line of work, most of what the guide's short example scripts cost the suite.
:class:`PreloadedPython` starts one server process (this file) that imports TensorFlow once
and then forks a child per script, in the given folder, with ``__file__``, ``sys.path[0]``
and ``__main__`` set as the interpreter sets them (``sys.argv[0]`` is the script's absolute
path, as runpy sets it), stdout and stderr in files, and a normal
interpreter exit (atexit handlers, TensorFlow's own shutdown). Each script still runs alone
in its process: what one does cannot reach the next. What differs from a fresh interpreter
is only that ``import tensorflow`` finds the module loaded, so environment variables read at
import (``TF_ENABLE_ONEDNN_OPTS``, ``TF_CPP_MIN_LOG_LEVEL``) are the ones the server started
with: give them in ``env``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


class PreloadedPython:
    """A server that runs scripts in forked children; use it as a context manager."""

    def __init__(self, env: dict[str, str]):
        self._scratch = tempfile.TemporaryDirectory(prefix="preloaded-")
        self._server = subprocess.Popen([sys.executable, __file__], env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        ready = self._server.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"the preloaded interpreter did not start (it said {ready!r})")

    def run(self, script: Path | str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        """``python script`` in ``cwd``: its exit status, stdout and stderr; on a timeout the
        child is killed and the status is None, as test helpers report a hung subprocess."""
        out, err = Path(self._scratch.name) / "stdout", Path(self._scratch.name) / "stderr"
        request = {"script": str(script), "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        self._server.stdin.write(json.dumps(request) + "\n")
        child = int(self._server.stdout.readline())
        timed_out = not select.select([self._server.stdout], [], [], timeout)[0]
        if timed_out:
            os.kill(child, signal.SIGKILL)
        status = json.loads(self._server.stdout.readline())["returncode"]
        stderr = err.read_text(errors="replace") + (f"\ntimeout after {timeout} s" if timed_out else "")
        return subprocess.CompletedProcess([script], None if timed_out else status,
                                           out.read_text(errors="replace"), stderr)

    def close(self) -> None:
        self._server.stdin.close()
        self._server.wait(timeout=60)
        self._scratch.cleanup()

    def __enter__(self) -> "PreloadedPython":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_child(request: dict) -> None:
    """In the forked child: become ``python script`` and never return to the server loop."""
    import runpy
    import traceback

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the server's requests are not the script's input
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(request["cwd"])
    script = os.path.abspath(request["script"])  # __file__ is absolute, as python makes it
    sys.argv = [request["script"]]
    sys.path[0] = os.path.dirname(script)
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) or leaving.code is None else 1
        if not isinstance(leaving.code, int) and leaving.code is not None:
            print(leaving.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught error
        traceback.print_exc()
        code = 1
    raise SystemExit(code)  # through the server's frames: a normal exit, atexit handlers run


def _serve() -> None:
    import tensorflow  # noqa: F401 - the point: once, here, for every child

    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    _serve()
