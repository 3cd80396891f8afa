"""TensorBoard's logdir, so both of TensorBoard's worlds open any trace tracebridge reads:

* an event file with one ``tagged_run_metadata`` per step, as ``FileWriter.add_run_metadata``
  wrote for the graph dashboard (``LOGDIR/events.out.tfevents.<time>.<host>``);
* an XSpace under ``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``, the file the profile
  plugin (xprof) reads, so TF1 runs open in its trace viewer and op statistics. The XSpace
  itself is :mod:`.xspace`'s; this module lays out the folders and names the files.
"""

from __future__ import annotations

import datetime
import os
import socket

from .. import protos
from .._files import atomic_output, write_bytes
from ..errors import OutputError
from ..model.trace import Trace
from ..tfrecord import frame
from .stepstats import run_metadata_per_step, to_run_metadata
from .xspace import to_xspace


def write_tensorboard(trace: Trace, logdir: str | os.PathLike, *, run: str | None = None,
                      host: str | None = None) -> dict[str, str]:
    """Write both outputs under ``logdir``; returns ``{"events": path, "xspace": path}``."""
    _refuse_empty(trace)
    host = file_name(host or str(trace.metadata.get("host") or socket.gethostname()))
    start = _start(trace)
    xspace = write_tensorboard_xplane(trace, logdir, run=run or start.strftime("%Y_%m_%d_%H_%M_%S"), host=host)
    events = os.path.join(os.fspath(logdir), f"events.out.tfevents.{int(start.timestamp())}.{host}")
    write_events(trace, events)
    return {"events": events, "xspace": xspace}


def write_tensorboard_xplane(trace: Trace, logdir: str | os.PathLike, *, run: str | None = None,
                             host: str | None = None) -> str:
    """The XSpace of one host in one run of a TensorBoard logdir, where the profile plugin
    reads it: ``LOGDIR/plugins/profile/<run>/<host>.xplane.pb`` (folders made as needed).
    ``run`` defaults to the trace's start time, as TF names its runs. Returns the path.
    (:func:`write_xspace_file` writes the same XSpace to a path of the caller's.)"""
    _refuse_empty(trace)
    host = file_name(host or str(trace.metadata.get("host") or socket.gethostname()))
    run = run or _start(trace).strftime("%Y_%m_%d_%H_%M_%S")
    if os.path.basename(run) != run or run in ("", ".", ".."):
        raise OutputError(f"run name {run!r} must be a plain folder name")
    profile_dir = os.path.join(os.fspath(logdir), "plugins", "profile", run)
    try:
        os.makedirs(profile_dir, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{profile_dir}: cannot create ({error.strerror or error})") from None
    xspace = os.path.join(profile_dir, f"{host}.xplane.pb")
    write_bytes(xspace, to_xspace(trace, host).SerializeToString(deterministic=True))
    return xspace


def _refuse_empty(trace: Trace) -> None:
    """Before any folder is made: a trace without ops gives TensorBoard nothing to show, and
    an empty ``plugins/profile/<run>/`` left behind would read as a run that failed."""
    if not len(trace):
        raise OutputError("the trace holds no ops: nothing for TensorBoard to show (no output written)")


def _start(trace: Trace) -> datetime.datetime:
    """When the trace began (now, for traces with relative times)."""
    return datetime.datetime.fromtimestamp(trace.start_ns / 1e9) if trace.start_ns > 1e17 else \
        datetime.datetime.now()


def write_events(trace: Trace, path: str | os.PathLike, *, tag: str | None = None) -> None:
    """An event file: ``file_version`` then one ``tagged_run_metadata`` per step, or, with
    ``tag``, the whole trace as one RunMetadata under that tag (ProfilerHook's ``step_<N>``)."""
    wall = trace.start_ns / 1e9 if trace.start_ns > 1e17 else 0.0
    with atomic_output(path, compress=False) as out:
        out.write(frame(protos.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()))
        if trace.steps and tag is None:
            tagged = ((step.number, step.name or f"step_{step.number}", md)
                      for step, md in run_metadata_per_step(trace))
        else:
            tagged = [(0, tag or "step_0", to_run_metadata(trace))]
        for number, name, run_metadata in tagged:
            event = protos.Event(wall_time=wall, step=number)
            event.tagged_run_metadata.tag = name
            event.tagged_run_metadata.run_metadata = run_metadata.SerializeToString(deterministic=True)
            out.write(frame(event.SerializeToString()))


def file_name(text: str) -> str:
    """A host name (or tag) fit for a file name. Host names can come from the input file, so
    no separator survives and the length stays well below the 255-byte name limit."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "-._" else "_" for c in text)[:100] or "host"
