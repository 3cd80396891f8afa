"""Aligning two runs by the model's structure: the graphs recorded at capture time.

Names differ between TF1 and TF2 code of one model, and positions shift with every
rewrite; the structure does not. Both graphs read the same variables (same shapes, created
in the same order within a shape) and wire the same computations to them. So:

1. **Variables are anchors.** Kernels pair by shape in their order in the graph (creation
   order for TF1, first use for a ``tf.function``'s captures); after propagating from
   them, variables whose shapes repeat (``gamma``, ``moving_mean``, ...: the roles TF1
   layers and Keras share) pair with the candidate of their shape and role that has the
   most paired nodes around it in common.
2. **Propagation.** From every pair, the neighbours along dataflow edges (consumers, then
   producers) pair when they have the same graph op type, in creation order among
   same-typed neighbours: the conv that reads a matched kernel, its gradients, the
   activation after it, the next layer. Graph op types do not depend on the TF build, so a
   oneDNN run aligns with a plain one.
3. **Groups** (analysis/graphs/structure_regions.py). What is left unpaired forms connected
   regions between paired nodes; a region on one side and a region on the other with the
   same paired neighbours compute the same thing another way (``FusedBatchNormV3``
   against Keras's moments and arithmetic, ``L2Loss`` against ``Square`` + ``Sum``) and
   pair as one group.
4. **Regions at one end.** What only feeds one paired node and reads nothing paired (a
   dropout's random numbers), or what only one paired node feeds (a bias gradient before
   the optimizer), pairs with its counterpart at the same node, as one group.

Everything is ordered by graph position and names, never by time, so the same graphs give
the same pairs whatever the warm-up or the timing.
"""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from dataclasses import dataclass, field

from .recorded_graph import SHAPE_ONLY_OPS, Graph, op_kind
from .structure_regions import pair_regions


@dataclass
class Alignment:
    """Node pairs (one to one) and groups (regions paired as wholes), by graph node name."""

    pairs: list[tuple[str, str]]
    groups: list[tuple[tuple[str, ...], tuple[str, ...]]]
    # Unpaired shape-only ops (a transpose one side's einsum needs) joined to the pair next
    # to them: side -> {node: the pair's control node}.
    attached: dict[str, dict[str, str]] = field(default_factory=dict)


def align_graphs(control: Graph, test: Graph) -> Alignment:
    paired_c: dict[str, str] = {}
    paired_t: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []

    def pair(c: str, t: str) -> bool:
        if c in paired_c or t in paired_t:
            return False
        paired_c[c], paired_t[t] = t, c
        pairs.append((c, t))
        return True

    def propagate(frontier):
        """Breadth first along dataflow edges from ``frontier``'s pairs."""
        while frontier:
            following = []
            for c, t in frontier:
                for edges in (Edges.CONSUMERS, Edges.PRODUCERS):
                    neighbours_c = _neighbours(control, c, edges)
                    neighbours_t = _neighbours(test, t, edges)
                    free_c = [n for n in neighbours_c if n not in paired_c]
                    free_t = [n for n in neighbours_t if n not in paired_t]
                    for nc, nt in _matching_neighbours(control, free_c, test, free_t):
                        if pair(nc, nt):
                            following.append((nc, nt))
            frontier = following

    # 1. Variables: kernels (shapes tell layers apart) by shape, in graph order; then the
    # others (batch-norm vectors, biases, optimizer slots), whose shapes repeat, by the
    # paired nodes around them (most in common first), then by shape and role alone.
    def anchor(variables_c, variables_t, key_c, key_t):
        by_key_t: dict[tuple, list[str]] = defaultdict(list)
        for name, shape, role in variables_t:
            if name not in paired_t:
                by_key_t[key_t(name, shape, role)].append(name)
        new_pairs = []
        for name, shape, role in variables_c:
            if name in paired_c:
                continue
            candidates = by_key_t.get(key_c(name, shape, role))
            if candidates and pair(name, candidates[0]):
                new_pairs.append((name, candidates.pop(0)))
        propagate(new_pairs)

    kernels_c = [v for v in control.variables if v[2] in _WEIGHTS]
    kernels_t = [v for v in test.variables if v[2] in _WEIGHTS]
    anchor(kernels_c, kernels_t, lambda n, shape, role: (shape, role), lambda n, shape, role: (shape, role))
    around_c = {n: _paired_around(control, n, paired_c, lambda x: x) for n, _, _ in control.variables}
    around_t = {n: _paired_around(test, n, paired_t, lambda x: paired_t[x]) for n, _, _ in test.variables}
    candidates = sorted(((_closeness(around_c[c], around_t[t]), -control.order[c], -test.order[t], c, t)
                         for c, shape_c, role_c in control.variables if c not in paired_c
                         for t, shape_t, role_t in test.variables
                         if t not in paired_t and (shape_c, role_c) == (shape_t, role_t)), reverse=True)
    propagate([(c, t) for shared, _, _, c, t in candidates if shared and pair(c, t)])
    anchor(control.variables, test.variables, lambda n, shape, role: (shape, role),
           lambda n, shape, role: (shape, role))

    # 3 and 4: what is left forms regions between or at the end of paired nodes
    groups, grouped_c, grouped_t = pair_regions(control, test, paired_c, paired_t, pairs)
    attached = {}
    for side, graph, paired, grouped, control_name_of in (
            ("control", control, paired_c, grouped_c, lambda n: n),
            ("test", test, paired_t, grouped_t, lambda n: paired_t[n])):
        attached[side] = {}
        for name, op_type in graph.types.items():
            if op_type in SHAPE_ONLY_OPS and name not in paired and name not in grouped:
                near = [n for edges in (Edges.PRODUCERS, Edges.CONSUMERS) for n in _neighbours(graph, name, edges)
                        if n in paired and graph.types[n] not in SHAPE_ONLY_OPS]
                if near:
                    attached[side][name] = control_name_of(min(near, key=graph.order.__getitem__))
    return Alignment(pairs=pairs, groups=groups, attached=attached)


