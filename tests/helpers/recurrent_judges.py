"""What each op of the recurrent model pairs computes (tests/models_recurrent.py), judged
from what the model code controls, independently of tracebridge's own attribution.

A :class:`Judgement` is (layer, role, direction):

- ``layer``: the model's layer the op computes for, by the Keras port's layer names
  (``embedding``, ``lstm0``, ``softmax``...), or None for an op of no layer;
- ``role``: ``layer`` (the layer's own computation), ``update`` (a variable's update),
  ``loss``, ``clip`` (a gradient clip's norm and scaling), ``optimizer`` (the optimizer's
  own state: step counter, learning rate), ``metrics`` (Keras's loss tracker), ``input``
  (feeds, iterators, ``fit``'s data) or ``step`` (the runtime's own per-step ops);
- ``direction``: ``forward``, ``backward`` (gradients) or ``update`` (the optimizer's
  work, the clip included).

Where an op's name says it, the name decides: the scopes each model's code opens
(``cell_0`` is ``lstm0``; ``gradients/`` and ``gradient_tape/`` are backward; the
optimizer's scope is the update). The rest (TF1's unscoped gradient sums ``gradients/AddN_N``,
a tape's ``zeros_like``, Keras's optimizer ops, whose names do not say which variable or
whether they clip) is judged from the recorded graph: a variable write by the variable it
writes, an optimizer op by the one variable its result updates, the clip by the global
norm's data flow, and any other op by its nearest judged neighbours.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from dataclasses import dataclass

DIRECTIONS = ("forward", "backward", "update")
VARIABLE_WRITES = re.compile(r"^(Assign(Add|Sub)?VariableOp|ResourceApply\w+|ResourceSparseApply\w+|"
                             r"ResourceScatter\w+)$")
KERAS_OPTIMIZERS = re.compile(r"^(sgd|adam|adamw|adagrad|rmsprop)(_\d+)?$")
KERAS_LOSS = re.compile(r"^(compile_loss|sparse_categorical_crossentropy|categorical_crossentropy)(_\d+)?$")
TF1_OPTIMIZERS = re.compile(r"(^|/)(GradientDescent|Adam|Momentum|RMSProp|Adagrad)(_\d+)?(/|$)")


@dataclass(frozen=True)
class Judgement:
    layer: str | None
    role: str
    direction: str

    @property
    def place(self) -> tuple[str, str]:
        """What "the same computation" compares: the layer (or, for an op of no layer,
        its role) and the direction."""
        return (self.layer or self.role, self.direction)


@dataclass(frozen=True)
class Partial:
    """What a name alone says: any field may be unknown (None)."""

    layer: str | None = None
    role: str | None = None
    direction: str | None = None

    def complete(self) -> bool:
        return self.role is not None and self.direction is not None and \
            (self.layer is not None or self.role not in ("layer", "update"))


@dataclass(frozen=True)
class ModelLayers:
    """A model's layers as each world names them: ``keras``, the Keras layer names (the
    layer ids); ``tf1``: (pattern searched in a TF1 op or variable name, layer id), the
    first that matches decides."""

    keras: tuple[str, ...]
    tf1: tuple[tuple[str, str], ...]
    stateless: tuple[str, ...] = ()  # layers without variables (nothing to update)
    # TF1 names the recorded graph cannot place (the control flow a loop is lowered to),
    # as ``tf1``: one dynamic_rnn loop runs both cells of a MultiRNNCell, and its control
    # is counted to the first
    loose: tuple[tuple[str, str], ...] = ()
    sparse: str | None = None  # the layer whose gradient is IndexedSlices (Keras updates it in a tf.cond)


# --- the models' layers ------------------------------------------------------------------
MODEL_LAYERS = {
    "lm": ModelLayers(
        keras=("embedding", "lstm0", "lstm1", "softmax"),
        tf1=((r"cell_0/|BasicLSTMCellZeroState(/|$)|^Model/RNN/strided_slice", "lstm0"),
             (r"cell_1/|BasicLSTMCellZeroState_1(/|$)|^Model/(concat|Reshape)$|Model/(concat|Reshape)_grad/",
              "lstm1"),
             (r"embedding", "embedding"), (r"softmax_[wb]|xw_plus_b|^Model/Reshape_1$|Model/Reshape_1_grad/",
                                           "softmax"))),
    "gru": ModelLayers(
        keras=("embedding", "gru", "classifier"),
        tf1=((r"(^|/)rnn/", "gru"), (r"(^|/)embedding/", "embedding"), (r"(^|/)classifier/", "classifier"))),
    "tagger": ModelLayers(  # the loop's own ops (one loop runs both cells) are judged by their data flow
        keras=("embedding", "lstm0", "lstm1", "tagger"),
        tf1=((r"cell_0/", "lstm0"), (r"cell_1/", "lstm1"), (r"(^|/)embedding/", "embedding"),
             (r"(^|/)tagger/", "tagger")),
        loose=((r"(^|/)rnn/", "lstm0"),)),
    "static": ModelLayers(
        keras=("lstm", "classifier"),
        tf1=((r"(^|/)rnn/|^unstack$", "lstm"), (r"(^|/)classifier/", "classifier"))),
    "bilstm": ModelLayers(
        keras=("embedding", "forward_lstm", "backward_lstm", "classifier"),
        tf1=((r"bidirectional_rnn/fw/", "forward_lstm"), (r"bidirectional_rnn/bw/", "backward_lstm"),
             (r"(^|/)embedding/", "embedding"), (r"(^|/)classifier/", "classifier"))),
    "seq2seq": ModelLayers(
        keras=("source_embedding", "target_embedding", "encoder", "decoder", "attention", "attention_output",
               "projection"),
        tf1=((r"(^|/)encoder/embedding", "source_embedding"), (r"(^|/)decoder/embedding", "target_embedding"),
             (r"(^|/)encoder/", "encoder"), (r"(^|/)decoder/", "decoder"), (r"(^|/)attention/", "attention"),
             (r"(^|/)attention_output/", "attention_output"), (r"(^|/)projection/", "projection")),
        stateless=("attention",)),
    "sparse": ModelLayers(
        keras=("embedding", "pooling", "hidden", "classifier"),
        tf1=((r"(^|/)embedding/", "embedding"), (r"(^|/)pooling/", "pooling"), (r"(^|/)hidden/", "hidden"),
             (r"(^|/)classifier/", "classifier")),
        stateless=("pooling",), sparse="embedding"),
}


# --- names -------------------------------------------------------------------------------
CALL_PREFIX = re.compile(r"^((StatefulPartitionedCall|PartitionedCall)(_\d+)?/)+")
LOOP_ID = re.compile(r"/(body|cond|then|else)/_\d+/")


def graph_name(name: str) -> str:
    """A trace's op name as the recorded graph names the node: a loop body's node without
    the runtime's ``/_N/`` instance id."""
    return LOOP_ID.sub(r"/\1/", name)


