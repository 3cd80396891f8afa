"""``load(path)``: every trace format tracebridge reads, told apart by content.

No reader imports TensorFlow; each turns a malformed file into one
:class:`~tracebridge.errors.TraceFormatError` that names the file and the place.
"""

from __future__ import annotations

import gzip
import os
import zlib

from ..errors import TraceFormatError
from ..model.trace import Trace

FORMATS = ("runmetadata", "pbtxt", "pickle", "events", "chrome")


def load(path: str | os.PathLike, *, format: str | None = None) -> Trace:
    """Read a trace file (or a directory of event files) into a :class:`Trace`.

    Formats, sniffed from the content unless ``format`` is given: binary RunMetadata or
    StepStats (``.pb``), their text dumps (``.pbtxt``), tfvis pickles of RunMetadata,
    TensorBoard event files with ``tagged_run_metadata``, and Chrome trace JSON
    (``.json``/``.json.gz``). Raises :class:`TraceFormatError` for anything else.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return _load_directory(name)
    data = _read(name)
    kind = format or sniff(name, data)
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
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise TraceFormatError(f"corrupt gzip data ({error})", path=name) from None
    return read_chrome(parse_json(data, name), name)


def _load_directory(name: str) -> Trace:
    event_files = sorted(f for f in os.listdir(name) if "tfevents" in f)
    if not event_files:
        raise TraceFormatError("is a directory without event files (give a trace file)", path=name)
    from .events import read_event_files
    return read_event_files([(os.path.join(name, f), _read(os.path.join(name, f))) for f in event_files],
                            path=name)
