"""The XLA rule: an XLA run's thunk and kernel rows against the ops of a run without XLA,
through the HLO metadata.

The XSpace reader names each XLA event's row after the TF op its HLO instruction came from
and marks it with ``hlo_instruction`` and, where it computes several TF ops (a fusion), a
``tf_ops`` stat naming them all, its own first (readers/xspace_xla.py). Each XLA row has a
*home*: the first of its TF ops whose counterpart in the other run is known, by the
recorded graphs' alignment (a node pair, or a region paired as a whole, as a fused batch
norm against Keras's arithmetic; an op the other run fused into a kernel, that kernel) or,
where the graphs place nothing, by name, gradient path or as its layer's fused kernel. The XLA rows of one home and
its ops in the other run form one row; the other run's ops that a fusion computed besides
its home, and that are no XLA row's home, join that row: the fusion's time stands against
all the ops it computed, never silently against the first alone. Its key names the
fusions and their TF ops.
"""

from __future__ import annotations

from collections import defaultdict

from ...common.kernels import fusion_parts
from ...common.xla import xla_ops
from ...graphs.structure import Alignment
from ..names import GRADIENT_TAIL_LENGTHS, gradient_tail, op_scope, plain_name, without_wrappers
from .graph import TraceNames, named_by
from .matcher import SIDES, Matcher, Rule

KEY_OPS = 6  # TF ops a row's key names before "and N more"


class XlaInstructions(Rule):
    """One side's XLA rows against the other side's ops they compute (module docstring).
    Where both sides ran XLA their rows carry the same TF op names, for the name rules."""

    name = "xla"
    confidence = 0.8

    def __init__(self, alignment: Alignment | None, names: TraceNames):
        self.alignment, self.names = alignment, names

    def match(self, matcher: Matcher) -> None:
        found = {side_name: xla_ops(matcher.side(side_name).trace, matcher.side(side_name).total)
                 for side_name in SIDES}
        for xla_side, other_side in (("test", "control"), ("control", "test")):
            if found[xla_side] and not found[other_side]:
                self._pair_side(matcher, xla_side, other_side, found[xla_side])

    def _pair_side(self, matcher: Matcher, xla_side: str, other_side: str, ops: dict[str, tuple[str, ...]]) -> None:
        homes = _Homes(matcher, xla_side, other_side, self.alignment, self.names)
        side = matcher.side(xla_side)
        rows = [name for name in matcher.unmatched(xla_side) if name in ops]
        home = {}
        for name in rows:
            home_of = next((unit for unit in map(homes.unit, ops[name]) if unit is not None), None)
            if home_of is not None:
                home[name] = home_of
        members: dict[tuple, list[str]] = defaultdict(list)
        for name in rows:
            if name in home:
                members[home[name]].append(name)
        taken = set(members)
        joined: dict[tuple, list[tuple]] = defaultdict(list)
        for name in sorted(home, key=lambda n: (-side.total[n], n)):  # the largest fusion first
            for unit in map(homes.unit, ops[name]):
                if unit is not None and unit not in taken:
                    taken.add(unit)
                    joined[home[name]].append(unit)
        row_of: dict[str, int] = {}  # XLA row -> the index of its pair
        for unit, xla_rows in members.items():
            others = [n for u in (unit, *joined[unit]) for n in homes.names(u)]
            if not others:
                continue
            computed = list(dict.fromkeys(op for name in xla_rows for op in ops[name]))
            key = _key(named_by(matcher.side(other_side), others), xla_rows, computed, xla_side)
            pair = (others, xla_rows) if xla_side == "test" else (xla_rows, others)
            matcher.pair(*pair, key, self.name, across_zones=True)
            row_of.update((name, len(matcher.pairs) - 1) for name in xla_rows)
        homes.join_writes(ops, row_of)


