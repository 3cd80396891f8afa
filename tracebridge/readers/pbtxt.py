"""Text dumps of RunMetadata or StepStats (``str(run_metadata)``, ``.pbtxt``) into the model.

protobuf's text format parses them into tracebridge's own schema; the binary message then
takes the one binary path (:mod:`.stepstats`).
"""

from __future__ import annotations

from google.protobuf import text_format

from .. import protos
from ..errors import TraceFormatError, one_line
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source, utf8
from .stepstats import read_run_metadatas


def read(source: Source, parallelism: Parallelism) -> Trace:
    binary = text_to_bytes(utf8(source.data, source.path), source.path)
    return read_run_metadatas([(0, "", binary)], {"source_format": "pbtxt"}, path=source.path,
                              parallelism=parallelism)


def text_to_bytes(text: str, path=None) -> bytes:
    """``str(run_metadata)`` or ``str(step_stats)`` dumps, as binary RunMetadata."""
    head = text.lstrip()[:64]
    target = protos.StepStats() if head.startswith("dev_stats") else protos.RunMetadata()
    try:
        # Unknown fields (graph attrs, cost graphs) are skipped; what tracebridge uses is defined.
        text_format.Parse(text, target, allow_unknown_field=True)
    except text_format.ParseError as error:
        line, column = error.GetLine(), error.GetColumn()
        reason = str(error)
        if line is not None and reason.startswith(f"{line}:{column} : "):
            reason = reason[len(f"{line}:{column} : "):]  # the place goes to ``where``
        raise TraceFormatError(f"not a RunMetadata text dump: {one_line(reason)}", path=path,
                               where=f"line {line} column {column}" if line is not None else None) from None
    except RecursionError:  # the parser recurses into nested (unknown) messages
        raise TraceFormatError("not a RunMetadata text dump: messages nested too deeply", path=path) from None
    if target.DESCRIPTOR.name == "StepStats":
        run_metadata = protos.RunMetadata()
        run_metadata.step_stats.CopyFrom(target)
        target = run_metadata
    return target.SerializeToString()
