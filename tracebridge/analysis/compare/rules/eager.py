"""Aligning a graph run's fused kernels with the eager ops of a run without ``tf.function``.

Eager ops carry no scopes and no inputs (:mod:`tracebridge.readers.eager_ops`), so the
comparison's fusion stage, which finds a fused kernel's parts by dataflow or layer scope,
finds none for them. What is left is their order: Grappler fuses a contraction with the
ops that directly follow it (``Conv2D`` -> ``BiasAdd`` -> ``Relu``), and eager execution
runs those parts one after another. So a fused kernel left unmatched takes the first
unmatched eager op of its first part's type, then, for each further part type, the first
unmatched eager op of that type that comes after the previous part.
"""

from __future__ import annotations

from ....model.schema import is_eager_name
from ...common.kernels import fusion_parts
from .matcher import Matcher, Rule


class EagerFusions(Rule):
    """Each side's unmatched fused kernels take the other side's unmatched eager ops of
    their parts' types, in order: one ``fusion`` row each."""

    name = "fusion"
    confidence = 0.75

    def match(self, matcher: Matcher) -> None:
        for side_name, other_name in (("control", "test"), ("test", "control")):
            side, other = matcher.side(side_name), matcher.side(other_name)
            own_unmatched, others_unmatched = matcher.unmatched(side_name), matcher.unmatched(other_name)
            eager = sorted((n for n in others_unmatched if is_eager_name(n)), key=other.order.__getitem__)
            if not eager:
                continue
            for name in sorted((n for n in own_unmatched if fusion_parts(side.type[n])), key=side.order.__getitem__):
                parts = fusion_parts(side.type[name])
                first = next((n for n in eager if n in others_unmatched and other.plain_type[n] == parts[0]), None)
                if first is None:
                    continue
                group, last = [first], other.order[first]
                for part in parts[1:]:
                    following = next((n for n in eager if n in others_unmatched and n not in group
                                      and other.plain_type[n] == part and other.order[n] > last), None)
                    # A fusion's parts are adjacent in the eager order: a part further on
                    # belongs to a later layer, and a fusion holds each part type once.
                    if following is not None and other.order[following] - last <= 3:
                        group.append(following)
                        last = other.order[following]
                kinds = "+".join(other.plain_type[n] for n in group)
                key = f"{name} [{side.type[name]} = {kinds}]"
                if side_name == "control":
                    matcher.pair([name], group, key, self.name)
                else:
                    matcher.pair(group, [name], key, self.name)


__all__ = ["EagerFusions"]