def _key(other: str, xla_rows: list[str], computed: list[str], xla_side: str) -> str:
    """``<other op> ~ <XLA rows>``, with ``[XLA fusion of N TF ops: ...]`` where the XLA
    rows compute more than one TF op or are not named after it."""
    shown = "+".join(xla_rows[:3]) + (f"+{len(xla_rows) - 3} more" if len(xla_rows) > 3 else "")
    names = (other, shown) if xla_side == "test" else (shown, other)
    key = names[0] if plain_name(names[0]) == plain_name(names[1]) else f"{names[0]} ~ {names[1]}"
    if len(computed) > 1 or computed[0] not in xla_rows:
        listed = ", ".join(computed[:KEY_OPS]) + (f" and {len(computed) - KEY_OPS} more" if len(computed) > KEY_OPS
                                                   else "")
        key += f" [XLA fusion of {len(computed)} TF ops: {listed}]"
    return key


_WRITES = {"AssignVariableOp", "AssignSubVariableOp", "AssignAddVariableOp"}
_PASS_THROUGH = {"Identity", "ReadVariableOp", "Cast"}


def _value_source(graph, node: str, computed_by: dict[str, str]) -> str | None:
    """The XLA row that computes the value a write ``node`` writes (its last input), through
    identities."""
    inputs = graph.producers.get(node, ())
    value = inputs[-1] if inputs else None
    for _ in range(4):
        if value is None or value in computed_by:
            break
        value = graph.producers.get(value, (None,))[0] if graph.types.get(value) in _PASS_THROUGH else None
    return computed_by.get(value) if value else None


