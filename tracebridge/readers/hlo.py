"""Serialized XLA HLO (HloProto or HloModuleProto) decoded with the wire reader, without
TensorFlow or XLA: each instruction's name, opcode, fusion kind, called computations and
the framework op of its metadata, into :class:`~tracebridge.model.hlo.HloOpMap`.

Field numbers are facts of XLA's ``xla/service/hlo.proto`` and ``xla/xla_data.proto``.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..model.hlo import XLA_ARGS, HloModule, HloOp, HloOpMap, kernel_safe
from .wire import LENGTH, VARINT, WireError, _read_varint, as_signed, decode, strings_per_message

# HloProto
_PROTO_MODULE = 1
# HloModuleProto
_MODULE_NAME, _MODULE_ENTRY_NAME, _MODULE_COMPUTATIONS, _MODULE_ID, _MODULE_ENTRY_ID = 1, 2, 3, 5, 6
# HloComputationProto
_COMPUTATION_NAME, _COMPUTATION_INSTRUCTIONS, _COMPUTATION_ID = 1, 2, 5
# HloInstructionProto
_INSTR_NAME, _INSTR_OPCODE, _INSTR_METADATA, _INSTR_FUSION_KIND, _INSTR_CALLED = 1, 2, 7, 11, 38
_INSTR_PARAMETER_NUMBER, _INSTR_ID, _INSTR_OPERANDS = 9, 35, 36
# How many instructions downstream an instruction without framework ops looks for the op it serves.
_CONSUMER_DEPTH = 4
# OpMetadata
_META_TYPE, _META_NAME = 1, 2


def hlo_op_map(modules: Iterable[bytes]) -> HloOpMap:
    """The instructions of serialized HLO modules (HloProto or HloModuleProto each);
    malformed bytes raise :class:`~tracebridge.errors.TraceFormatError`."""
    decoded = []
    for data in modules:
        try:
            decoded.append(_module(bytes(data)))
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


def _module(raw: bytes) -> HloModule:
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
        _consumer_ops(tf_ops, op_names, op_types, opcodes, owners, called, comp_ids, ids, operands,
                      instrs_f.scalar(_INSTR_PARAMETER_NUMBER, count).tolist())
    for row in range(count):
        callees = tuple(comp_name_of.get(c, str(c)) for c in called[row])
        module.ops[names[row]] = HloOp(
            module=name, name=names[row], opcode=opcodes[row], op_name=op_names[row],
            op_type=op_types[row], fusion_kind=fusion_kinds[row], called=callees, tf_ops=tf_ops[row])
    for op in module.ops.values():
        module.by_kernel_name.setdefault(kernel_safe(op.name), op)
    return module


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


def _consumer_ops(tf_ops: list, op_names: list[str], op_types: list[str], opcodes: list[str], owner: list[int], called: list[list[int]],
                  comp_ids: list[int], ids: list[int], operands: list[list[int]], parameters: list[int]) -> None:
    """An instruction with no framework op of its own or inside (XLA made it: TF's filter
    gradient becomes a convolution with new dimensions and no metadata) computes for the
    first framework op downstream of it: a user's own op, or inside a fusion that takes it,
    the op that first reads the parameter it arrives as. Sets ``tf_ops`` of such ones."""
    row_of_id = {(owner[row], ids[row]): row for row in range(len(ids))}
    users: dict[int, list[tuple[int, int]]] = {}  # row -> (user row, operand index), in order
    for row, row_operands in enumerate(operands):
        for index, operand in enumerate(row_operands):
            found = row_of_id.get((owner[row], operand))
            if found is not None:
                users.setdefault(found, []).append((row, index))
    comp_index = {comp_id: index for index, comp_id in enumerate(comp_ids)}
    parameter_of: dict[tuple[int, int], int] = {}  # (computation, parameter number) -> row
    for row in (row for row, opcode in enumerate(opcodes) if opcode == "parameter"):
        parameter_of.setdefault((owner[row], parameters[row]), row)

    def first_op(row: int, depth: int) -> tuple[str, str] | None:
        for user, index in users.get(row, ()):
            for callee in called[user]:  # inside a fusion: from the parameter it arrives as
                inner = parameter_of.get((comp_index.get(callee, -1), index))
                found = first_op(inner, depth - 1) if inner is not None and depth else None
                if found:
                    return found
            if op_names[user] and op_names[user] != XLA_ARGS:
                return op_names[user], op_types[user]
            found = first_op(user, depth - 1) if depth else None
            if found:
                return found
        return None

    for row, ops in enumerate(tf_ops):
        if not ops:
            found = first_op(row, _CONSUMER_DEPTH)
            if found:
                tf_ops[row] = (found,)


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
