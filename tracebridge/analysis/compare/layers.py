"""A comparison by layer: each run's ops in the model's layers and phases
(:mod:`..graphs.layers`), the two runs' layers paired, and the table of time per layer and
phase that :class:`~.result.Comparison` shows first.

A port can restructure a model completely (20 unrolled cells against one loop), but not its
parameters: the layer table holds for any port, and alignment pairs ops only within one
layer and phase (:meth:`~.rules.matcher.Matcher.compatible`), so no row crosses layers.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..common.types import SIDES, PerSide
from ..common.xla import xla_ops
from ..graphs.layers import Attribution, Layer, Phase, attribute, pair_layers
from ..graphs.recorded_graph import graph_node_name
from ..graphs.structure import Alignment
from .sides import Side

# An op's zone: (the key of its layer pair, or None outside the layers; its phase).
Zone = tuple[str | None, str]

# A TF1 loop's control flow as the runtime lowers it: in no recorded graph, and in no layer
# (it joins its loop condition's row, rules/loops.py)
_LOWERED_LOOP = frozenset({"Enter", "Merge", "Switch", "NextIteration", "LoopCond", "Exit"})
_GRAPPLER = re.compile(r"/ArithmeticOptimizer/\w+?_(?P<node>[^/]+)$")


@dataclass
class LayerMap:
    """Both runs' layers, paired (``keys``: pair key -> each side's layers), and each op's zone."""

    layers: PerSide[list[Layer]]
    keys: dict[str, PerSide[tuple[Layer, ...]]]
    zones: PerSide[dict[str, Zone]]
    # ops whose zone is inferred, not their graph node's (an XLA row's first TF op, a scope's
    # majority): they count in the table but constrain no row (an XLA fusion computes several
    # layers' ops at once)
    inferred: PerSide[set[str]] = field(default_factory=lambda: PerSide(set(), set()))

    def label(self, key: str | None, phase: str) -> str:
        if key is None:
            return phase
        layers = self.keys[key]
        names = [" + ".join(layer.name for layer in side) for side in layers]
        shown = names[0] if names[0] == names[1] else " ~ ".join(n or "-" for n in names)
        return f"{shown} {phase}"

    def variables(self) -> list[dict]:
        """The pairing of the runs' variables, layer by layer (``--json``'s ``variables``)."""
        def side(layers: tuple[Layer, ...]) -> dict:
            return {"layers": [layer.name for layer in layers],
                    "variables": [v for layer in layers for v in layer.variables],
                    "shapes": [list(s) for layer in layers for s in layer.shapes],
                    "parameters": sum(layer.parameters for layer in layers)}
        return [{"key": key, "control": side(pair.control), "test": side(pair.test)} for key, pair in self.keys.items()]


def map_layers(control: Side, test: Side, alignment: Alignment | None = None) -> LayerMap | None:
    """The layer map of two runs whose graphs were recorded, else None. ``alignment``: the
    graphs' structural alignment, whose variable pairs anchor the layer pairs."""
    if not (control.graph and test.graph):
        return None
    attributions = PerSide(attribute(control.graph), attribute(test.graph))
    anchors = set()
    shapes_c = {node: shape for node, shape, _ in control.graph.variables}
    shapes_t = {node: shape for node, shape, _ in test.graph.variables}
    for node_c, node_t in alignment.pairs if alignment is not None else ():
        layer_c, layer_t = attributions.control.layer_of.get(node_c), attributions.test.layer_of.get(node_t)
        # matrices only: vectors of one size (biases, a norm's gamma) pair weakly
        if layer_c is not None and layer_t is not None and len(shapes_c.get(node_c) or ()) > 1 \
                and len(shapes_t.get(node_t) or ()) > 1:
            anchors.add((layer_c, layer_t))
    keys: dict[str, PerSide[tuple[Layer, ...]]] = {}
    key_of: PerSide[dict[int, str]] = PerSide({}, {})
    rank: PerSide[dict[int, int]] = PerSide({}, {})
    for number, pair in enumerate(pair_layers(attributions.control.layers, attributions.test.layers, anchors)):
        key = f"L{number}"
        keys[key] = PerSide(tuple(attributions.control.layers[i] for i in pair.control),
                            tuple(attributions.test.layers[i] for i in pair.test))
        for i in pair.control:
            key_of.control[i], rank.control[i] = key, number
        for i in pair.test:
            key_of.test[i], rank.test[i] = key, number
    # again, with both runs' layers in one order (which layer is "the latest" alike on both)
    attributions = PerSide(attribute(control.graph, rank.control), attribute(test.graph, rank.test))
    found = [_zones(side, attribution, keys_of) for side, attribution, keys_of in zip((control, test), attributions, key_of)]
    return LayerMap(layers=attributions.map(lambda a: a.layers), keys=keys,
                    zones=PerSide(found[0][0], found[1][0]), inferred=PerSide(found[0][1], found[1][1]))


