"""Serialized XLA HLO (HloProto or HloModuleProto) decoded with the wire reader, without
TensorFlow or XLA: each instruction's name, opcode, fusion kind, called computations and
the framework op of its metadata, into :class:`~tracebridge.model.hlo.HloOpMap`.

Field numbers are facts of XLA's ``xla/service/hlo.proto`` and ``xla/xla_data.proto``.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..model.hlo import XLA_ARGS, HloModule, HloOp, HloOpMap, kernel_safe, without_wrappers
from .hlo_made import Dataflow, FrameworkGraph, made_for
from .wire import LENGTH, VARINT, WireError, _read_varint, as_signed, decode, strings_per_message

# HloProto
_PROTO_MODULE = 1
# HloModuleProto
_MODULE_NAME, _MODULE_ENTRY_NAME, _MODULE_COMPUTATIONS, _MODULE_ID, _MODULE_ENTRY_ID = 1, 2, 3, 5, 6
_MODULE_SCHEDULE = 7
# HloScheduleProto: map<computation id, InstructionSequence> sequences = 1 (map entry: key 1,
# value 2); InstructionSequence: repeated int64 instruction_ids = 1
_SCHEDULE_SEQUENCES, _SEQUENCE_IDS = 1, 1
# HloComputationProto
_COMPUTATION_NAME, _COMPUTATION_INSTRUCTIONS, _COMPUTATION_ID, _COMPUTATION_ROOT = 1, 2, 5, 6
# HloInstructionProto
_INSTR_NAME, _INSTR_OPCODE, _INSTR_METADATA, _INSTR_FUSION_KIND, _INSTR_CALLED = 1, 2, 7, 11, 38
_INSTR_PARAMETER_NUMBER, _INSTR_ID, _INSTR_OPERANDS = 9, 35, 36
# OpMetadata
_META_TYPE, _META_NAME = 1, 2


def hlo_op_map(modules: Iterable[bytes], graph: FrameworkGraph | None = None) -> HloOpMap:
    """The instructions of serialized HLO modules (HloProto or HloModuleProto each);
    malformed bytes raise :class:`~tracebridge.errors.TraceFormatError`. ``graph``: the
    framework graph the modules were compiled from, where known (it places the
    instructions XLA made without metadata: readers/hlo_made.py)."""
    decoded = []
    for data in modules:
        try:
            decoded.append(_module(bytes(data), graph))
        except WireError as error:
            raise error.to_format_error(what="HLO module") from None
    return HloOpMap(decoded)


def _module_span(raw: bytes) -> tuple[int, int]:
    """Where the HloModuleProto is: the whole of ``raw``, or an HloProto's ``hlo_module``.
    Both start with a length-delimited field 1 (a module's name, an HloProto's module);
    a module has fields an HloProto lacks (entry computation, id), and an HloProto's field 1
    decodes as a module that has computations."""
    top = decode(raw, [0], [len(raw)])
    if set(top.numbers()) - {_PROTO_MODULE, 3}:
        return 0, len(raw)
    _, starts, ends = top.spans(_PROTO_MODULE)
    if len(starts):
        try:
            inner = decode(raw, starts[-1:], ends[-1:])
            if _MODULE_COMPUTATIONS in inner.numbers() or _MODULE_ID in inner.numbers():
                return int(starts[-1]), int(ends[-1])
        except WireError:
            pass  # field 1 is a module's name after all
    return 0, len(raw)


def _module(raw: bytes, graph: FrameworkGraph | None = None) -> HloModule:
    start, end = _module_span(raw)
    module_f = decode(raw, [start], [end])
    name = strings_per_message(raw, module_f, _MODULE_NAME, 1)[0]
    program_id = int(as_signed(module_f.scalar(_MODULE_ID, 1, np.uint64))[0]) \
        if _MODULE_ID in module_f.numbers() else None
    module = HloModule(name, program_id)
    _, comp_starts, comp_ends = module_f.spans(_MODULE_COMPUTATIONS)
    if not len(comp_starts):
        return module
    comps_f = decode(raw, comp_starts, comp_ends)
    n_comps = len(comp_starts)
    comp_names = strings_per_message(raw, comps_f, _COMPUTATION_NAME, n_comps)
    comp_ids = as_signed(comps_f.scalar(_COMPUTATION_ID, n_comps, np.uint64)).tolist()
    comp_name_of = dict(zip(comp_ids, comp_names))
    owner, starts, ends = comps_f.spans(_COMPUTATION_INSTRUCTIONS)
    count = len(starts)
    instrs_f = decode(raw, starts, ends)
    names = strings_per_message(raw, instrs_f, _INSTR_NAME, count)
    opcodes = strings_per_message(raw, instrs_f, _INSTR_OPCODE, count)
    fusion_kinds = strings_per_message(raw, instrs_f, _INSTR_FUSION_KIND, count)  # "kLoop", ...
    op_names, op_types = [""] * count, [""] * count
    meta_owner, meta_starts, meta_ends = instrs_f.spans(_INSTR_METADATA)
    if len(meta_starts):
        meta_f = decode(raw, meta_starts, meta_ends)
        found_names = strings_per_message(raw, meta_f, _META_NAME, len(meta_starts))
        found_types = strings_per_message(raw, meta_f, _META_TYPE, len(meta_starts))
        for row, op_name, op_type in zip(meta_owner.tolist(), found_names, found_types):
            op_names[row], op_types[row] = op_name, op_type
    called = _repeated_ints(raw, instrs_f, count, _INSTR_CALLED)
    owners = owner.tolist()
    ids = as_signed(instrs_f.scalar(_INSTR_ID, count, np.uint64)).tolist()
    operands = _repeated_ints(raw, instrs_f, count, _INSTR_OPERANDS)
    # The framework ops of each computation, in instruction order (what a call computes),
    # but for its constants: XLA makes one constant of all equal ones (CSE) and keeps one
    # user's metadata on it, so the zero a metrics' div_no_nan fusion reads is named for a
    # layer's Relu. A fusion computes the ops of what it computes, not of what it reads.
    constants = _constant_rows(opcodes, owners, ids, operands)
    comp_ops: dict[str, list[tuple[str, str]]] = {}
    for row, comp in enumerate(owners):
        ops = comp_ops.setdefault(comp_names[comp], [])
        if row not in constants:
            _add_op(ops, op_names[row], op_types[row])
    tf_ops = [_tf_ops(op_names[row], op_types[row], tuple(comp_name_of.get(c, str(c)) for c in called[row]),
                      comp_ops) for row in range(count)]
    if any(not ops for ops in tf_ops):
        flow = _dataflow(comps_f, n_comps, comp_ids, instrs_f, owners, ids, operands, op_names, op_types,
                         opcodes, called)
        computed = {without_wrappers(name) for name in op_names if name and name != XLA_ARGS}
        for row, ops in enumerate(tf_ops):  # (inside a fusion an instruction runs as the fusion)
            if not ops and opcodes[row] not in _NO_WORK and owners[row] not in flow.caller:
                found = made_for(row, flow, graph, computed)
                if found:
                    tf_ops[row] = (found,)
    for row in range(count):
        callees = tuple(comp_name_of.get(c, str(c)) for c in called[row])
        module.ops[names[row]] = HloOp(
            module=name, name=names[row], opcode=opcodes[row], op_name=op_names[row],
            op_type=op_types[row], fusion_kind=fusion_kinds[row], called=callees, tf_ops=tf_ops[row])
    for op in module.ops.values():
        module.by_kernel_name.setdefault(kernel_safe(op.name), op)
    entry = _entry_index(module_f, comp_ids)
    if entry is not None:
        entry_rows = {ids[row]: row for row in range(count) if owners[row] == entry}
        sequence = _schedule(raw, module_f, comp_ids[entry]) or list(entry_rows)
        module.order = {names[entry_rows[i]]: place for place, i in enumerate(i for i in sequence if i in entry_rows)}
    return module


def _entry_index(module_f, comp_ids: list[int]) -> int | None:
    """The entry computation's index among the module's computations, or None."""
    if _MODULE_ENTRY_ID not in module_f.numbers():
        return None
    entry_id = int(as_signed(module_f.scalar(_MODULE_ENTRY_ID, 1, np.uint64))[0])
    return comp_ids.index(entry_id) if entry_id in comp_ids else None


def _schedule(raw: bytes, module_f, computation_id: int) -> list[int]:
    """The instruction ids of a computation in the module's schedule; [] where it has none
    (an unscheduled module runs its instructions in the order the proto lists them, a
    post order)."""
    if _MODULE_SCHEDULE not in module_f.numbers():
        return []
    _, starts, ends = module_f.spans(_MODULE_SCHEDULE)
    schedule_f = decode(raw, starts[-1:], ends[-1:])
    if _SCHEDULE_SEQUENCES not in schedule_f.numbers():
        return []
    _, entry_starts, entry_ends = schedule_f.spans(_SCHEDULE_SEQUENCES)
    entries_f = decode(raw, entry_starts, entry_ends)
    keys = as_signed(entries_f.scalar(1, len(entry_starts), np.uint64)).tolist()
    if 2 not in entries_f.numbers():
        return []
    for entry, start, end in zip(*entries_f.spans(2)):
        if keys[entry] == computation_id:
            sequence_f = decode(raw, [start], [end])
            return _repeated_ints(raw, sequence_f, 1, _SEQUENCE_IDS)[0]
    return []


# Instructions that only reshape or spread what they are given: a constant through them stays one.
_CONSTANT_PRESERVING = frozenset({"broadcast", "reshape", "bitcast", "convert", "copy", "transpose"})


def _constant_rows(opcodes: list[str], owner: list[int], ids: list[int], operands: list[list[int]]) -> set[int]:
    """The rows that hold a constant: ``constant`` instructions, and those of
    :data:`_CONSTANT_PRESERVING` whose operands all do (a broadcast zero). Operands come
    before their users in a computation (XLA writes instructions in post order)."""
    found: set[int] = set()
    row_of_id = {(owner[row], ids[row]): row for row in range(len(ids))}
    for row, opcode in enumerate(opcodes):
        if opcode == "constant" or opcode in _CONSTANT_PRESERVING and operands[row] and all(
                row_of_id.get((owner[row], operand)) in found for operand in operands[row]):
            found.add(row)
    return found


def _tf_ops(op_name: str, op_type: str, callees: tuple[str, ...],
            comp_ops: dict[str, list[tuple[str, str]]]) -> tuple[tuple[str, str], ...]:
    """Its own op, then those of the computations it calls (a fusion's inside)."""
    ops: list[tuple[str, str]] = []
    _add_op(ops, op_name, op_type)
    for callee in callees:
        for inner_name, inner_type in comp_ops.get(callee, ()):
            _add_op(ops, inner_name, inner_type)
    return tuple(ops)


# Instructions that compute nothing of their own: no op is looked for them.
_NO_WORK = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
                      "add-dependency", "opt-barrier"})


