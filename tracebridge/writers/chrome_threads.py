"""Where each op of a Chrome trace goes: its process (pid: the device) and thread (tid:
the lane, a sub-row of it for ops that partly overlap others, or the network thread).

A thread's X events must nest or be disjoint as the viewers read the file: Perfetto drops
an event that partly overlaps another one of its thread, speedscope ends the wrong frame.
Ops of a lane go to sub-rows (:func:`~tracebridge.model.lanes.nested_fit`) where they
partly overlap at nanoseconds, and also where they only do as a viewer reads the times: the
writer prints exact decimal microseconds since the epoch (``1795842827258095.787``), but
viewers parse them as doubles, 0.25 us apart at today's times, and add the duration to the
rounded start, so two ops 200 ns apart can overlap there (in one TF1 CPU step of ten as
Perfetto reads it, in some op of nearly every longer trace). :func:`json_readings` gives
the times as they read them. Transfers share their device's network thread, whatever lanes
they came from: they get sub-rows too (a TF1 cluster's RPCs overlap in most steps). And no
thread of a device has the device's pid as tid: Perfetto's importer would merge it with
thread 0 (:func:`thread_ids`).
"""

from __future__ import annotations

import numpy as np

from ..model.lanes import by_group_start, nested_fit
from ..model.trace import Trace

FIRST_DEVICE_PID = 2  # pid 0 holds the steps, pid 1 the allocator counters
NETWORK_TID = 999_999
NETWORK_LANE = -1  # the lane of a network thread's sub-rows in pids_and_tids' extra threads


def thread_ids(numbers, pid):
    """The tid of a device process's thread number ``numbers`` (0: its first lane): the
    number, but one higher from ``pid`` on. Perfetto's JSON importer takes tid 0 for the
    process's main thread, whose tid is the pid: a thread with the tid ``pid`` would share
    a track with thread 0 there, its events partly overlapping those of thread 0."""
    return numbers + (numbers >= pid)


def local_lane_numbers(trace: Trace) -> np.ndarray:
    """Lane number within its device for every lane (lanes are stored device by device)."""
    devices = np.array([lane.device for lane in trace.lanes], dtype=np.int64)
    if not len(devices):
        return devices
    first = np.r_[0, np.flatnonzero(devices[1:] != devices[:-1]) + 1]
    counts = np.diff(np.r_[first, len(devices)])
    return np.arange(len(devices)) - np.repeat(first, counts)


