"""Measuring a command: wall time and peak RSS of a fresh child process, repeated, as medians.

Peak RSS comes from ``wait4``'s rusage for that child alone, so runs do not blur each
other the way ``RUSAGE_CHILDREN`` (a running maximum) would.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    returncode: int
    output: str
    cpu_s: float = 0.0  # user + system CPU of the process and the children it waited for


def run_once(command: list[str], *, timeout: float | None = None, env: dict | None = None) -> Run:
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, **(env or {})})
    timer = threading.Timer(timeout, process.kill) if timeout else None
    if timer:
        timer.start()
    output = process.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage, then it is reaped
    if timer:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stdout.close()
    seconds = time.perf_counter() - start
    if process.returncode < 0:
        output += "\n(killed: timeout)" if timeout else "\n(killed)"
    return Run(seconds, usage.ru_maxrss / 1024, process.returncode, output, usage.ru_utime + usage.ru_stime)


def median_of(command: list[str], repeat: int = 3, **kwargs) -> tuple[float, float, list[Run]]:
    runs = [run_once(command, **kwargs) for _ in range(repeat)]
    failed = [r for r in runs if r.returncode]
    if failed:
        raise RuntimeError(f"{' '.join(command)} failed:\n{failed[0].output[-2000:]}")
    return (statistics.median(r.seconds for r in runs), statistics.median(r.peak_rss_mb for r in runs), runs)


def compile_package() -> None:
    """tracebridge's modules compiled to bytecode once, before any timed run, as pip does
    at install: with PYTHONDONTWRITEBYTECODE set (as on these machines), or after an edit,
    every timed process would otherwise compile the changed modules again (20-70 ms each)."""
    import compileall

    import tracebridge
    compileall.compile_dir(os.path.dirname(os.path.abspath(tracebridge.__file__)), quiet=1)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def tracebridge_command(*args: str) -> list[str]:
    """The ``tracebridge`` command as users run it: the console script of this interpreter's
    environment (it starts numpy without OpenBLAS's thread pool, tracebridge_command.py),
    else ``python -m tracebridge``."""
    script = os.path.join(os.path.dirname(sys.executable), "tracebridge")
    return [script, *args] if os.access(script, os.X_OK) else python("-m", "tracebridge", *args)


# Whose versions a figure depends on: the anchors (TensorFlow's timeline.py, xprof) and
# what both sides parse protobufs and arrays with.
PACKAGES = ("tensorflow-cpu", "tensorflow", "xprof", "protobuf", "numpy")


def machine() -> str:
    """CPU model, cores, RAM, Python and the versions of the packages in PACKAGES."""
    parts = [_cpu_model(), f"{os.cpu_count()} cores"]
    try:
        with open("/proc/meminfo") as handle:
            parts.append(f"{int(handle.readline().split()[1]) / 1024 / 1024:.0f} GiB")
    except OSError:
        pass
    parts.append(f"Python {platform.python_version()}")
    from importlib.metadata import PackageNotFoundError, version
    for name in PACKAGES:
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(parts)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({platform.machine()})"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def xspace_profile(out_dir: str, ops: int, steps: int) -> str:
    """The real TF profile of bench/gen_xspace.py (``ops`` x ``steps``) in ``out_dir``,
    generated on first use (it takes a TF run)."""
    os.makedirs(out_dir, exist_ok=True)
    source = os.path.join(out_dir, f"xspace_{ops}x{steps}.xplane.pb")
    if not os.path.exists(source):
        print(f"generating {source} ...", flush=True)
        here = os.path.dirname(os.path.abspath(__file__))
        generated = run_once(python(os.path.join(here, "gen_xspace.py"), source, str(ops), str(steps)))
        if generated.returncode:
            raise SystemExit(generated.output)
    return source