def _dataflow(comps_f, n_comps: int, comp_ids: list[int], instrs_f, owner: list[int], ids: list[int],
              operand_ids: list[list[int]], op_names: list[str], op_types: list[str], opcodes: list[str],
              called: list[list[int]]) -> Dataflow:
    """The module's instructions as one dataflow graph (readers/hlo_made.py)."""
    count = len(owner)
    numbers = instrs_f.scalar(_INSTR_PARAMETER_NUMBER, count).tolist()
    row_of_id = {(owner[row], ids[row]): row for row in range(count)}
    operands = [[row_of_id[(owner[row], o)] for o in found if (owner[row], o) in row_of_id]
                for row, found in enumerate(operand_ids)]
    comp_index = {comp_id: index for index, comp_id in enumerate(comp_ids)}
    root_ids = as_signed(comps_f.scalar(_COMPUTATION_ROOT, n_comps, np.uint64)).tolist() \
        if _COMPUTATION_ROOT in comps_f.numbers() else [None] * n_comps
    roots = {comp: row_of_id[(comp, root)] for comp, root in enumerate(root_ids) if (comp, root) in row_of_id}
    parameters = {(owner[row], numbers[row]): row for row in range(count) if opcodes[row] == "parameter"}
    fusion_callee, caller = {}, {}
    for row in range(count):
        if opcodes[row] == "fusion" and called[row] and called[row][0] in comp_index:
            fusion_callee[row] = comp_index[called[row][0]]
            caller.setdefault(fusion_callee[row], row)

    def op_of(row: int) -> tuple[str, str] | None:
        name = op_names[row]
        return (name, op_types[row]) if name and name != XLA_ARGS else None
    return Dataflow(op_of, operands, opcodes, fusion_callee, roots, parameters, caller, owner, numbers)


