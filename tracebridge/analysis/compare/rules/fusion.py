"""The fusion rule: a fused kernel on one side against its parts, unfused, on the other."""

from __future__ import annotations

from ...common.kernels import fusion_parts
from ..names import Pair, op_scope, same_scope
from ..sides import Side


def group_fusions(pairs: list[Pair], control: Side, test: Side, unmatched_control: dict,
                  unmatched_test: dict) -> None:
    """A fused kernel on one side against its parts, unfused, on the other: one group.

    The parts are the other side's still unmatched ops of a type the kernel fuses, found
    along the dataflow from the op the fused one matched by name (it keeps the name of one
    of its parts), or else in the same layer scope. A fused op that matched takes its parts
    into its row; an unmatched one makes a new row."""
    position = {}
    for index, pair in enumerate(pairs):
        for name in pair.control:
            position["control", name] = index
        for name in pair.test:
            position["test", name] = index
    for side_name, side, other, others_unmatched, own_unmatched in (
            ("control", control, test, unmatched_test, unmatched_control),
            ("test", test, control, unmatched_control, unmatched_test)):
        for name in side.names:
            parts = fusion_parts(side.type[name])
            if not parts:
                continue
            index = position.get((side_name, name))
            if index is None and name not in own_unmatched:
                continue
            pair = pairs[index] if index is not None else None
            counterparts = (pair.test if side_name == "control" else pair.control) if pair else ()
            if any(other.plain_type[n] == side.plain_type[name] for n in counterparts):
                continue  # fused on both sides
            found = _fused_by_dataflow(counterparts, other, parts, others_unmatched) or \
                _fused_by_scope(side.rewritten[name], other, parts, others_unmatched)
            if not found:
                continue
            for n in found:
                others_unmatched.pop(n)
            own_unmatched.pop(name, None)
            group = tuple(counterparts) + tuple(found)
            kinds = "+".join(sorted({other.plain_type[n] for n in group},
                                    key=lambda kind: parts.index(kind) if kind in parts else -1))
            key = f"{name} [{side.type[name]} = {kinds}]"
            fused, unfused = (name,), group
            pair = Pair(key, "fusion", *((fused, unfused) if side_name == "control" else (unfused, fused)))
            if index is None:
                pairs.append(pair)
                index = len(pairs) - 1
            else:
                pairs[index] = pair
            for n in found:
                position["test" if side_name == "control" else "control", n] = index


def _fused_by_dataflow(counterparts, other: Side, parts: tuple[str, ...], others_unmatched) -> list[str]:
    """The unfused ops around a fused op's counterpart, along the other side's dataflow: a
    fused kernel keeps the name of its last part (``dense/Relu`` for MatMul+BiasAdd+Relu),
    so walk up to producers, or of its first (``bn1/FusedBatchNormV3`` for BN+ReLU), so walk
    down to consumers. Each part type is taken once: a fusion holds one MatMul, one ReLU."""
    if len(counterparts) != 1 or not other.producers:
        return []
    start = counterparts[0]
    downstream = other.plain_type[start] == parts[0]
    taken_types = {other.plain_type[start]}
    found, frontier = [], [start]
    while frontier:
        name = frontier.pop(0)
        for near in (other.consumers.get(name, ()) if downstream else other.producers.get(name, ())):
            kind = other.plain_type.get(near)
            if near in others_unmatched and kind in parts and kind not in taken_types and near not in found:
                taken_types.add(kind)
                found.append(near)
                frontier.append(near)
    return found


def _fused_by_scope(fused_name: str, other: Side, parts: tuple[str, ...], others_unmatched) -> list[str]:
    """The other side's unmatched ops of the fused kind in the fused op's layer scope;
    forward and gradient ops never group."""
    scope, gradient = op_scope(fused_name)
    return [n for n in others_unmatched if other.plain_type[n] in parts
            and op_scope(other.rewritten[n])[1] == gradient
            and same_scope(scope, op_scope(other.rewritten[n])[0])]


__all__ = ["group_fusions"]
