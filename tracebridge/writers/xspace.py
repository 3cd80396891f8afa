"""The trace as an XSpace, the profile format of TF2 and xprof (``.xplane.pb``).

Layout written: a ``Task Environment`` plane with ``profile_start_time``; a ``/host:CPU``
plane holding every CPU device's ops (a line per device lane, events named ``node:Type``
as TF2's executor names them) and, on each of its lines, a ``train`` step marker
(``step_num``, ``_r``) around each step; one ``/device:GPU:N`` (or TPU) plane per
accelerator, a line per lane. :mod:`.tensorboard` puts it in a TensorBoard logdir.
"""

from __future__ import annotations

import os

import numpy as np

from .. import protos
from .._files import write_bytes
from ..model.accelerator import launches
from ..model.schema import CALL_STATS, METADATA_STATS, Category, OpFlag
from ..model.trace import Trace
from .xspace_hlo import add_hlo_modules, xla_event_stats

_HOST_PLANE = "/host:CPU"


def write_xspace_file(trace: Trace, path: str | os.PathLike) -> None:
    """The XSpace, to the file ``path`` (``.xplane.pb``, what ``save`` writes), its hostname
    the trace's host; no logdir layout (that is :func:`write_tensorboard_xplane`)."""
    write_bytes(path, to_xspace(trace, str(trace.metadata.get("host") or "")).SerializeToString(deterministic=True))


def to_xspace(trace: Trace, host: str | None = None):
    """The trace as an XSpace message (tracebridge's schema; TF's XSpace on the wire)."""
    return _XSpaceBuilder(trace, host).build()


class _XSpaceBuilder:
    """One XSpace being written: its planes by name, and per plane the ids of its stat and
    event metadata (1, 2, ... in the order first used)."""

    def __init__(self, trace: Trace, host: str | None):
        self.trace, self.ops, self.strings, self.base = trace, trace.ops, trace.strings, trace.start_ns
        self.space = protos.XSpace()
        if host:
            self.space.hostnames.append(host)
        self.planes: dict[str, object] = {}
        self.stat_ids: dict[tuple[str, str], int] = {}
        self.metadata_ids: dict[tuple[str, str, str], int] = {}
        self.last_id: dict[str, int] = {}  # per plane: event metadata ids are 1, 2, ...

    def build(self):
        self.add_environment()
        add_hlo_modules(self.trace, self.plane, self.stat_id)
        self.xla = xla_event_stats(self.trace)
        self.calls = _call_stats(self.trace)
        self.correlation, self.kernels_of = _correlations(self.trace)
        for lane_index, rows in _lane_rows(self.ops).items():
            self.add_line(lane_index, rows)
        if self.trace.steps:
            self.add_step_markers(self.plane(_HOST_PLANE))
        return self.space

    # --- ids ----------------------------------------------------------------------------
    def plane(self, name: str):
        if name not in self.planes:
            self.planes[name] = self.space.planes.add(id=len(self.planes), name=name)
        return self.planes[name]

    def stat_id(self, plane, stat_name: str) -> int:
        key = (plane.name, stat_name)
        if key not in self.stat_ids:
            self.stat_ids[key] = len([k for k in self.stat_ids if k[0] == plane.name]) + 1
            plane.stat_metadata[self.stat_ids[key]].id = self.stat_ids[key]
            plane.stat_metadata[self.stat_ids[key]].name = stat_name
        return self.stat_ids[key]

    def metadata_id(self, plane, event_name: str, display_name: str) -> int:
        """Keyed by type too: a name with a colon is written without its type, and two ops
        of that name but different types need a metadata entry (display name) each."""
        key = (plane.name, event_name, display_name)
        if key not in self.metadata_ids:
            self.metadata_ids[key] = self.last_id[plane.name] = self.last_id.get(plane.name, 0) + 1
            entry = plane.event_metadata[self.metadata_ids[key]]
            entry.id = self.metadata_ids[key]
            entry.name = event_name
            entry.display_name = display_name
        return self.metadata_ids[key]

    # --- planes, lines, events ------------------------------------------------------------
    def add_environment(self) -> None:
        """The capture's times, and the graph and input shapes it recorded."""
        environment, trace = self.plane("Task Environment"), self.trace
        self.add_stat(environment, environment, "profile_start_time", max(self.base, 0))
        self.add_stat(environment, environment, "profile_stop_time", max(trace.end_ns, 0))
        for key, stat in METADATA_STATS.items():
            if trace.metadata.get(key):
                environment.stats.add(metadata_id=self.stat_id(environment, stat), str_value=str(trace.metadata[key]))

    def add_stat(self, plane, owner, stat: str, value: int) -> None:
        owner.stats.add(metadata_id=self.stat_id(plane, stat), uint64_value=value)

    def add_line(self, lane_index: int, rows: np.ndarray) -> None:
        lane = self.trace.lanes[lane_index]
        device = self.trace.devices[lane.device]
        plane = self.plane(_plane_name(device))
        # A record TF1's tracer repeated on another stream is written once.
        rows = rows[(self.ops["flags"][rows] & np.uint8(OpFlag.DUPLICATE)) == 0]
        if not len(rows):
            return
        line = plane.lines.add(id=lane_index + 1, name=_line_name(device, lane), timestamp_ns=0)
        for i in rows.tolist():
            self.add_event(plane, line, i)

    def add_event(self, plane, line, i: int) -> None:
        ops, strings = self.ops, self.strings
        name, op_type = strings[ops["name"][i]], strings[ops["op_type"][i]]
        category = ops["category"][i]
        on_device = category in (Category.DEVICE, Category.MEMCPY)
        event_name = strings[ops["kernel"][i]] if on_device else \
            f"{name}:{op_type}" if category == Category.OP and ":" not in name else name
        start = int(ops["start_ns"][i])
        offset_ps = (start - self.base) * 1000
        event = line.events.add(metadata_id=self.metadata_id(plane, event_name, op_type), offset_ps=offset_ps,
                                duration_ps=max(int(ops["end_ns"][i]) - start, 0) * 1000)
        self.add_event_stats(plane, event, i, f"{name}:{op_type}" if on_device else None)
        self.add_launches(plane, line, i, offset_ps)

    def add_event_stats(self, plane, event, i: int, launched_by: str | None) -> None:
        if launched_by is not None:  # the TF op that launched it, as TF2's GPU tracer annotates kernels
            for stat in ("tf_op", "annotation"):
                event.stats.add(metadata_id=self.stat_id(plane, stat), str_value=launched_by)
        if i in self.correlation:
            event.stats.add(metadata_id=self.stat_id(plane, "correlation_id"), int64_value=self.correlation[i])
        for stat, value in self.calls.get(i, ()):  # a tf.function call's stats, as TF wrote them
            event.stats.add(metadata_id=self.stat_id(plane, stat), str_value=value)
        for stat, kind, value in self.xla.get(i, ()):  # its HLO instruction (writers/xspace_hlo.py)
            if kind == "uint64":
                self.add_stat(plane, event, stat, value)
            else:
                event.stats.add(metadata_id=self.stat_id(plane, stat), str_value=value)

    def add_launches(self, plane, line, i: int, offset_ps: int) -> None:
        """A TF1 op's launch event for each kernel it started (see :func:`_correlations`)."""
        for kernel in self.kernels_of.get(i, ()):
            kernel_name = self.strings[self.ops["kernel"][kernel]]
            launch = line.events.add(metadata_id=self.metadata_id(plane, kernel_name, kernel_name),
                                     offset_ps=offset_ps, duration_ps=0)
            launch.stats.add(metadata_id=self.stat_id(plane, "correlation_id"), int64_value=self.correlation[kernel])

    def add_step_markers(self, host_plane) -> None:
        """A ``train`` event (``step_num``, ``_r``: a root) around each step on every host line,
        as ``tf.profiler.experimental.Trace("train", step_num=i, _r=1)`` records one around the
        step's work: xprof groups the events a root encloses on its line into that step, and a
        marker on a line of its own encloses nothing ("No step marker observed", step time 0).
        Readers merge a step's markers by number."""
        train = self.metadata_id(host_plane, "train", "")
        lines = list(host_plane.lines) or [host_plane.lines.add(id=0, name="Steps", timestamp_ns=0)]
        step_num, root = self.stat_id(host_plane, "step_num"), self.stat_id(host_plane, "_r")
        for line in lines:
            markers = [self.step_marker(train, step, step_num, root) for step in self.trace.steps]
            # By start, an enclosing event before what it encloses (xprof nests them so).
            events = sorted([*line.events, *markers], key=lambda event: (event.offset_ps, -event.duration_ps))
            del line.events[:]
            line.events.extend(events)

    def step_marker(self, train: int, step, step_num: int, root: int):
        marker = protos.XSpace().planes.add().lines.add().events.add(
            metadata_id=train, offset_ps=(step.start_ns - self.base) * 1000,
            duration_ps=max(step.duration_ns, 0) * 1000)
        marker.stats.add(metadata_id=step_num, int64_value=step.number)
        marker.stats.add(metadata_id=root, int64_value=1)
        return marker