def _add_op(ops: list[tuple[str, str]], op_name: str, op_type: str) -> None:
    """Add a framework op once by name; the first type given for it stays (TF leaves the
    type off some instructions of an op that others of it carry)."""
    if not op_name or op_name == XLA_ARGS:
        return
    for at, (name, known) in enumerate(ops):
        if name == op_name:
            if not known and op_type:
                ops[at] = (name, op_type)
            return
    ops.append((op_name, op_type))


def _repeated_ints(raw: bytes, instrs_f, count: int, number: int) -> list[list[int]]:
    """A repeated int64 field of each instruction (``called_computation_ids``,
    ``operand_ids``): packed (proto3's default) or not."""
    out: list[list[int]] = [[] for _ in range(count)]
    if number not in instrs_f.numbers():
        return out
    field = instrs_f.groups[number]
    messages = instrs_f.message[field].tolist()
    kinds = instrs_f.wire_type[field].tolist()
    values = instrs_f.value[field].tolist()
    offsets = instrs_f.offset[field].tolist()
    for message, kind, value, offset in zip(messages, kinds, values, offsets):
        if kind == VARINT:
            out[message].append(_signed(value))
        elif kind == LENGTH:
            p, end = offset, offset + value
            while p < end:
                number, p = _read_varint(raw, p, end)
                out[message].append(_signed(number))
        else:
            raise WireError(f"field {number} has wire type {kind}", offset)
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
