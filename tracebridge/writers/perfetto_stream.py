"""A trace handed over as windows of time (:mod:`tracebridge.readers.xspace_windows`)
written into one ``.pftrace``, one window in memory at a time.

Every window's trace has the same devices and lanes (empty ones too); window k + 1's ops
all start after window k's last start. The windows' ops go on the same tracks: a process
per device, a thread track per lane, the sub-rows of a lane's partly overlapping ops, the
network thread, the allocators' counter tracks; each track gets a new packet sequence per
window (it clears its incremental state and interns its own strings, as every sequence of
:mod:`.perfetto` does). Thread tracks are described when first used (those of lanes
without ops at the end); the step slices, gathered from every window, are written last.

Slices must nest on a track across windows too: an op that is still running when the next
window begins (its end event lies in its own window's sequence, after the next window's
first begin) is carried into the next window, and that window's ops that would partly
overlap it take another sub-row (:class:`_SubRows`). An op that starts the instant a
carried one ends takes another sub-row too: the two events lie in different sequences,
and only events of one sequence are ordered at one time by their place in the file.

Flows whose two ends lie in different windows are not written (neither end is in the
trace that the flow would be made from); within a window, every flow of
:mod:`.perfetto` is.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterable

import numpy as np

from .._files import atomic_output
from ..errors import OutputError
from ..model.lanes import by_group_start, nested_fit
from ..model.schema import Category
from ..model.trace import Trace
from .chrome import _SORT, DERIVED_SUFFIX, NETWORK_SORT
from .chrome_threads import local_lane_numbers
from .perfetto import _HostWriter, _StringTable


def write_perfetto_windows(windows: Iterable[Trace], path: str | os.PathLike, *, dataflow: bool = True,
                           memory: bool = True, progress=None, workers: int | None = None) -> tuple[int, int]:
    """Write the windows of one trace (see the module's doc) to ``path`` as one Perfetto
    trace; options as :func:`~.perfetto.write_perfetto` (``progress(done, None)`` after each
    window). Returns the number of ops and steps written."""
    with atomic_output(path, compress=False) as out:
        return _WindowWriter(out, 0, dataflow=dataflow, memory=memory, label_hosts=False,
                             workers=workers).write_windows(windows, progress)


class _WindowWriter(_HostWriter):
    """:class:`~.perfetto._HostWriter` for a trace that comes as windows."""

    def write_windows(self, windows: Iterable[Trace], progress=None) -> tuple[int, int]:
        processes = None
        rows: dict[int, _SubRows] = {}  # per lane (or -1 - device: its network thread)
        threads: dict[tuple[int, int], int] = {}  # (lane key, sub-row) -> track uuid
        steps, ops, host, last_start, trace = [], 0, None, None, None
        for trace in windows:
            if not len(trace) and not trace.counters.rows and not trace.steps:
                continue
            if len(trace) and int(trace.ops["start_ns"].min()) < 0:
                raise OutputError("Perfetto timestamps are unsigned: this trace has ops before 1970 "
                                  "(shift it, or write Chrome JSON)")
            if processes is None:
                host = next((d.host for d in trace.devices if d.host), None) or trace.metadata.get("host")
                processes = self._describe_devices(trace)
            if len(trace):
                first = int(trace.ops["start_ns"].min())
                if last_start is not None and first <= last_start:
                    raise OutputError("the windows of a streamed trace overlap: a window's ops start before the "
                                      "previous one's last start")
                last_start = int(trace.ops["start_ns"].max())
                strings = _StringTable(trace.strings)
                self._write_window(trace, strings, processes, rows, threads, last_start)
            if self.memory and trace.counters.rows:
                self._write_counters(trace, _StringTable(trace.strings), host)
            steps += trace.steps
            ops += len(trace)
            if progress:
                progress(ops, None)
        if trace is not None:  # lanes without ops have their tracks, as in the whole trace
            local = local_lane_numbers(trace)
            for key, lane in enumerate(trace.lanes):
                if (key, 0) not in threads:
                    threads[key, 0] = self._describe_thread(processes[lane.device], lane.name, _SORT * int(local[key]))
        if steps:
            self._write_steps(types.SimpleNamespace(steps=steps), host)
        return ops, len(steps)

    def _write_window(self, trace: Trace, strings: _StringTable, processes: list[tuple[int, int]],
                      rows: dict[int, "_SubRows"], threads: dict[tuple[int, int], int], last_start: int) -> None:
        ops = trace.ops
        network = np.zeros(len(trace), dtype=bool)
        if trace.transfers.rows:
            network[trace.transfers["op"]] = True  # a device's transfers share its network thread
        group = np.where(network, np.int64(-1) - ops["device"], ops["lane"]) if network.any() else ops["lane"]
        order = by_group_start(group, ops["start_ns"], ops["end_ns"])  # None: in that order
        groups = group if order is None else group[order]
        cuts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1], True])
        track_of = np.empty(len(trace), dtype=np.int32)
        uuids: list[int] = []
        local = local_lane_numbers(trace)
        derived = set(np.unique(ops["lane"][ops["category"] == Category.DERIVED]).tolist())
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            mine = np.arange(lo, hi) if order is None else order[lo:hi]
            key = int(groups[lo])
            sub = rows.setdefault(key, _SubRows()).place(ops["start_ns"][mine], ops["end_ns"][mine])
            for row in np.unique(sub).tolist():
                if (key, row) not in threads:
                    if key >= 0:
                        lane = trace.lanes[key]
                        name = lane.name + (DERIVED_SUFFIX if key in derived else "")
                        device, rank = lane.device, _SORT * int(local[key]) + min(row, _SORT - 1)
                    else:
                        name, device, rank = "network", -1 - key, NETWORK_SORT + row
                    threads[key, row] = self._describe_thread(processes[device], name, rank)
                track_of[mine[sub == row]] = len(uuids)
                uuids.append(threads[key, row])
        for sub_rows in rows.values():
            sub_rows.carry(last_start)
        # flows between tracks: ends on different tracks
        handed = {"track_of": track_of,
                  "flows": self._flows(trace, track_of.astype(np.int64), np.zeros(len(trace), dtype=np.int64))}
        del track_of
        self._write_tracks(trace, strings, handed, uuids, None)


class _SubRows:
    """The sub-rows of one lane across windows, and the ops of earlier windows still running
    (per sub-row, the ends of a chain of nested ops, outermost first)."""

    def __init__(self):
        self.carried: list[list[int]] = []
        self._placed: list[tuple[np.ndarray, np.ndarray]] = []  # this window's (ends, rows)

    def place(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Sub-rows of one window's ops of the lane (sorted by start, longest first): as
        :func:`~tracebridge.model.lanes.nested_fit` places them, where nothing is carried;
        else the ops until everything carried and everything before them has ended, one
        at a time beside the carried ones, and the rest as nested_fit places them."""
        n = len(start)
        if not any(self.carried):
            result = nested_fit(start, end)
        else:
            # strictly after the carried ends: see the module's doc
            reach = np.maximum.accumulate(np.r_[max(max(c) for c in self.carried if c) + 1, end[:-1]])
            free = np.flatnonzero(start >= reach)
            split = int(free[0]) if len(free) else n
            result = np.empty(n, dtype=np.int32)
            result[:split] = self._beside_carried(start[:split].tolist(), end[:split].tolist())
            result[split:] = nested_fit(start[split:], end[split:])
        self._placed.append((end, result))
        return result

    def _beside_carried(self, start: list[int], end: list[int]) -> list[int]:
        """:func:`~tracebridge.model.lanes._nested_rows` with each sub-row's carried ops open
        (a carried op stays open at its own end)."""
        stacks = [[(e, True) for e in chain] for chain in self.carried]
        result = []
        for s, e in zip(start, end):
            for k, stack in enumerate(stacks):
                while stack and (stack[-1][0] < s if stack[-1][1] else stack[-1][0] <= s):
                    stack.pop()
                if not stack or e <= stack[-1][0]:
                    stack.append((e, False))
                    result.append(k)
                    break
            else:
                stacks.append([(e, False)])
                result.append(len(stacks) - 1)
        return result

    def carry(self, last_start: int) -> None:
        """After a window whose last op (of any lane) starts at ``last_start``: what is still
        running then is carried into the next window, whose ops all start later."""
        chains = [[e for e in chain if e > last_start] for chain in self.carried]
        for end, result in self._placed:
            running = np.flatnonzero(end > last_start)
            for row, e in zip(result[running].tolist(), end[running].tolist()):
                while len(chains) <= row:
                    chains.append([])
                chains[row].append(e)
        self.carried = [sorted(chain, reverse=True) for chain in chains]
        while self.carried and not self.carried[-1]:
            self.carried.pop()
        self._placed = []