_WEIGHTS = ("kernel", "recurrent_kernel", "embeddings")  # the anchors whose shapes tell layers apart


def _matching_neighbours(control: Graph, names_c: list[str], test: Graph, names_t: list[str]):
    """Neighbours of a pair that pair in turn: the same op type, and where a type repeats
    (a variable's several reads), the same types of consumers; in graph order."""
    out = []
    by_type_t = _by_type(test, names_t)
    for op_type, same_c in _by_type(control, names_c).items():
        same_t = by_type_t.get(op_type, [])
        if len(same_c) == len(same_t) == 1:
            out.append((same_c[0], same_t[0]))
            continue
        by_use_t: dict[tuple, list[str]] = defaultdict(list)
        for name in same_t:
            by_use_t[_uses(test, name)].append(name)
        by_use_c: dict[tuple, list[str]] = defaultdict(list)
        for name in same_c:
            by_use_c[_uses(control, name)].append(name)
        left_c, left_t = list(same_c), list(same_t)
        for uses, group_c in by_use_c.items():
            group_t = by_use_t.get(uses, [])
            if len(group_c) == len(group_t):
                out.extend(zip(group_c, group_t))
                left_c = [n for n in left_c if n not in group_c]
                left_t = [n for n in left_t if n not in group_t]
        if len(left_c) == len(left_t):  # used differently (a rewrite): creation order decides
            out.extend(zip(left_c, left_t))
    return out


def _uses(graph: Graph, name: str) -> tuple[str, ...]:
    return tuple(sorted({op_kind(graph.types[n]) for n in _neighbours(graph, name, Edges.CONSUMERS)
                         if graph.types[n] not in SHAPE_ONLY_OPS}))


def _paired_around(graph: Graph, start: str, paired: dict[str, str], control_name_of, limit: int = 10,
                   hub: int = 16) -> dict[str, int]:
    """The paired nodes around ``start`` and their distance (edges either way, through
    unpaired nodes, not through other variables or through hubs such as a learning rate
    every update reads, at most ``limit`` edges), named by their control-side nodes: a
    batch norm's gamma has its conv, its ReLU and their gradients around it on both sides,
    however differently each side computes the batch norm in between."""
    seen, frontier, found = {start}, [start], {}
    variables = {v[0] for v in graph.variables}
    for distance in range(1, limit + 1):
        following = []
        for name in frontier:
            for near in (*graph.producers.get(name, ()), *graph.consumers.get(name, ())):
                if near in seen or near not in graph.order or near in variables:
                    continue
                seen.add(near)
                if near in paired:
                    found[control_name_of(near)] = distance
                elif len(graph.producers.get(near, ())) + len(graph.consumers.get(near, ())) <= hub:
                    following.append(near)
        frontier = following
    return found


def _closeness(around_a: dict[str, int], around_b: dict[str, int]) -> float:
    """How much two nodes' surroundings agree: shared paired nodes, the nearer the more.
    Summed exactly (fsum): a set's order changes with the hash seed, and a plain sum's last
    bit with it, which reordered pairs whose closeness ties."""
    return math.fsum(1.0 / (around_a[n] + around_b[n]) for n in around_a.keys() & around_b.keys())


class Edges(enum.Enum):
    """Which way along dataflow a search goes: to the ops that read a node, or that feed it."""

    CONSUMERS = "consumers"
    PRODUCERS = "producers"


def _neighbours(graph: Graph, name: str, edges: Edges, depth: int = 3) -> list[str]:
    """Consumers or producers of ``name``, and beyond shape-only ones, theirs."""
    table = graph.consumers if edges is Edges.CONSUMERS else graph.producers
    out, frontier = [], [name]
    for _ in range(depth):
        following = []
        for node in frontier:
            for near in table.get(node, ()):
                if near in graph.types and near not in out:
                    out.append(near)
                    if graph.types[near] in SHAPE_ONLY_OPS:
                        following.append(near)
        frontier = following
    return out


def _by_type(graph: Graph, names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name in sorted(set(names), key=graph.order.__getitem__):
        out[op_kind(graph.types[name])].append(name)
    return out


__all__ = ["Alignment", "align_graphs"]
