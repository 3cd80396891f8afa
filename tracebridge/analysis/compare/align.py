"""The alignment rules of a comparison, in order (see :mod:`tracebridge.analysis.compare`): structure from the
recorded graphs, names, gradients, fusions, optimizer updates; then what only one side
records joins the rows made (shape-only ops, a TF1 loop's control flow); position last. A
:class:`~.rules.matcher.Matcher` runs them (:func:`alignment_rules` lists them)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable

from ..graphs.structure import Alignment
from .layers import UNATTRIBUTED, LayerMap
from ..graphs.layers import Phase
from ..graphs.recorded_graph import op_kind
from .names import GRADIENT_TAIL_LENGTHS, Pair, gradient_tail, op_scope, pair_key, plain_name
from .rules.eager import EagerFusions
from .rules.fusion import group_fusions
from .rules.graph import ShapeOpsJoinNeighbours, TraceNames, matched_scopes, structure_rules
from .rules.loops import LoopControlJoinsCondition
from .rules.matcher import Matcher, Rule
from .rules.optimizer import optimizer_groups
from .rules.xla import XlaInstructions
from .sides import Side

# Name tails: how many trailing parts of a name (model scopes, then the op) two ops of the
# same type must share, longest first: ``block/dense/MatMul`` before ``dense/MatMul``.
NAME_TAIL_LENGTHS = (4, 3, 2)


def align_ops(control: Side, test: Side, user_rules: bool, alignment: Alignment | None = None,
              notes: list[str] | None = None, layer_map: LayerMap | None = None) -> list[Pair]:
    """Every op of both sides in one row: paired by the first rule that pairs it, or alone;
    with ``layer_map``, only ops of the same layer and phase pair."""
    matcher = Matcher(control, test, in_graph_order=alignment is not None,
                      zones=layer_map.zones if layer_map is not None else None,
                      inferred=layer_map.inferred if layer_map is not None else None)
    rules = alignment_rules(control, test, user_rules, alignment, notes, layer_map)
    if layer_map is not None:
        # Where one run loops over what the other unrolled, names within the layer coincide
        # (an unrolled copy's ``MatMul_1`` is the loop's second matmul): group those first.
        # So do loops whose cells differ (TF1's LSTMCell multiplies one concatenated matrix,
        # Keras's LSTM two): a loop body's ops of one kind, counted differently on each side.
        first_name_rule = next(i for i, rule in enumerate(rules) if isinstance(rule, SameKey))
        rules.insert(first_name_rule, SameLayerKernel(layer_map, looped_against_unrolled(control, test, layer_map),
                                                      loops_that_differ=True))
        rules += [SameLayerKernel(layer_map), SameLayerRest(layer_map)]
    return matcher.run(rules)


def alignment_rules(control: Side, test: Side, user_rules: bool, alignment: Alignment | None,
                    notes: list[str] | None, layer_map: LayerMap | None = None) -> list[Rule]:
    """The rules in the order they run. ``user_rules``: the names were rewritten by the
    caller's rules, so a pair by name is theirs (``user``); with ``alignment`` (the graphs
    are known) the structure runs first, and position pairs only within matched scopes."""
    by_name = UserName if user_rules else SameName
    with_graphs = alignment is not None
    return [XlaInstructions(alignment, TraceNames(control, test)),
            *(structure_rules(control, test, alignment, notes) if with_graphs else ()),
            by_name(_whole_name, same_type=False),
            by_name(plain_name, same_type=False),
            *(SameTail(_name_tail(length)) for length in NAME_TAIL_LENGTHS),
            *(SameGradient(gradient_tail(length)) for length in GRADIENT_TAIL_LENGTHS),
            Fusions(),
            OptimizerUpdates(alignment, layer_map),
            *((ShapeOpsJoinNeighbours(),) if with_graphs else ()),
            LoopControlJoinsCondition(),
            EagerFusions(),  # eager ops: no scopes, no inputs
            ByPosition(within_matched_scopes=with_graphs, notes=notes)]


class SameKey(Rule, abstract=True):
    """Each unmatched control op pairs with the first unmatched test op whose name gives
    the same key (and, with ``same_type``, whose kernel has the same plain type); a key of
    None pairs nothing. The name rules below say which rule their rows record."""

    def __init__(self, key_of: Callable[[str], Hashable | None], same_type: bool = True):
        self.key_of, self.same_type = key_of, same_type

    def match(self, matcher: Matcher) -> None:
        control, test = matcher.control, matcher.test
        index: dict = defaultdict(list)
        for name, text in matcher.unmatched_test.items():
            key = self.key_of(text)
            if key is not None:
                index[(key, test.plain_type[name] if self.same_type else "")].append(name)
        for name, text in list(matcher.unmatched_control.items()):
            key = self.key_of(text)
            if key is None:
                continue
            candidates = index.get((key, control.plain_type[name] if self.same_type else ""))
            while candidates and candidates[0] not in matcher.unmatched_test:
                candidates.pop(0)
            other = next((n for n in candidates or () if n in matcher.unmatched_test
                          and matcher.compatible([name], [n])), None)
            if other is not None:
                candidates.remove(other)
                matcher.pair([name], [other], pair_key(name, other), self.name)


class SameName(SameKey):
    """The same name (whole, or without function wrappers)."""
    name, confidence = "exact", 1.0


class UserName(SameKey):
    """The same name after the caller's rewrite rules: the pair is theirs."""
    name, confidence = "user", 1.0


