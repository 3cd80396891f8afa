"""A loop's control flow on the one side that records it.

A TF1 Session lowers a functional ``While`` to dataflow control-flow ops (``Enter`` into
the loop's frame, ``Merge`` and ``Switch`` per loop variable, ``NextIteration``,
``LoopCond``, ``Exit``) and its step stats time each of them, every iteration: hundreds
of runs a step for one LSTM layer. TF2's profiler records none of them. Each run takes
about a microsecond, yet in some captures of the structure tests' LSTM while loop one run
of one ``Switch`` or ``Merge`` measured 8-12 ms, 5-7% of the step's op time (the thread
was off the CPU while it ran, most likely). Left unmatched, they decided whether that
pair reached 90% coverage.

They are the loop's own work, which its condition drives (every ``Switch`` reads the
``LoopCond``, which reads the condition's result), so they join the condition's row: a
``Less`` the structure paired with the other side's loop condition.
"""

from __future__ import annotations

from ..sides import Side
from .matcher import JoinRule

LOOP_CONTROL_OPS = frozenset({"Enter", "RefEnter", "Merge", "RefMerge", "Switch", "RefSwitch", "NextIteration",
                              "RefNextIteration", "LoopCond", "Exit", "RefExit"})


_ENTERS = frozenset({"Enter", "RefEnter"})


class LoopControlJoinsCondition(JoinRule):
    """Each unmatched loop control-flow op joins the row of its loop's condition: found
    along the trace's dataflow through control-flow ops, the nearest ``LoopCond``'s input.
    An ``Enter`` that passes a loop invariant (a variable) into the frame reaches no
    ``LoopCond``: it joins the row of what reads it there. No rows of its own."""

    name = "joined to the loop's condition"
    confidence = None  # no rows of its own

    def joining(self, side: Side, pool: dict[str, str]) -> list[str]:
        # by name: the graph does not have them, so their place in the pool is by timing
        return sorted(n for n in pool if side.plain_type[n] in LOOP_CONTROL_OPS)

    def joins(self, side: Side, name: str, row_of: dict[str, int]) -> str | None:
        condition = _loop_condition(side, name)
        if condition in row_of:
            return condition
        if side.plain_type[name] not in _ENTERS:  # an Exit's readers are past the loop
            return None
        readers = sorted(n for n in side.consumers.get(name, ()) if n in row_of)
        return readers[0] if readers else None


def _loop_condition(side: Side, start: str, depth: int = 4) -> str | None:
    """The op whose result the nearest ``LoopCond`` from ``start`` reads (breadth first
    along dataflow, consumers by name before producers, through control-flow ops only, at
    most ``depth`` edges), or None."""
    seen, frontier = {start}, [start]
    for _ in range(depth + 1):
        following = []
        for name in frontier:
            if side.plain_type.get(name) == "LoopCond":
                return next(iter(side.producers.get(name, ())), None)
            # consumers are listed in the order they first ran: sorted, so timing decides nothing
            for near in (*sorted(side.consumers.get(name, ())), *side.producers.get(name, ())):
                if near not in seen and side.plain_type.get(near) in LOOP_CONTROL_OPS:
                    seen.add(near)
                    following.append(near)
        frontier = following
    return None


__all__ = ["LOOP_CONTROL_OPS", "LoopControlJoinsCondition"]
