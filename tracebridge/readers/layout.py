"""Where a profile's files are, against where TensorBoard and xprof look for them.

TensorBoard's profile plugin and xprof read ``LOGDIR/plugins/profile/<run>/<host>.xplane.pb``
and nothing else: a file one folder too high or too deep, a run folder without host files,
or the ``.trace``/``.pb.gz`` files older plugins wrote give "No profile data was found".
These checks look at names and sizes only; they read no trace. Their findings are plain
dicts (``code``, ``missing``, ``evidence``, ``fix``), turned into problems by
:mod:`tracebridge.diagnosis` (readers produce data; the analysis layer judges it).
"""

from __future__ import annotations

import os

from .. import protos
from ..errors import TraceFormatError

XPLANE = ".xplane.pb"
EXPECTED = "LOGDIR/plugins/profile/<run>/<host>.xplane.pb"
# Files older profile plugins (TF 2.0-2.1) and converters wrote where .xplane.pb belongs now.
OLD_SUFFIXES = (".trace", ".pb.gz", ".trace.json.gz", ".tracetable", ".overview_page.pb", ".input_pipeline.pb")
PROFILE_MARKER = ".profile-empty"  # the event file tf.profiler writes beside plugins/profile
_SEARCH_DEPTH = 6


def finding(code: str, missing: str, evidence: str, fix: str) -> dict:
    return {"code": code, "missing": missing, "evidence": evidence, "fix": fix}


def folder_findings(folder: str) -> tuple[list[dict], bool]:
    """Layout problems of a logdir, run folder or other folder, and whether tracebridge can
    still read a profile from it (False: the findings say why not)."""
    found: list[dict] = []
    profile_root = os.path.join(folder, "plugins", "profile")
    here = _files(folder)
    if any(f.endswith(XPLANE) for f in here):  # a run folder itself
        return found, True
    runs = sorted(d for d in _dirs(profile_root)) if os.path.isdir(profile_root) else []
    good = [r for r in runs if any(f.endswith(XPLANE) for f in _files(os.path.join(profile_root, r)))]
    for run in runs:
        if run in good:
            continue
        files = _files(os.path.join(profile_root, run))
        old = [f for f in files if f.endswith(OLD_SUFFIXES)]
        if old:
            found.append(finding("layout", f"run {run} has only files older profile plugins wrote",
                                 f"plugins/profile/{run}/: {', '.join(old[:4])}; no {XPLANE}",
                                 "current TensorBoard/xprof read only .xplane.pb: capture again with TF 2.3 or "
                                 "later (tf.profiler.experimental.start(logdir) ... stop())"))
        else:
            found.append(finding("layout", f"run folder {run} holds no host files",
                                 f"plugins/profile/{run}/ has {len(files)} files, no {XPLANE}",
                                 "the capture wrote nothing there (stopped before it saved, or saved elsewhere): "
                                 "capture again, and make sure stop() returns without an error"))
    if good:
        return found, True
    if os.path.isdir(profile_root):
        high = [f for f in _files(profile_root) if f.endswith(XPLANE)]
        if high:
            found.append(finding("layout", "the .xplane.pb is one folder too high",
                                 f"plugins/profile/{high[0]} is not in a run folder; expected {EXPECTED}",
                                 f"move it into a run folder: plugins/profile/2024_01_01_00_00_00/{high[0]}"))
    if not found:
        deeper = _find_xplanes(folder)
        if deeper:
            rel = os.path.relpath(deeper[0], folder)
            found.append(finding("layout", f"the .xplane.pb is not where TensorBoard looks under {folder}",
                                 f"found {rel} ({len(deeper)} in all); expected {EXPECTED}",
                                 _move_fix(folder, deeper[0])))
    markers = [f for f in here if f.endswith(PROFILE_MARKER)]
    if markers and not os.path.isdir(profile_root):
        found.append(finding("layout", "an event file without plugins/profile beside it",
                             f"{markers[0]} is the profiler's marker, but {folder} has no plugins/profile",
                             "the profile itself was not saved here: copy the whole logdir, including "
                             "plugins/profile/<run>/, or capture again"))
    old = [f for f in here if f.endswith(OLD_SUFFIXES)]
    if old and not found:
        found.append(finding("layout", "only files older profile plugins wrote",
                             f"{', '.join(old[:4])}; no {XPLANE}",
                             "current TensorBoard/xprof read only .xplane.pb: capture again with TF 2.3 or later"))
    events = [f for f in here if "tfevents" in f and not f.endswith(PROFILE_MARKER)]
    if not found and not events:
        found.append(finding("layout", f"no profile under {folder}",
                             f"no {XPLANE}, event file or trace file within {_SEARCH_DEPTH} folders",
                             f"give a trace file, or a logdir laid out as {EXPECTED}"))
    return found, bool(events) and not found


# A RunMetadata that session.run filled with nothing (run_metadata= without a trace_level)
# serializes to 0 bytes, as binary and as text: the one trace file TF writes empty.
_RUN_METADATA_SUFFIXES = (".pb", ".pbtxt", ".txt")


