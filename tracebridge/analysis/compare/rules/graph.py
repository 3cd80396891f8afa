"""The alignment rules that read the recorded graphs (:mod:`.graphs.structure` aligned them):
structure pairs and groups run first, since the structure knows which op is which where
names only look alike; shape-only ops left over at the end join the rows of their graph
neighbours."""

from __future__ import annotations

import re
from collections import defaultdict

from ...graphs.recorded_graph import SHAPE_ONLY_OPS, graph_node_name
from ...graphs.structure import Alignment
from ..names import op_scope, pair_key, plain_name, same_scope
from ..sides import Side
from .matcher import JoinRule, Matcher, Rule


class TraceNames:
    """Each side's trace name for a graph node: its own, or, where Grappler rewrote the
    node after the graph was recorded or it runs in a loop, the name it ran under."""

    def __init__(self, control: Side, test: Side):
        self.sides = {"control": control, "test": test}
        self.run_as = {side_name: _rewritten_by_grappler(side) for side_name, side in self.sides.items()}

    def unmatched(self, matcher: Matcher, side_name: str, node: str) -> str | None:
        """The trace name of ``node`` while it is still unmatched, else None."""
        pool = matcher.unmatched(side_name)
        node = node if node in pool else self.run_as[side_name].get(node, node)
        return node if node in pool else None

    def all_unmatched(self, matcher: Matcher, side_name: str, nodes) -> list[str]:
        return [n for n in (self.unmatched(matcher, side_name, node) for node in nodes) if n]

    def ran(self, side_name: str, node: str) -> bool:
        side = self.sides[side_name]
        return node in side.total or self.run_as[side_name].get(node) in side.total


class StructurePairs(Rule):
    """Node pairs of the structure, with the shape-only ops the structure joined to each
    (``exact`` where the names agree and nothing joined). A node whose counterpart never
    ran stays unmatched, and ``notes`` say how much time that leaves."""

    name = "structure"
    confidence = 0.95

    def __init__(self, alignment: Alignment, names: TraceNames, notes: list[str] | None):
        self.alignment, self.names, self.notes = alignment, names, notes

    def match(self, matcher: Matcher) -> None:
        joined: dict[tuple[str, str], list[str]] = defaultdict(list)  # (side, the pair's control node) -> nodes
        for side_name, nodes in self.alignment.attached.items():
            for node, control_node in nodes.items():
                joined[side_name, control_node].append(node)
        not_run: dict[str, list[str]] = {"control": [], "test": []}  # paired in the graphs, run on one side only
        for node_c, node_t in self.alignment.pairs:
            c, t = self.names.unmatched(matcher, "control", node_c), self.names.unmatched(matcher, "test", node_t)
            if c and not self.names.ran("test", node_t) or t and not self.names.ran("control", node_c):
                not_run["test" if c else "control"].append(c or t)
            if c and t:
                extra_c = self.names.all_unmatched(matcher, "control", joined["control", node_c])
                extra_t = self.names.all_unmatched(matcher, "test", joined["test", node_c])
                same = plain_name(c) == plain_name(t) and not (extra_c or extra_t)
                matcher.pair([c, *extra_c], [t, *extra_t], pair_key(c, t), "exact" if same else self.name)
        if self.notes is not None:
            self.notes.extend(_not_run_notes(matcher.control, matcher.test, not_run))


class StructureGroups(Rule):
    """Regions the structure paired as wholes (a fused batch norm against Keras's
    arithmetic), as far as they ran on both sides."""

    name = "group"
    confidence = 0.8

    def __init__(self, alignment: Alignment, names: TraceNames):
        self.alignment, self.names = alignment, names

    def match(self, matcher: Matcher) -> None:
        for members_c, members_t in self.alignment.groups:
            names_c = self.names.all_unmatched(matcher, "control", members_c)
            names_t = self.names.all_unmatched(matcher, "test", members_t)
            if names_c and names_t:
                key = pair_key(named_by(matcher.control, names_c), named_by(matcher.test, names_t))
                matcher.pair(names_c, names_t, f"{key} [group of {len(names_c)} ~ {len(names_t)} ops]", self.name)


def structure_rules(control: Side, test: Side, alignment: Alignment, notes: list[str] | None) -> list[Rule]:
    names = TraceNames(control, test)
    return [StructurePairs(alignment, names, notes), StructureGroups(alignment, names)]


# What joins a neighbour's row when left over: shape-only ops (a reshape whose counterpart
# Grappler folded away), and what only feeds a value in, computing nothing (TF1 runs its
# constants; a Shape reads only its input's shape).
_JOINS_A_NEIGHBOUR = SHAPE_ONLY_OPS | {"Const", "Shape"}


