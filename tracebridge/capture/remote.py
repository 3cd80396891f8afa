"""Remote capture: profile TF processes that run ``tf.profiler.experimental.server.start(port)``.

Uses xprof's capture client, which needs no TensorFlow in this process and sends tracer
levels as typed values (TF's own client drops them). Every address is captured at the
same time, each into its own folder, and the hosts are merged into one trace with a
device per plane and host.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sys
import tempfile
import threading

from ..errors import CaptureError
from ..model.trace import Trace
from . import tf_internals


def capture_remote(addresses: list[str] | str, duration_ms: int, *, host_tracer_level: int = 2,
                   python_tracer_level: int = 0, device_tracer_level: int = 1,
                   include_dataset_ops: bool = True, attempts: int = 3,
                   logdir: str | None = None) -> Trace:
    """Capture ``duration_ms`` from every ``host:port`` and merge the hosts into one trace.
    Raises :class:`CaptureError` when a host cannot be reached or records nothing."""
    client = tf_internals.xprof_capture("remote capture (xprof's client)")
    if isinstance(addresses, str):
        addresses = [a for a in addresses.split(",") if a]
    addresses = [a.removeprefix("grpc://") for a in addresses]
    if not addresses:
        raise CaptureError("no address to capture from (give host:port)")
    if duration_ms <= 0:
        raise CaptureError("duration_ms must be positive")
    root = logdir or tempfile.mkdtemp(prefix="tracebridge-remote-")
    os.makedirs(root, exist_ok=True)  # a logdir given may not exist yet
    options = {"host_tracer_level": host_tracer_level, "python_tracer_level": python_tracer_level,
               "device_tracer_level": device_tracer_level}
    errors: dict[str, str] = {}

    def capture(index: int, address: str) -> None:
        try:
            client(address, os.path.join(root, f"host-{index}"), include_dataset_ops,
                   int(duration_ms), attempts, options)
        except Exception as error:  # reported below, host by host
            errors[address] = str(error).splitlines()[0] if str(error) else type(error).__name__

    threads = [threading.Thread(target=capture, args=(i, a), daemon=True) for i, a in enumerate(addresses)]
    with _native_logs_to(os.path.join(root, "client.log")):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    try:
        if errors:
            raise CaptureError("; ".join(f"{address}: {message}" for address, message in errors.items()))
        files = []
        for index, address in enumerate(addresses):
            found = sorted(glob.glob(os.path.join(root, f"host-{index}", "plugins", "profile", "*", "*.xplane.pb")))
            if not found:
                raise CaptureError(f"{address}: the capture wrote no profile")
            with open(found[-1], "rb") as handle:
                files.append((found[-1], handle.read(), address))
        from ..readers.xspace import read_xspace_files
        return read_xspace_files(files, {"source_format": "remote", "hosts": ",".join(addresses),
                                         "duration_ms": int(duration_ms)})
    finally:
        if logdir is None:
            shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _native_logs_to(path: str):
    """The capture client prints progress and every retry from C++ straight to file
    descriptors 1 and 2; keep those lines in a file instead, so callers see one error line."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
    except (OSError, ValueError):  # no real descriptors (embedded interpreters): leave them
        yield
        return
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)
