"""The per-host engine: a function run on each host's profile, one host at a time per
worker, and its results handed back in host order for a merge.

A TF2 multi-host profile is one XSpace per host (``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``);
all hosts in one trace need the memory of all of them. Here an analysis is split in two:
``function(host_file)`` reads one host and returns a small, picklable result, and the
caller merges the results (see :mod:`.summary`). The analyses do
no file I/O themselves: the hosts are found by :func:`tracebridge.readers.host_files.host_files`
and each is read by the ``load`` callable the caller hands in
(:func:`tracebridge.formats.load_host`), on the worker that analyses it. Where the
functions run:

* in this process, one host after the other (the default; no extra needed);
* ``workers=N``: a local Dask cluster of N single-threaded worker processes;
* ``scheduler="tcp://HOST:PORT"``: an existing Dask cluster, whose workers read the files
  from paths they can see (shared storage, or fsspec URLs such as ``gs://`` or ``s3://``
  where fsspec has the backend). Start those workers with ``MALLOC_TRIM_THRESHOLD_``
  unset (see :func:`host_runner`): Dask's default makes them 2-3x slower on this work.

Dask is the optional extra ``tracebridge[dask]``; progress is Dask's own
(``distributed.progress``), or rich's bar in this process where rich is installed.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...errors import MissingDependencyError, OptionError, TraceFormatError
from ...model.trace import Trace


class HostInput(Protocol):
    """What the per-host analyses need of a host's file (a
    :class:`tracebridge.readers.host_files.HostFile`): its name and where it is."""

    host: str
    path: str


# Reads one host's trace where the analysis of that host runs (a Dask worker reads its
# own host); picklable, as a module-level function is.
HostLoader = Callable[[HostInput], Trace]


def map_hosts(function: Callable[[Any], Any], files: Sequence, *, workers: int | None = None,
              scheduler: str | None = None, progress: bool = False) -> list:
    """``[function(file) for file in files]``, in this process (``workers`` None or 1 and
    no ``scheduler``) or on Dask. Each call holds one host; results come back in order."""
    with host_runner(workers=workers, scheduler=scheduler, progress=progress) as run:
        return run(function, files)


@contextlib.contextmanager
def host_runner(*, workers: int | None = None, scheduler: str | None = None, progress: bool = False):
    """``run(function, items)`` as :func:`map_hosts` does it, on one cluster for the whole
    ``with`` block (a local cluster is started once, however many maps run on it)."""
    if workers is not None and workers < 1:
        raise OptionError(f"workers must be 1 or more, not {workers}")
    if scheduler is None and (workers is None or workers == 1):
        yield functools.partial(_in_process, progress=progress)
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        what = f"--scheduler {scheduler}" if scheduler else f"{workers} workers"
        raise MissingDependencyError(what, "dask") from None
    cluster = None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as error:
            raise TraceFormatError(f"no Dask scheduler answers ({error})", path=scheduler) from None
    else:
        import dask
        # Processes, one thread each: a worker holds one host's trace at a time.
        # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536. Setting it turns off
        # glibc's sliding mmap threshold, so every numpy temporary over 128 KiB is a fresh mmap,
        # page faults and munmap. Measured on the 3M-event host: 5.9-6.6 s of CPU per host in
        # a worker against 1.4-2.5 s in this process (which slows the same way with the variable
        # set); unset, 1.8-2.9 s in a worker. A user's own setting in this process still passes on.
        with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        client = Client(cluster)
    try:
        yield functools.partial(_on_dask, client, progress=progress)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _on_dask(client, function, items: Sequence, progress: bool) -> list:
    futures = client.map(function, list(items), pure=False)
    if progress:  # Dask's text bar writes to stdout: keep stdout for the results
        from distributed import progress as dask_progress
        with contextlib.redirect_stdout(sys.stderr):
            dask_progress(futures)
    return client.gather(futures)


def _in_process(function, files: Sequence, progress: bool) -> list:
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:  # rich is optional: no bar then
        progress = False
    if not progress:
        return [function(file) for file in files]
    results = []
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("hosts", total=len(files))
        for file in files:
            results.append(function(file))
            bar.advance(task)
    return results