def _zones(side: Side, attribution: Attribution, key_of: dict[int, str]) -> tuple[dict[str, Zone], set[str]]:
    """Each of a run's ops in its zone: its graph node's (inside a loop, without the loop's
    runtime ids; an op Grappler renamed, the node it replaced; an XLA row, the first TF op
    its instructions compute), else the zone most of its scope's nodes are in."""
    def zone_of_node(node: str) -> Zone | None:
        found = attribution.zone(node)
        if found is None:
            return None
        layer, phase = found
        return (key_of.get(layer) if layer is not None else None), phase

    by_scope: dict[str, Counter] = defaultdict(Counter)
    for node in attribution.phase_of:
        zone = zone_of_node(node)
        parts = node.split("/")
        for end in range(1, len(parts)):
            by_scope["/".join(parts[:end])][zone] += 1
    zones: dict[str, Zone] = {}
    inferred: set[str] = set()
    graph_types = side.graph.types if side.graph else {}
    calls = [f"{n}/" for n, t in graph_types.items() if t in ("StatefulPartitionedCall", "PartitionedCall")]
    computed = xla_ops(side.trace, among=set(side.names))  # an XLA row: the TF ops it computes
    for name in side.names:
        node = graph_node_name(computed[name][0] if computed.get(name) else name)
        renamed = _GRAPPLER.search(node)
        if node not in attribution.phase_of and renamed:
            node = node[:renamed.start()] + "/" + renamed.group("node")
        zone = zone_of_node(node)
        for call in calls if zone is None else ():  # XLA names a called function's op without the call
            zone = zone_of_node(call + node)
            if zone is not None:
                break
        if computed.get(name) and (computed[name][0] != name or len(computed[name]) > 1):
            inferred.add(name)  # an XLA fusion: of its first TF op's zone, and of others'
        if zone is None and side.plain_type.get(name) not in _LOWERED_LOOP:
            inferred.add(name)
            parts = node.split("/")
            for end in range(len(parts) - 1, 0, -1):
                votes = by_scope.get("/".join(parts[:end]))
                if votes:  # the most of the scope's nodes; a tie by name, never by order
                    zone = max(votes.items(), key=lambda item: (item[1], str(item[0])))[0]
                    break
        if zone is not None:
            zones[name] = zone
    return zones, inferred


@dataclass
class LayerRow:
    """One layer (or a phase outside the layers: input, loss, clip, ...) and phase: both runs'
    time per step in it (medians of per-step sums), their op names and the op rows folded under it."""

    key: str | None
    phase: str
    label: str
    control_layers: tuple[str, ...]
    test_layers: tuple[str, ...]
    control_names: tuple[str, ...]
    test_names: tuple[str, ...]
    control_total_ns: float
    test_total_ns: float
    rows: list[str] = field(default_factory=list)

    @property
    def delta_ns(self) -> float:
        return self.test_total_ns - self.control_total_ns

    def to_dict(self) -> dict:
        return {"key": self.key, "phase": self.phase, "label": self.label,
                "control_layers": list(self.control_layers), "test_layers": list(self.test_layers),
                "control_names": list(self.control_names), "test_names": list(self.test_names),
                "control_total_ns": self.control_total_ns, "test_total_ns": self.test_total_ns,
                "delta_ns": self.delta_ns, "rows": self.rows}


UNATTRIBUTED = "unattributed"


def layer_rows(layer_map: LayerMap, sides: PerSide[Side], rows) -> list[LayerRow]:
    """The layer table: every zone either run has ops in, layers in the model's order and
    phases in the order a step runs them; ops outside the graphs under ``unattributed``."""
    members: dict[Zone, PerSide[list[str]]] = defaultdict(lambda: PerSide([], []))
    for side_name, side, zones in zip(SIDES, sides, layer_map.zones):
        for name in side.names:
            getattr(members[zones.get(name, (None, UNATTRIBUTED))], side_name).append(name)
    row_zone: dict[Zone, list[str]] = defaultdict(list)
    for row in rows:
        weights: Counter = Counter()
        for side_name, zones in zip(SIDES, layer_map.zones):
            for name in getattr(row.names, side_name):
                weights[zones.get(name, (None, UNATTRIBUTED))] += getattr(sides, side_name).total.get(name, 0) + 1
        if weights:
            row_zone[weights.most_common(1)[0][0]].append(row.key)
    order = {key: n for n, key in enumerate(layer_map.keys)}
    phases = {phase: n for n, phase in enumerate((*Phase.ORDER, UNATTRIBUTED))}

    def rank(zone: Zone):
        key, phase = zone
        if key is None:  # input first, then the layers, then loss, clip, ... at their phase
            return (0 if phase == Phase.INPUT else 2, phases.get(phase, 99), -1)
        return (1, order[key], phases.get(phase, 99))

    table = []
    for zone in sorted(members, key=rank):
        key, phase = zone
        names = members[zone]
        layers = layer_map.keys[key] if key is not None else PerSide((), ())
        table.append(LayerRow(
            key=key, phase=phase, label=layer_map.label(key, phase) if phase != UNATTRIBUTED else UNATTRIBUTED,
            control_layers=tuple(layer.name for layer in layers.control),
            test_layers=tuple(layer.name for layer in layers.test),
            control_names=tuple(names.control), test_names=tuple(names.test),
            control_total_ns=_median_total(sides.control, names.control),
            test_total_ns=_median_total(sides.test, names.test), rows=row_zone.get(zone, [])))
    return table


def _median_total(side: Side, names: list[str]) -> float:
    if not names:
        return 0.0
    return float(np.median(np.sum([side.per_step[name] for name in names], axis=0)))


__all__ = ["UNATTRIBUTED", "LayerMap", "LayerRow", "Zone", "layer_rows", "map_layers"]
