"""Time per HLO instruction of an XLA run: each instruction with the framework ops it
computes (a fusion's several ops together) and the op row its time went to.

The XSpace reader marks each XLA event it linked with the stats ``hlo_instruction``,
``hlo_module`` and, for a fusion of several framework ops, ``tf_ops``
(readers/xspace_xla.py); a trace without them has no rows here.
"""

from __future__ import annotations

import numpy as np

from ..model.hlo import HLO_INSTRUCTION, HLO_MODULE, TF_OPS
from ..model.trace import Trace


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
