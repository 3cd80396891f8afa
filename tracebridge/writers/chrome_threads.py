"""Where each op of a Chrome trace goes: its process (pid: the device) and thread (tid:
the lane, a sub-row of it for ops that partly overlap others, or the network thread)."""

from __future__ import annotations

import numpy as np

from ..model.lanes import by_group_start, nested_fit
from ..model.trace import Trace

FIRST_DEVICE_PID = 2  # pid 0 holds the steps, pid 1 the allocator counters
NETWORK_TID = 999_999


def local_lane_numbers(trace: Trace) -> np.ndarray:
    """Lane number within its device for every lane (lanes are stored device by device)."""
    devices = np.array([lane.device for lane in trace.lanes], dtype=np.int64)
    if not len(devices):
        return devices
    first = np.r_[0, np.flatnonzero(devices[1:] != devices[:-1]) + 1]
    counts = np.diff(np.r_[first, len(devices)])
    return np.arange(len(devices)) - np.repeat(first, counts)


def pids_and_tids(trace: Trace) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int, int]]]:
    """pid and tid of every op, and the extra threads ``(pid, tid, lane, k)`` that hold
    the ops of a lane that partly overlap others (a TPU op timed by the device clock runs
    into the next one; async ops overlap what runs meanwhile): the k-th sub-row of the
    lane, named as the lane (a reader merges them back) and sorted right after it."""
    ops = trace.ops
    pid = ops["device"].astype(np.int64) + FIRST_DEVICE_PID
    local = local_lane_numbers(trace)
    tid = local[ops["lane"]] if len(local) else np.zeros(len(trace), dtype=np.int64)
    extra: list[tuple[int, int, int, int]] = []
    if len(trace):
        order = by_group_start(ops["lane"], ops["start_ns"], ops["end_ns"])  # None: in that order
        lanes = ops["lane"] if order is None else ops["lane"][order]
        cuts = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1], True])
        next_tid = {}  # per device: the first tid after its lanes
        for device, count in zip(*np.unique([lane.device for lane in trace.lanes], return_counts=True)):
            next_tid[int(device)] = int(count)
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            rows = slice(lo, hi) if order is None else order[lo:hi]
            sub = nested_fit(ops["start_ns"][rows], ops["end_ns"][rows])
            if not sub.any():
                continue
            if order is None:
                rows = np.arange(lo, hi)
            lane = int(lanes[lo])
            device = trace.lanes[lane].device
            for k in range(1, int(sub.max()) + 1):
                extra.append((device + FIRST_DEVICE_PID, next_tid[device], lane, k))
                tid[rows[sub == k]] = next_tid[device]
                next_tid[device] += 1
    if trace.transfers.rows:
        tid = tid.copy()
        tid[trace.transfers["op"]] = NETWORK_TID
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
