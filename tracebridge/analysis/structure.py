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
3. **Groups.** What is left unpaired forms connected regions between paired nodes; a region
   on one side and a region on the other with the same paired neighbours compute the same
   thing another way (``FusedBatchNormV3`` against Keras's moments and arithmetic,
   ``L2Loss`` against ``Square`` + ``Sum``) and pair as one group.
4. **Regions at one end.** What only feeds one paired node and reads nothing paired (a
   dropout's random numbers), or what only one paired node feeds (a bias gradient before
   the optimizer), pairs with its counterpart at the same node, as one group.

Everything is ordered by graph position and names, never by time, so the same graphs give
the same pairs whatever the warm-up or the timing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Graph:
    """A recorded graph (capture/graph_record.py): nodes in creation order."""

    order: dict[str, int]
    types: dict[str, str]
    producers: dict[str, tuple[str, ...]]
    consumers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    variables: list[tuple[str, tuple, str]] = field(default_factory=list)  # (node, shape, role) in graph order


def decode_graph(metadata) -> Graph | None:
    """The graph a trace's capture recorded, or None (an old file, a with-block capture)."""
    text = metadata.get("graph") if metadata else None
    if not text:
        return None
    try:
        record = json.loads(text)
        nodes, variables = record["nodes"], record["variables"]
    except (ValueError, KeyError, TypeError):
        return None
    graph = Graph(order={}, types={}, producers={})
    for index, (name, op_type, inputs, _shape) in enumerate(nodes):
        graph.order[name] = index
        graph.types[name] = op_type
        graph.producers[name] = tuple(dict.fromkeys(inputs))
    # Identity ops only forward a tensor (TF1's gradients wrap every output in one): edges
    # go through them, so a gradient's consumers are the ops that use it.
    def source(name: str) -> str:
        seen = set()
        while graph.types.get(name) == "Identity" and graph.producers.get(name) and name not in seen:
            seen.add(name)
            name = graph.producers[name][0]
        return name
    for name, inputs in graph.producers.items():
        graph.producers[name] = tuple(dict.fromkeys(source(n) for n in inputs))
    for name, inputs in graph.producers.items():
        for producer in inputs:
            graph.consumers[producer].append(name)
    graph.variables = sorted(((name, tuple(shape or ()), _role(variable)) for name, (variable, shape)
                              in variables.items() if name in graph.order), key=lambda item: graph.order[item[0]])
    return graph


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
                for edges in ("consumers", "producers"):
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

    # 3. Groups: an unpaired op between paired ones (FusedBatchNormV3 between its conv,
    # its gamma and beta, and the ReLU after it) stands for the unpaired ops between the
    # counterparts of those same neighbours on the other side.
    groups = []
    grouped_c: set[str] = set()
    grouped_t: set[str] = set()
    for first, second, paired_first, paired_second, taken_first, taken_second, flip in (
            (control, test, paired_c, paired_t, grouped_c, grouped_t, False),
            (test, control, paired_t, paired_c, grouped_t, grouped_c, True)):
        for name in list(first.order):
            if name in paired_first or name in taken_first:
                continue
            inputs = [n for n in first.producers.get(name, ()) if n in paired_first]
            outputs = [n for n in first.consumers.get(name, ()) if n in paired_first]
            if not inputs or not outputs:
                continue
            own = _between(first, inputs, outputs, paired_first, taken_first)
            other = _between(second, [paired_first[n] for n in inputs], [paired_first[n] for n in outputs],
                             paired_second, taken_second)
            if name not in own or not other:
                continue
            taken_first.update(own)
            taken_second.update(other)
            groups.append((other, own) if flip else (own, other))
    _pair_feeding_regions(control, test, paired_c, paired_t, grouped_c, grouped_t, pairs, groups)
    attached = {}
    for side, graph, paired, grouped, control_name_of in (
            ("control", control, paired_c, grouped_c, lambda n: n),
            ("test", test, paired_t, grouped_t, lambda n: paired_t[n])):
        attached[side] = {}
        for name, op_type in graph.types.items():
            if op_type in _SHAPE_OPS and name not in paired and name not in grouped:
                near = [n for edges in ("producers", "consumers") for n in _neighbours(graph, name, edges)
                        if n in paired and graph.types[n] not in _SHAPE_OPS]
                if near:
                    attached[side][name] = control_name_of(min(near, key=graph.order.__getitem__))
    return Alignment(pairs=pairs, groups=groups, attached=attached)