def _call_stats(trace: Trace) -> dict[int, list[tuple[str, str]]]:
    """Op row -> the tf.function call stats it carries (model/schema.py, CALL_STATS)."""
    stats = trace.table("event_stats")
    wanted = {trace.string_id(key): key for key in CALL_STATS}
    wanted.pop(-1, None)
    out: dict[int, list] = {}
    if not wanted or not stats.rows:
        return out
    rows = np.flatnonzero(np.isin(stats["key"], list(wanted)))
    for op, key, value in zip(stats["op"][rows].tolist(), stats["key"][rows].tolist(), stats["value"][rows].tolist()):
        out.setdefault(op, []).append((wanted[key], trace.strings[value]))
    return out


def _lane_rows(ops) -> dict[int, np.ndarray]:
    """Each lane's op rows, by start."""
    order = np.lexsort((ops["start_ns"], ops["lane"]))
    lanes = ops["lane"][order]
    cuts = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1], True])
    return {int(lanes[a]): order[a:b] for a, b in zip(cuts[:-1], cuts[1:])}


def _correlations(trace: Trace) -> tuple[dict[int, int], dict[int, list[int]]]:
    """``(correlation id by row, kernels by TF1 op row)``. A launch and the kernel it started
    share a correlation_id, as TF2's GPU tracer writes them: xprof puts a kernel in the step
    whose marker encloses its launch on the host (a GPU step's device time is its kernels so
    grouped: without any, step time is 0). xprof takes an event named ``name:Type`` for a TF
    op, never for a launch, so a TF1 op's dispatch gets one launch event per kernel inside it
    (at its start, no length: TF1 records no launch times); an XSpace's own launch events
    keep being the launches."""
    launched_by = launches(trace)
    categories = trace.ops["category"]
    correlation = {kernel: number for number, kernel in enumerate(sorted(launched_by), start=1)}
    kernels_of: dict[int, list[int]] = {}
    for kernel, host_row in launched_by.items():
        if categories[host_row] == Category.OP:
            kernels_of.setdefault(host_row, []).append(kernel)
        else:
            correlation.setdefault(host_row, correlation[kernel])
    return correlation, kernels_of


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
