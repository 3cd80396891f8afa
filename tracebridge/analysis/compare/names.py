"""Op names as comparison sees them (without function wrappers and Keras uniquifiers, as
gradients of which op, in which layer scope), and the pairs alignment makes of them: their
rule, confidence and key from the real names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...model.hlo import without_wrappers
_UNIQUIFIED_SCOPE = re.compile(r"^([a-z][a-z0-9_]*?)_\d+$")
_TF1_GRADIENT = re.compile(r"^(?:.*/)?gradients(?:_\d+)?/(?:gradients/)?(?P<rest>.+)$")
_TF2_GRADIENT = re.compile(r"^(?:.*/)?gradient_tape/(?P<rest>.+)$")


# How sure each rule is that its pair is the same computation, by the name its rows record:
# each alignment rule class declares its ``confidence`` (rules/matcher.py's ``Rule``, which
# fills this table as the classes are defined; a rule without one fails there).
RULE_CONFIDENCE: dict[str, float] = {}


@dataclass
class Pair:
    key: str
    rule: str
    control: tuple[str, ...]
    test: tuple[str, ...]
    confidence: float = -1.0  # below 0: the rule's own (RULE_CONFIDENCE, which must have it)

    def __post_init__(self):
        if self.confidence < 0:
            self.confidence = RULE_CONFIDENCE[self.rule]


def pair_key(control_name: str, test_name: str) -> str:
    """A row's key from the real names: one name when both sides agree, else
    ``control ~ test``. Normalised names only decide matches; they are never shown."""
    return control_name if control_name == test_name else f"{control_name} ~ {test_name}"


def plain_name(name: str) -> str:
    """Without function wrappers, and with Keras uniquifiers removed from scope parts."""
    name = without_wrappers(name)
    parts = name.split("/")
    scopes = [(_UNIQUIFIED_SCOPE.match(p).group(1) if _UNIQUIFIED_SCOPE.match(p) else p) for p in parts[:-1]]
    return "/".join(scopes + parts[-1:])


def gradient_key(name: str) -> tuple[str, ...] | None:
    """A gradient op as (scope parts..., op) without the ``_grad`` marker, or None."""
    match = _TF1_GRADIENT.match(name)
    if match:
        parts = [p[:-len("_grad")] if p.endswith("_grad") else p for p in match.group("rest").split("/")]
        return tuple(parts)
    match = _TF2_GRADIENT.match(name)
    if match:
        return tuple(match.group("rest").split("/"))
    return None


# Gradient tails: how many trailing parts of a gradient's path (the forward op's scopes and
# the op, without ``gradients/`` or ``gradient_tape/`` and the ``_grad`` marker) two ops must
# share, longest first.
GRADIENT_TAIL_LENGTHS = (3, 2)


def gradient_tail(length: int):
    """The key of a gradient op by the last ``length`` parts of its path (None if shorter)."""
    def key(text: str) -> tuple[str, ...] | None:
        path = gradient_key(plain_name(text))
        return path[-length:] if path and len(path) >= length else None
    return key


def op_scope(name: str) -> tuple[tuple[str, ...], bool]:
    """An op's scope parts (without function wrappers) and whether it is a gradient op. A
    TF1 gradient's scope is its forward op's (``conv1`` for ``conv1/Conv2D_grad/...``); TF2
    names a gradient by the layer, sometimes with the forward op (``conv1/BiasAdd``)."""
    stripped = plain_name(name)
    gradient = gradient_key(stripped)
    if gradient is None:
        return tuple(stripped.split("/")[:-1]), False
    tf1_style = _TF1_GRADIENT.match(stripped) is not None
    return gradient[:-2] if tf1_style else gradient[:-1], True


def same_scope(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same layer when the shorter scope runs inside the longer one (``dense`` in
    ``mlp/dense``, ``conv1`` in ``conv1/BiasAdd``); top-level ops only with top-level ops."""
    shorter, longer = sorted((a, b), key=len)
    if not shorter:
        return not longer
    return any(longer[i:i + len(shorter)] == shorter for i in range(len(longer) - len(shorter) + 1))


__all__ = ["GRADIENT_TAIL_LENGTHS", "RULE_CONFIDENCE", "Pair", "gradient_key", "gradient_tail", "op_scope", "pair_key", "plain_name", "same_scope",
           "without_wrappers"]