def file_findings(path: str) -> list[dict]:
    """Problems a file shows by itself before it is read: an empty file (an empty RunMetadata
    is a capture's mistake; any other trace file is never written empty), or the profiler's
    marker event file given for the profile."""
    if not os.path.isfile(path):
        return []
    if path.endswith(PROFILE_MARKER):
        return [_marker_finding(path)]
    if os.path.getsize(path) == 0:
        name = os.path.basename(path)
        if path.endswith(_RUN_METADATA_SUFFIXES) and not path.endswith(XPLANE):
            return [finding("no_trace_level", "an empty RunMetadata: session.run traced nothing",
                            f"{name} is 0 bytes (a RunMetadata with no step_stats serializes to nothing)",
                            _TRACE_LEVEL_FIX)]
        return [finding("layout", "an empty file", f"{name} is 0 bytes: nothing was written to it",
                        "no writer leaves this file empty: the program that wrote it stopped before it "
                        "saved, or the file was cut short when copied; write or copy it again")]
    return []


def _marker_finding(path: str) -> dict:
    """The ``.profile-empty`` event file tf.profiler writes into the logdir's root: a marker
    for TensorBoard, with no profile in it; the profile is under plugins/profile/<run>/."""
    name, logdir = os.path.basename(path), os.path.dirname(os.path.abspath(path))
    profile_root = os.path.join(logdir, "plugins", "profile")
    if os.path.isdir(profile_root):
        runs = sorted(_dirs(profile_root))
        return finding("layout", "the profiler's marker file, not the profile",
                       f"{name} is the event file tf.profiler writes into the logdir; the profile lives under "
                       f"plugins/profile/<run>/ beside it (runs: {', '.join(runs[:3]) or 'none'})",
                       f"give the logdir instead: tracebridge doctor {logdir} (tensorboard --logdir {logdir})")
    return finding("layout", "the profiler's marker file, and no profile beside it",
                   f"{name} is the event file tf.profiler writes into the logdir, but {logdir} has "
                   "no plugins/profile",
                   f"the profile itself was not saved here ({EXPECTED}): copy the whole logdir, including "
                   "plugins/profile/<run>/, or capture again")


_TRACE_LEVEL_FIX = ("pass options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE) with "
                    "run_metadata=... to session.run (SOFTWARE_TRACE also works locally; on a grpc:// "
                    "cluster only FULL_TRACE records)")


def unreadable_finding(path: str, error: TraceFormatError) -> dict | None:
    """The problem behind a read error that a capture causes (not a damaged file), or None."""
    if "holds no step stats" in error.reason:
        what = _run_metadata_fields(path)
        return finding("no_trace_level", "a RunMetadata without step_stats: session.run traced nothing",
                       f"{os.path.basename(path)} holds {what or 'no fields'}, no step_stats", _TRACE_LEVEL_FIX)
    if "holds no planes with events" in error.reason:
        return finding("empty_window", "the profiling window recorded no events",
                       f"{os.path.basename(error.path or path)}: {_plane_counts(error.path or path)}",
                       "start the profiler before the training steps and stop it after them "
                       "(tf.profiler.experimental.start/stop around the loop; Keras: "
                       "TensorBoard(profile_batch=(first, last)) within the batches of one epoch)")
    return None


def _run_metadata_fields(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            message = protos.RunMetadata.FromString(handle.read())
    except Exception:  # not a RunMetadata after all: say nothing of its fields
        return ""
    return ", ".join(f"{len(value)} {d.name}" if d.is_repeated else d.name for d, value in message.ListFields())


def _plane_counts(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            space = protos.XSpace.FromString(handle.read())
    except Exception:
        return "no events"
    planes = [f"{p.name} {sum(len(line.events) for line in p.lines)} events" for p in space.planes
              if p.name != "Task Environment"]
    return "; ".join(planes) or "no planes"


def _move_fix(folder: str, path: str) -> str:
    parent = os.path.dirname(path)
    if os.path.basename(os.path.dirname(parent)) == "profile" and \
            os.path.basename(os.path.dirname(os.path.dirname(parent))) == "plugins":
        logdir = os.path.dirname(os.path.dirname(os.path.dirname(parent)))
        return f"point TensorBoard and tracebridge at {logdir} (tensorboard --logdir {logdir})"
    return f"move it to {folder}/plugins/profile/<run>/{os.path.basename(path)}"


def _find_xplanes(folder: str) -> list[str]:
    found = []
    base = folder.rstrip(os.sep).count(os.sep)
    for root, dirs, files in os.walk(folder):
        if root.count(os.sep) - base >= _SEARCH_DEPTH:
            dirs[:] = []
        found += sorted(os.path.join(root, f) for f in files if f.endswith(XPLANE))
        dirs.sort()
    return found


def _files(folder: str) -> list[str]:
    try:
        return sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))
    except OSError:
        return []


def _dirs(folder: str) -> list[str]:
    try:
        return [d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))]
    except OSError:
        return []