def json_readings(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The times (integer ns) at which JSON viewers place events that the Chrome writer
    prints at ``start_ns``/``end_ns`` (``ts`` and ``dur`` as exact decimal microseconds):

    - Perfetto's trace processor (v52, checked against it slice by slice): ``ts`` as a
      double; one with no fraction times 1000 as an integer, any other one times 1000 as
      a double, rounded; ``dur`` comes out exact. At today's times since the epoch, starts
      move by up to 250 ns.
    - readers that add ``ts`` and ``dur`` as doubles (speedscope, after it takes the
      thread's first ``ts`` off: its sums are exact to far below 1 ns): the double nearest
      ``ts``, to the nanosecond, plus the duration. (Ends that tie at the nanosecond, an
      op and the scope it ends with, stay a tie here; speedscope's last bits may not.)

    Both keep starts in order (a rounding is monotone), so they can go to
    :func:`~tracebridge.model.lanes.nested_fit` beside the exact times."""
    start_ns = np.asarray(start_ns, dtype=np.int64)
    duration = np.asarray(end_ns, dtype=np.int64) - start_ns
    if not len(start_ns):
        return (start_ns, start_ns + duration), (start_ns, start_ns + duration)
    negative = bool(start_ns.min() < 0)
    magnitude = np.abs(start_ns) if negative else start_ns
    # The double a parser makes of "<whole>.<fraction>": below 2**53 ns the division of the
    # exact integer rounds once, as a parser does; above, whole + fraction/1000 rounds once
    # too and lands on the same double (the halfway points between doubles there are
    # multiples of 2**-10 us, which no fraction/1000 falls within 2**-53 of without hitting).
    small = magnitude < (1 << 53)
    if small.all():
        us = magnitude / 1000.0
        double = magnitude  # the double is within far less than 0.5 ns of the written time
    else:  # (in place where it can: millions of ops)
        whole, fraction = np.divmod(magnitude, 1000)
        us = fraction.astype(np.float64)
        del fraction
        us /= 1000.0
        us += whole
        # us - whole is exact (the two are within one unit of each other): its ns, rounded
        above = us - whole
        above *= 1000.0
        double = whole
        double *= 1000
        double += np.rint(above, out=above).astype(np.int64)
        del above
        if small.any():
            us = np.where(small, magnitude / 1000.0, us)
            double = np.where(small, magnitude, double)
    perfetto = np.rint(us * 1000.0).astype(np.int64)
    whole_us = np.floor(us)
    integral = np.flatnonzero(whole_us == us)
    perfetto[integral] = whole_us[integral].astype(np.int64) * 1000
    if negative:
        sign = np.where(start_ns < 0, -1, 1)
        perfetto, double = sign * perfetto, sign * double
    return (perfetto, perfetto + duration), (double, double + duration)


def pids_and_tids(trace: Trace, *, decimal_times: bool = True) \
        -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int, int]]]:
    """pid and tid of every op, and the extra threads ``(pid, tid, lane, k)`` that hold
    the ops of a lane that partly overlap others (a TPU op timed by the device clock runs
    into the next one; async ops overlap what runs meanwhile; neighbours that touch as
    the viewers read the times, see the module's doc): the k-th sub-row of the lane, named
    as the lane (a reader merges them back) and sorted right after it. Transfers go to the
    device's network thread, ``lane`` :data:`NETWORK_LANE` for its sub-rows. Threads are
    numbered lanes first, then sub-rows; their tids skip the pid (:func:`thread_ids`).

    ``decimal_times``: place ops as a viewer reads the Chrome writer's decimals too
    (:func:`json_readings`); a writer of exact nanoseconds (Perfetto's format) passes False."""
    ops = trace.ops
    pid = ops["device"].astype(np.int64) + FIRST_DEVICE_PID
    local = local_lane_numbers(trace)
    tid = local[ops["lane"]] if len(local) else np.zeros(len(trace), dtype=np.int64)  # thread numbers first
    extra: list[tuple[int, int, int, int]] = []
    if not len(trace):
        return pid, tid, extra
    # Transfers share their device's network thread, whatever lanes they came from.
    network = np.zeros(len(trace), dtype=bool)
    if trace.transfers.rows:
        network[trace.transfers["op"]] = True
    group = np.where(network, np.int64(-1) - ops["device"], ops["lane"]) if network.any() else ops["lane"]
    order = by_group_start(group, ops["start_ns"], ops["end_ns"])  # None: in that order
    groups = group if order is None else group[order]
    cuts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1], True])
    next_number = {}  # per device: the first thread number after its lanes
    for device, count in zip(*np.unique([lane.device for lane in trace.lanes], return_counts=True)):
        next_number[int(device)] = int(count)
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        rows = slice(lo, hi) if order is None else order[lo:hi]
        start, end = ops["start_ns"][rows], ops["end_ns"][rows]
        sub = nested_fit(start, end, json_readings(start, end) if decimal_times else ())
        key = int(groups[lo])
        if key >= 0 and not sub.any():
            continue  # the lane on its own thread
        if order is None:
            rows = np.arange(lo, hi)
        if key < 0:
            lane, device = NETWORK_LANE, -1 - key
            tid[rows[sub == 0]] = NETWORK_TID
        else:
            lane, device = key, trace.lanes[key].device
        for k in range(1, int(sub.max()) + 1):
            number = next_number[device]
            extra.append((device + FIRST_DEVICE_PID, int(thread_ids(number, device + FIRST_DEVICE_PID)), lane, k))
            tid[rows[sub == k]] = number
            next_number[device] += 1
    shifted = (tid >= pid) & (tid != NETWORK_TID)  # thread numbers to tids (thread_ids)
    if shifted.any():
        tid += shifted
    return pid, tid, extra


def pid_tid_texts(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """``'"pid":2,"tid":0'`` for every op, made once for each of the few distinct pairs
    (found without sorting when pids and tids are small)."""
    if not len(pid):
        return np.zeros(0, dtype=object)
    tid = tid.astype(np.int64)
    # few distinct: lane numbers and the network thread
    tids = np.flatnonzero(np.bincount(tid)) if 0 <= tid.min() and tid.max() <= NETWORK_TID else np.unique(tid)
    if int(pid.max()) * len(tids) < 10_000_000 and pid.min() >= 0:
        key = pid * len(tids) + np.searchsorted(tids, tid)
        present = np.flatnonzero(np.bincount(key))
        table = np.empty(int(key.max()) + 1, dtype=object)
        table[present] = [f'"pid":{k // len(tids)},"tid":{tids[k % len(tids)]}' for k in present.tolist()]
        return table[key]
    pairs, pair_of_op = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
    texts = np.array([f'"pid":{p},"tid":{t}' for p, t in pairs.tolist()], dtype=object)
    return texts[pair_of_op.ravel()]