def bare(name: str) -> str:
    """The name without the function-call prefixes and Grappler's own prefixes."""
    name = CALL_PREFIX.sub("", name)
    return re.sub(r"^(ConstantFolding|ArithmeticOptimizer|LayoutOptimizer)/", "", name)


def tf1_name(name: str, layers: ModelLayers) -> Partial:
    name = bare(name)
    if name.startswith("_arg_") or name in ("_SOURCE",) or name.startswith("_retval_"):
        return Partial(None, "input" if name.startswith("_arg_") else "step", "forward")
    if re.search(r"(^|/)(IteratorGetNext|OneShotIterator|IteratorV2|MakeIterator)(_\d+)?$", name):
        return Partial(None, "input", "forward")
    if re.search(r"(^|/)(clip_by_global_norm|global_norm)(/|$)", name):
        return Partial(None, "clip", "update")
    if TF1_OPTIMIZERS.search(name):
        update = re.search(r"/update_(.+?)/[A-Za-z]+(_\d+)?$", name)
        layer = tf1_layer(update.group(1), layers) if update else None
        return Partial(layer, "update", "update") if layer else Partial(None, None, "update")
    backward = "gradients/" in name
    direction = "backward" if backward else "forward"
    if re.search(r"(^|/)loss(_\d+)?/", name):
        return Partial(None, "loss", direction)
    layer = tf1_layer(name.split("gradients/", 1)[-1], layers)
    return Partial(layer, "layer" if layer else None, direction)


