"""The machinery of alignment (:mod:`.align` has the rules, in order): a
:class:`Matcher` owns each side's unmatched ops and the pairs made so far, and runs an
ordered list of :class:`Rule` objects over them."""

from __future__ import annotations

from collections.abc import Iterable

from ..names import RULE_CONFIDENCE, Pair
from ..sides import Side
from ...common.types import SIDES, PerSide



class Rule:
    """One stage of alignment. ``name``: the rule its rows record; ``confidence``: how sure
    a row of this rule is (a rule may scale it per row), None for a rule that only adds ops
    to other rules' rows. Every rule class declares its own ``confidence`` (no default: a
    class without one fails where it is defined, unless ``abstract``); the named ones fill
    :data:`RULE_CONFIDENCE`. :meth:`match` pairs what it can of a matcher's unmatched ops."""

    name: str
    confidence: float | None

    def __init_subclass__(cls, abstract: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        if "confidence" not in vars(cls):
            raise TypeError(f"alignment rule {cls.__name__} declares no confidence")
        if cls.confidence is not None:
            known = RULE_CONFIDENCE.setdefault(cls.name, cls.confidence)
            if known != cls.confidence:
                raise TypeError(f"alignment rule {cls.__name__}: rule {cls.name!r} has confidence {known}, "
                                f"not {cls.confidence}")

    def match(self, matcher: Matcher) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class JoinRule(Rule, abstract=True):
    """A rule that makes no rows: each unmatched op it takes (``joining``) joins the row of
    another op (``joins``, among the ops with a row: ``row_of``), on each side."""

    confidence = None  # no rows of its own
    # whether an op that joined a row can itself be joined (a constant feeding a constant)
    chains: bool = False

    def joining(self, side: Side, pool: dict[str, str]) -> list[str]:
        raise NotImplementedError

    def joins(self, side: Side, name: str, row_of: dict[str, int]) -> str | None:
        raise NotImplementedError

    def match(self, matcher: Matcher) -> None:
        for side_name in SIDES:
            side, pool = matcher.side(side_name), matcher.unmatched(side_name)
            row_of = {name: index for index, pair in enumerate(matcher.pairs) for name in getattr(pair, side_name)}
            for name in self.joining(side, pool):
                target = self.joins(side, name, row_of)
                if target is not None and matcher.join(side_name, name, row_of[target]) and self.chains:
                    row_of[name] = row_of[target]


class Matcher:
    """Pairs the ops of two sides. ``unmatched_control``/``unmatched_test``: each side's ops
    no rule has taken yet (name -> the name the rules read, after the caller's rewrites), in
    graph order where the graphs are known (the same graphs give the same pairs), else in
    order of first occurrence; ``pairs``: the rows made so far."""

    def __init__(self, control: Side, test: Side, in_graph_order: bool, zones: PerSide[dict] | None = None,
                 inferred: PerSide[set] | None = None):
        def ordered(side: Side) -> list[str]:
            return sorted(side.names, key=side.order.__getitem__) if in_graph_order else side.names
        self.control, self.test = control, test
        # each op's layer and phase (compare.layers), where both graphs were recorded: no row
        # pairs ops of different layers or phases
        self.zones = zones
        # ops whose zone is inferred (compare.layers.LayerMap.inferred): grouped, never constrained
        self.inferred = inferred or PerSide(set(), set())
        self.unmatched_control = {name: control.rewritten[name] for name in ordered(control)}
        self.unmatched_test = {name: test.rewritten[name] for name in ordered(test)}
        self.pairs: list[Pair] = []

    def side(self, side_name: str) -> Side:
        return self.control if side_name == "control" else self.test

    def unmatched(self, side_name: str) -> dict[str, str]:
        return self.unmatched_control if side_name == "control" else self.unmatched_test

    def compatible(self, control_names: Iterable[str], test_names: Iterable[str]) -> bool:
        """Whether these ops may form a row: both sides' ops are in the same layers and
        phases (an op outside both graphs, an XLA instruction say, constrains nothing)."""
        if self.zones is None:
            return True
        zones_c, zones_t = self._known_zones("control", control_names), self._known_zones("test", test_names)
        return not zones_c or not zones_t or zones_c == zones_t

    def _known_zones(self, side_name: str, names: Iterable[str]) -> set:
        """The zones of these ops of ``side_name`` that their graph nodes give (not inferred)."""
        zones, inferred = getattr(self.zones, side_name), getattr(self.inferred, side_name)
        return {zones[n] for n in names if n in zones and n not in inferred}

    def pair(self, control_names: Iterable[str], test_names: Iterable[str], key: str, rule: str,
             confidence: float = -1.0, across_zones: bool = False) -> bool:
        """A row of ``rule`` pairing these ops, which leave the unmatched pools;
        ``confidence`` below 0: the rule's own. Refused (False, nothing paired) where the ops
        are in different layers or phases, unless ``across_zones`` (an XLA fusion computes
        several layers' ops, forward and backward, in one kernel: it cannot be split)."""
        control_names, test_names = tuple(control_names), tuple(test_names)
        if not across_zones and not self.compatible(control_names, test_names):
            return False
        for name in control_names:
            self.unmatched_control.pop(name, None)
        for name in test_names:
            self.unmatched_test.pop(name, None)
        self.pairs.append(Pair(key, rule, control_names, test_names, confidence))
        return True

    def join(self, side_name: str, name: str, row: int, across_zones: bool = False) -> bool:
        """Unmatched op ``name`` of ``side_name`` joins the row at index ``row``; refused
        (False) where the op is in another layer or phase than the row's ops of its side."""
        pair = self.pairs[row]
        if self.zones is not None and not across_zones:
            own, joining = self._known_zones(side_name, getattr(pair, side_name)), self._known_zones(side_name, [name])
            if own and joining and not joining <= own:
                return False
        setattr(pair, side_name, (*getattr(pair, side_name), name))
        self.unmatched(side_name).pop(name)
        return True

    def run(self, rules: Iterable[Rule]) -> list[Pair]:
        """Each rule in turn, then a row of its own for every op no rule took."""
        for rule in (*rules, Unmatched()):
            rule.match(self)
        return self.pairs


class Unmatched(Rule):
    """Last, after every rule: a row of its own for every op no rule took."""

    name = "unmatched"
    confidence = 0.0

    def match(self, matcher: Matcher) -> None:
        matcher.pairs += [Pair(name, self.name, (name,), ()) for name in matcher.unmatched_control]
        matcher.pairs += [Pair(name, self.name, (), (name,)) for name in matcher.unmatched_test]


__all__ = ["RULE_CONFIDENCE", "SIDES", "Matcher", "Rule", "Unmatched"]