class SameTail(SameKey):
    """The same trailing parts of the names (model scopes, then the op)."""
    name, confidence = "normalized", 0.9


class SameGradient(SameKey):
    """Gradients of the same op (the same tail after the gradient scope)."""
    name, confidence = "gradient", 0.85


def _whole_name(text: str) -> str:
    return text


def _name_tail(length: int) -> Callable[[str], tuple[str, ...] | None]:
    def key(text: str) -> tuple[str, ...] | None:
        parts = plain_name(text).split("/")
        return tuple(parts[-length:]) if len(parts) >= length else None
    return key


class Fusions(Rule):
    """A fused kernel on one side against its parts, unfused, on the other
    (:mod:`.rules.fusion`)."""

    name = "fusion"
    confidence = 0.75

    def match(self, matcher: Matcher) -> None:
        before = len(matcher.pairs)
        group_fusions(matcher.pairs, matcher.control, matcher.test, matcher.unmatched_control,
                      matcher.unmatched_test)
        # a fusion's parts across two layers (a classifier's matmul fused with what it read)
        # are no row: its ops go back to the pools
        for pair in [p for p in matcher.pairs[before:] if not matcher.compatible(p.control, p.test)]:
            matcher.pairs.remove(pair)
            matcher.unmatched_control.update((n, matcher.control.rewritten[n]) for n in pair.control)
            matcher.unmatched_test.update((n, matcher.test.rewritten[n]) for n in pair.test)


class OptimizerUpdates(Rule):
    """Variable updates as groups, per paired variable where the graphs are known
    (:mod:`.rules.optimizer`)."""

    name = "optimizer"
    confidence = 0.6

    def __init__(self, alignment: Alignment | None, layer_map: LayerMap | None = None):
        self.alignment, self.layer_map = alignment, layer_map

    def match(self, matcher: Matcher) -> None:
        for names_c, names_t, key in optimizer_groups(matcher.control, matcher.test, self.alignment,
                                                      matcher.unmatched_control, matcher.unmatched_test):
            if matcher.zones is None:
                matcher.pair(names_c, names_t, key, self.name)
                continue
            # by layer: an optimizer's scope holds every layer's updates (and may hold a
            # gradient clip, which is not an update)
            zones_c, zones_t = _split_by_zone(names_c, matcher.zones.control), _split_by_zone(names_t, matcher.zones.test)
            for zone in sorted(zones_c.keys() & zones_t.keys(), key=str):
                if zone[1] == Phase.UPDATE:
                    label = self.layer_map.label(*zone) if zone[0] is not None else "shared"
                    matcher.pair(zones_c[zone], zones_t[zone], f"{key} ({label})" if len(zones_c) > 1 else key,
                                 self.name)
            # what XLA compiled has no zone of its own (an update fused with others): where the
            # test run's updates left include such, they and the control's left stay one row,
            # as without layers
            left_c, left_t = _updates_left(matcher, "control", names_c), _updates_left(matcher, "test", names_t)
            if left_c and any(n in matcher.inferred.test for n in left_t):
                matcher.pair(left_c, left_t, key, self.name, across_zones=True)