def tf1_layer(name: str, layers: ModelLayers) -> str | None:
    for pattern, layer in layers.tf1:
        if re.search(pattern, name):
            return layer
    return None


def keras_name(name: str, layers: ModelLayers) -> Partial:
    name = bare(name)
    parts = name.split("/")
    if parts[0] == "eager" or name in ("optional",) or re.match(r"^(GatherV2|IteratorGetNext)(_\d+)?$", name):
        return Partial(None, "input", "forward")  # fit's iterator ops, run eagerly, and the data's slicing
    if KERAS_OPTIMIZERS.match(parts[0]):
        return Partial(None, None, "update")
    direction = "backward" if "gradient_tape" in parts else "forward"
    if any(KERAS_LOSS.match(p) for p in parts):
        return Partial(None, "loss", direction)
    for part in reversed(parts):  # the innermost layer: bidirectional/forward_lstm is forward_lstm
        base = re.sub(r"_\d+$", "", part)
        if base in layers.keras:
            return Partial(base, "layer", direction)
    return Partial(None, None, direction if direction == "backward" else None)


def keras_variable_place(path: str, layers: ModelLayers, paths=()) -> Judgement:
    """Where a Keras variable's writes belong, by its path (``sequential/lstm0/lstm_cell/kernel``);
    an optimizer's slot (``adam/sequential_lstm0_lstm_cell_kernel_momentum``) belongs to the
    variable of ``paths`` it is made for."""
    parts = path.split("/")
    for part in reversed(parts[:-1]):
        if part in layers.keras:
            return Judgement(part, "update", "update")
    owners = [p for p in paths if p != path and parts[-1].startswith(p.replace("/", "_") + "_")]
    if owners:
        return keras_variable_place(max(owners, key=len), layers)
    if parts[0] in ("loss", "metrics") or parts[-1] in ("total", "count"):
        return Judgement(None, "metrics", "update")
    return Judgement(None, "optimizer", "update")


# --- the recorded graph -------------------------------------------------------------------
class RecordedGraph:
    """The graph a trace recorded (metadata["graph"]), read here on its own: nodes, data
    inputs through Identity ops, consumers, and each variable's path."""

    def __init__(self, metadata: dict):
        record = json.loads(metadata["graph"])
        self.types = {node[0]: node[1] for node in record["nodes"]}
        raw = {node[0]: list(node[2]) for node in record["nodes"]}
        self.variables = {node: value[0] for node, value in record["variables"].items()}

        def through(name: str) -> str:
            seen = set()
            while self.types.get(name) == "Identity" and raw.get(name) and name not in seen \
                    and name not in self.variables:
                seen.add(name)
                name = raw[name][0]
            return name
        self.inputs = {name: [through(i) for i in inputs] for name, inputs in raw.items()}
        self.consumers: dict[str, list[str]] = {}
        for name, inputs in self.inputs.items():
            for producer in inputs:
                self.consumers.setdefault(producer, []).append(name)

    def variable_of(self, name: str) -> str | None:
        """The variable path a write node writes (its first input, through Identity ops)."""
        inputs = self.inputs.get(name)
        return self.variables.get(inputs[0]) if inputs else None

    def ancestors(self, start: str, within=lambda n: True) -> set[str]:
        seen, queue = set(), deque([start])
        while queue:
            for producer in self.inputs.get(queue.popleft(), ()):
                if producer not in seen and within(producer):
                    seen.add(producer)
                    queue.append(producer)
        return seen

    def descendants(self, start: str, within=lambda n: True) -> set[str]:
        seen, queue = set(), deque([start])
        while queue:
            for consumer in self.consumers.get(queue.popleft(), ()):
                if consumer not in seen and within(consumer):
                    seen.add(consumer)
                    queue.append(consumer)
        return seen


