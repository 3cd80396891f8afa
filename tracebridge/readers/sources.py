"""What a reader is handed: a :class:`Source`, the files read from the path given to
``load``, and how the formats are told apart (by name, else by content) and found in folders.

Every format's reader has one shape, ``read(source, parallelism) -> Trace``
(:mod:`tracebridge.formats` lists them). The sniffing here reads no more than a file's
first bytes and imports no reader, so that telling formats apart costs nothing.
"""

from __future__ import annotations

import enum
import gzip
import io
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import TraceFormatError, one_line

try:  # the optional C loops (setup.py); a plain read where they are not built
    from . import _wirec
except ImportError:
    _wirec = None


@dataclass(frozen=True)
class InputFile:
    """One file's bytes. ``host``: the host it belongs to (the XSpace files of a profile
    run are one per host), None for the host the file names itself."""

    path: str
    data: bytes
    host: str | None = None

    def take(self) -> bytes:
        """The bytes, handed over: this file holds them no longer (``data`` is None after),
        so that a reader that decodes them into columns can free them as soon as it is done
        with them (the 168 MB of a 10M-event XSpace, say), not when the read returns."""
        data = self.data
        object.__setattr__(self, "data", None)  # frozen for everything but this hand-over
        return data

    def bytes_now(self) -> bytes | None:
        """The bytes, also after a reader took them: read again from the path (an error's
        diagnosis looks at them); None where they cannot be read any more."""
        if self.data is not None:
            return self.data
        try:
            with open(self.path, "rb") as handle:
                return handle.read()
        except OSError:
            return None


