"""An XLA run's op rows as the XSpace reader linked them to HLO (readers/xspace_xla.py):
each row's instructions (its thunks or kernels) and the TF ops they compute, from the
events' ``hlo_instruction`` and ``tf_ops`` stats; and the time per HLO instruction
(:func:`hlo_rows`): each instruction with the framework ops it computes (a fusion's
several ops together) and the op row its time went to.

The XSpace reader marks each XLA event it linked with the stats ``hlo_instruction``,
``hlo_module`` and, for a fusion of several framework ops, ``tf_ops``; a trace without
them has no rows here.
"""

from __future__ import annotations

import numpy as np

from ...model.hlo import HLO_INSTRUCTION, HLO_MODULE, TF_OPS
from ...model.trace import Trace


def _linked(trace: Trace, key: str) -> dict[str, dict[str, None]]:
    """Each op row of ``trace`` linked to an HLO instruction -> the values of its events'
    ``key`` stat (``hlo_instruction`` or ``tf_ops``), in order, once each; a row's event
    without ``tf_ops`` computes the op it is named after."""
    linked = set(trace.event_stat(HLO_INSTRUCTION)[0].tolist())
    rows, values = trace.event_stat(key)
    found_values = {op: trace.strings[value] for op, value in zip(rows.tolist(), values.tolist())}
    names = trace.ops["name"]
    out: dict[str, dict[str, None]] = {}
    for op in sorted(linked):
        name = trace.strings[int(names[op])]
        value = found_values.get(op)
        values_of = out.setdefault(name, {})
        for item in (value.split(", ") if key == TF_OPS else [value]) if value is not None else [name]:
            values_of[item] = None
    return out


def xla_ops(trace: Trace, among=None) -> dict[str, tuple[str, ...]]:
    """Each op row of ``trace`` (of the names ``among``, where given) the reader linked to
    an HLO instruction -> the TF ops its instructions compute, its own first (a row of one
    TF op: itself)."""
    return {name: tuple(ops) for name, ops in _linked(trace, TF_OPS).items() if among is None or name in among}


def xla_instructions(trace: Trace) -> dict[str, tuple[str, ...]]:
    """Each op row of ``trace`` linked to HLO -> the instructions (thunks, kernels) it ran."""
    return {name: tuple(found) for name, found in _linked(trace, HLO_INSTRUCTION).items()}


def hlo_rows(trace: Trace, counted: np.ndarray, time: np.ndarray, total: int, top: int | None) -> list[dict]:
    """``{"key": instruction, "module", "op": the row it is counted under, "tf_ops": every
    framework op it computes, "count", "total_ns", "share"}`` over the counted rows,
    largest first."""
    def per_op(key: str) -> dict[int, int]:
        rows, values = trace.event_stat(key)
        return dict(zip(rows.tolist(), values.tolist()))

    instructions, modules, fused = per_op(HLO_INSTRUCTION), per_op(HLO_MODULE), per_op(TF_OPS)
    names = trace.ops["name"]
    groups: dict[tuple[int, int], list] = {}
    for op, instruction in instructions.items():
        if not counted[op]:
            continue
        group = groups.setdefault((modules.get(op, 0), instruction), [0, 0, names[op], fused.get(op)])
        group[0] += 1
        group[1] += int(time[op])
    text = trace.strings
    rows = [{"key": text[instruction], "module": text[module], "op": text[name],
             "tf_ops": text[tf_ops].split(", ") if tf_ops is not None else [text[name]],
             "count": count, "total_ns": spent, "mean_ns": spent // count if count else 0,
             "share": spent / total if total else 0.0}
            for (module, instruction), (count, spent, name, tf_ops) in groups.items()]
    rows.sort(key=lambda row: (-row["total_ns"], row["key"]))
    return rows[:top] if top is not None else rows


__all__ = ["hlo_rows", "xla_instructions", "xla_ops"]
