"""Writers: the model out to Chrome traces and RunMetadata (binary and text).

``save(trace, path)`` picks the writer from the file name."""

from __future__ import annotations

import os
from typing import Any

from .._files import atomic_output, write_bytes
from ..errors import OutputError
from ..model.trace import Trace

TARGETS = ("chrome", "runmetadata", "pbtxt", "xspace", "html")


def target_for(path: str | os.PathLike) -> str:
    """``chrome`` for .json/.json.gz, ``pbtxt`` for .pbtxt/.txt, ``xspace`` for .xplane.pb,
    ``runmetadata`` for .pb."""
    name = os.fspath(path).lower()
    if name.endswith((".json", ".json.gz")):
        return "chrome"
    if name.endswith(".xplane.pb"):
        return "xspace"
    if name.endswith((".html", ".htm")):
        return "html"
    if name.endswith((".pbtxt", ".txt")):
        return "pbtxt"
    if name.endswith(".pb"):
        return "runmetadata"
    raise OutputError(f"{os.fspath(path)}: cannot tell the output format from the name "
                      "(use .json, .json.gz, .pb, .pbtxt, .xplane.pb or .html, or choose one with --to)")


def save(trace: Trace, path: str | os.PathLike, *, to: str | None = None, **options: Any) -> None:
    """Write ``trace`` to ``path`` in the format ``to`` or the one its suffix names.
    Chrome options: ``dataflow`` (default True), ``memory`` (default False), ``progress``."""
    target = to or target_for(path)
    if target == "chrome":
        from .chrome import write_chrome
        write_chrome(trace, path, **options)
    elif target == "runmetadata":
        write_bytes(path, trace.to_run_metadata().SerializeToString(deterministic=True))
    elif target == "html":
        from .html import write_html
        write_html(trace, path, **{k: v for k, v in options.items() if k in ("device_pattern", "title")})
    elif target == "xspace":
        from .tensorboard import to_xspace
        write_bytes(path, to_xspace(trace, str(trace.metadata.get("host") or "")).SerializeToString(deterministic=True))
    elif target == "pbtxt":
        with atomic_output(path, compress=False) as out:
            out.write(str(trace.to_run_metadata()).encode("utf-8"))
    else:
        raise OutputError(f"unknown output format {target!r} (one of {', '.join(TARGETS)})")