class ByPosition(Rule):
    """What is left: same kernel type, in order of first occurrence within the step;
    ``within_matched_scopes`` (with graphs): only within scopes the rules before matched to
    each other, and ``notes`` say how many paired and how many stay outside. Confidence
    falls with the number of candidates."""

    name = "type+position"
    confidence = 0.5  # divided by the number of candidates

    def __init__(self, within_matched_scopes: bool, notes: list[str] | None):
        self.within_matched_scopes, self.notes = within_matched_scopes, notes

    def match(self, matcher: Matcher) -> None:
        if not self.within_matched_scopes:
            self._pair(matcher, lambda name: ())
            return
        before = len(matcher.pairs)
        self._pair(matcher, matched_scopes(matcher))
        by_position = len(matcher.pairs) - before
        left_c, left_t = len(matcher.unmatched_control), len(matcher.unmatched_test)
        if self.notes is not None and (by_position or (left_c and left_t)):
            self.notes.append(f"type+position paired {by_position} ops, only within scopes the structure and names "
                              f"matched; {left_c} control and {left_t} test ops outside them stay unmatched")

    def _pair(self, matcher: Matcher, scope_of) -> None:
        """``scope_of``: control name -> the test scopes it may pair in, ``()`` for any, or
        None for none."""
        control, test = matcher.control, matcher.test
        by_type_t: dict[str, list[str]] = defaultdict(list)
        for name in sorted(matcher.unmatched_test, key=lambda n: test.order[n]):
            by_type_t[test.plain_type[name]].append(name)
        for name in sorted(matcher.unmatched_control, key=lambda n: control.order[n]):
            allowed = scope_of(name)
            if allowed is None:
                continue
            candidates = [n for n in by_type_t.get(control.plain_type[name], ())
                          if (not allowed or op_scope(test.rewritten[n]) in allowed) and matcher.compatible([name], [n])]
            if candidates:
                other = candidates[0]
                by_type_t[control.plain_type[name]].remove(other)
                matcher.pair([name], [other], pair_key(name, other), self.name, self.confidence / len(candidates))


class SameLayerKernel(Rule):
    """What is left of one layer and phase, by kernel type: every op of a type on one side
    with every op of that type on the other, as one row. A TF1 model's 20 unrolled copies of
    a cell's ``MatMul`` and the Keras loop body's ``MatMul`` (run 20 times) are one row."""

    name = "layer+type"
    confidence = 0.7

    def __init__(self, layer_map: LayerMap, zones: set | None = None, loops_that_differ: bool = False):
        # zones: only these (None: all); loops_that_differ: also where both sides loop and
        # count a kind's ops differently
        self.layer_map, self.zones, self.loops_that_differ = layer_map, zones, loops_that_differ

    def _applies(self, matcher: Matcher, zone, names_c: list[str], names_t: list[str]) -> bool:
        if self.zones is None or zone in self.zones:
            return True
        return self.loops_that_differ and zone[0] is not None and len(names_c) != len(names_t) and \
            _in_loops(matcher.control, names_c) and _in_loops(matcher.test, names_t)

    def match(self, matcher: Matcher) -> None:
        groups_c, groups_t = _by_zone(matcher, "control", True), _by_zone(matcher, "test", True)
        for (zone, kernel), names_c in groups_c.items():
            names_t = groups_t.get((zone, kernel))
            if names_t and _grouped(zone) and self._applies(matcher, zone, names_c, names_t):
                kernel = " + ".join(sorted({matcher.control.plain_type[n] for n in names_c}
                                           | {matcher.test.plain_type[n] for n in names_t}))
                matcher.pair(names_c, names_t, f"{self.layer_map.label(*zone)}: {kernel} "
                             f"[{len(names_c)} ~ {len(names_t)} ops]", self.name)


