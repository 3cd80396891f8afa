"""XLA events of an XSpace linked to the framework ops they compute, through the HLO.

Every XLA event names its HLO instruction: a GPU kernel or copy by its ``hlo_op`` stat, a
CPU thunk by ``hlo_op`` and its own name, a TPU op by its name. Inside a CUDA graph, where
``hlo_op`` is ``command_buffer_N``, a kernel takes its instruction by its place in the
module's schedule, which its kernel's name only confirms (readers/xla_order.py); so does a
device event that names no instruction by either name, not ``XlaModule``. The
instruction's metadata names the framework op (``op_name``): the event's row takes that
op's name and type, as xprof's framework_op_stats names them. A fusion that computes
several framework ops keeps its own op_name as the row (xprof's choice) and gets a
``tf_ops`` stat naming all of them (so does an instruction XLA made without metadata, named
for itself: the op it computes for, readers/hlo_made.py); every linked event gets
``hlo_instruction``, so a by-HLO table can group by instruction.

The HLO comes from the ``/host:metadata`` plane (one event metadata per module, with the
``Hlo Proto`` bytes stat) and from a capture's ``metadata["hlo_modules"]``.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceFormatError
from ..model.builder import TraceBuilder
from ..model.hlo import (HLO_INSTRUCTION, HLO_MODULE, HLO_MODULES, TF_OPS, HloModule, HloOp, HloOpMap, module_entry,
                         modules_of)
from ..model.schema import Category

HLO_PROTO_STAT = "Hlo Proto"
METADATA_PLANE = "/host:metadata"
COMMAND_BUFFER = "command_buffer"  # the hlo_op of a kernel inside a CUDA graph: command_buffer_N
# The event stats that link an XLA event to its instruction (they decide its row's name).
XLA_STATS = frozenset({"hlo_op", "hlo_module", "program_id"})


def note_hlo_modules(builder: TraceBuilder, found: list[tuple[str, int | None, bytes]]) -> HloOpMap | None:
    """Keep the modules of ``/host:metadata`` (``(name, program id, proto)``) in the trace's
    metadata, beside any a capture recorded; the map of all of them, or None if none."""
    entries = list(builder.metadata_value(HLO_MODULES, None) or [])
    known = {(e.get("name"), e.get("program_id")) for e in entries if isinstance(e, dict)}
    for name, program_id, data in found:
        if (name, program_id) not in known:
            entries.append(module_entry(name, program_id, data))
            known.add((name, program_id))
    if not entries:
        return None
    builder.note(**{HLO_MODULES: entries})
    from .hlo import hlo_op_map  # a profile without XLA never imports the HLO reader
    from .hlo_made import FrameworkGraph
    decoded, damaged = [], []
    graph = FrameworkGraph.parse(builder.metadata_value("graph", None))  # the capture's, if it recorded one
    for entry in entries:
        try:  # a damaged module loses its own links, not the trace
            data = modules_of({HLO_MODULES: [entry]})
            if not data:
                continue
            module, = hlo_op_map(data, graph).modules
        except (TraceFormatError, ValueError):  # binascii.Error is a ValueError
            damaged.append(str(entry.get("name")))
            continue
        decoded.append((entry, module))
    if damaged:
        builder.note(hlo_errors=f"unreadable HLO of {len(damaged)} modules: {', '.join(damaged[:5])}")
    hlo = HloOpMap([module for _, module in decoded])
    for entry, module in decoded:
        if isinstance(entry.get("name"), str):
            hlo.alias(entry["name"], integer(entry.get("program_id")), module)
    return hlo


def module_name(metadata_name: str) -> tuple[str, int | None]:
    """A ``/host:metadata`` event's name is ``<module>(<program id>)``: both parts (the
    program id is there also where no ``program_id`` stat is, as in xprof's TPU profiles)."""
    head, paren, tail = metadata_name.rpartition("(")
    if not (paren and head and tail.endswith(")")):
        return metadata_name, None
    return head, integer(tail[:-1])


def spread_metadata_stats(metadata_stats: list[dict[int, dict[str, str]]], stats: dict,
                          event_plane: np.ndarray, metadata_id: np.ndarray,
                          device_ops: list[dict[int, str]]) -> None:
    """XLA stats on an event's metadata (``hlo_op`` of every run of a kernel) as stats of
    each such event, where the event has none of its own. A TPU op's metadata has a
    ``program_id`` and no ``hlo_op``: its display name is the instruction (``device_ops``:
    per plane, metadata id -> that name, for device planes)."""
    for plane, names in enumerate(device_ops):
        for found_id, name in names.items():
            found = metadata_stats[plane].get(found_id)
            if found is not None and "program_id" in found and "hlo_op" not in found:
                found["hlo_op"] = name
    for key in XLA_STATS:
        own = set(stats[key][0]) if key in stats else set()
        for plane, per_metadata in enumerate(metadata_stats):
            ids = [m for m, found in per_metadata.items() if key in found]
            if not ids:
                continue
            events = np.flatnonzero((event_plane == plane) & np.isin(metadata_id, ids))
            events = [e for e in events.tolist() if e not in own]
            if events:
                into = stats.setdefault(key, ([], []))
                into[0].extend(events)
                into[1].extend(per_metadata[int(metadata_id[e])][key] for e in events)


