"""The graph that ran, recorded at capture time, for structural comparison.

A trace names ops but says little about how they connect (XSpace records no inputs), and
names differ between TF1 and TF2 code. The graph says what both runs share: which variable
each op reads, what feeds what, output shapes. TF1: the session's ``tf.Graph``; TF2: the
traced ``tf.function``'s concrete graph, where variables are captured resource inputs.

The record is plain data (:func:`tracebridge.analysis.structure.encode_graph`'s form):
nodes ``[name, type, [data inputs], shape of output 0 or None]`` in creation order, and
variables ``{node name: [variable name, shape]}``.

A functional loop (``While``, ``StatelessWhile``: ``tf.while_loop`` under control flow v2,
Keras's ``unroll=False`` RNNs and their gradients) runs ops that live in the graph's
function library, not the graph; traces name them ``<loop>/body/_<id>/<body node>``. So
each loop's body and condition are recorded too, as nodes ``<loop>/body/<body node>``
right after the loop, and wired in: a body argument is an ``Identity`` of the loop's input
at its position (so a variable the loop carries reaches the ops that read it inside), and
the loop reads the body's results (so what follows the loop follows its last ops).
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


_LOOPS = ("While", "StatelessWhile")


def _nodes(graph) -> list[list]:
    library = None  # the graph's functions, serialized only when a loop needs them
    nodes = []
    for op in graph.get_operations():
        inputs = [t.op.name for t in op.inputs]
        shape = _shape(op.outputs[0].shape) if op.outputs else None
        node = [op.name, op.type, inputs, shape]
        nodes.append(node)
        if op.type in _LOOPS:
            if library is None:
                library = {f.signature.name: f for f in graph.as_graph_def().library.function}
            nodes += _loop_nodes(node, {part: op.get_attr(part).name for part in ("cond", "body")}, library, 0)
    return nodes


def _loop_nodes(loop: list, functions: dict[str, str], library: dict, depth: int) -> list[list]:
    """The nodes of a loop's condition and body functions (a FunctionDef each), named under
    the loop; loops inside them in turn. Appends the body's results to ``loop``'s inputs."""
    out: list[list] = []
    if depth > 8:  # a library refers to itself only through bugs; stop rather than recurse
        return out
    loop_name, loop_inputs = loop[0], loop[2]
    for part, function_name in functions.items():
        function = library.get(function_name)
        if function is None:
            continue
        prefix = f"{loop_name}/{part}/"
        for index, arg in enumerate(function.signature.input_arg):
            outer = [loop_inputs[index]] if index < len(loop_inputs) else []
            out.append([prefix + arg.name, "Identity", outer, None])

        def inner(reference: str) -> str:  # "node:output:0" or an argument's name
            return prefix + reference.split(":")[0]
        for node_def in function.node_def:
            node = [prefix + node_def.name, node_def.op,
                    [inner(r) for r in node_def.input if not r.startswith("^")], None]
            out.append(node)
            if node_def.op in _LOOPS:
                nested = {p: node_def.attr[p].func.name for p in ("cond", "body")}
                out += _loop_nodes(node, nested, library, depth + 1)
        if part == "body":
            results = [function.ret[a.name] for a in function.signature.output_arg if a.name in function.ret]
            loop[2] = loop_inputs + [inner(r) for r in results]
    return out


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
