"""Regions: what structural propagation (analysis/graphs/structure.py) leaves unpaired, paired
as wholes. Two sides compute one thing in different ops (a fused batch norm against
moments and arithmetic, a dropout's random numbers, a bias gradient); what they share is
the paired nodes around the region.

3. **Groups.** An unpaired op between paired ones (``FusedBatchNormV3`` between its conv,
   its gamma and beta, and the ReLU after it) stands for the unpaired ops between the
   counterparts of those same neighbours on the other side.
4. **Regions at one end.** What only feeds one paired node and reads nothing paired, or
   what only one paired node feeds, pairs with its counterpart at the same node.
"""

from __future__ import annotations

from .recorded_graph import Graph, op_kind


def pair_regions(control: Graph, test: Graph, paired_c: dict[str, str], paired_t: dict[str, str],
                 pairs: list) -> tuple[list, set[str], set[str]]:
    """Groups ``(control nodes, test nodes)`` and the nodes they took on each side; single
    ops a region comes down to join ``pairs`` (and ``paired_c``/``paired_t``)."""
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
    return groups, grouped_c, grouped_t


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
        if len(work_c) == len(work_t) == 1 and op_kind(control.types[work_c[0]]) == op_kind(test.types[work_t[0]]):
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
