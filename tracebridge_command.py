"""The ``tracebridge`` command's entry point (``[project.scripts]``).

It lives outside the package so that it runs before ``import tracebridge``, which imports
numpy: numpy's OpenBLAS starts a thread pool when it is loaded, a thread per further CPU,
and each thread spins for about a tenth of a second waiting for work that a command that
reads profiles never gives it (tracebridge does no linear algebra). On a 2-core machine
that spinning takes the second core from the reader's and the summary's threads just when
they run: a 3M-event ``summary`` takes 0.44 s instead of 0.38 s, and 0.7 s of CPU instead
of 0.56. So the command loads OpenBLAS without a pool, unless the variable that sizes it is
set already, and takes the variable away again at once: what the command starts (a
script run by ``tracebridge run``, its TensorFlow) sizes its own pool as it would have.

When the command is done, the process ends at once (its output flushed), without Python's
teardown of its modules: some 30-40 ms of freeing what nobody will use again, a tenth of a
summary's time. Not where a library that cleans up at exit was loaded (TensorFlow, Dask).

``python -m tracebridge`` runs the same command, with the pool and the teardown.
"""

from __future__ import annotations

import os
import sys

_POOL_SIZE = "OPENBLAS_NUM_THREADS"
# Libraries whose exit handlers do work that matters (sessions, clusters, profilers).
_CLEANS_UP_AT_EXIT = ("tensorflow", "dask", "distributed", "jax", "torch")


def main() -> int:
    if _POOL_SIZE not in os.environ:
        os.environ[_POOL_SIZE] = "1"
        try:
            import numpy  # noqa: F401 - OpenBLAS reads the variable as numpy loads it
        finally:
            del os.environ[_POOL_SIZE]
    from tracebridge.cli import main as command
    code = command()
    if any(name in sys.modules for name in _CLEANS_UP_AT_EXIT):
        return code
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away (`... | head`), as cli.main answers it
        os._exit(141)
    os._exit(code)
