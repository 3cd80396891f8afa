"""TensorBoard outputs, so both of TensorBoard's worlds open any trace tracebridge reads:

* an event file with one ``tagged_run_metadata`` per step, as ``FileWriter.add_run_metadata``
  wrote for the graph dashboard (``LOGDIR/events.out.tfevents.<time>.<host>``);
* an XSpace under ``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``, the file the profile
  plugin (xprof) reads, so TF1 runs open in its trace viewer and op statistics.

XSpace layout written: a ``Task Environment`` plane with ``profile_start_time``; a
``/host:CPU`` plane holding every CPU device's ops (a line per device lane, events named
``node:Type`` as TF2's executor names them) and, on each of its lines, a ``train`` step
marker (``step_num``, ``_r``) around each step; one ``/device:GPU:N`` (or TPU) plane per accelerator, a line per lane.
"""

from __future__ import annotations

import datetime
import os
import socket

import numpy as np

from .. import protos
from .._files import atomic_output, write_bytes
from ..errors import OutputError
from ..model.accelerator import launches
from ..model.schema import METADATA_STATS, Category, OpFlag
from ..model.trace import Trace
from ..tfrecord import frame
from .stepstats import run_metadata_per_step, to_run_metadata
from .xspace_hlo import add_hlo_modules, xla_event_stats

_HOST_PLANE = "/host:CPU"


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


def write_xspace_file(trace: Trace, path: str | os.PathLike) -> None:
    """The XSpace, to the file ``path`` (``.xplane.pb``, what ``save`` writes), its hostname
    the trace's host; no logdir layout (that is :func:`write_tensorboard_xplane`)."""
    write_bytes(path, to_xspace(trace, str(trace.metadata.get("host") or "")).SerializeToString(deterministic=True))


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


def to_xspace(trace: Trace, host: str | None = None):
    """The trace as an XSpace message (tracebridge's schema; TF's XSpace on the wire)."""
    space = protos.XSpace()
    if host:
        space.hostnames.append(host)
    base = trace.start_ns
    ops = trace.ops
    planes: dict[str, object] = {}
    stat_ids: dict[tuple[str, str], int] = {}

    def plane_for(name: str):
        if name not in planes:
            planes[name] = space.planes.add(id=len(planes), name=name)
        return planes[name]

    def stat_id(plane, stat_name: str) -> int:
        key = (plane.name, stat_name)
        if key not in stat_ids:
            stat_ids[key] = len([k for k in stat_ids if k[0] == plane.name]) + 1
            plane.stat_metadata[stat_ids[key]].id = stat_ids[key]
            plane.stat_metadata[stat_ids[key]].name = stat_name
        return stat_ids[key]

    environment = plane_for("Task Environment")
    environment.stats.add(metadata_id=stat_id(environment, "profile_start_time"), uint64_value=max(base, 0))
    environment.stats.add(metadata_id=stat_id(environment, "profile_stop_time"), uint64_value=max(trace.end_ns, 0))
    for key, stat in METADATA_STATS.items():  # the graph and input shapes a capture recorded
        if trace.metadata.get(key):
            environment.stats.add(metadata_id=stat_id(environment, stat), str_value=str(trace.metadata[key]))
    add_hlo_modules(trace, plane_for, stat_id)
    xla = xla_event_stats(trace)

    strings = trace.strings
    starts, ends = ops["start_ns"], ops["end_ns"]
    categories = ops["category"]
    lane_rows: dict[int, np.ndarray] = {}
    order = np.lexsort((starts, ops["lane"]))
    lanes = ops["lane"][order]
    cuts = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1], True])
    for a, b in zip(cuts[:-1], cuts[1:]):
        lane_rows[int(lanes[a])] = order[a:b]
    # A launch and the kernel it started share a correlation_id, as TF2's GPU tracer writes
    # them: xprof puts a kernel in the step whose marker encloses its launch on the host
    # (a GPU step's device time is its kernels so grouped: without any, step time is 0).
    # xprof takes an event named ``name:Type`` for a TF op, never for a launch, so a TF1
    # op's dispatch gets one launch event per kernel inside it (at its start, no length:
    # TF1 records no launch times); an XSpace's own launch events keep being the launches.
    launched_by = launches(trace)
    correlation = {kernel: number for number, kernel in enumerate(sorted(launched_by), start=1)}
    kernels_of: dict[int, list[int]] = {}
    for kernel, host_row in launched_by.items():
        if categories[host_row] == Category.OP:
            kernels_of.setdefault(host_row, []).append(kernel)
        else:
            correlation.setdefault(host_row, correlation[kernel])
    metadata_ids: dict[tuple[str, str, str], int] = {}
    last_id: dict[str, int] = {}  # per plane: event metadata ids are 1, 2, ...

    def metadata_id(plane, event_name: str, display_name: str) -> int:
        # Keyed by type too: a name with a colon is written without its type, and two
        # ops of that name but different types need a metadata entry (display name) each.
        key = (plane.name, event_name, display_name)
        if key not in metadata_ids:
            metadata_ids[key] = last_id[plane.name] = last_id.get(plane.name, 0) + 1
            entry = plane.event_metadata[metadata_ids[key]]
            entry.id = metadata_ids[key]
            entry.name = event_name
            entry.display_name = display_name
        return metadata_ids[key]

    for lane_index, rows in lane_rows.items():
        lane = trace.lanes[lane_index]
        device = trace.devices[lane.device]
        plane = plane_for(_plane_name(device))
        # A record TF1's tracer repeated on another stream is written once.
        rows = rows[(ops["flags"][rows] & np.uint8(OpFlag.DUPLICATE)) == 0]
        if not len(rows):
            continue
        line = plane.lines.add(id=lane_index + 1, name=_line_name(device, lane), timestamp_ns=0)
        for i in rows.tolist():
            name = strings[ops["name"][i]]
            op_type = strings[ops["op_type"][i]]
            on_device = categories[i] in (Category.DEVICE, Category.MEMCPY)
            event_name = strings[ops["kernel"][i]] if on_device else \
                f"{name}:{op_type}" if categories[i] == Category.OP and ":" not in name else name
            offset_ps = (int(starts[i]) - base) * 1000
            event = line.events.add(metadata_id=metadata_id(plane, event_name, op_type), offset_ps=offset_ps,
                                    duration_ps=max(int(ends[i]) - int(starts[i]), 0) * 1000)
            if on_device:  # the TF op that launched it, as TF2's GPU tracer annotates kernels
                for stat in ("tf_op", "annotation"):
                    event.stats.add(metadata_id=stat_id(plane, stat), str_value=f"{name}:{op_type}")
            if i in correlation:
                event.stats.add(metadata_id=stat_id(plane, "correlation_id"), int64_value=correlation[i])
            for stat, kind, value in xla.get(i, ()):  # its HLO instruction (writers/xspace_hlo.py)
                if kind == "uint64":
                    event.stats.add(metadata_id=stat_id(plane, stat), uint64_value=value)
                else:
                    event.stats.add(metadata_id=stat_id(plane, stat), str_value=value)
            for kernel in kernels_of.get(i, ()):
                kernel_name = strings[ops["kernel"][kernel]]
                launch = line.events.add(metadata_id=metadata_id(plane, kernel_name, kernel_name),
                                         offset_ps=offset_ps, duration_ps=0)
                launch.stats.add(metadata_id=stat_id(plane, "correlation_id"), int64_value=correlation[kernel])
    if trace.steps:
        _add_step_markers(trace, plane_for(_HOST_PLANE), base, metadata_ids, last_id, stat_id)
    return space


