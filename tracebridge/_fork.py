"""When the reader and the Chrome writer may use a second, forked process.

Automatically only where forking is safe and pays: ``os.fork`` exists, two CPUs are
available, and TensorFlow is not loaded in this process (its thread pools may hold locks
at the moment of the fork, which can hang the child). ``TRACEBRIDGE_WORKERS=1`` or ``2``
decides explicitly."""

from __future__ import annotations

import os
import sys


def cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def workers_setting() -> int | None:
    setting = os.environ.get("TRACEBRIDGE_WORKERS", "")
    return int(setting) if setting.isdigit() else None


def automatic_fork_ok() -> bool:
    return hasattr(os, "fork") and cpus() >= 2 and "tensorflow" not in sys.modules
