"""An XLA run's op rows as the XSpace reader linked them to HLO (readers/xspace_xla.py):
each row's instructions (its thunks or kernels) and the TF ops they compute, from the
events' ``hlo_instruction`` and ``tf_ops`` stats."""

from __future__ import annotations

from ..model.hlo import HLO_INSTRUCTION, TF_OPS
from ..model.trace import Trace


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


__all__ = ["xla_instructions", "xla_ops"]
