"""How many processes reading and writing use: decided once, where a call enters tracebridge.

``tracebridge.load``, ``Trace.save`` (with ``write_chrome``) and the CLI's ``--workers``
take ``workers=``; :func:`choose_parallelism` turns it into a :class:`Parallelism`, which the
readers and the Chrome writer receive and never second-guess. Given no number, the
``TRACEBRIDGE_WORKERS`` environment variable decides, and failing that the automatic
choice: two processes where forking is safe, for inputs large enough that it pays.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ._fork import cpus
from .errors import OptionError

WORKERS_VARIABLE = "TRACEBRIDGE_WORKERS"


@dataclass(frozen=True)
class Parallelism:
    """``workers``: 1, or 2 to let a forked second process take half of the work (more
    are not used). ``large_only``: split only work of a size where the second process
    pays for its start (the automatic choice); False when workers were asked for, so
    that small inputs split too (the tests and benchmarks of the split paths rely on it)."""

    workers: int = 1
    large_only: bool = True

    def splits(self, size: int, large: int) -> bool:
        """Whether work of ``size`` units goes to two processes; ``large``: the size from
        which a second process pays."""
        return self.workers >= 2 and (size >= large or not self.large_only)

    def threads(self) -> int:
        """Threads for work done in threads of this process (loops that release the GIL):
        the workers asked for, or two where the choice is automatic (a thread, unlike a
        forked process, is safe beside TensorFlow's), at most the CPUs there are."""
        return max(1, min(2 if self.large_only else self.workers, cpus()))


def choose_parallelism(workers: int | None = None) -> Parallelism:
    """The decision for ``workers=`` as given to a public call (None: automatic)."""
    if workers is None:
        workers = _from_environment()
        if workers is None:
            return Parallelism(2 if fork_is_safe() else 1, large_only=True)
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OptionError(f"workers must be a whole number of 1 or more, not {workers!r}")
    return Parallelism(workers if hasattr(os, "fork") else 1, large_only=False)


def fork_is_safe() -> bool:
    """Whether a second process is automatically worth it: ``os.fork`` exists, two CPUs
    are available, and TensorFlow is not loaded (its thread pools may hold locks at the
    moment of the fork, which can hang the child)."""
    return hasattr(os, "fork") and cpus() >= 2 and "tensorflow" not in sys.modules


def _from_environment() -> int | None:
    """``TRACEBRIDGE_WORKERS=1`` or ``=2``, the fallback when no call names a number."""
    setting = os.environ.get(WORKERS_VARIABLE, "")
    return max(int(setting), 1) if setting.isdigit() else None
