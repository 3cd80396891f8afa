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
``python -m tracebridge`` runs the same command, with the pool.
"""

from __future__ import annotations

import os

_POOL_SIZE = "OPENBLAS_NUM_THREADS"


def main() -> int:
    if _POOL_SIZE not in os.environ:
        os.environ[_POOL_SIZE] = "1"
        try:
            import numpy  # noqa: F401 - OpenBLAS reads the variable as numpy loads it
        finally:
            del os.environ[_POOL_SIZE]
    from tracebridge.cli import main as command
    return command()