class _Homes:
    """Where a TF op of the XLA side stands in the other run: a unit (a node pair or a
    region the graphs' alignment paired; where the graphs place nothing, an op found by
    name, gradient path or as its layer's fused kernel) and the other run's still
    unmatched ops of it."""

    def __init__(self, matcher: Matcher, xla_side: str, other_side: str, alignment: Alignment | None,
                 names: TraceNames):
        self.matcher, self.xla_side, self.other_side, self.names_of = matcher, xla_side, other_side, names
        self.alignment = alignment
        self.node_of: dict[str, str] = {}             # TF op name -> the XLA side's graph node
        self.unit_of_node: dict[str, tuple] = {}      # the XLA side's graph node -> its unit
        self.unit_of_other: dict[str, tuple] = {}     # the other side's graph node -> its unit
        self.attached: dict[str, list[str]] = defaultdict(list)  # the other side's pair node -> nodes joined
        if alignment is not None:
            self._index_graphs(alignment)
        self.by_name: dict = {}
        self._index_names()

    def _index_graphs(self, alignment: Alignment) -> None:
        xla_graph = self.matcher.side(self.xla_side).graph
        unwrapped: dict[str, list[str]] = defaultdict(list)  # HLO op_names leave the function call out
        for node in xla_graph.order:
            unwrapped[without_wrappers(node)].append(node)
        self.node_of = {name: nodes[0] for name, nodes in unwrapped.items() if len(nodes) == 1}
        self.node_of.update({node: node for node in xla_graph.order})
        mine, theirs = (1, 0) if self.xla_side == "test" else (0, 1)
        test_of = dict(alignment.pairs)  # control node -> test node
        for pair in alignment.pairs:
            self.unit_of_node[pair[mine]] = self.unit_of_other[pair[theirs]] = ("pair", pair[theirs])
        for index, group in enumerate(alignment.groups):
            for node in group[mine]:
                self.unit_of_node.setdefault(node, ("group", index))
            for node in group[theirs]:
                self.unit_of_other.setdefault(node, ("group", index))
        # attached: side -> {node: the control node of the pair it joined}
        for node, control_node in alignment.attached.get(self.xla_side, {}).items():
            other_node = control_node if self.xla_side == "test" else test_of.get(control_node)
            if other_node:
                self.unit_of_node.setdefault(node, ("pair", other_node))
        for node, control_node in alignment.attached.get(self.other_side, {}).items():
            other_node = control_node if self.other_side == "control" else test_of.get(control_node)
            if other_node:
                self.attached[other_node].append(node)

    def _index_names(self) -> None:
        """The other run's ops by name, by gradient path, and its fused kernels by layer."""
        other = self.matcher.side(self.other_side)
        for name in other.names:
            text = other.rewritten[name]
            self.by_name.setdefault(plain_name(text), name)
            for length in GRADIENT_TAIL_LENGTHS:
                key = gradient_tail(length)(text)
                if key:
                    self.by_name.setdefault(key, name)
            if fusion_parts(other.type[name]):
                self.by_name.setdefault(op_scope(text), name)

    def unit(self, tf_op: str) -> tuple | None:
        """The unit of ``tf_op`` in the other run, if it ran there (as itself, or inside a
        kernel the other run fused it into); else None."""
        node = self.node_of.get(tf_op)
        unit = self.unit_of_node.get(node) if node else None
        if unit is not None and self._ran(unit):
            return unit
        fused = self._fused_into(unit[1]) if unit is not None and unit[0] == "pair" else None
        if fused is not None:
            return fused
        keys = (plain_name(tf_op), *(gradient_tail(length)(tf_op) for length in GRADIENT_TAIL_LENGTHS),
                op_scope(tf_op))
        name = next((self.by_name[key] for key in keys if key and key in self.by_name), None)
        return ("name", name) if name else None

    def _ran(self, unit: tuple) -> bool:
        if unit[0] == "name":
            return True
        return any(self.names_of.ran(self.other_side, node) for node in self._nodes(unit))

    def _fused_into(self, node: str) -> tuple | None:
        """The unit of the other run's fused kernel that took ``node`` in (Grappler's remapper
        or oneDNN fuses a MatMul into the ``_FusedMatMul`` named after its BiasAdd, a ReLU
        into the batch norm before it): a graph neighbour that ran as a fusion."""
        side = self.matcher.side(self.other_side)
        for near in (*side.graph.consumers.get(node, ()), *side.graph.producers.get(node, ())):
            name = self.names_of.run_as[self.other_side].get(near, near)
            if name in side.type and fusion_parts(side.type[name]):
                return self.unit_of_other.get(near)
        return None

    def _nodes(self, unit: tuple) -> list[str]:
        kind, value = unit
        if kind == "name":
            return []
        if kind == "pair":
            return [value, *self.attached.get(value, ())]
        return list(self.alignment.groups[value][0 if self.other_side == "control" else 1])

    def join_writes(self, ops: dict[str, tuple[str, ...]], row_of: dict[str, int]) -> None:
        """The other run's variable writes still unmatched join the row of the XLA rows that
        compute the value written: XLA writes a variable as an output of its module, with
        no instruction (nor time) of its own."""
        if self.alignment is None:
            return
        xla = self.matcher.side(self.xla_side)
        computed_by = {self.node_of.get(op): name for name, tf_ops in ops.items() if name in row_of for op in tf_ops}
        computed_by.pop(None, None)
        mine, theirs = (1, 0) if self.xla_side == "test" else (0, 1)
        for pair in self.alignment.pairs:
            node, other_node = pair[mine], pair[theirs]
            if xla.graph.types.get(node) not in _WRITES:
                continue
            name = self.names_of.unmatched(self.matcher, self.other_side, other_node)
            value = _value_source(xla.graph, node, computed_by)
            if name and value:
                self.matcher.join(self.other_side, name, row_of[value], across_zones=True)

    def names(self, unit: tuple) -> list[str]:
        """The other run's ops of ``unit`` no rule has taken yet."""
        if unit[0] == "name":
            return [unit[1]] if unit[1] in self.matcher.unmatched(self.other_side) else []
        return self.names_of.all_unmatched(self.matcher, self.other_side, self._nodes(unit))


__all__ = ["XlaInstructions"]
