"""The alignment rules of a comparison, in order (see :mod:`.compare`): structure from the
recorded graphs, names, gradients, fusions, optimizer updates, and position last."""

from __future__ import annotations

import re
from collections import defaultdict

from .compare_fusion import group_fusions
from .eager_align import group_fusions_by_position
from .compare_names import RULE_CONFIDENCE, Pair, gradient_key, pair_key, plain_name
from .compare_sides import Side
from .structure import Alignment

_UPDATE_TYPES = {"ResourceApplyGradientDescent", "ApplyGradientDescent", "AssignSubVariableOp",
                 "AssignAddVariableOp", "ResourceApplyAdam", "ApplyAdam", "ResourceApplyMomentum",
                 "ResourceApplyKerasMomentum", "AssignVariableOp"}
_OPTIMIZER_SCOPES = re.compile(r"(?:^|/)(?:GradientDescent|SGD|sgd(?:_\d+)?|Adam|adam(?:_\d+)?|"
                               r"Momentum|optimizer|training)(?:/|$)")


def _is_update(side: Side, name: str) -> bool:
    return side.plain_type[name] in _UPDATE_TYPES or (
        bool(_OPTIMIZER_SCOPES.search(name)) and gradient_key(name) is None) or \
        (side.plain_type[name] == "Mul" and re.fullmatch(r"mul(_\d+)?", name) is not None)


def align_ops(control: Side, test: Side, user_rules: bool, alignment: Alignment | None = None) -> list[Pair]:
    pairs: list[Pair] = []
    def ordered(side):  # with graphs, graph order: the same graphs give the same pairs
        return sorted(side.names, key=side.order.__getitem__) if alignment is not None else side.names
    left = {n: control.rewritten[n] for n in ordered(control)}
    right = {n: test.rewritten[n] for n in ordered(test)}

    def take(c_names, t_names, key, rule, confidence=-1.0):
        for n in c_names:
            left.pop(n, None)
        for n in t_names:
            right.pop(n, None)
        pairs.append(Pair(key, rule, tuple(c_names), tuple(t_names), confidence))

    def match_by(key_of, rule, same_type=True):
        index: dict = defaultdict(list)
        for name, text in right.items():
            key = key_of(text)
            if key is not None:
                index[(key, test.plain_type[name] if same_type else "")].append(name)
        for name, text in list(left.items()):
            key = key_of(text)
            if key is None:
                continue
            candidates = index.get((key, control.plain_type[name] if same_type else ""))
            while candidates and candidates[0] not in right:
                candidates.pop(0)
            if candidates:
                other = candidates.pop(0)
                take([name], [other], pair_key(name, other), rule)

    rule_name = "user" if user_rules else "exact"
    if alignment is not None:
        # The structure first: it knows which op is which where names only look alike.
        # Ops Grappler rewrote after the graph was recorded run under new names; the trace
        # name for a graph node is its own, or its rewritten one.
        run_as = {"control": _rewritten_by_grappler(control), "test": _rewritten_by_grappler(test)}

        def in_trace(side_name, node, pool):
            node = node if node in pool else run_as[side_name].get(node, node)
            return node if node in pool else None
        joined: dict[tuple[str, str], list[str]] = defaultdict(list)  # shape ops joined to a pair
        for side_name, nodes in alignment.attached.items():
            for node, control_node in nodes.items():
                joined[side_name, control_node].append(node)
        for node_c, node_t in alignment.pairs:
            c, t = in_trace("control", node_c, left), in_trace("test", node_t, right)
            if c and t:
                extra_c = [n for n in (in_trace("control", m, left) for m in joined["control", node_c]) if n]
                extra_t = [n for n in (in_trace("test", m, right) for m in joined["test", node_c]) if n]
                take([c, *extra_c], [t, *extra_t], pair_key(c, t),
                     "exact" if plain_name(c) == plain_name(t) and not (extra_c or extra_t) else "structure")
        for members_c, members_t in alignment.groups:
            names_c = [n for n in (in_trace("control", m, left) for m in members_c) if n]
            names_t = [n for n in (in_trace("test", m, right) for m in members_t) if n]
            if names_c and names_t:
                take(names_c, names_t, f"{pair_key(names_c[0], names_t[0])} "
                     f"[group of {len(names_c)} ~ {len(names_t)} ops]", "group")
    match_by(lambda text: text, rule_name, same_type=False)
    match_by(plain_name, rule_name, same_type=False)
    # Model scopes: the longest common tail of scope parts, same op type.
    for depth in (4, 3, 2):
        match_by(lambda text, d=depth: tuple(plain_name(text).split("/")[-d:])
                 if len(plain_name(text).split("/")) >= d else None, "normalized")
    # Gradients: compare the gradient paths' tails.
    for depth in (3, 2):
        match_by(lambda text, d=depth: (gradient_key(plain_name(text)) or ())[-d:] or None
                 if gradient_key(plain_name(text)) and len(gradient_key(plain_name(text))) >= d else None, "gradient")
    group_fusions(pairs, control, test, left, right)
    # Optimizer updates: one group per side.
    updates_c = [n for n in left if _is_update(control, n)]
    updates_t = [n for n in right if _is_update(test, n)]
    if updates_c and updates_t:
        take(updates_c, updates_t, "optimizer updates", "optimizer")
    group_fusions_by_position(control, test, left, right, take)  # eager ops: no scopes, no inputs
    # What is left: same kernel type, in order of first occurrence within the step.
    by_type_t: dict[str, list[str]] = defaultdict(list)
    for name in sorted(right, key=lambda n: test.order[n]):
        by_type_t[test.plain_type[name]].append(name)
    for name in sorted(left, key=lambda n: control.order[n]):
        candidates = by_type_t.get(control.plain_type[name])
        if candidates:
            choices = len(candidates)
            other = candidates.pop(0)
            take([name], [other], pair_key(name, other), "type+position",
                 RULE_CONFIDENCE["type+position"] / choices)
    for name in left:
        pairs.append(Pair(name, "unmatched", (name,), ()))
    for name in right:
        pairs.append(Pair(name, "unmatched", (), (name,)))
    return pairs


_GRAPPLER_RENAMED = re.compile(r"^(?P<scope>.*)/ArithmeticOptimizer/[A-Za-z]+_(?P<base>[^/]+)$")


def _rewritten_by_grappler(side: Side) -> dict[str, str]:
    """Graph node -> the trace's name for it, where Grappler's arithmetic optimizer replaced
    the node by one named ``<scope>/ArithmeticOptimizer/<Rule>_<node>`` (as
    ``FoldTransposeIntoMatMul`` does to a transpose-fed MatMul)."""
    out = {}
    for name in side.names:
        match = _GRAPPLER_RENAMED.match(name)
        if match and side.graph and name not in side.graph.order:
            original = f"{match.group('scope')}/{match.group('base')}"
            if original in side.graph.order and original not in side.total:
                out.setdefault(original, name)
    return out


__all__ = ["align_ops"]
