"""The graph that ran, recorded at capture time, for structural comparison.

A trace names ops but says little about how they connect (XSpace records no inputs), and
names differ between TF1 and TF2 code. The graph says what both runs share: which variable
each op reads, what feeds what, output shapes. TF1: the session's ``tf.Graph``; TF2: the
traced ``tf.function``'s concrete graph, where variables are captured resource inputs.

The record is plain data (:func:`tracebridge.analysis.graphs.structure.encode_graph`'s form):
nodes ``[name, type, [data inputs], shape of output 0 or None]`` in creation order, and
variables ``{node name: [variable name, shape]}``.

A functional loop (``While``, ``StatelessWhile``: ``tf.while_loop`` under control flow v2,
Keras's ``unroll=False`` RNNs and their gradients) runs ops that live in the graph's
function library, not the graph; traces name them ``<loop>/body/_<id>/<body node>``. So
each loop's body and condition are recorded too, as nodes ``<loop>/body/<body node>``
right after the loop, and wired in: a body argument is an ``Identity`` of the loop's input
at its position (so a variable the loop carries reaches the ops that read it inside), and
the loop reads the body's results (so what follows the loop follows its last ops).

A call of another ``tf.function`` (``StatefulPartitionedCall``, ``PartitionedCall``: Keras
3's ``fit`` runs ``multi_step_on_iterator``, which calls ``one_step_on_data``) is inlined
by TF's runtime, and traces name the callee's ops ``<call>/<callee node>``. So the callee
is recorded the same way, as nodes ``<call>/<callee node>`` wired in as a loop body is.
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
_CALLS = ("StatefulPartitionedCall", "PartitionedCall")


def _called(attr_of, op_type: str) -> dict[str, str] | None:
    """The functions an op runs that traces show inside it, by the part of the op's name
    their nodes get (``body``/``cond`` for a loop; "" for a call); None for another op.
    ``attr_of(name)`` is the op's function-valued attribute's function name."""
    if op_type in _LOOPS:
        return {part: attr_of(part) for part in ("cond", "body")}
    if op_type in _CALLS:
        return {"": attr_of("f")}
    return None


def _nodes(graph) -> list[list]:
    library = None  # the graph's functions, serialized only when a loop needs them
    nodes = []
    for op in graph.get_operations():
        inputs = [t.op.name for t in op.inputs]
        shape = _shape(op.outputs[0].shape) if op.outputs else None
        node = [op.name, op.type, inputs, shape]
        nodes.append(node)
        functions = _called(lambda attr: op.get_attr(attr).name, op.type)
        if functions:
            if library is None:
                library = {f.signature.name: f for f in graph.as_graph_def().library.function}
            nodes += _function_nodes(node, functions, library, 0)
    return nodes


def _function_nodes(caller: list, functions: dict[str, str], library: dict, depth: int) -> list[list]:
    """The nodes of the functions an op runs (a FunctionDef each: a loop's condition and
    body, a call's callee), named under the op; loops and calls inside them in turn.
    Appends the results of the body (or callee) to ``caller``'s inputs."""
    out: list[list] = []
    if depth > 8:  # a library refers to itself only through bugs; stop rather than recurse
        return out
    caller_name, caller_inputs = caller[0], caller[2]
    for part, function_name in functions.items():
        function = library.get(function_name)
        if function is None:
            continue
        prefix = f"{caller_name}/{part}/" if part else f"{caller_name}/"
        for index, arg in enumerate(function.signature.input_arg):
            outer = [caller_inputs[index]] if index < len(caller_inputs) else []
            out.append([prefix + arg.name, "Identity", outer, None])

        def inner(reference: str) -> str:  # "node:output:0" or an argument's name
            return prefix + reference.split(":")[0]
        for node_def in function.node_def:
            node = [prefix + node_def.name, node_def.op,
                    [inner(r) for r in node_def.input if not r.startswith("^")], None]
            out.append(node)
            nested = _called(lambda attr: node_def.attr[attr].func.name, node_def.op)
            if nested:
                out += _function_nodes(node, nested, library, depth + 1)
        if part in ("body", ""):
            results = [function.ret[a.name] for a in function.signature.output_arg if a.name in function.ret]
            caller[2] = caller_inputs + [inner(r) for r in results]
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


def input_shapes(args: tuple, kwargs: dict) -> str:
    """The tensors a call was given, as ``dtype[d0,d1]`` joined by ", " (other values as
    their type's name): what an XLA compilation is keyed on, since a ``jit_compile``
    function compiles once per input shape and TF's profile does not say which."""
    import tensorflow as tf
    parts = []
    for value in tf.nest.flatten((args, kwargs)):
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None:
            parts.append(type(value).__name__)
            continue
        dims = _shape(tf.TensorShape(shape))
        name = getattr(dtype, "name", str(dtype))
        parts.append(f"{name}[{','.join('?' if d < 0 else str(d) for d in dims)}]" if dims is not None else f"{name}[...]")
    return ", ".join(parts)

