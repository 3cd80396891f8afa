"""The alignment rules of a comparison, in order (see :mod:`.compare`): structure from the
recorded graphs, names, gradients, fusions, optimizer updates, and position last."""

from __future__ import annotations

import re
from collections import defaultdict

from .compare_fusion import group_fusions
from .compare_names import RULE_CONFIDENCE, Pair, gradient_key, op_scope, pair_key, plain_name
from .compare_optimizer import optimizer_groups
from .compare_sides import Side
from .eager_align import group_fusions_by_position
from .structure import Alignment, graph_node_name


def align_ops(control: Side, test: Side, user_rules: bool, alignment: Alignment | None = None,
              notes: list[str] | None = None) -> list[Pair]:
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
        def ran(side_name, node):
            side = control if side_name == "control" else test
            return node in side.total or run_as[side_name].get(node) in side.total
        joined: dict[tuple[str, str], list[str]] = defaultdict(list)  # shape ops joined to a pair
        for side_name, nodes in alignment.attached.items():
            for node, control_node in nodes.items():
                joined[side_name, control_node].append(node)
        not_run = {"control": [], "test": []}  # paired in the graphs, run on one side only
        for node_c, node_t in alignment.pairs:
            c, t = in_trace("control", node_c, left), in_trace("test", node_t, right)
            if c and not ran("test", node_t) or t and not ran("control", node_c):
                not_run["test" if c else "control"].append(c or t)
            if c and t:
                extra_c = [n for n in (in_trace("control", m, left) for m in joined["control", node_c]) if n]
                extra_t = [n for n in (in_trace("test", m, right) for m in joined["test", node_c]) if n]
                take([c, *extra_c], [t, *extra_t], pair_key(c, t),
                     "exact" if plain_name(c) == plain_name(t) and not (extra_c or extra_t) else "structure")
        for members_c, members_t in alignment.groups:
            names_c = [n for n in (in_trace("control", m, left) for m in members_c) if n]
            names_t = [n for n in (in_trace("test", m, right) for m in members_t) if n]
            if names_c and names_t:
                take(names_c, names_t, f"{pair_key(_named_by(control, names_c), _named_by(test, names_t))} "
                     f"[group of {len(names_c)} ~ {len(names_t)} ops]", "group")
        if notes is not None:
            notes += _not_run_notes(control, test, not_run)
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
    for names_c, names_t, key in optimizer_groups(control, test, alignment, left, right):
        take(names_c, names_t, key, "optimizer")
    # Constants and shape ops left over (TF1 runs its constants; a reshape whose counterpart
    # Grappler folded away) join the row of what they feed or shape.
    if alignment is not None:
        for side_name, side, pool in (("control", control, left), ("test", test, right)):
            _attach_to_neighbours(pairs, side_name, side, pool,
                                  [n for n in pool if side.graph.types.get(n) in _ATTACHED_TYPES])
    group_fusions_by_position(control, test, left, right, take)  # eager ops: no scopes, no inputs
    # What is left: same kernel type, in order of first occurrence within the step; with
    # graphs, only within scopes the rules above matched to each other.
    if alignment is None:
        _pair_by_position(control, test, left, right, take, lambda name: ())
    else:
        scope_of = _matched_scopes(pairs, control, test)
        before = len(pairs)
        _pair_by_position(control, test, left, right, take, scope_of)
        by_position = len(pairs) - before
        if notes is not None and (by_position or (left and right)):
            notes.append(f"type+position paired {by_position} ops, only within scopes the structure and names "
                         f"matched; {len(left)} control and {len(right)} test ops outside them stay unmatched")
    for name in left:
        pairs.append(Pair(name, "unmatched", (name,), ()))
    for name in right:
        pairs.append(Pair(name, "unmatched", (), (name,)))
    return pairs


_ATTACHED_TYPES = {"Const", "Shape", "Reshape", "Transpose", "ExpandDims", "Squeeze", "Identity", "Cast"}


def _attach_to_neighbours(pairs: list[Pair], side_name: str, side: Side, pool: dict, names: list[str]) -> None:
    """Each of ``names`` (still in ``pool``) joins the row of a graph neighbour that has one:
    one in its own scope first, then what it feeds, then what feeds it; a name with no such
    neighbour stays."""
    row_of = {name: index for index, pair in enumerate(pairs) for name in getattr(pair, side_name)}
    for name in names:
        if name not in pool:
            continue
        near = [*side.graph.consumers.get(name, ()), *side.graph.producers.get(name, ())]
        scope = op_scope(side.rewritten[name])
        near = sorted((n for n in near if n in row_of), key=lambda n: op_scope(side.rewritten.get(n, n)) != scope)
        index = row_of[near[0]] if near else None
        if index is None:
            continue
        pair = pairs[index]
        setattr(pair, side_name, (*getattr(pair, side_name), name))
        row_of[name] = index
        pool.pop(name)


def _named_by(side: Side, names: list[str]) -> str:
    """The op a group's key names: its first (in graph order) that computes something."""
    return next((n for n in names if side.plain_type[n] not in _INERT), names[0])


_INERT = {"Const", "Shape", "VarHandleOp", "_Arg", "NoOp", "Placeholder", "ReadVariableOp", "Identity"}


def _pair_by_position(control: Side, test: Side, left: dict, right: dict, take, scope_of) -> None:
    """Pair what is left by kernel type, in order, each control op with a test op whose
    scope ``scope_of`` (control name -> the test scopes it may pair in, or ``()`` for any)
    allows; confidence falls with the number of candidates."""
    by_type_t: dict[str, list[str]] = defaultdict(list)
    for name in sorted(right, key=lambda n: test.order[n]):
        by_type_t[test.plain_type[name]].append(name)
    for name in sorted(left, key=lambda n: control.order[n]):
        allowed = scope_of(name)
        if allowed is None:
            continue
        candidates = [n for n in by_type_t.get(control.plain_type[name], ())
                      if not allowed or op_scope(test.rewritten[n]) in allowed]
        if candidates:
            other = candidates[0]
            by_type_t[control.plain_type[name]].remove(other)
            take([name], [other], pair_key(name, other), "type+position",
                 RULE_CONFIDENCE["type+position"] / len(candidates))


def _matched_scopes(pairs: list[Pair], control: Side, test: Side):
    """Control op name -> the test scopes matched to its scope by the pairs so far (names,
    structure, groups), or None where its scope matched none: a scope corresponds to
    another when some op of one paired an op of the other."""
    matched: dict[tuple, set] = defaultdict(set)
    for pair in pairs:
        if pair.rule in ("optimizer", "type+position", "unmatched"):
            continue
        for c in pair.control:
            for t in pair.test:
                matched[op_scope(control.rewritten[c])].add(op_scope(test.rewritten[t]))
    return lambda name: matched.get(op_scope(control.rewritten[name])) or None


# ``AddOpsRewrite`` also names the partial sums it adds ``..._Leaf_<n>_<node>``.
_GRAPPLER_RENAMED = re.compile(r"^(?P<scope>.*)/ArithmeticOptimizer/[A-Za-z]+_(?P<leaf>Leaf_\d+_)?(?P<base>[^/]+)$")


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


__all__ = ["align_ops"]
