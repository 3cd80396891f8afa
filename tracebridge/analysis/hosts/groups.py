"""Two multi-host runs compared host group by host group.

A TF1 ps/worker run has one trace per task; a TF2 MultiWorkerMirroredStrategy or TPU run
one XSpace per host. Hosts fall into groups by name (``worker-3`` and ``worker-12`` are
``worker``; ``ps0`` is ``ps``); groups of the same name are compared with
:func:`tracebridge.analysis.compare.compare`, each group's hosts merged into one trace
(memory: one group of one run at a time, not every host). Where each run has one group
only, those two are compared whatever their names (a TF1 ``worker`` group against TF2
hosts named by address). Groups are compared one after the other, or on Dask like the
per-host summaries (:func:`.map_hosts`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..common.tables import csv_text
from ..common.types import PerSide
from ..compare.result import ROW_COLUMNS, row_cells
from .engine import HostInput, HostLoader, map_hosts

_TASK_NUMBER = re.compile(r"[-_.:]*\d+$")


def host_group(host: str) -> str:
    """A host's group: its name less a trailing task or port number (``worker-3`` ->
    ``worker``); a name that is all number (an address) is its own group's name."""
    group = _TASK_NUMBER.sub("", host)
    return group or host


def grouped(files: Sequence[HostInput]) -> dict[str, list[HostInput]]:
    groups: dict[str, list[HostInput]] = {}
    for file in files:
        groups.setdefault(host_group(file.host), []).append(file)
    return groups


@dataclass(frozen=True)
class GroupComparison:
    """Per matched group pair: the comparison (as ``Comparison.to_dict``) and its text."""

    pairs: list[dict]
    unmatched: PerSide[list[str]] = field(default_factory=lambda: PerSide([], []))  # groups without a counterpart

    def to_dict(self) -> dict:
        return {"groups": [{k: v for k, v in pair.items() if k != "text"} for pair in self.pairs],
                "unmatched_groups": self.unmatched.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        """Every group pair's aligned rows, each led by its pair's group names."""
        return csv_text(("control_group", "test_group", *ROW_COLUMNS),
                        ([pair["control_group"], pair["test_group"], *row_cells(row)]
                         for pair in self.pairs for row in pair["comparison"]["rows"]))

    def to_text(self) -> str:
        lines = []
        for pair in self.pairs:
            lines += [f"== group {pair['control_group']} ({len(pair['control_hosts'])} hosts) vs "
                      f"{pair['test_group']} ({len(pair['test_hosts'])} hosts)", pair["text"], ""]
        for side, names in self.unmatched.items():
            if names:
                lines.append(f"{side} groups without a counterpart: {', '.join(names)}")
        return "\n".join(lines).rstrip()


def compare_host_groups(control: Sequence[HostInput], test: Sequence[HostInput], *, load: HostLoader,
                        workers: int | None = None, scheduler: str | None = None, top: int = 25,
                        **options) -> GroupComparison:
    """Compare the groups of ``control`` and ``test`` (see the module's doc), each host
    read by ``load`` where its group is compared; ``options`` go to
    :func:`~tracebridge.analysis.compare.compare`."""
    left, right = grouped(control), grouped(test)
    if len(left) == 1 and len(right) == 1:
        matched = [(next(iter(left)), next(iter(right)))]
    else:
        matched = [(name, name) for name in left if name in right]
    jobs = [(a, left[a], b, right[b]) for a, b in matched]
    pairs = map_hosts(functools.partial(_compare_group, load=load, top=top, options=options), jobs, workers=workers,
                      scheduler=scheduler)
    paired_left, paired_right = {a for a, _ in matched}, {b for _, b in matched}
    return GroupComparison(pairs=pairs, unmatched=PerSide([g for g in left if g not in paired_left],
                                                          [g for g in right if g not in paired_right]))


def _compare_group(job, *, load: HostLoader, top: int, options: dict) -> dict:
    """One group pair, compared where it runs; only plain data goes back."""
    from ...model.merge import merge_traces
    from ..compare import compare
    from ..findings import comparison_findings
    control_group, control_files, test_group, test_files = job
    traces = []
    for files in (control_files, test_files):
        loaded = [load(file) for file in files]
        traces.append(loaded[0] if len(loaded) == 1 else merge_traces(loaded))
        del loaded
    comparison = compare(traces[0], traces[1], find=comparison_findings, **options)
    return {"control_group": control_group, "test_group": test_group,
            "control_hosts": [f.host for f in control_files], "test_hosts": [f.host for f in test_files],
            "comparison": comparison.to_dict(), "text": comparison.to_text(top=top)}
