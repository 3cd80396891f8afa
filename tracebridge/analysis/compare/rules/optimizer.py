"""The optimizer rule: variable updates differ entirely between TF1 and TF2
(``ResourceApplyAdam`` against Keras's ``AssignAddVariableOp``s and their arithmetic), so
updates pair as groups. Where the graphs were recorded, each trainable variable's updates
form a group of their own, paired through the variables the structure already paired
(the anchors); what serves several variables at once (a learning-rate schedule, the step
counter) stays one shared group, as does everything when no graph is known."""

from __future__ import annotations

import re

from ...graphs.recorded_graph import Graph
from ...graphs.structure import Alignment
from ..names import gradient_key, pair_key
from ..sides import Side

_UPDATE_TYPES = {"ResourceApplyGradientDescent", "ApplyGradientDescent", "AssignSubVariableOp",
                 "AssignAddVariableOp", "ResourceApplyAdam", "ApplyAdam", "ResourceApplyMomentum",
                 "ResourceApplyKerasMomentum", "AssignVariableOp"}
# Optimizer scopes, and TF1's slot variables (``kernel/Adam``, ``kernel/Adam_1``, ``kernel/Momentum``).
_OPTIMIZER_SCOPES = re.compile(r"(?:^|/)(?:GradientDescent|SGD|sgd|Adam|adam|Momentum|optimizer|training)"
                               r"(?:_\d+)?(?:/|$)")


def is_update(side: Side, name: str) -> bool:
    """An op of the optimizer: an update kernel, or an op in an optimizer's scope that is
    not a gradient, or TF1's top-level ``mul`` (a power of beta)."""
    return side.plain_type[name] in _UPDATE_TYPES or (
        bool(_OPTIMIZER_SCOPES.search(name)) and gradient_key(name) is None) or \
        (side.plain_type[name] == "Mul" and re.fullmatch(r"mul(_\d+)?", name) is not None)


def optimizer_groups(control: Side, test: Side, alignment: Alignment | None, unmatched_control: dict,
                     unmatched_test: dict) -> list[tuple[list[str], list[str], str]]:
    """``(control names, test names, key)`` per group of updates, taken from each side's
    unmatched ops: one per paired trainable variable both sides update on their own, then
    the rest of each side's updates as one group."""
    updates_c = [n for n in unmatched_control if is_update(control, n)]
    updates_t = [n for n in unmatched_test if is_update(test, n)]
    if not (updates_c and updates_t):
        return []
    groups = []
    if alignment is not None and control.graph and test.graph:
        served_c = _by_variable(_owners(control.graph, updates_c), updates_c)
        served_t = _by_variable(_owners(test.graph, updates_t), updates_t)
        for variable_c, variable_t in alignment.pairs:
            names_c, names_t = list(served_c.get(variable_c, ())), list(served_t.get(variable_t, ()))
            if not (names_c and names_t):
                continue
            # The variable's own handle op, where a side runs one (TF1's VarHandleOp).
            names_c += [v for v in (variable_c,) if v in unmatched_control and v not in names_c]
            names_t += [v for v in (variable_t,) if v in unmatched_test and v not in names_t]
            key = pair_key(names_c[0], names_t[0]) if len(names_c) == len(names_t) == 1 else \
                f"updates of {variable_c} [{len(names_c)} ~ {len(names_t)} ops]"
            groups.append((names_c, names_t, key))
        taken_c = {n for names, _, _ in groups for n in names}
        taken_t = {n for _, names, _ in groups for n in names}
        updates_c = [n for n in updates_c if n not in taken_c]
        updates_t = [n for n in updates_t if n not in taken_t]
    if updates_c and updates_t:
        groups.append((updates_c, updates_t, "optimizer updates"))
    return groups


def _by_variable(owners: dict[str, str], updates: list[str]) -> dict[str, list[str]]:
    """Variable -> the update ops serving it, in ``updates``' order."""
    out: dict[str, list[str]] = {}
    for name in updates:
        if name in owners:
            out.setdefault(owners[name], []).append(name)
    return out


def _owners(graph: Graph, updates: list[str]) -> dict[str, str]:
    """Update op -> the one trainable variable it serves, where it serves one: the variable
    its assignments (followed through slot variables such as Adam's moments) write to."""
    roles = {name: role for name, _, role in graph.variables}
    ops = set(updates) | set(roles)
    owners = {}
    for name in updates:
        if name not in graph.order:
            continue
        served, seen, frontier = set(), {name}, [name]
        while frontier and len(served) < 2:
            node = frontier.pop(0)
            nexts = list(graph.consumers.get(node, ()))
            if graph.types.get(node) in _UPDATE_TYPES and graph.producers.get(node):
                target = graph.producers[node][0]
                if roles.get(target, "other") != "other":
                    served.add(target)
                elif target in roles:
                    nexts.append(target)  # a slot: on to what reads it
            for near in nexts:
                if near in ops and near not in seen:
                    seen.add(near)
                    frontier.append(near)
        if len(served) == 1:
            owners[name] = served.pop()
    return owners


__all__ = ["is_update", "optimizer_groups"]
