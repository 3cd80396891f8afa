"""The graph a capture recorded (capture/graph_record.py), as analysis reads it: nodes,
their op types and dataflow edges, the variables, and what op types mean to alignment.

Structural alignment (:mod:`.structure`, :mod:`.structure_regions`) and the comparison's
rules (:mod:`.compare.align`) both import from here, and this module imports neither.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Graph:
    """A recorded graph (capture/graph_record.py): nodes in creation order."""

    order: dict[str, int]
    types: dict[str, str]
    producers: dict[str, tuple[str, ...]]
    consumers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    variables: list[tuple[str, tuple, str]] = field(default_factory=list)  # (node, shape, role) in graph order
    variable_names: dict[str, str] = field(default_factory=dict)  # variable node -> the variable's own name


def decode_graph(metadata) -> Graph | None:
    """The graph a trace's capture recorded, or None (an old file, a with-block capture)."""
    text = metadata.get("graph") if metadata else None
    if not text:
        return None
    try:
        record = json.loads(text)
        return _graph(record["nodes"], record["variables"])
    except (ValueError, KeyError, TypeError, AttributeError):  # not a graph record: no graph
        return None


def _graph(nodes: list, variables: dict) -> Graph:
    graph = Graph(order={}, types={}, producers={})
    for index, (name, op_type, inputs, _shape) in enumerate(nodes):
        graph.order[name] = index
        graph.types[name] = op_type
        graph.producers[name] = tuple(dict.fromkeys(inputs))
    # Identity ops only forward a tensor (TF1's gradients wrap every output in one): edges
    # go through them, so a gradient's consumers are the ops that use it.
    def source(name: str) -> str:
        seen = set()
        while graph.types.get(name) == "Identity" and graph.producers.get(name) and name not in seen:
            seen.add(name)
            name = graph.producers[name][0]
        return name
    for name, inputs in graph.producers.items():
        graph.producers[name] = tuple(dict.fromkeys(source(n) for n in inputs))
    for name, inputs in graph.producers.items():
        for producer in inputs:
            graph.consumers[producer].append(name)
    graph.variables = sorted(((name, tuple(shape or ()), _role(variable)) for name, (variable, shape)
                              in variables.items() if name in graph.order), key=lambda item: graph.order[item[0]])
    graph.variable_names = {name: str(variable) for name, (variable, _) in variables.items() if name in graph.order}
    return graph


# Variable names both worlds share (tf.compat.v1.layers, tf_keras and Keras 3 alike); any
# other variable (optimizer slots, counters) has the role "other".
_ROLES = ("kernel", "recurrent_kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "embeddings")


def _role(variable_name: str) -> str:
    leaf = variable_name.split(":")[0].rsplit("/", 1)[-1]
    return leaf if leaf in _ROLES else "other"


# An op inside a functional loop runs as ``<loop>/body/_<runtime id>/<body node>`` (or
# ``cond``); the recorded graph has it as ``<loop>/body/<body node>`` (capture/graph_record.py).
_IN_LOOP = re.compile(r"/(?P<part>body|cond)/_\d+/")


def graph_node_name(trace_name: str) -> str:
    """The recorded graph's name for an op a trace names: without a loop's runtime ids."""
    return _IN_LOOP.sub(lambda m: f"/{m.group('part')}/", trace_name)


# Ops that only move or relabel data, so alignment looks through them: structure follows
# dataflow edges past them, and one left unpaired joins the row of a neighbour in its
# layer rather than standing alone (its counterpart may not exist: Keras 3 lowers an
# einsum to transpose, reshape and matmul; Grappler folds a reshape away on one side).
SHAPE_ONLY_OPS = frozenset({
    "Reshape", "ExpandDims", "Squeeze",       # the same elements under another shape
    "Transpose", "ConjugateTranspose",        # the same elements in another order
    "Identity",                               # the same tensor under another name
    "Cast",                                   # the same values in another dtype
    "Unpack", "StridedSlice", "Slice",        # a sequence cut into its time steps
})


# Op types that compute the same thing under other names.
_KINDS = {"Einsum": "matmul", "MatMul": "matmul", "BatchMatMul": "matmul", "BatchMatMulV2": "matmul",
          "BatchMatMulV3": "matmul", "_FusedMatMul": "matmul", "Add": "add", "AddV2": "add",
          "RandomUniform": "random", "StatelessRandomUniformV2": "random",  # dropout masks
          "While": "while", "StatelessWhile": "while"}  # a loop that reads a variable or not


def op_kind(op_type: str) -> str:
    return _KINDS.get(op_type, op_type)


__all__ = ["SHAPE_ONLY_OPS", "Graph", "decode_graph", "graph_node_name", "op_kind"]
