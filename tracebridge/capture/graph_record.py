"""The graph that ran, recorded at capture time, for structural comparison.

A trace names ops but says little about how they connect (XSpace records no inputs), and
names differ between TF1 and TF2 code. The graph says what both runs share: which variable
each op reads, what feeds what, output shapes. TF1: the session's ``tf.Graph``; TF2: the
traced ``tf.function``'s concrete graph, where variables are captured resource inputs.

The record is plain data (:func:`tracebridge.analysis.structure.encode_graph`'s form):
nodes ``[name, type, [data inputs], shape of output 0 or None]`` in creation order, and
variables ``{node name: [variable name, shape]}``.
"""

from __future__ import annotations

from typing import Any


def _shape(tensor_shape) -> list[int] | None:
    """A TensorShape or a TensorShapeProto (an op's ``shape`` attr) as a list; -1 for an
    unknown dimension, None for an unknown rank."""
    if hasattr(tensor_shape, "dim"):  # TensorShapeProto
        return None if tensor_shape.unknown_rank else [int(d.size) for d in tensor_shape.dim]
    try:
        dims = tensor_shape.as_list()
    except ValueError:
        return None
    return [-1 if d is None else int(d) for d in dims]


def _nodes(graph) -> list[list]:
    nodes = []
    for op in graph.get_operations():
        inputs = [t.op.name for t in op.inputs]
        shape = _shape(op.outputs[0].shape) if op.outputs else None
        nodes.append([op.name, op.type, inputs, shape])
    return nodes


def record_session_graph(graph) -> dict[str, Any]:
    """A TF1 graph: variables are its ``VarHandleOp`` (or ``VariableV2``) nodes, by name."""
    variables = {}
    for op in graph.get_operations():
        if op.type in ("VarHandleOp", "VariableV2", "Variable"):
            try:
                shape = _shape(op.get_attr("shape"))
            except ValueError:
                shape = _shape(op.outputs[0].shape)
            variables[op.name] = [op.name, shape]
    return {"nodes": _nodes(graph), "variables": variables}


def record_function_graph(function, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The concrete graph a ``tf.function`` runs for these arguments (the one it already
    traced: no retrace), or None for a plain Python callable. Variables are the graph's
    captured resource placeholders, named by the variable they stand for."""
    concrete_of = getattr(function, "get_concrete_function", None)
    if concrete_of is None:
        return None
    concrete = concrete_of(*args, **kwargs)
    graph = concrete.graph
    by_handle = {id(v.handle): v for v in concrete.variables if hasattr(v, "handle")}
    variables = {}
    for external, internal in graph.captures:
        variable = by_handle.get(id(external))
        if variable is not None:
            name = getattr(variable, "path", None) or variable.name.split(":")[0]
            variables[internal.op.name] = [str(name), _shape(variable.shape)]
    return {"nodes": _nodes(graph), "variables": variables}