# 4. Feeding regions: what only feeds one paired op and reads nothing paired. A dropout
# mask compares random numbers with the rate: TF1 draws them with one stateful
# RandomUniform, Keras 3 with a seed variable it reads and advances, a key-counter op,
# StatelessRandomUniformV2 and a scaling to [min, max). Nothing paired leads into either
# region, so neither propagation nor step 3 reaches it; the comparison they feed pairs.
# And fed regions, the mirror: what only one paired op feeds, up to ops that also read
# something else (a bias gradient: TF1's Sum and Reshape, Keras's BiasAddGrad, both read
# by the optimizer).
def _pair_feeding_regions(control: Graph, test: Graph, paired_c: dict[str, str], paired_t: dict[str, str],
                          grouped_c: set[str], grouped_t: set[str], pairs: list, groups: list) -> None:
    variables = {v[0] for v in control.variables}  # what reads a variable is the propagation's
    ends = [(region_of, end) for region_of in (_feeding_region, _fed_region)
            for end in sorted(paired_c, key=control.order.__getitem__) if end not in variables]
    for region_of, end_c in ends:
        end_t = paired_c[end_c]
        region_c = region_of(control, end_c, paired_c, grouped_c)
        region_t = region_of(test, end_t, paired_t, grouped_t)
        work_c = [n for n in region_c if control.types[n] not in _INERT_OPS]
        work_t = [n for n in region_t if test.types[n] not in _INERT_OPS]
        if not work_c or not work_t:
            continue
        if len(work_c) == len(work_t) == 1 and _kind(control.types[work_c[0]]) == _kind(test.types[work_t[0]]):
            paired_c[work_c[0]], paired_t[work_t[0]] = work_t[0], work_c[0]
            pairs.append((work_c[0], work_t[0]))
            continue
        grouped_c.update(region_c)
        grouped_t.update(region_t)
        groups.append((region_c, region_t))


def _feeding_region(graph: Graph, sink: str, paired: dict[str, str], grouped: set[str], depth: int = 12,
                    limit: int = 40) -> tuple[str, ...]:
    """The unpaired, ungrouped nodes upstream of ``sink`` (at most ``depth`` edges) whose
    outputs go only to ``sink``, to each other, or to side effects of their own (a seed
    variable's update, an op nothing consumes); empty where anything paired feeds them or the
    region outgrows ``limit`` nodes."""
    free = lambda n: n in graph.order and n not in paired and n not in grouped  # noqa: E731
    region: set[str] = set()
    frontier = [n for n in graph.producers.get(sink, ()) if free(n)]
    for _ in range(depth):
        following = []
        for name in frontier:
            if name in region:
                continue
            region.add(name)
            for near in graph.producers.get(name, ()):
                if not free(near):
                    return ()  # it reads something paired: not a region of its own
                following.append(near)
        frontier = following
        if len(region) > limit:
            return ()
    if frontier:
        return ()
    changed = True
    while changed:  # side effects in, then out what still feeds anything else
        changed = False
        for name in sorted(region, key=graph.order.__getitem__):
            for near in graph.consumers.get(name, ()):
                if near == sink or near in region:
                    continue
                branch = _side_branch(graph, near, region, free)
                if branch:
                    region.update(branch)  # the region's own side effect (a seed's update)
                    changed = True
    changed = True
    while changed:
        changed = False
        for name in sorted(region, key=graph.order.__getitem__):
            if any(near != sink and near not in region for near in graph.consumers.get(name, ())):
                region.discard(name)
                changed = True
    return tuple(sorted(region, key=graph.order.__getitem__))


def _fed_region(graph: Graph, source: str, paired: dict[str, str], grouped: set[str], depth: int = 6,
                limit: int = 40) -> tuple[str, ...]:
    """The unpaired, ungrouped nodes downstream of ``source`` fed only by it, by each other
    or by constants, not variables (at most ``depth`` edges); empty when it outgrows
    ``limit`` nodes."""
    free = lambda n: n in graph.order and n not in paired and n not in grouped  # noqa: E731
    variables = {v[0] for v in graph.variables}  # an op that writes one is the optimizer's
    region: set[str] = set()
    frontier = [n for n in graph.consumers.get(source, ()) if free(n)]
    for _ in range(depth):
        following = []
        for name in frontier:
            if name in region or not all(p == source or p in region or not (graph.producers.get(p) or p in variables)
                                         for p in graph.producers.get(name, ())):
                continue
            region.add(name)
            following += [n for n in graph.consumers.get(name, ()) if free(n)]
        frontier = following
        if len(region) > limit:
            return ()
    return tuple(sorted(region, key=graph.order.__getitem__))


