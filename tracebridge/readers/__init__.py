"""``load(path)``: every trace format tracebridge reads, told apart by content.

No reader imports TensorFlow; each turns a malformed file into one
:class:`~tracebridge.errors.TraceFormatError` that names the file and the place.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib

from ..errors import TraceFormatError
from ..model.trace import Trace

FORMATS = ("runmetadata", "pbtxt", "pickle", "events", "chrome", "xspace")


def load(path: str | os.PathLike, *, format: str | None = None, run: str | None = None) -> Trace:
    """Read a trace file or folder into a :class:`Trace`.

    Formats, sniffed from the content unless ``format`` is given: binary RunMetadata or
    StepStats (``.pb``), their text dumps (``.pbtxt``), tfvis pickles of RunMetadata,
    TensorBoard event files with ``tagged_run_metadata``, Chrome trace JSON
    (``.json``/``.json.gz``) and XSpace (``.xplane.pb``). Folders: a TF2 profile logdir
    (``plugins/profile/<run>/<host>.xplane.pb``; the newest run unless ``run`` names one,
    all hosts merged) or a folder of event files. Raises :class:`TraceFormatError`.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return _load_directory(name, run)
    data = _read(name)
    kind = format or sniff(name, data)
    if kind == "xspace":
        from .xspace import read_xspace_files
        return read_xspace_files([(name, data, None)])
    if kind == "chrome":
        return _load_chrome(name, data)
    if kind == "events":
        from .events import read_event_files
        return read_event_files([(name, data)])
    if kind == "pickle":
        from .pickles import read_pickle
        from .stepstats import read_run_metadatas
        messages = read_pickle(data, name)
        return read_run_metadatas([(i, "", blob) for i, (_, blob) in enumerate(messages)],
                                  {"source_format": "pickle"}, path=name)
    from .stepstats import read_run_metadatas, text_to_bytes
    if kind == "pbtxt":
        text = _utf8(data, name)
        return read_run_metadatas([(0, "", text_to_bytes(text, name))], {"source_format": "pbtxt"},
                                  path=name)
    if kind == "runmetadata":
        return read_run_metadatas([(0, "", data)], {"source_format": "runmetadata"}, path=name)
    raise TraceFormatError(f"unknown format {kind!r} (one of {', '.join(FORMATS)})", path=name)


def sniff(name: str, data: bytes) -> str:
    """The format of ``data`` (see :data:`FORMATS`)."""
    if data[:2] == b"\x1f\x8b" or name.endswith(".json") or name.endswith(".json.gz"):
        return "chrome"
    if name.endswith(".xplane.pb"):
        return "xspace"
    if "tfevents" in os.path.basename(name):
        return "events"
    head = data[:64].lstrip()
    if head[:1] in (b"{", b"["):
        return "chrome"
    if data[:1] == b"\x80" or name.endswith((".pickle", ".pkl")) or data[:1] in (b"(", b"c"):
        # Protocol 2+ starts with \x80; protocols 0/1 with "(" or "c" (GLOBAL) and are
        # not mistaken for text dumps, which start with a field name.
        if data[:1] in (b"\x80", b"(", b"c") and not _looks_like_text(data):
            return "pickle"
    if _looks_like_text(data):
        return "pbtxt"
    return "runmetadata"


def one_line(text: str, limit: int = 300) -> str:
    """Foreign text (a parser's message quoting the input, a name from the file) made fit
    for a one-line error: characters that are not printable (newlines, U+2028, NUL...)
    escaped, and cut at ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _looks_like_text(data: bytes) -> bool:
    head = data[:256].lstrip()
    return head.startswith((b"step_stats", b"dev_stats", b"partition_graphs", b"cost_graph",
                            b"function_graphs", b"#"))


def _read(name: str) -> bytes:
    try:
        with open(name, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise TraceFormatError("no such file", path=name) from None
    except PermissionError:
        raise TraceFormatError("permission denied", path=name) from None
    except OSError as error:
        raise TraceFormatError(f"cannot read ({error.strerror or error})", path=name) from None
    if not data:
        raise TraceFormatError("empty file", path=name)
    return data


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"not UTF-8 text ({error.reason})", path=name,
                               where=f"byte {error.start}") from None


def _load_chrome(name: str, data: bytes) -> Trace:
    from .chrome import parse_json, read_chrome
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
    return read_chrome(parse_json(data, name), name)


# Chrome traces compress 10-15x (TF's timeline.json files), 45x at most for tracebridge's
# own output of a trace of identical ops; deflate cannot exceed ~1030x. A file that
# inflates beyond this ratio (plus a little, for tiny files) is a gzip bomb, not a trace.
GZIP_MAX_RATIO = 256
_GZIP_SLACK = 1 << 20


def _gunzip(data: bytes, name: str) -> bytes:
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
        raise TraceFormatError(f"corrupt gzip data ({one_line(str(error))})", path=name) from None
    if total > limit:
        raise TraceFormatError(f"gzip data inflates more than {GZIP_MAX_RATIO}x its size, as gzip bombs "
                               "do; gunzip it to read it anyway", path=name)
    return b"".join(chunks)


def _load_directory(name: str, run: str | None = None) -> Trace:
    profile_root = os.path.join(name, "plugins", "profile")
    if not os.path.isdir(profile_root) and os.path.basename(os.path.normpath(name)) == "profile":
        profile_root = name
    if os.path.isdir(profile_root) or _xplanes(name):
        return _load_profile(name, profile_root, run)
    event_files = sorted(f for f in os.listdir(name) if "tfevents" in f)
    if not event_files:
        raise TraceFormatError("is a directory without event files or plugins/profile runs "
                               "(give a trace file or a profile logdir)", path=name)
    from .events import read_event_files
    return read_event_files([(os.path.join(name, f), _read(os.path.join(name, f))) for f in event_files],
                            path=name)


def profile_runs(logdir: str | os.PathLike) -> list[str]:
    """Run folders of a TF2 profile logdir, oldest first (their names are timestamps)."""
    root = os.path.join(os.fspath(logdir), "plugins", "profile")
    if not os.path.isdir(root):
        return []
    return sorted(d for d in os.listdir(root) if _xplanes(os.path.join(root, d)))


def _xplanes(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".xplane.pb")) if os.path.isdir(folder) else []


def _load_profile(name: str, profile_root: str, run: str | None) -> Trace:
    """All hosts of one run of a profile logdir (or a run folder itself), merged."""
    from .xspace import read_xspace_files
    folder = name if _xplanes(name) else None
    if folder is None:
        runs = sorted(d for d in os.listdir(profile_root) if _xplanes(os.path.join(profile_root, d)))
        if not runs:
            raise TraceFormatError("profile logdir has no runs with .xplane.pb files", path=name)
        if run is not None and run not in runs:
            raise TraceFormatError(f"no run {run!r} (runs: {', '.join(runs)})", path=name)
        folder = os.path.join(profile_root, run or runs[-1])
    files = _xplanes(folder)
    hosts = [f[:-len(".xplane.pb")] for f in files]
    return read_xspace_files([(os.path.join(folder, f), _read(os.path.join(folder, f)),
                               host if len(files) > 1 else None) for f, host in zip(files, hosts)],
                             {"profile_run": os.path.basename(folder)})
