"""What multi-host users ask first: step time per host, the stragglers and why, step skew
across hosts, and time in cross-host transfers and collectives.

Built from the per-host summary parts (:mod:`.summary`), so it
never needs more than one host in memory.

* A **straggler** is a host whose median step time exceeds the median of all hosts' by
  more than ``threshold`` (a share). Its *extra* time is the difference; the ops and lanes
  that make it are those whose time per step exceeds the median host's the most (time
  no op accounts for, a sleep or a wait outside TF, is what is left).
* **Step skew**: for each step number that several hosts ran, the spread of its start
  times. Times are each host's own clock: absolute, from the host's
  ``profile_start_time``; the offsets of those start times are reported beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..common.tables import csv_text, ms
from ..common.thresholds import DEFAULT
from .summary import HostPart

# Op types of cross-host transfers and collectives (TF1 send/recv pairs, TF2 collective
# ops, NCCL, XLA collectives), matched against op types (and kernels on a device).
COLLECTIVE = re.compile(r"(?i)collective|all-?reduce|all-?gather|reduce-?scatter|all-?to-?all|nccl|"
                        r"^_?(host)?(send|recv)$|recvtensor|broadcast|cross-?replica|collective-?permute")
_TOP = 5


@dataclass(frozen=True)
class HostReport:
    """Per-host step times, stragglers, skew and collective time (see the module's doc)."""

    hosts: list[dict]
    stragglers: list[dict]
    skew: dict
    median_step_ns: int
    threshold: float
    time: str = "host"
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"time": self.time, "threshold": self.threshold, "median_step_ns": self.median_step_ns,
                "hosts": self.hosts, "stragglers": self.stragglers, "skew": self.skew, **self.extra}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        """The host table of the text, a row per host; ``straggler``: 1 for a straggler."""
        late = {s["host"] for s in self.stragglers}
        return csv_text(("host", "steps", "median_step_ns", "max_step_ns", "clock_offset_ns", "collective_ns",
                         "straggler"),
                        ((h["host"], h["steps"], h["median_step_ns"], h["max_step_ns"], h["clock_offset_ns"],
                          h["collective_ns"], int(h["host"] in late)) for h in self.hosts))

    def to_text(self) -> str:
        lines = [f"{len(self.hosts)} hosts, median step {ms(self.median_step_ns)}; "
                 f"stragglers: step time over the median by more than {100 * self.threshold:.0f}%", ""]
        header = ("host", "steps", "median step", "max step", "clock offset", "collectives")
        body = [(h["host"], str(h["steps"]), ms(h["median_step_ns"]), ms(h["max_step_ns"]),
                 "-" if h["clock_offset_ns"] is None else ms(h["clock_offset_ns"]), ms(h["collective_ns"]))
                for h in self.hosts]
        widths = [max(len(header[i]), *(len(b[i]) for b in body)) for i in range(len(header))]
        lines.append("  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                                      for i, (h, w) in enumerate(zip(header, widths))))
        for b in body:
            lines.append("  " + "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                          for i, (v, w) in enumerate(zip(b, widths))))
        lines += ["", "Stragglers" if self.stragglers else "Stragglers: none"]
        for s in self.stragglers:
            lines.append(f"  {s['host']}: median step {ms(s['median_step_ns'])}, "
                         f"{ms(s['extra_ns'])} ({100 * s['extra_share']:.0f}%) over the median")
            for op in s["ops"]:
                lines.append(f"    op {op['key']}: +{ms(op['extra_ns'])} a step")
            for lane in s["lanes"]:
                lines.append(f"    lane {lane['lane']} ({lane['device']}): +{ms(lane['extra_ns'])} a step")
            lines.append(f"    not in any op: {ms(s['unaccounted_ns'])} a step")
        if self.skew["steps"]:
            lines += ["", f"Step skew across hosts: median {ms(self.skew['median_ns'])}, "
                          f"max {ms(self.skew['max_ns'])} (step {self.skew['max_step']}: "
                          f"{self.skew['max_first']} first, {self.skew['max_last']} last)"]
        return "\n".join(lines)

    __str__ = to_text


def host_report(parts: Sequence[HostPart], threshold: float | None = None) -> HostReport:
    """The report of hosts' summary parts (in host order); ``threshold``: a straggler's
    median step exceeds all hosts' median by more than this share (default:
    ``Thresholds.straggler``)."""
    threshold = DEFAULT.straggler if threshold is None else threshold
    starts = [p.profile_start_ns for p in parts if p.profile_start_ns]
    earliest = min(starts) if starts else None
    hosts, per_step = [], []
    for part in parts:
        summary = part.summary
        durations = [s["duration_ns"] for s in summary.steps]
        steps = max(len(durations), 1)
        collective = [r for r in summary.by_type if COLLECTIVE.search(r["key"])]
        profile_start = part.profile_start_ns
        hosts.append({
            "host": part.host, "steps": len(durations),
            "median_step_ns": int(np.median(durations)) if durations else 0,
            "max_step_ns": max(durations, default=0), "min_step_ns": min(durations, default=0),
            "step_ns": durations, "profile_start_ns": profile_start,
            "clock_offset_ns": profile_start - earliest if profile_start and earliest is not None else None,
            "collective_ns": sum(r["total_ns"] for r in collective),
            "collective_host_ns": sum(r.get("host_ns", 0) for r in collective),
            "collectives": [{"op_type": r["key"], "count": r["count"], "total_ns": r["total_ns"]}
                            for r in collective],
        })
        per_step.append(({r["key"]: r["total_ns"] / steps for r in summary.by_op},
                         {(lane.lane, lane.device): lane.time_ns / steps for lane in part.lanes}))
    medians = [h["median_step_ns"] for h in hosts if h["steps"]]
    median = int(np.median(medians)) if medians else 0
    stragglers = []
    for host, (ops, lanes) in zip(hosts, per_step):
        extra = host["median_step_ns"] - median
        if not host["steps"] or not median or extra <= threshold * median:
            continue
        op_extra = _extra(ops, [o for o, _ in per_step])
        lane_extra = _extra(lanes, [lane for _, lane in per_step])
        stragglers.append({
            "host": host["host"], "median_step_ns": host["median_step_ns"], "extra_ns": extra,
            "extra_share": extra / median,
            "ops": [{"key": key, "extra_ns": int(ns)} for key, ns in op_extra[:_TOP]],
            "lanes": [{"lane": key[0], "device": key[1], "extra_ns": int(ns)} for key, ns in lane_extra[:_TOP]],
            "unaccounted_ns": int(max(extra - sum(ns for _, ns in op_extra), 0)),
        })
    stragglers.sort(key=lambda s: -s["extra_ns"])
    return HostReport(hosts=hosts, stragglers=stragglers, skew=_skew(parts), median_step_ns=median,
                      threshold=threshold, time=parts[0].summary.time if parts else "host")


def _extra(mine: dict, everyone: list[dict]) -> list[tuple]:
    """Keys whose time per step exceeds the median host's, most first."""
    found = []
    for key, value in mine.items():
        typical = float(np.median([other.get(key, 0.0) for other in everyone]))
        if value > typical:
            found.append((key, value - typical))
    found.sort(key=lambda item: -item[1])
    return found


def _skew(parts: Sequence[HostPart]) -> dict:
    """Spread of each step's start across the hosts that ran it (hosts whose profile has
    no start time have relative times only, and are left out)."""
    starts: dict[int, list[tuple[int, str]]] = {}
    for part in parts:
        if not part.profile_start_ns:
            continue
        for step in part.summary.steps:
            starts.setdefault(step["number"], []).append((step["start_ns"], part.host))
    rows = []
    for number, found in sorted(starts.items()):
        if len(found) < 2:
            continue
        found.sort()
        rows.append({"number": number, "skew_ns": found[-1][0] - found[0][0], "first": found[0][1],
                     "last": found[-1][1]})
    if not rows:
        return {"steps": [], "median_ns": 0, "max_ns": 0}
    worst = max(rows, key=lambda r: r["skew_ns"])
    return {"steps": rows, "median_ns": int(np.median([r["skew_ns"] for r in rows])), "max_ns": worst["skew_ns"],
            "max_step": worst["number"], "max_first": worst["first"], "max_last": worst["last"]}
