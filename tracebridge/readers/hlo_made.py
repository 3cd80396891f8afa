"""The framework op an HLO instruction without one of its own computes for.

XLA makes instructions while it optimizes: a filter gradient becomes a convolution (or a
dot) with new dimensions, a max pool's gradient a variadic ``reduce-window`` and a scatter,
layouts bring copies and transposes. Such an instruction has no metadata and calls nothing
that has, so no framework op names it (xprof shows it under its own name). It is placed by
the dataflow around it, read across fusion boundaries (a fusion without metadata of its own
is entered at the parameter an edge arrives as, or left at its root):

- where the capture recorded the framework graph (trace metadata ``graph``): the graph's op
  between the instruction's operands and its users that no instruction of the module
  computes (TF's ``Conv2DBackpropFilter`` when XLA rewrote every instruction of it): it
  reads values of the operands' ops (the more operands, the better), and the users' ops
  read its value. Where two fit as well, the one that reads a variable of a shape the users'
  ops write wins (a filter gradient reads its layer's kernel; the optimizer writes the
  kernel's momentum); where that does not tell them apart, neither is taken;
- else the nearest framework op downstream of its first user that leads to one, the op it
  computes for; with none there, the nearest upstream, whose result it finishes.
"""

from __future__ import annotations

import json

from ..model.hlo import without_wrappers

# Graph ops that only pass a value on, read a variable or describe a shape: never the op
# an instruction computes for.
_PLAIN_GRAPH_OPS = frozenset({
    "Identity", "IdentityN", "Const", "Shape", "ShapeN", "Size", "Rank", "ReadVariableOp", "VarHandleOp",
    "NoOp", "_Arg", "_Retval", "Placeholder", "StopGradient", "PreventGradient",
})
_IDENTITIES = ("Identity", "IdentityN")
_HOPS = 3          # graph edges between an op and the variable it reads or the ops it feeds
NEAREST_HOPS = 12  # instructions crossed looking for the nearest framework op


class FrameworkGraph:
    """The framework graph a capture recorded (capture/graph_record.py's JSON: nodes
    ``[name, type, [inputs], shape]`` and ``variables`` by resource node), by the names XLA
    gives ops: each node's type, producers and consumers, and which nodes are variables."""

    def __init__(self, types: dict[str, str], producers: dict[str, tuple[str, ...]], variables: dict[str, tuple]):
        self.types, self.producers = types, producers
        self.variables = variables  # resource node -> the variable's shape
        self.consumers: dict[str, list[str]] = {}
        for name, inputs in producers.items():
            for producer in inputs:
                self.consumers.setdefault(producer, []).append(name)

    @classmethod
    def parse(cls, text) -> "FrameworkGraph | None":
        """The graph of a trace's ``graph`` metadata text; None where there is none or it
        is not a graph record (the HLO then places instructions by itself)."""
        if not isinstance(text, str) or not text:
            return None
        try:
            record = json.loads(text)
            nodes, variables = record["nodes"], record["variables"]
            types = {without_wrappers(node[0]): str(node[1]) for node in nodes}
            producers = {without_wrappers(node[0]): tuple(dict.fromkeys(
                without_wrappers(str(i)) for i in node[2])) for node in nodes}
            shapes = {without_wrappers(name): tuple(value[1] or ()) for name, value in variables.items()}
            return cls(types, producers, shapes)
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def within(self, start, step, hops: int = _HOPS, through=None) -> set[str]:
        """``start`` and the nodes ``hops`` edges or fewer from it along ``step``
        (:meth:`upstream` or :meth:`downstream`), going on only from nodes ``through``
        allows (every node where it is None)."""
        seen, frontier = set(start), list(start)
        for _ in range(hops):
            reached = []
            for node in frontier:
                for near in step(node):
                    if near not in seen:
                        seen.add(near)
                        reached.append(near)
            frontier = [n for n in reached if through is None or through(n)]
        return seen

    def inputs(self, node: str) -> set[str]:
        """The ops whose values ``node`` reads, through the identities that pass them on."""
        return {p for producer in self.upstream(node)
                for p in (self.upstream(producer) if self.types.get(producer) in _IDENTITIES else (producer,))}

    def upstream(self, node: str) -> tuple[str, ...]:
        return self.producers.get(node, ())

    def downstream(self, node: str) -> list[str]:
        return self.consumers.get(node, [])


