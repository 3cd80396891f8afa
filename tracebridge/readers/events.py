"""TensorBoard event files (``events.out.tfevents.*``) written by
``FileWriter.add_run_metadata`` or ``ProfilerHook``: one step per ``tagged_run_metadata``.

Framing (TFRecord): ``uint64 length``, ``uint32 masked crc32c(length)``, ``data``,
``uint32 masked crc32c(data)``, all little-endian. A truncated last record (a writer that
was killed) is tolerated and noted in the trace's metadata; any other damage is an error.
"""

from __future__ import annotations

import re
import struct

from .. import protos
from ..errors import TraceFormatError
from ..model.trace import Trace
from ..options import Parallelism
from ..tfrecord import masked_crc32c
from .sources import Source
from .stepstats import read_run_metadatas

_STEP_IN_TAG = re.compile(r"(\d+)$")
_DATA_CRC_LIMIT = 4 << 20  # data CRCs are checked in pure Python: only for records up to 4 MiB


def read_records(data: bytes, path=None) -> tuple[list[tuple[int, bytes]], str | None]:
    """``[(offset, record), ...]`` and a note when the last record was cut short."""
    records, offset, size = [], 0, len(data)
    while offset < size:
        if size - offset < 12:
            return records, f"last record truncated at byte {offset} (header incomplete)"
        length_bytes = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if masked_crc32c(length_bytes) != length_crc:
            raise TraceFormatError("not an event file: record length checksum mismatch", path=path,
                                   where=f"byte {offset}")
        end = offset + 12 + length + 4
        if end > size:
            return records, f"last record truncated at byte {offset} ({length} bytes announced)"
        payload = data[offset + 12:offset + 12 + length]
        if length <= _DATA_CRC_LIMIT:
            (data_crc,) = struct.unpack("<I", data[end - 4:end])
            if masked_crc32c(payload) != data_crc:
                raise TraceFormatError("record data checksum mismatch", path=path, where=f"byte {offset}")
        records.append((offset, payload))
        offset = end
    return records, None


def read(source: Source, parallelism: Parallelism) -> Trace:
    """An event file, or a folder's event files in order; each tagged RunMetadata is a step."""
    runs, notes = [], []
    for name, data in ((file.path, file.data) for file in source.files):
        records, note = read_records(data, name)
        if note:
            notes.append(f"{name}: {note}")
        for offset, payload in records:
            try:
                event = protos.Event.FromString(payload)
            except Exception:  # protobuf's DecodeError; the message is not ours to show raw
                raise TraceFormatError("event record is not an Event protobuf", path=name,
                                       where=f"byte {offset}") from None
            if event.WhichOneof("what") != "tagged_run_metadata":
                continue
            tagged = event.tagged_run_metadata
            match = _STEP_IN_TAG.search(tagged.tag)
            number = int(match.group(1)) if match else (event.step or len(runs))
            runs.append((number, tagged.tag, tagged.run_metadata))
    if not runs:
        raise TraceFormatError(
            "event file holds no run metadata (no tagged_run_metadata events); TF2 profiles are "
            "the .xplane.pb files under plugins/profile/", path=source.path)
    metadata = {"source_format": "events"}
    if notes:
        metadata["warnings"] = "; ".join(notes)
    return read_run_metadatas(runs, metadata, path=source.path, parallelism=parallelism)