def _side_branch(graph: Graph, start: str, region: set[str], free, depth: int = 4) -> set[str]:
    """``start`` and what it feeds, when all of it is free, fed only from ``region``, the
    branch itself or constants, and ends in ops nothing consumes (an assignment); else empty."""
    branch: set[str] = set()
    frontier = [start]
    for _ in range(depth):
        following = []
        for name in frontier:
            if name in branch:
                continue
            if not free(name):
                return set()
            branch.add(name)
            following += graph.consumers.get(name, ())
        frontier = following
    if frontier:
        return set()
    fed = all(p in region or p in branch or not graph.producers.get(p)
              for name in branch for p in graph.producers.get(name, ()))
    return branch if fed else set()


# Ops that compute nothing worth a pair of their own: a region of only these is left alone.
_INERT_OPS = {"Const", "Placeholder", "VarHandleOp", "VariableV2", "_Arg", "NoOp", "Shape"}


# Variable names both worlds share (tf.compat.v1.layers, tf_keras and Keras 3 alike); any
# other variable (optimizer slots, counters) has the role "other".
_ROLES = ("kernel", "recurrent_kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "embeddings")
_WEIGHTS = ("kernel", "recurrent_kernel", "embeddings")  # the anchors whose shapes tell layers apart


def _role(variable_name: str) -> str:
    leaf = variable_name.split(":")[0].rsplit("/", 1)[-1]
    return leaf if leaf in _ROLES else "other"


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
    return tuple(sorted({_kind(graph.types[n]) for n in _neighbours(graph, name, "consumers")
                         if graph.types[n] not in _SHAPE_OPS}))


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
    """How much two nodes' surroundings agree: shared paired nodes, the nearer the more."""
    return sum(1.0 / (around_a[n] + around_b[n]) for n in around_a.keys() & around_b.keys())


def _between(graph: Graph, sources: list[str], sinks: list[str], paired: dict[str, str], taken: set[str],
             depth: int = 12) -> tuple[str, ...]:
    """Unpaired, ungrouped nodes downstream of ``sources`` and upstream of ``sinks``
    (through such nodes only, at most ``depth`` edges), in graph order."""
    def reach(starts, edges):
        seen: set[str] = set()
        frontier = list(starts)
        for _ in range(depth):
            following = []
            for name in frontier:
                for near in edges.get(name, ()):
                    if near not in seen and near in graph.order and near not in paired and near not in taken:
                        seen.add(near)
                        following.append(near)
            frontier = following
        return seen
    inside = reach(sources, graph.consumers) & reach(sinks, graph.producers)
    return tuple(sorted(inside, key=graph.order.__getitem__))


# Ops that only move or relabel data: one side's einsum is the other's transpose, reshape
# and matmul (Keras 3 lowers einsum so), so edges are followed through them.
_SHAPE_OPS = {"Reshape", "Transpose", "ExpandDims", "Squeeze", "Cast", "Identity", "ConjugateTranspose",
              "Unpack", "StridedSlice", "Slice"}  # the last three: a sequence cut into its time steps
# Op types that compute the same thing under other names.
_KINDS = {"Einsum": "matmul", "MatMul": "matmul", "BatchMatMul": "matmul", "BatchMatMulV2": "matmul",
          "BatchMatMulV3": "matmul", "_FusedMatMul": "matmul", "Add": "add", "AddV2": "add",
          "RandomUniform": "random", "StatelessRandomUniformV2": "random"}  # dropout masks


def _kind(op_type: str) -> str:
    return _KINDS.get(op_type, op_type)


def _neighbours(graph: Graph, name: str, edges: str, depth: int = 3) -> list[str]:
    """Consumers or producers of ``name``, and beyond shape-only ones, theirs."""
    table = graph.consumers if edges == "consumers" else graph.producers
    out, frontier = [], [name]
    for _ in range(depth):
        following = []
        for node in frontier:
            for near in table.get(node, ()):
                if near in graph.types and near not in out:
                    out.append(near)
                    if graph.types[near] in _SHAPE_OPS:
                        following.append(near)
        frontier = following
    return out


def _by_type(graph: Graph, names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name in sorted(set(names), key=graph.order.__getitem__):
        out[_kind(graph.types[name])].append(name)
    return out


__all__ = ["Alignment", "Graph", "align_graphs", "decode_graph"]