class Dataflow:
    """One module's instructions as one dataflow graph across fusion boundaries: the
    nearest framework ops up or down from an instruction. Rows are instruction indices;
    ``op_of(row)`` is its own framework op, or None."""

    def __init__(self, op_of, operands: list[list[int]], opcodes: list[str], fusion_callee: dict[int, int],
                 roots: dict[int, int], parameters: dict[tuple[int, int], int], caller: dict[int, int],
                 owner: list[int], parameter_number: list[int]):
        self.op_of, self.operands, self.opcodes = op_of, operands, opcodes
        self.fusion_callee, self.roots, self.parameters = fusion_callee, roots, parameters
        self.caller, self.owner, self.parameter_number = caller, owner, parameter_number
        self.root_of = {root: comp for comp, root in roots.items()}
        self.users: list[list[tuple[int, int]]] = [[] for _ in operands]
        for row, row_operands in enumerate(operands):
            for index, operand in enumerate(row_operands):
                self.users[operand].append((row, index))

    def _enter(self, row: int, at: int | None, down: bool) -> int:
        """``row`` itself, or for a fusion the instruction inside that the edge reaches: the
        parameter ``at`` going down (the op that reads the value there is nearer than the
        fusion's own), the root going up."""
        callee = self.fusion_callee.get(row)
        if callee is None:
            return row
        inner = self.parameters.get((callee, at)) if down else self.roots.get(callee)
        return row if inner is None else inner

    def next_rows(self, row: int, down: bool) -> list[int]:
        found = []
        if down:
            found += [self._enter(user, index, True) for user, index in self.users[row]]
            caller = self.caller.get(self.root_of.get(row, -1))  # a fusion's root: on to the fusion's users
            if caller is not None:
                found += self.next_rows(caller, True)
        else:
            found += [self._enter(operand, None, False) for operand in self.operands[row]]
            if self.opcodes[row] == "parameter":  # a fusion's parameter: on to the fusion's operand
                caller = self.caller.get(self.owner[row])
                if caller is not None and self.parameter_number[row] < len(self.operands[caller]):
                    found.append(self._enter(self.operands[caller][self.parameter_number[row]], None, False))
        return found

    def nearest(self, starts: list[int], down: bool, hops: int = NEAREST_HOPS) -> list[tuple[str, str]]:
        """The framework ops nearest to ``starts`` (those rows included), in the order
        found: all those at the least distance that has any."""
        seen, frontier = set(starts), list(starts)
        for _ in range(hops + 1):
            found = [op for op in map(self.op_of, frontier) if op is not None]
            if found:
                return list(dict.fromkeys(found))
            frontier = [n for row in frontier for n in self.next_rows(row, down) if n not in seen and not seen.add(n)]
            if not frontier:
                break
        return []

    def nearest_from_each(self, rows: list[int], down: bool) -> list[list[tuple[str, str]]]:
        """:meth:`nearest` from each of ``rows`` on its own (an operand's ops apart from another's)."""
        return [self.nearest([row], down) for row in dict.fromkeys(rows)]


def made_for(row: int, flow: Dataflow, graph: FrameworkGraph | None, computed: set[str]) -> tuple[str, str] | None:
    """The framework op instruction ``row`` (without one of its own, nothing inside) computes
    for (module docstring). ``computed``: the ops some instruction of the module names."""
    users = flow.next_rows(row, True)
    operands = flow.next_rows(row, False)
    # the first user that leads to an op (XLA lists users in program order) says what it is for
    down = next((ops for ops in flow.nearest_from_each(users, True) if ops), [])
    if graph is not None:
        found = _missing_op(flow.nearest_from_each(operands, False), down, graph, computed)
        if found is not None:
            return found
    if down:
        return down[0]
    up = flow.nearest(operands, False) if operands else []
    return up[0] if up else None


def _missing_op(branches: list[list[tuple[str, str]]], down: list[tuple[str, str]], graph: FrameworkGraph,
                computed: set[str]) -> tuple[str, str] | None:
    """The graph op between the operands' ops (``branches``, one list per operand) and the
    users' ops (``down``) that no instruction computes, if one is the best placed."""
    def known(ops) -> set[str]:
        return {n for n in (without_wrappers(name) for name, _ in ops) if n in graph.types}
    branch_sets = [found for found in map(known, branches) if found]
    below = known(down)
    if not branch_sets or not below:
        return None

    def missing(node: str) -> bool:
        return node not in computed and graph.types.get(node, "") not in _PLAIN_GRAPH_OPS

    def passes(node: str) -> bool:  # what a value crosses between ops that compute
        return node not in computed or graph.types.get(node) in _IDENTITIES

    # The shapes of the variables the users' ops write: the weights a gradient updates, or
    # an optimizer's slot of their shape (momentum writes the slot, the weight reads it back).
    feeds = graph.within(below, graph.downstream, 2)
    written = {graph.variables[p] for node in feeds for p in graph.upstream(node) if p in graph.variables}
    candidates = {n for ops in branch_sets for n in graph.within(ops, graph.downstream, 2, passes) if missing(n)}
    scored = []
    for node in candidates:
        inputs = graph.inputs(node)
        fed = sum(bool(inputs & ops) for ops in branch_sets)
        reaches = bool(graph.within([node], graph.downstream, _HOPS) & below)
        read = {graph.variables[n] for n in graph.within([node], graph.upstream, _HOPS) if n in graph.variables}
        updates = bool(read & written)
        if fed and reaches:  # between the two: fed by the operands' ops, feeding the users'
            scored.append(((fed, updates), node))
    if not scored:
        return None
    scored.sort(reverse=True)
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return None  # two ops fit as well: the graph does not say which
    node = scored[0][1]
    return node, graph.types[node]


__all__ = ["Dataflow", "FrameworkGraph", "NEAREST_HOPS", "made_for"]