class ShapeOpsJoinNeighbours(JoinRule):
    """Constants and shape-only ops left over join the row of a graph neighbour that has
    one: in their own scope first, then in their layer, what they feed before what feeds
    them; never another layer's row (the LSTM's last time step, sliced out for the
    classifier alone, stays alone). No rows of its own: a joined op takes its neighbour's
    row, rule and confidence."""

    name = "joined to a neighbour"
    confidence = None  # no rows of its own
    chains = True

    def joining(self, side: Side, pool: dict[str, str]) -> list[str]:
        return [n for n in pool if side.graph.types.get(n) in _JOINS_A_NEIGHBOUR]

    def joins(self, side: Side, name: str, row_of: dict[str, int]) -> str | None:
        near = [n for n in (*side.graph.consumers.get(name, ()), *side.graph.producers.get(name, ()))
                if n in row_of and _farness(name, side, n) is not None]
        return min(near, key=lambda n: _farness(name, side, n), default=None)


def _farness(name: str, side: Side, neighbour: str) -> int | None:
    """How near ``neighbour`` is to ``name`` in the model: 0 in the same scope, 1 in the
    same layer (a scope inside or around it, or the op ``name`` is named under, as a
    ``Tile``'s ``multiples``), None in another layer."""
    text, other_text = side.rewritten[name], side.rewritten.get(neighbour, neighbour)
    scope, other = op_scope(text), op_scope(other_text)
    if other == scope:
        return 0
    same_layer = other[1] == scope[1] and same_scope(other[0], scope[0])
    return 1 if same_layer or text.startswith(other_text + "/") else None


def matched_scopes(matcher: Matcher):
    """Control op name -> the test scopes matched to its scope by the pairs so far (names,
    structure, groups), or None where its scope matched none: a scope corresponds to
    another when some op of one paired an op of the other."""
    control, test = matcher.control, matcher.test
    matched: dict[tuple, set] = defaultdict(set)
    for pair in matcher.pairs:
        if pair.rule in ("optimizer", "type+position", "unmatched"):
            continue
        for c in pair.control:
            for t in pair.test:
                matched[op_scope(control.rewritten[c])].add(op_scope(test.rewritten[t]))
    return lambda name: matched.get(op_scope(control.rewritten[name])) or None


def named_by(side: Side, names: list[str]) -> str:
    """The op a group's key names: its first (in graph order) that computes something."""
    return next((n for n in names if side.plain_type[n] not in _INERT), names[0])


_INERT = {"Const", "Shape", "VarHandleOp", "_Arg", "NoOp", "Placeholder", "ReadVariableOp", "Identity"}


def _not_run_notes(control: Side, test: Side, not_run: dict[str, list[str]]) -> list[str]:
    """Ops whose counterpart in the other graph never ran (Grappler pruned it: in a TF1
    Session, ``tf.gradients`` differentiates a loop's every input, where TF2 prunes what the
    tape did not ask for). They stay unmatched; the note says why."""
    out = []
    for missing, ran, side in (("test", "control", control), ("control", "test", test)):
        names = not_run[missing]
        time = sum(side.total[n] for n in names) / (side.all_time or 1.0)
        if names and time >= 0.001:
            example = max(names, key=lambda n: (side.total[n], n))
            out.append(f"{len(names)} {ran} ops ({time:.1%} of its op time) pair structurally with {missing} graph "
                       f"nodes that did not run there (pruned, or renamed by a rewrite), e.g. {example}")
    return out


# ``AddOpsRewrite`` also names the partial sums it adds ``..._Leaf_<n>_<node>``.
_GRAPPLER_RENAMED = re.compile(r"^(?P<scope>.*)/ArithmeticOptimizer/[A-Za-z]+_(?P<leaf>Leaf_\d+_)?(?P<base>[^/]+)$")


def _rewritten_by_grappler(side: Side) -> dict[str, str]:
    """Graph node -> the trace's name for it: inside a loop, the name without the loop's
    runtime id; and where Grappler's arithmetic optimizer replaced the node by one named
    ``<scope>/ArithmeticOptimizer/<Rule>_<node>`` (as ``FoldTransposeIntoMatMul`` does to a
    transpose-fed MatMul), the replacement's."""
    renamed: dict[str, list[tuple[bool, str]]] = {}  # graph node -> (a partial sum?, trace name)
    if not side.graph:
        return {}
    for name in side.names:
        node = graph_node_name(name)
        if node != name and node in side.graph.order:
            renamed.setdefault(node, []).append((False, name))
            continue
        match = _GRAPPLER_RENAMED.match(node)
        if match and node not in side.graph.order:
            original = f"{match.group('scope')}/{match.group('base')}"
            if original in side.graph.order and original not in side.total:
                renamed.setdefault(original, []).append((bool(match.group("leaf")), name))
    # the rewrite itself before its partial sums, then by name: never by which ran first
    return {original: min(names)[1] for original, names in renamed.items()}


__all__ = ["ShapeOpsJoinNeighbours", "StructureGroups", "StructurePairs", "TraceNames", "matched_scopes", "named_by",
           "structure_rules"]
