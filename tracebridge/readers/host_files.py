"""The hosts of a multi-host profile and their bytes: what the host-by-host analyses
(:mod:`tracebridge.analysis.hosts`) are handed, found and read here so that the analyses
do no file I/O of their own.

A TF2 multi-host profile is one XSpace per host (``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``);
a TF1 ps/worker run one file per task. A host's file is a local path or an fsspec URL
(``gs://bucket/run/h.xplane.pb``) that a Dask worker reads for itself. Which reader turns
the bytes into a trace is the format table's choice (:func:`tracebridge.formats.load_host`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import MissingDependencyError, TraceFormatError
from .sources import profile_run_hosts, read_file


@dataclass(frozen=True)
class HostFile:
    """One host's profile: a local path or an fsspec URL (``gs://bucket/run/h.xplane.pb``)."""

    host: str
    path: str


def host_files(inputs: str | os.PathLike | Sequence[str | os.PathLike], run: str | None = None) -> list[HostFile]:
    """The hosts of a profile logdir or run folder (the newest run unless ``run`` names
    one), or of a list of XSpace files or URLs (one host each, named by the file)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths = [os.fspath(path) for path in inputs]
    if len(paths) == 1 and not _is_url(paths[0]) and os.path.isdir(paths[0]):
        found = profile_run_hosts(paths[0], run)
        if found is None or not found[1]:
            raise TraceFormatError("is a directory without plugins/profile runs (give a profile logdir, "
                                   "a run folder or .xplane.pb files)", path=paths[0])
        return [HostFile(host, path) for host, path in found[1]]
    names = [_host_name(path) for path in paths]
    if len(set(names)) < len(names):  # the same file name in two folders: tell them apart
        names = [f"{name}#{i}" for i, name in enumerate(names)]
    return [HostFile(name, path) for name, path in zip(names, paths)]


def _host_name(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name[:-len(".xplane.pb")] if name.endswith(".xplane.pb") else name


def _is_url(path: str) -> bool:
    return "://" in path


def read_host(file: HostFile) -> bytes:
    """A host's bytes, from a local path or through fsspec."""
    if not _is_url(file.path):
        return read_file(file.path)
    try:
        import fsspec
    except ImportError:
        raise MissingDependencyError(f"reading {file.path}", "dask") from None
    try:
        with fsspec.open(file.path, "rb") as handle:
            data = handle.read()
    except (ImportError, ValueError) as error:  # fsspec without the protocol's backend
        raise TraceFormatError(f"cannot read through fsspec ({error})", path=file.path) from None
    except OSError as error:
        raise TraceFormatError(f"cannot read ({error})", path=file.path) from None
    if not data:
        raise TraceFormatError("empty file", path=file.path)
    return data