def _add_step_markers(trace: Trace, host_plane, base: int, metadata_ids: dict, last_id: dict, stat_id) -> None:
    """A ``train`` event (``step_num``, ``_r``: a root) around each step on every host line,
    as ``tf.profiler.experimental.Trace("train", step_num=i, _r=1)`` records one around the
    step's work: xprof groups the events a root encloses on its line into that step, and a
    marker on a line of its own encloses nothing ("No step marker observed", step time 0).
    Readers merge a step's markers by number."""
    key = (host_plane.name, "train", "")
    if key not in metadata_ids:
        metadata_ids[key] = last_id[host_plane.name] = last_id.get(host_plane.name, 0) + 1
        host_plane.event_metadata[metadata_ids[key]].id = metadata_ids[key]
        host_plane.event_metadata[metadata_ids[key]].name = "train"
    lines = list(host_plane.lines)
    if not lines:
        lines = [host_plane.lines.add(id=0, name="Steps", timestamp_ns=0)]
    step_num, root = stat_id(host_plane, "step_num"), stat_id(host_plane, "_r")
    for line in lines:
        events = list(line.events)
        for step in trace.steps:
            marker = protos.XSpace().planes.add().lines.add().events.add(
                metadata_id=metadata_ids[key], offset_ps=(step.start_ns - base) * 1000,
                duration_ps=max(step.duration_ns, 0) * 1000)
            marker.stats.add(metadata_id=step_num, int64_value=step.number)
            marker.stats.add(metadata_id=root, int64_value=1)
            events.append(marker)
        # By start, an enclosing event before what it encloses (xprof nests them so).
        events.sort(key=lambda event: (event.offset_ps, -event.duration_ps))
        del line.events[:]
        line.events.extend(events)


def _plane_name(device) -> str:
    """Accelerators keep a plane each (streams become its lines); everything else is host work."""
    if device.name.startswith("/device:") and device.stream is None and device.type not in (None, "CPU"):
        return device.name
    if device.stream is not None and device.type in ("GPU", "TPU") and device.index is not None:
        return f"/device:{device.type}:{device.index}"
    # TF1's own GPU device records each op's dispatch, which runs on a host thread (TF2
    # records it on /host:CPU too); its kernels are on the stream devices.
    return _HOST_PLANE


def _line_name(device, lane) -> str:
    """TF1 tracer streams become ``Stream #N`` lines, the name xprof gives a GPU's streams."""
    if device.stream is not None:
        return f"Stream #{device.stream}"
    return f"{device.short_name} {lane.name}".strip()


def file_name(text: str) -> str:
    """A host name (or tag) fit for a file name. Host names can come from the input file, so
    no separator survives and the length stays well below the 255-byte name limit."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "-._" else "_" for c in text)[:100] or "host"
