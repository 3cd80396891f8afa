"""``tracebridge.doctor(path_or_trace)``: why a profile is empty, or lacks time, memory,
steps or devices, and what to change.

A path is looked at first as files (:mod:`tracebridge.readers.layout`: the layout
TensorBoard expects, an empty file, the profiler's marker event file given for its profile),
then read and checked as a trace
(:mod:`tracebridge.analysis.run.doctor`). Several ``.xplane.pb`` files are one profile of
several hosts; other inputs are checked one by one. A damaged file is not a finding: it
raises :class:`~tracebridge.errors.TraceFormatError`, as ``load`` does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .analysis.common.thresholds import DEFAULT, Thresholds
from .analysis.run.doctor import CODES, Diagnosis, Problem, diagnose
from .errors import TraceFormatError
from .model.trace import Trace
from .readers import layout

__all__ = ["CODES", "Diagnosis", "Problem", "doctor"]


def doctor(target: Trace | str | os.PathLike | Sequence[str | os.PathLike], *, run: str | None = None,
           thresholds: Thresholds = DEFAULT) -> Diagnosis:
    """The problems of a trace, a trace file, a run folder, a profile logdir (``run``:
    which run; the newest by default), or a list of them (``.xplane.pb`` files: one host
    each), most serious first. ``Diagnosis.ok`` when nothing is wrong (warnings aside);
    ``thresholds``: the steps timing findings need (``min_steps``: ``few_steps``)."""
    if isinstance(target, Trace):
        return diagnose(target, thresholds=thresholds)
    paths = [os.fspath(target)] if isinstance(target, (str, os.PathLike)) else [os.fspath(p) for p in target]
    if not paths:
        raise TraceFormatError("nothing to check: give a trace file, a run folder or a logdir")
    if len(paths) > 1 and all(p.endswith(layout.XPLANE) and os.path.isfile(p) for p in paths):
        return _hosts(paths, thresholds)
    result = Diagnosis()
    for path in paths:
        result.add(_one(path, run, thresholds))
    return result


def _one(path: str, run: str | None, thresholds: Thresholds) -> Diagnosis:
    from .formats import load
    result = Diagnosis()
    if os.path.isdir(path):
        findings, readable = layout.folder_findings(path)
        result.add(_from_findings(findings, path))
        if not readable:
            return result
    elif not os.path.exists(path):
        raise TraceFormatError("no such file", path=path)
    else:
        findings = layout.file_findings(path)
        if findings:
            result.add(_from_findings(findings, path))
            return result
    try:
        trace = load(path, run=run)
    except TraceFormatError as error:
        found = layout.unreadable_finding(path, error)
        if found is None:
            raise
        result.add(_from_findings([found], path))
        return result
    result.add(diagnose(trace, path, thresholds))
    return result


def _hosts(paths: list[str], thresholds: Thresholds) -> Diagnosis:
    from .readers.host_files import host_files
    from .readers.sources import read_file
    from .readers.xspace import read_xspace_files
    result = Diagnosis()
    for path in paths:  # an empty host file says so by itself, before the hosts are read together
        result.add(_from_findings(layout.file_findings(path), path))
    if result.problems:
        return result
    files = host_files(paths)
    try:
        trace = read_xspace_files([(f.path, read_file(f.path), f.host) for f in files])
    except TraceFormatError as error:
        found = layout.unreadable_finding(error.path or paths[0], error)
        if found is None:
            raise
        return _from_findings([found], error.path or paths[0])
    return diagnose(trace, ", ".join(f.host for f in files), thresholds)


def _from_findings(findings: list[dict], path: str) -> Diagnosis:
    result = Diagnosis([Problem(**f, path=path) for f in findings])
    result.sort()
    return result