class SameLayerRest(Rule):
    """Last, what is left of a layer and phase on both sides, computed with other kernels on
    each (TF1's ``ConcatV2`` of input and state against Keras's two ``MatMul`` inputs): one row."""

    name = "layer"
    confidence = 0.5

    def __init__(self, layer_map: LayerMap):
        self.layer_map = layer_map

    def match(self, matcher: Matcher) -> None:
        groups_c, groups_t = _by_zone(matcher, "control", False), _by_zone(matcher, "test", False)
        for (zone, _), names_c in groups_c.items():
            names_t = groups_t.get((zone, ""))
            # a layer's, the loss's or the clip's rest; the input's differ in kind, not in how
            # (a TF1 iterator against a port that is handed its batches)
            if names_t and _grouped(zone) and (zone[0] is not None or zone[1] in (Phase.LOSS, Phase.LOSS_GRADIENT,
                                                                                    Phase.CLIP)):
                matcher.pair(names_c, names_t, f"{self.layer_map.label(*zone)}: the rest "
                             f"[{len(names_c)} ~ {len(names_t)} ops]", self.name)


def _grouped(zone) -> bool:
    """Whether a zone's ops may pair as groups: a layer's, or the loss, clip, input, ...;
    not what no phase describes."""
    return zone[0] is not None or zone[1] not in (Phase.OTHER, UNATTRIBUTED)


def _updates_left(matcher: Matcher, side_name: str, names) -> list[str]:
    """Those of ``names`` still unmatched that update (or whose zone XLA's fusion hides)."""
    pool, zones, inferred = matcher.unmatched(side_name), getattr(matcher.zones, side_name), \
        getattr(matcher.inferred, side_name)
    return [n for n in names if n in pool and (n in inferred or zones.get(n, (None, Phase.UPDATE))[1] == Phase.UPDATE)]


def _split_by_zone(names, zones: dict) -> dict:
    """Ops by zone; an op of no zone counts as a shared update."""
    out: dict = defaultdict(list)
    for name in names:
        out[zones.get(name, (None, Phase.UPDATE))].append(name)
    return out


def _repeats(side: Side, name: str) -> bool:
    """Whether an op runs several times a step (in a loop's body)."""
    return side.count[name] > 1.5 * max(len(side.per_step[name]), 1)


def _in_loops(side: Side, names: list[str]) -> bool:
    return all(_repeats(side, n) for n in names)


def looped_against_unrolled(control: Side, test: Side, layer_map: LayerMap) -> set:
    """The zones that one run computes in a loop (its ops there mostly run several times a
    step) and the other unrolled (its ops there run once a step)."""
    def repeated_share(side: Side, zones: dict) -> dict:
        # by op count, not time: the same graphs give the same rows, however each run was timed
        ops, repeated = Counter(), Counter()
        for name in side.names:
            zone = zones.get(name)
            if zone is None:
                continue
            ops[zone] += 1
            repeated[zone] += _repeats(side, name)
        return {zone: repeated[zone] / ops[zone] for zone in ops}
    shares_c = repeated_share(control, layer_map.zones.control)
    shares_t = repeated_share(test, layer_map.zones.test)
    return {zone for zone in shares_c.keys() & shares_t.keys()
            if max(shares_c[zone], shares_t[zone]) >= 0.5 and min(shares_c[zone], shares_t[zone]) <= 0.1}


def _by_zone(matcher: Matcher, side_name: str, by_kernel: bool) -> dict[tuple, list[str]]:
    """A side's unmatched ops by zone (and kernel type), in the matcher's order."""
    side, zones = matcher.side(side_name), getattr(matcher.zones, side_name)
    inferred = getattr(matcher.inferred, side_name)  # an XLA fusion left unpaired stays alone
    out: dict[tuple, list[str]] = defaultdict(list)
    for name in matcher.unmatched(side_name):
        if name in zones and name not in inferred:
            out[zones[name], op_kind(side.plain_type[name]) if by_kernel else ""].append(name)
    # by name: a group's ops are a set, and ops outside the graph sit in the order they first
    # ran, which the timing may change
    return {key: sorted(names) for key, names in out.items()}


__all__ = ["GRADIENT_TAIL_LENGTHS", "NAME_TAIL_LENGTHS", "Matcher", "Rule", "align_ops", "alignment_rules"]
