"""``advise`` on a multi-host profile, host by host.

Each host's findings are computed where the host is read (:func:`.engine.map_hosts`: in
this process or on Dask), from that host's trace alone, so no process holds more than one
host. A finding is about one host's steps (its share is of that host's step time), so
findings are not summed across hosts: the result lists each host's findings, and ranks
every (host, finding) pair by share so the worst host's worst problem comes first.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..common.tables import csv_text
from ..common.thresholds import DEFAULT, Thresholds
from ..findings.evidence import FINDING_COLUMNS, finding_row
from .engine import HostInput, HostLoader, map_hosts


@dataclass(frozen=True)
class HostFindings:
    """``hosts``: ``[{"host": name, "findings": [finding dicts]}]`` in host order."""

    hosts: list[dict]
    thresholds: Thresholds = DEFAULT

    def ranked(self) -> list[dict]:
        """Every host's findings in one list, largest share first, each naming its host."""
        every = [{"host": host["host"], **finding} for host in self.hosts for finding in host["findings"]]
        return sorted(every, key=lambda f: (-f["share"], f["host"], f["kind"]))

    def to_dict(self) -> dict:
        return {"by_host": self.hosts, "ranked": self.ranked(), "thresholds": self.thresholds.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        """One row per finding, host by host as the text lists them, the host first."""
        return csv_text(("host", *FINDING_COLUMNS),
                        ([host["host"], *finding_row(f)] for host in self.hosts for f in host["findings"]))

    def to_text(self) -> str:
        lines = []
        for host in self.hosts:
            lines.append(f"== {host['host']}")
            lines.append(host["text"])
        return "\n".join(lines)


def advise_hosts(files: Sequence[HostInput], *, load: HostLoader, warmup: int | None = None,
                 thresholds: Thresholds = DEFAULT, workers: int | None = None,
                 scheduler: str | None = None, progress: bool = False) -> HostFindings:
    """:func:`.findings.advise` on each host of ``files`` (see
    :func:`tracebridge.readers.host_files.host_files`), read by ``load`` where it runs."""
    parts = map_hosts(functools.partial(_host_findings, load=load, warmup=warmup, thresholds=thresholds), files,
                      workers=workers, scheduler=scheduler, progress=progress)
    return HostFindings(parts, thresholds)


def _host_findings(file: HostInput, *, load: HostLoader, warmup: int | None, thresholds: Thresholds) -> dict:
    """One host's findings, as plain data (what goes back from a Dask worker)."""
    from ..findings.kinds import advise
    findings = advise(load(file), warmup=warmup, thresholds=thresholds)
    return {"host": file.host, "findings": [f.to_dict() for f in findings], "notes": findings.notes,
            "text": findings.to_text()}
