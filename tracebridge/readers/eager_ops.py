"""Ops that ran eagerly, from the host events TF 2.21 records for them.

An eager op leaves no ``name:Type`` op event (TF_FACTS C.2): only an ``EagerExecute``
annotation on the Python thread, whose ``eager_op`` stat names the op type (``MatMul``), with
``is_func`` 1 when it runs a ``tf.function`` (whose own ops are op events already). Each
eager ``EagerExecute`` becomes a TF op (``Category.OP``) of that type. Eager ops have no node
names, so each is named ``eager/<Type>``, ``eager/<Type>_1``, ... by its order among the
ops of its type within its step (as TF uniquifies graph names), which keeps the names of
one step equal to the next one's and lets a comparison pair them by type and position.
"""

from __future__ import annotations

import numpy as np

from ..model.schema import EAGER_SCOPE, Category
_EAGER_EVENT = "EagerExecute"


def mark_eager_ops(strings, stats: dict, category: np.ndarray, name_id: np.ndarray, type_id: np.ndarray,
                   kernel_id: np.ndarray, start_ns: np.ndarray) -> int:
    """Rewrite the rows of eager ``EagerExecute`` events in place into TF ops; returns how
    many there were. ``stats``: the reader's ``{stat: (events, values)}``."""
    if "eager_op" not in stats:
        return 0
    functions = {event for event, value in zip(*stats.get("is_func", ((), ()))) if value not in (0, "0")}
    eager_event = strings[_EAGER_EVENT]
    found = [(int(start_ns[event]), event, str(value)) for event, value in zip(*stats["eager_op"])
             if event not in functions and name_id[event] == eager_event and str(value)
             and not str(value).startswith("__inference_")]
    if not found:
        return 0
    found.sort()
    # Numbering restarts at each step marker, so that step k's third MatMul has step 1's name.
    markers = np.array(sorted(int(start_ns[e]) for e in stats.get("step_num", ((), ()))[0]), dtype=np.int64)
    seen: dict[tuple[int, str], int] = {}
    op = np.uint8(Category.OP)
    for start, event, op_type in found:
        window = int(np.searchsorted(markers, start, side="right")) if len(markers) else 0
        ordinal = seen.get((window, op_type), 0)
        seen[window, op_type] = ordinal + 1
        name = f"{EAGER_SCOPE}{op_type}" + (f"_{ordinal}" if ordinal else "")
        name_id[event], type_id[event], kernel_id[event] = strings[name], strings[op_type], strings[op_type]
        category[event] = op
    return len(found)