# --- the judge ----------------------------------------------------------------------------
class Judge:
    """Judges every op of one capture of one model. ``world``: ``tf1``, ``function`` or ``fit``."""

    def __init__(self, model: str, world: str, metadata: dict):
        self.layers = MODEL_LAYERS[model]
        self.keras = world != "tf1"
        self.graph = RecordedGraph(metadata)
        self.names = {n: self._name(n) for n in self.graph.types}
        self.decided: dict[str, Judgement] = {}
        if self.keras:
            self._keras_state_reads()
            self._keras_optimizer()
        else:
            self._tf1_variable_handles()
        self._variable_writes()

    def _name(self, name: str) -> Partial:
        return keras_name(name, self.layers) if self.keras else tf1_name(name, self.layers)

    def _variable_writes(self) -> None:
        for node, op_type in self.graph.types.items():
            if not VARIABLE_WRITES.match(op_type) or node in self.decided:
                continue
            path = self.graph.variable_of(node)
            if path is None:
                continue
            if self.keras:
                self.decided[node] = keras_variable_place(path, self.layers, self.graph.variables.values())
            else:
                layer = tf1_layer(path, self.layers)
                self.decided[node] = Judgement(layer, "update", "update") if layer else \
                    Judgement(None, "optimizer", "update")

    def _keras_state_reads(self) -> None:
        """Reads of the metrics' own variables (the loss tracker's total and count) belong
        to them. (A read of the learning rate or the step counter is judged by what uses
        it: each variable's update reads them, as TF1's fused update ops do inside.)"""
        for node, op_type in self.graph.types.items():
            inputs = self.graph.inputs.get(node)
            if op_type == "ReadVariableOp" and inputs and inputs[0] in self.graph.variables:
                place = keras_variable_place(self.graph.variables[inputs[0]], self.layers,
                                             self.graph.variables.values())
                if place.role == "metrics":
                    self.decided[node] = place

    def _tf1_variable_handles(self) -> None:
        """TF1 runs each variable's ``VarHandleOp`` (and its optimizer slots', ``kernel/Adam``)
        in every step: the variable's state, counted with its update."""
        for node, op_type in self.graph.types.items():
            if op_type in ("VarHandleOp", "VariableV2"):
                layer = tf1_layer(node, self.layers)
                self.decided[node] = Judgement(layer, "update", "update") if layer else \
                    Judgement(None, "optimizer", "update")

    def _keras_optimizer(self) -> None:
        """A Keras optimizer's clip (``global_clipnorm``): the global norm (a ``Sqrt`` in the
        optimizer's scope), what computes it, the scale made from it, and what applies the
        scale to the gradients with the inputs made for that (a sparse gradient made dense)."""
        scoped = {n for n in self.graph.types if KERAS_OPTIMIZERS.match(bare(n).split("/")[0])}

        def is_norm(node):  # sqrt(sum(stack(squared norms))), not an Adam's sqrt(v)
            inputs = self.graph.inputs.get(node, ())
            return self.graph.types[node] == "Sqrt" and any(
                self.graph.types.get(i) == "Sum" and any(self.graph.types.get(j) == "Pack"
                                                         for j in self.graph.inputs.get(i, ())) for i in inputs)
        norms = [n for n in scoped if is_norm(n)]
        if not norms:
            return
        in_scope = scoped.__contains__
        for norm in norms:
            after = self.graph.descendants(norm, in_scope)
            # (not the IdentityN that passes the clipped gradients on: it has as many
            # consumers, and what reads it is the optimizer's own arithmetic)
            scale = max((n for n in after if self.graph.types[n] not in ("IdentityN", "Identity")),
                        key=lambda n: len(self.graph.consumers.get(n, ())), default=None)
            if scale is None:
                continue
            path = (after & self.graph.ancestors(scale, in_scope)) | {scale}
            applied = set(self.graph.consumers.get(scale, ())) & scoped
            clip = self.graph.ancestors(norm, in_scope) | {norm} | path | applied
            for node in applied:
                clip |= self.graph.ancestors(node, lambda n: in_scope(n) and n not in after)
            for node in clip:
                self.decided[node] = Judgement(None, "clip", "update")

    def __call__(self, name: str) -> Judgement:
        node = graph_name(name)
        if node not in self.graph.types:  # Grappler's folded constants: ConstantFolding/<node>-folded-N
            folded = re.sub(r"-folded-\d+$", "", bare(node))
            node = folded if folded in self.graph.types else node
        if node in self.decided:
            return self.decided[node]
        partial = self.names.get(node) or self._name(node)
        if partial.complete():
            judged = Judgement(partial.layer, partial.role, partial.direction)
        else:
            judged = self._from_neighbours(node, partial)
        self.decided[node] = judged
        return judged

    def _from_neighbours(self, node: str, partial: Partial) -> Judgement:
        """An op whose name does not say it all takes what its nearest judged neighbours
        are: a gradient helper its producers' layer (the gradients it sums), another op
        its consumers' (what it is made for), then the other way."""
        orders = ((self.graph.inputs, self.graph.consumers) if partial.direction == "backward"
                  else (self.graph.consumers, self.graph.inputs))
        for edges in orders:
            found = self._nearest(node, edges)
            if found and partial.direction == "update" and len(set(found)) > 1:
                return Judgement(None, "optimizer", "update")  # shared by several updates
            if found:
                layer, role, direction = Counter(found).most_common(1)[0][0]
                return Judgement(partial.layer or layer, partial.role or role, partial.direction or direction)
        if self.keras and partial.direction == "update" and re.search(r"/cond/(then|else)/", node) \
                and self.layers.sparse:
            # a branch of the optimizer's tf.cond (the graph records no branches): Keras's
            # path for an IndexedSlices gradient, which only the embedding has
            return Judgement(self.layers.sparse, "update", "update")
        if not self.keras and partial.layer is None:
            layer = tf1_layer(bare(node).split("gradients/", 1)[-1], ModelLayers((), self.layers.loose))
            if layer:  # TF1's lowered loop control, which the graph does not record
                return Judgement(layer, "layer", partial.direction or "forward")
        fallback = "optimizer" if partial.direction == "update" else "unknown"  # TF1's final NoOp: "Adam"
        return Judgement(partial.layer, partial.role or fallback, partial.direction or "forward")

    def _nearest(self, node: str, edges: dict, depth: int = 8) -> list[tuple]:
        seen, frontier = {node}, [node]
        for _ in range(depth):
            found, following = [], []
            for current in frontier:
                for neighbour in edges.get(current, ()):
                    if neighbour in seen:
                        continue
                    seen.add(neighbour)
                    judged = self.decided.get(neighbour)
                    partial = self.names.get(neighbour)
                    if judged is None and partial is not None and partial.complete():
                        judged = Judgement(partial.layer, partial.role, partial.direction)
                    if judged is not None:
                        found.append((judged.layer, judged.role, judged.direction))
                    else:
                        following.append(neighbour)
            if found:
                return found
            frontier = following
        return []


def judge(model: str, world: str, trace) -> Judge:
    """The judge of one capture (a tracebridge Trace with its recorded graph)."""
    return Judge(model, world, trace.metadata)