def link_xla_events(builder: TraceBuilder, hlo: HloOpMap, stats: dict, category: np.ndarray,
                    name_id: np.ndarray, type_id: np.ndarray, kernel_id: np.ndarray,
                    device_of_event: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Name each XLA event's row after the framework op its instruction computes; a CPU
    thunk (a host event) becomes an op row, and the function op that ran the module around
    it (``__inference_f:__inference_f``) an annotation, so that its time is not counted a
    second time on top of its thunks'. Returns how many events were linked."""
    if "hlo_op" not in stats and "hlo_module" not in stats:
        return 0
    s = builder.strings
    module_of = dict(zip(*stats["hlo_module"])) if "hlo_module" in stats else {}
    program_of = dict(zip(*stats["program_id"])) if "program_id" in stats else {}
    instructions, fused, named = ([], []), ([], []), ([], [])
    host, op = int(Category.HOST), int(Category.OP)
    work = (int(Category.DEVICE), int(Category.MEMCPY), host, op)  # op: a thunk tracebridge wrote
    texts = builder.strings.as_tuple()
    placed: dict[int, tuple[HloModule, HloOp]] = {}
    unplaced: dict[int, HloModule] = {}  # a device event of a known module that names no instruction
    in_buffers: dict[int, HloModule] = {}  # a device event that ran inside a CUDA graph
    named_op = dict(zip(*stats["hlo_op"])) if "hlo_op" in stats else {}
    # A device event of a module that names no instruction at all (only ``hlo_module``) is
    # found by its kernel's name, or by the order its module runs, as one whose hlo_op is unknown.
    device_work = (int(Category.DEVICE), int(Category.MEMCPY))
    unnamed = [e for e in module_of if e not in named_op and category[e] in device_work]
    for event, hlo_op in [*named_op.items(), *((e, "") for e in unnamed)]:
        if category[event] not in work:
            continue
        module = module_of.get(event)
        module = module if isinstance(module, str) else None
        program = integer(program_of.get(event))
        found = hlo.find_with_module(module, str(hlo_op), program)
        if found is not None:
            placed[event] = found
            continue
        candidates = [m for m in hlo.module(module, program) if m.order] if category[event] in device_work else []
        if len(candidates) == 1 and str(hlo_op).startswith(COMMAND_BUFFER):
            in_buffers[event] = candidates[0]  # its kernel's name may be a reused one's: walked below
            continue
        found = hlo.find_with_module(module, texts[kernel_id[event]], program)
        if found is not None:
            placed[event] = found
        elif len(candidates) == 1:
            unplaced[event] = candidates[0]
    from .xla_order import align_command_buffers, place_by_order  # only where events name no instruction
    if in_buffers:
        aligned = align_command_buffers(in_buffers, placed, device_of_event, start_ns,
                                        {e: texts[kernel_id[e]] for e in in_buffers})
        for event, module in in_buffers.items():
            if event in aligned:
                placed[event] = module, aligned[event]
            else:
                unplaced[event] = module
    ops = {event: instruction for event, (_, instruction) in placed.items()}
    ops.update(place_by_order(unplaced, placed, device_of_event, start_ns))
    for event in dict.fromkeys(e for e in [*named_op, *unnamed] if e in ops):
        found = ops[event]
        name_id[event], type_id[event] = s[found.row_name], s[found.row_type]
        if category[event] == host:
            category[event] = op
        instructions[0].append(event)
        instructions[1].append(found.name)
        if not isinstance(module_of.get(event), str):  # a TPU op knows its module by program id only
            named[0].append(event)
            named[1].append(found.module)
        if found.beyond_row:
            fused[0].append(event)
            fused[1].append(found.describe_ops())
    if instructions[0]:
        _demote_module_ops(builder, np.array(instructions[0], dtype=np.int64), category, type_id,
                           device_of_event, start_ns, end_ns)
    for key, pairs in ((HLO_INSTRUCTION, instructions), (TF_OPS, fused), (HLO_MODULE, named)):
        if pairs[0]:
            into = stats.setdefault(key, ([], []))
            into[0].extend(pairs[0])
            into[1].extend(pairs[1])
    return len(ops)


def integer(value) -> int | None:
    """A program id: an int stat, or one read off event metadata as text."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


_CALL_TYPES = frozenset({"StatefulPartitionedCall", "PartitionedCall"})  # TF's function call ops


def _demote_module_ops(builder: TraceBuilder, thunks: np.ndarray, category: np.ndarray, type_id: np.ndarray,
                       device_of_event: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> None:
    """TF runs a ``jit_compile`` function as one op of the function's own type, on the
    calling thread; its thunks run inside its span, on that thread or the XLA pool's. Called
    from a graph (Keras's ``multi_step_on_iterator`` calls ``one_step_on_data``), the op is a
    ``StatefulPartitionedCall`` (rows of its own at host_tracer_level 3: 59% of a small
    ``fit`` step's op time, on top of its thunks). An op row of a function type
    (``__inference_*``) or a call type that encloses a thunk of its device becomes a HOST
    annotation: the thunks are its time."""
    thunks = thunks[category[thunks] == int(Category.OP)]
    if not len(thunks):
        return
    functions = np.array([i for text, i in builder.strings.items()
                          if text.startswith("__inference_") or text in _CALL_TYPES], dtype=np.int64)
    candidates = np.flatnonzero((category == int(Category.OP)) & np.isin(type_id, functions))
    if not len(candidates):
        return
    for device in np.unique(device_of_event[thunks]).tolist():
        mine = thunks[device_of_event[thunks] == device]
        starts = np.sort(start_ns[mine])
        here = candidates[device_of_event[candidates] == device]
        # a thunk starts inside the op's span: first thunk start at or after the op's start
        at = np.searchsorted(starts, start_ns[here], side="left")
        inside = (at < len(starts)) & (starts[np.minimum(at, len(starts) - 1)] <= end_ns[here])
        category[here[inside]] = int(Category.HOST)
