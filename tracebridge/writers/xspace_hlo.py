"""XLA's HLO in the XSpace tracebridge writes, where XLA's own runtime puts it: each module
in a ``/host:metadata`` plane (event metadata ``<module>(<program id>)`` with stats
``Hlo Proto`` and ``program_id``, as JAX's profiler writes them), and on each XLA event the
``hlo_op``/``hlo_module``/``program_id`` stats that link it to its instruction. The reader
links the events again from these; xprof reads them as it reads a profile of its own.
"""

from __future__ import annotations

import base64

from ..model.hlo import HLO_INSTRUCTION, HLO_MODULE, HLO_MODULES
from ..model.trace import Trace

# event stat (as the reader keeps it) -> stat written, value kind
_EVENT_STATS = {HLO_INSTRUCTION: ("hlo_op", "str"), HLO_MODULE: ("hlo_module", "str"),
                "program_id": ("program_id", "uint64")}


def add_hlo_modules(trace: Trace, plane_for, stat_id) -> None:
    """The trace's modules (``metadata["hlo_modules"]``) as a ``/host:metadata`` plane."""
    entries = [e for e in trace.metadata.get(HLO_MODULES) or () if isinstance(e, dict)
               and isinstance(e.get("proto"), str)]
    if not entries:
        return
    plane = plane_for("/host:metadata")
    for number, entry in enumerate(entries, start=1):
        metadata = plane.event_metadata[number]
        metadata.id = number
        program_id = entry.get("program_id")
        metadata.name = f"{entry.get('name', '')}({program_id if program_id is not None else 0})"
        metadata.stats.add(metadata_id=stat_id(plane, "Hlo Proto"), bytes_value=base64.b64decode(entry["proto"]))
        if isinstance(program_id, int) and program_id >= 0:
            metadata.stats.add(metadata_id=stat_id(plane, "program_id"), uint64_value=program_id)


def xla_event_stats(trace: Trace) -> dict[int, list[tuple[str, str, object]]]:
    """Op row -> ``(stat name, kind, value)`` of the HLO link the reader found for it."""
    stats = trace.table("event_stats")
    wanted = {trace.string_id(key): key for key in _EVENT_STATS}
    wanted.pop(-1, None)
    if not wanted:
        return {}
    out: dict[int, list] = {}
    strings = trace.strings
    for op, key, value in zip(stats["op"].tolist(), stats["key"].tolist(), stats["value"].tolist()):
        if key not in wanted:
            continue
        name, kind = _EVENT_STATS[wanted[key]]
        text = strings[value]
        if kind == "uint64":
            if not text.isdigit():
                continue
            out.setdefault(op, []).append((name, kind, int(text)))
        else:
            out.setdefault(op, []).append((name, kind, text))
    return {op: found for op, found in out.items() if any(name == "hlo_op" for name, _, _ in found)}