@dataclass(frozen=True)
class Source:
    """The path the user gave (a file or a folder), the files read from it, and metadata
    the folder adds (``profile_run``)."""

    path: str
    files: tuple[InputFile, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def data(self) -> bytes:
        """The bytes of a single-file source."""
        (single,) = self.files
        return single.data


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb", buffering=0) as handle:
            data = _read_all(handle)
    except FileNotFoundError:
        raise TraceFormatError("no such file", path=path) from None
    except PermissionError:
        raise TraceFormatError("permission denied", path=path) from None
    except OSError as error:
        raise TraceFormatError(f"cannot read ({error.strerror or error})", path=path) from None
    if not data:
        raise TraceFormatError("empty file", path=path)
    return data


# Files from this size on are read by the C loop's read_file, into huge pages: a 48 MB
# profile then takes some 20 page faults where a plain read takes 12,000 (twice the time).
_HUGE_READ_MIN = 8 << 20


def _read_all(handle) -> bytes:
    """The whole of an open file (unbuffered), whatever it grew to since it was opened."""
    size = os.fstat(handle.fileno()).st_size
    if _wirec is None or size < _HUGE_READ_MIN:
        return handle.read()
    data = _wirec.read_file(handle.fileno(), size)
    rest = handle.read() if len(data) == size else b""  # it grew while read
    return data + rest if rest else data


def utf8(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"not UTF-8 text ({error.reason})", path=path,
                               where=f"byte {error.start}") from None


# Chrome traces compress 10-15x (TF's timeline.json files), 45x at most for tracebridge's
# own output of a trace of identical ops; deflate cannot exceed ~1030x. A file that
# inflates beyond this ratio (plus a little, for tiny files) is a gzip bomb, not a trace.
GZIP_MAX_RATIO = 256
_GZIP_SLACK = 1 << 20


def is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def gunzip(data: bytes, path: str) -> bytes:
    """All members of a gzip file, inflated a megabyte at a time up to the ratio limit."""
    limit = GZIP_MAX_RATIO * len(data) + _GZIP_SLACK
    chunks, total = [], 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while total <= limit:
                chunk = stream.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
    except (OSError, EOFError, zlib.error) as error:
        raise TraceFormatError(f"corrupt gzip data ({one_line(str(error))})", path=path) from None
    if total > limit:
        raise TraceFormatError(f"gzip data inflates more than {GZIP_MAX_RATIO}x its size, as gzip bombs "
                               "do; gunzip it to read it anyway", path=path)
    return b"".join(chunks)


# --- telling formats apart ---------------------------------------------------------------------
class Evidence(enum.IntEnum):
    """How sure a format's sniffer is that a file is in its format: the name (or a magic
    number) beats the look of the content; among equals, the format table's order decides."""

    NONE = 0
    CONTENT = 1
    NAME = 2


def sniff_chrome(name: str, data: bytes) -> Evidence:
    if is_gzip(data) or name.endswith((".json", ".json.gz")):
        return Evidence.NAME
    # By content only for text: a binary RunMetadata starts with step_stats' tag (0x0a, a
    # newline) and its length, which is "{" or "[" for a 123- or 91-byte StepStats, so a
    # ".pb" is never sniffed as JSON and a JSON head holds no control bytes but whitespace.
    head = data[:64]
    if name.endswith(".pb") or any(byte < 0x20 and byte not in b"\t\n\r" for byte in head):
        return Evidence.NONE
    return Evidence.CONTENT if head.lstrip()[:1] in (b"{", b"[") else Evidence.NONE


def sniff_xspace(name: str, data: bytes) -> Evidence:
    return Evidence.NAME if name.endswith(".xplane.pb") else Evidence.NONE


def sniff_perfetto(name: str, data: bytes) -> Evidence:
    # By name only: a Perfetto trace starts with field 1, length-delimited, as a RunMetadata does.
    return Evidence.NAME if name.endswith((".pftrace", ".perfetto-trace")) else Evidence.NONE


def sniff_events(name: str, data: bytes) -> Evidence:
    return Evidence.NAME if "tfevents" in os.path.basename(name) else Evidence.NONE


def sniff_pickle(name: str, data: bytes) -> Evidence:
    # Protocol 2+ starts with \x80; protocols 0/1 with "(" or "c" (GLOBAL) and are not
    # mistaken for text dumps, which start with a field name.
    if data[:1] in (b"\x80", b"(", b"c") and not looks_like_text(data):
        return Evidence.CONTENT
    return Evidence.NONE


def sniff_pbtxt(name: str, data: bytes) -> Evidence:
    return Evidence.CONTENT if looks_like_text(data) else Evidence.NONE


def looks_like_text(data: bytes) -> bool:
    head = data[:256].lstrip()
    return head.startswith((b"step_stats", b"dev_stats", b"partition_graphs", b"cost_graph",
                            b"function_graphs", b"#"))


# --- folders -----------------------------------------------------------------------------------
def find_profile_run(folder: str, run: str | None) -> Source | None:
    """All hosts' XSpace files of one run of a TF2 profile logdir (the newest unless ``run``
    names one), or of a run folder itself; None when ``folder`` is neither."""
    found = profile_run_hosts(folder, run)
    if found is None:
        return None
    run_folder, hosts = found
    return Source(folder, tuple(InputFile(path, read_file(path), host if len(hosts) > 1 else None)
                                for host, path in hosts),
                  {"profile_run": os.path.basename(run_folder)})


def profile_run_hosts(folder: str, run: str | None) -> tuple[str, list[tuple[str, str]]] | None:
    """``(run folder, [(host, path), ...])`` of one run of a TF2 profile logdir (see
    :func:`find_profile_run`), without reading the files; None when ``folder`` is neither."""
    profile_root = os.path.join(folder, "plugins", "profile")
    if not os.path.isdir(profile_root) and os.path.basename(os.path.normpath(folder)) == "profile":
        profile_root = folder
    if not (os.path.isdir(profile_root) or _xplanes(folder)):
        return None
    run_folder = folder if _xplanes(folder) else None
    if run_folder is None:
        runs = _runs(profile_root)
        if not runs:
            raise TraceFormatError("profile logdir has no runs with .xplane.pb files", path=folder)
        if run is not None and run not in runs:
            raise TraceFormatError(f"no run {run!r} (runs: {', '.join(runs)})", path=folder)
        run_folder = os.path.join(profile_root, run or runs[-1])
    return run_folder, [(f[:-len(".xplane.pb")], os.path.join(run_folder, f)) for f in _xplanes(run_folder)]


def find_event_files(folder: str, run: str | None) -> Source | None:
    """The event files of a folder, in name order; None when it has none."""
    names = sorted(f for f in os.listdir(folder) if "tfevents" in f)
    if not names:
        return None
    return Source(folder, tuple(InputFile(path, read_file(path))
                                for path in (os.path.join(folder, f) for f in names)))


def profile_runs(logdir: str | os.PathLike) -> list[str]:
    """Run folders of a TF2 profile logdir, oldest first (their names are timestamps)."""
    root = os.path.join(os.fspath(logdir), "plugins", "profile")
    return _runs(root) if os.path.isdir(root) else []


def _runs(profile_root: str) -> list[str]:
    return sorted(d for d in os.listdir(profile_root) if _xplanes(os.path.join(profile_root, d)))


def _xplanes(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".xplane.pb")) if os.path.isdir(folder) else []
