"""Every op of a recorded graph in a layer and a phase, by dataflow from the model's variables.

Names and graph shapes differ between a TF1 model and its port (an unrolled ``BasicLSTMCell``
against a Keras ``LSTM`` loop); the parameters do not. So a graph's ops are attributed to the
variables whose values they compute:

- **Parameters** are the variables the forward computation reads and the gradients update
  (optimizer slots, counters and seeds are read only to update, or never updated by a
  gradient). They form **layers**: the variables under one scope (``cell_0/basic_lstm_cell``,
  ``lstm/lstm_cell``), a variable at the root scope alone (``softmax_w``), ordered by their
  first use in the forward computation.
- **Phases**: ``backward`` ops are the gradients (TF names them under ``gradients/`` or
  ``gradient_tape/``); ``update`` ops write variables, with the arithmetic that only feeds
  them; ``clip`` is what combines several layers' gradients before the updates (a global
  norm); the rest computes forward: ``forward`` where it depends on a layer, ``input`` where
  it depends on none and feeds one, ``loss`` where the last layer's output meets the data
  (and that loss's gradient), ``metrics`` where nothing the training needs depends on it.
- **Layer of an op**: forward, the latest layer its values depend on (the cell of layer 1 at
  time step 5 reads layer 0's output: it is layer 1); backward, the layer of the forward op
  it is the gradient of (by TF's gradient names, else its neighbours'); update, the layer of
  the variable written (a slot's, the layer whose gradient feeds it).

:func:`pair_layers` pairs two graphs' layers by order and parameter count, merging
neighbours where one side splits what the other fuses (one ``[400, 800]`` kernel against
``kernel`` and ``recurrent_kernel``, ``[200, 800]`` each).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass

from .recorded_graph import SHAPE_ONLY_OPS, Graph


class Phase:
    FORWARD, BACKWARD, UPDATE = "forward", "backward", "update"
    INPUT, LOSS, LOSS_GRADIENT, CLIP, METRICS, OTHER = "input", "loss", "loss gradient", "clip", "metrics", "other"
    LAYERED = (FORWARD, BACKWARD, UPDATE)  # the phases an op of a layer is in
    ORDER = (INPUT, FORWARD, LOSS, LOSS_GRADIENT, BACKWARD, CLIP, UPDATE, METRICS, OTHER)


@dataclass(frozen=True)
class Layer:
    """A group of variables one layer of the model keeps, in the order the forward pass
    first uses them. ``parameters``: their elements, what pairs layers across a port."""

    index: int
    name: str
    variables: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    parameters: int


@dataclass
class Attribution:
    """One graph's layers, and each node's layer (an index into ``layers``, or None) and phase."""

    layers: list[Layer]
    layer_of: dict[str, int | None]
    phase_of: dict[str, str]

    def zone(self, node: str) -> tuple[int | None, str] | None:
        if node not in self.phase_of:
            return None
        return self.layer_of.get(node), self.phase_of[node]


# Ops that write a variable (input 0 is the variable): the optimizer's updates and a batch
# norm's moving averages.
_WRITES = re.compile(r"^(Resource)?(Sparse)?(Apply\w+|Assign(Add|Sub)?(VariableOp)?|Scatter\w+)$")
# TF's names for gradients: TF1 ``gradients/<op>_grad/...``, a tape's ``gradient_tape/...``.
_GRADIENT_SCOPE = re.compile(r"(?:^|/)(?:gradients(?:_\d+)?|gradient_tape)/")
_GRAD_PART = re.compile(r"^(?P<op>.+)_grad$")
_IN_FUNCTION = re.compile(r"^.*/(?:body|cond)/")  # a loop body's node: its name inside the body
# Ops that prepare a recurrent layer's input (_prepares_steps): cut a sequence into its time
# steps, read one, or (in a loop's body) join it to the state, as a TF1 cell's concat does
_SEQUENCE_SPLITS = frozenset({"Unpack", "TensorListFromTensor", "TensorArrayScatterV3", "TensorListGetItem",
                              "TensorArrayReadV3"})
_SLICES = frozenset({"StridedSlice", "Slice"})
_CONCATS = frozenset({"ConcatV2", "Concat"})
_CALLS_AND_LOOPS = ("StatefulPartitionedCall", "PartitionedCall", "While", "StatelessWhile")
# What a loop keeps of each iteration for its gradient: no use of the value by the model
_ACCUMULATORS = frozenset({"TensorListPushBack", "StackPushV2", "TensorArrayWriteV3"})
# TF ops whose output is the loss of labels against logits
_LOSS_OPS = frozenset({"SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits"})
# What a gradient starts from where no value flows back
_GRADIENT_SEEDS = frozenset({"ZerosLike", "OnesLike"})



def attribute(graph: Graph, rank: dict[int, int] | None = None) -> Attribution:
    """``rank``: the layers' order where another run decides it (compare pairs two runs'
    layers, and an attention's query, key and value must be ordered alike on both sides for
    "the latest layer" to mean one layer); else the order of first use."""
    variables = {node for node, _, _ in graph.variables}
    names = graph.variable_names
    order = _topological(graph)
    backward = {n for n in graph.order if _GRADIENT_SCOPE.search(n)}
    # The tape makes the zeros of a gradient nothing flows into (a loop's unused outputs)
    # outside its gradient scope, as a root ``zeros_like``: what only gradients read is theirs.
    backward |= {n for n in graph.order if graph.types[n] in _GRADIENT_SEEDS and graph.consumers.get(n)
                 and all(c in backward for c in graph.consumers[n])}
    writes = {n: _written(graph, n, variables) for n in graph.order if _WRITES.match(graph.types[n])}
    writes = {n: v for n, v in writes.items() if v}
    feeds_backward = _ancestors(graph, backward, stop=variables)
    update_region = _ancestors(graph, writes, stop=variables | backward | feeds_backward) | set(writes)
    forward = [n for n in order if n not in backward and n not in update_region and n not in variables]
    forward_set = set(forward)

    # Parameters: read by the forward pass, and (where the graph trains) updated from a gradient.
    trained = _trained(graph, writes, variables, backward, feeds_backward - backward)
    # read where the forward pass computes what the gradients differentiate (an optimizer's
    # slot may be read outside the updates, by what only a control edge orders)
    used = forward_set & feeds_backward if backward else forward_set
    read_forward = {v for v in variables if any(c in used for c in _reads(graph, v))}
    parameters = {v for v in read_forward if not backward or v in trained}
    layers, layer_of_variable = _layers(graph, parameters, variables, names, forward_set)

    layer_of: dict[str, int | None] = {}
    phase_of: dict[str, str] = {}

    def ranked(layer: int) -> tuple:
        return (rank.get(layer, len(layers) + layer), layer) if rank else (layer,)
    # forward: the latest layer each op's values depend on
    for node in forward:
        own = [layer_of_variable[p] for p in graph.producers.get(node, ()) if p in layer_of_variable and p in parameters]
        inherited = [layer_of[p] for p in graph.producers.get(node, ()) if p in forward_set and layer_of.get(p) is not None]
        found = own + inherited
        layer_of[node] = max(found, key=ranked) if found else None
    # What only prepares a later layer's input (the time step a cell reads, sliced from the
    # embedding's output; its concat with the cell's state) is that layer's: it takes the
    # layer of the ops it feeds.
    for node in reversed(forward):
        if not _prepares_steps(graph, node) or any(p in parameters for p in graph.producers.get(node, ())):
            continue
        fed = {layer_of.get(c) for c in graph.consumers.get(node, ())
               if c in forward_set and graph.types[c] not in _ACCUMULATORS}
        if len(fed) == 1 and None not in fed:
            later = fed.pop()
            if layer_of[node] is None or ranked(later) > ranked(layer_of[node]):
                layer_of[node] = later
    last = max(range(len(layers)), key=ranked, default=-1)
    raw = {n for n in forward if layer_of[n] is None}  # computed from the data alone
    for node in forward:
        phase_of[node] = Phase.FORWARD if layer_of[node] is not None else Phase.OTHER
    _mark_loss(graph, forward, raw, last, layer_of, phase_of, feeds_backward)
    feeds_model = _ancestors(graph, [n for n in forward if n not in raw], stop=variables)
    for node in forward:
        if node in raw:
            phase_of[node] = Phase.INPUT if node in feeds_model else Phase.OTHER
    # what is computed from the data for one layer only (Keras's check of an embedding's ids,
    # a cell's zero state) is that layer's forward work, not the model's input
    for node in reversed(forward):
        if node in raw and graph.types[node] not in ("Placeholder", "IteratorGetNext"):
            fed = {(layer_of.get(c), phase_of.get(c)) for c in graph.consumers.get(node, ())
                   if c in forward_set and graph.types[c] not in _ACCUMULATORS}
            if len(fed) == 1:
                layer, phase = fed.pop()
                if layer is not None and phase == Phase.FORWARD:
                    layer_of[node], phase_of[node] = layer, Phase.FORWARD
    if backward:  # what training never uses, computed from the model's output: metrics
        needed = feeds_backward | _ancestors(graph, writes, stop=variables)
        for node in forward:
            if node not in needed and phase_of[node] == Phase.FORWARD and layer_of[node] == last:
                phase_of[node] = Phase.METRICS

    # what a loop keeps of each iteration is kept for the gradient: backward work, though the
    # forward loop does it
    for node in forward:
        if graph.types[node] in _ACCUMULATORS and phase_of[node] == Phase.FORWARD and node in feeds_backward:
            phase_of[node] = Phase.BACKWARD
    _attribute_backward(graph, backward, forward, layer_of, phase_of)
    _attribute_updates(graph, order, writes, update_region, backward, layer_of_variable, layer_of, phase_of)
    for node in sorted(variables, key=graph.order.__getitem__):
        layer_of[node], phase_of[node] = layer_of_variable.get(node), Phase.UPDATE if node in trained else Phase.OTHER
    # An Identity only forwards a tensor, and the graph's edges pass through it
    # (recorded_graph.decode_graph): it is where its source is.
    for node in graph.order:
        if graph.types[node] == "Identity" and graph.producers.get(node):
            source = graph.producers[node][0]
            if source in phase_of:
                layer_of[node], phase_of[node] = layer_of.get(source), phase_of[source]
    return Attribution(layers=layers, layer_of=layer_of, phase_of=phase_of)


def _trained(graph: Graph, writes: dict[str, str], variables: set[str], backward: set[str],
             forward: set[str]) -> set[str]:
    """The variables written from a gradient: directly (SGD), or from another variable so
    written (Keras's momentum: the slot takes the gradient, the kernel adds the slot); not
    from the forward pass (a batch norm's moving averages)."""
    if not backward:
        return set(writes.values())
    sources = {}
    for node, variable in writes.items():
        feeding = _ancestors(graph, [node], stop=variables | forward) | {node}
        read = {p for n in feeding for p in graph.producers.get(n, ()) if p in variables} - {variable}
        sources[node] = (bool(feeding & backward), read)
    trained: set[str] = set()
    while True:
        more = {writes[n] for n, (from_gradient, read) in sources.items() if from_gradient or read & trained}
        if more <= trained:
            return trained
        trained |= more


def _layers(graph: Graph, parameters: set[str], variables: set[str], names: dict[str, str],
            forward: set[str]) -> tuple[list[Layer], dict[str, int]]:
    """Parameters grouped by scope, in order of first forward use; other variables under a
    group's scope (a batch norm's moving averages) join it."""
    def scope(node: str) -> str:
        name = names.get(node, node)
        return name.rsplit("/", 1)[0] if "/" in name else name  # a root variable: a layer of its own

    first_use = {v: min((graph.order[c] for c in _reads(graph, v) if c in forward), default=math.inf)
                 for v in parameters}
    by_scope: dict[str, list[str]] = defaultdict(list)
    for v in sorted(parameters, key=lambda v: (first_use[v], graph.order[v])):
        by_scope[scope(v)].append(v)
    groups: dict[str, list[str]] = {}
    for name, members in by_scope.items():
        for cluster in _apart(graph, members, forward):
            groups[name if len(cluster) == len(members) else names.get(cluster[0], cluster[0])] = cluster
    _join_normalizations(graph, groups, first_use, forward)
    ordered = sorted(groups.items(), key=lambda item: min(first_use[v] for v in item[1]))
    shapes = {node: shape for node, shape, _ in graph.variables}
    layers, layer_of_variable = [], {}
    for index, (name, members) in enumerate(ordered):
        layers.append(Layer(index=index, name=name, variables=tuple(names.get(v, v) for v in members),
                            shapes=tuple(shapes[v] for v in members),
                            parameters=sum(_elements(shapes[v]) for v in members)))
        for v in members:
            layer_of_variable[v] = index
    by_scope = {layer.name: layer.index for layer in layers}
    # An optimizer's slots by their names: TF1 ``<variable>/Adam``, Keras 3
    # ``adam/<variable's path with _>_momentum``; a batch norm's moving averages by scope.
    by_name = sorted(((names.get(v, v), layer_of_variable[v]) for v in parameters), key=lambda x: -len(x[0]))
    for v in sorted(variables - parameters, key=graph.order.__getitem__):
        name = names.get(v, v)
        if scope(v) in by_scope:
            layer_of_variable[v] = by_scope[scope(v)]
            continue
        owner = next((layer for p, layer in by_name if name.startswith(p + "/")
                      or f"/{p.replace('/', '_')}_" in name), None)
        if owner is not None:
            layer_of_variable[v] = owner
    return layers, layer_of_variable


def _prepares_steps(graph: Graph, node: str) -> bool:
    """Whether ``node`` prepares a recurrent layer's input: a sequence split, one of several
    slices of one tensor (its time steps; not the last output a classifier reads), or a
    concat in a loop's body."""
    op_type = graph.types[node]
    if op_type in _SEQUENCE_SPLITS:
        return True
    if op_type in _SLICES:
        source = (graph.producers.get(node) or ("",))[0]
        return sum(1 for c in graph.consumers.get(source, ()) if graph.types.get(c) in _SLICES) > 1
    return op_type in _CONCATS and "/body/" in node


def _apart(graph: Graph, members: list[str], forward: set[str], reach: int = 3) -> list[list[str]]:
    """A scope's variables split where they do not compute together: matrices whose uses
    meet within ``reach`` ops stay one layer (an LSTM's kernel and recurrent kernel, added
    at once), others part (an embedding and the softmax a TF1 model keeps in one scope);
    each vector goes with the first matrix its use meets (else alone)."""
    def near(variable: str) -> set[str]:
        seen, frontier = set(), [c for c in _reads(graph, variable) if c in forward]
        seen.update(frontier)
        for _ in range(reach):
            frontier = [c for n in frontier for c in graph.consumers.get(n, ()) if c in forward and c not in seen]
            seen.update(frontier)
        return seen
    shapes = {node: shape for node, shape, _ in graph.variables}
    matrices = [v for v in members if len(shapes.get(v) or ()) > 1]
    if len(matrices) < 2:
        return [members]
    reached = {v: near(v) for v in members}
    clusters: list[list[str]] = []
    for v in matrices:
        home = next((c for c in clusters if any(reached[v] & reached[u] for u in c)), None)
        if home is None:
            clusters.append([v])
        else:
            home.append(v)
    for v in members:
        if v not in matrices:
            home = next((c for c in clusters if any(reached[v] & reached[u] for u in c)), None)
            (home.append(v) if home is not None else clusters.append([v]))
    return clusters


def _join_normalizations(graph: Graph, groups: dict[str, list[str]], first_use: dict, forward: set[str],
                         reach: int = 12) -> None:
    """A group of vectors only (a batch or layer norm's gamma and beta, a root-level bias)
    joins the group whose op computes what it normalizes or offsets: of the groups up the
    dataflow from where it is read (``reach`` ops), the one the forward pass computes last. TF1 code keeps a conv and its batch norm under one
    scope, Keras in two layers; joined, both read as one layer."""
    group_of = {v: name for name, members in groups.items() for v in members}
    for name in sorted(groups, key=lambda n: min(first_use[v] for v in groups[n])):
        members = groups.get(name)
        if not members or any(len(shape) > 1 for node, shape, _ in graph.variables if node in members):
            continue
        readers = [c for v in members for c in _reads(graph, v) if c in forward]
        seen, frontier, near = set(readers), list(readers), set()
        for _ in range(reach):
            following = []
            for node in frontier:
                for producer in graph.producers.get(node, ()):
                    if producer in seen:
                        continue
                    seen.add(producer)
                    if graph.types.get(producer) == "ReadVariableOp":
                        producer = (graph.producers.get(producer) or ("",))[0]
                    if producer in group_of and group_of[producer] != name:
                        near.add(group_of[producer])
                    elif producer in forward:
                        following.append(producer)
            frontier = following
        # the group computed last among those it reads from (a residual add reads this
        # block's output and, nearer, the block before's)
        found = max(near, key=lambda g: (min(first_use[v] for v in groups[g]), g)) if near else None
        if found and min(first_use[v] for v in groups[found]) <= min(first_use[v] for v in members):
            groups[found].extend(members)
            for v in members:
                group_of[v] = found
            del groups[name]


def _mark_loss(graph: Graph, forward: list[str], raw: set[str], last: int, layer_of, phase_of,
               feeds_backward: set[str]) -> None:
    """The loss: where the last layer's output meets values from the data alone (labels), or
    a cross-entropy op, and what follows from it without reading another variable."""
    loss: set[str] = set()
    for node in forward:
        producers = graph.producers.get(node, ())
        starts = graph.types[node] in _LOSS_OPS or (
            graph.types[node] not in SHAPE_ONLY_OPS and layer_of[node] == last and any(p in raw for p in producers)
            and any(layer_of.get(p) == last for p in producers))
        if starts and (node in feeds_backward or graph.types[node] in _LOSS_OPS) or \
                (layer_of[node] is not None and producers and any(p in loss for p in producers)
                 and all(p in loss or p in raw or layer_of.get(p) is None for p in producers)):
            loss.add(node)
    for node in loss:
        phase_of[node] = Phase.LOSS
        layer_of[node] = None


def _attribute_backward(graph: Graph, backward: set[str], forward: list[str], layer_of, phase_of) -> None:
    """Each gradient op takes the layer and phase of the forward op it is the gradient of: by
    TF's name for it (``gradients/<op>_grad/...``; a tape's ``gradient_tape/<op>/...``; in a
    loop's gradient, the body's name), else from its gradient neighbours, by majority."""
    by_name: dict[str, str] = {}
    for node in forward:
        by_name[node] = node
        inner = _IN_FUNCTION.sub("", node)
        by_name.setdefault(inner, node)
    # a tape names a gradient after the forward op's scope where the op has none of its own
    # (``gradient_tape/conv2/Conv2DBackpropInput`` for ``conv2/Conv2D``): the scope's first op
    for node in forward:
        scope = node.rsplit("/", 1)[0] if "/" in node else ""
        if scope:
            by_name.setdefault(scope, node)
    # A loop's gradient runs in a loop of its own (``<loop>_grad``), whose ops are named for
    # the body's ops: two loops (a bidirectional RNN's) have bodies that name theirs alike.
    loops = sorted((n for n in forward if graph.types[n] in ("While", "StatelessWhile")), key=len, reverse=True)
    for node in sorted(backward, key=graph.order.__getitem__):
        loop = next((n for n in loops if f"{n}_grad/" in node), None) or \
            next((n for n in loops if _grad_of_loop(node, n)), None)
        source = _forward_of(node, by_name, f"{loop}/body/" if loop else "")
        if source is not None and phase_of.get(source) in (Phase.FORWARD, Phase.LOSS):
            layer_of[node] = layer_of[source]
            phase_of[node] = Phase.BACKWARD if phase_of[source] == Phase.FORWARD else Phase.LOSS_GRADIENT
    # what the names do not tell: from the neighbours, a few rounds
    unknown = sorted((n for n in backward if n not in phase_of), key=graph.order.__getitem__)
    for _ in range(4):
        left, decided = [], {}
        for node in unknown:  # each round from the last one's answers: no order dependence
            # a gradient is of the layer whose gradient ops read it (a sum of the contributions
            # to one output's gradient, AddN, is that output's layer's): consumers count twice
            votes = Counter()
            for weight, near in ((1, graph.producers.get(node, ())), (2, graph.consumers.get(node, ()))):
                for n in near:
                    if n in backward and n in phase_of:
                        votes[layer_of[n], phase_of[n]] += weight
            if votes:
                decided[node] = max(votes.items(), key=lambda item: (item[1], str(item[0])))[0]
            else:
                left.append(node)
        for node, (layer, phase) in decided.items():
            layer_of[node], phase_of[node] = layer, phase
        unknown = left
    for node in unknown:
        layer_of[node], phase_of[node] = None, Phase.BACKWARD


def _grad_of_loop(node: str, loop: str) -> bool:
    """Whether gradient op ``node`` runs in the gradient of loop ``loop``, called from
    another function (``fit``'s ``StatefulPartitionedCall/<loop>``, whose gradient names
    the loop without the call)."""
    tail = loop.split("/", 1)[1] if "/" in loop else loop
    return loop.startswith(("StatefulPartitionedCall/", "PartitionedCall/")) and f"/{tail}_grad/" in node


def _forward_of(node: str, by_name: dict[str, str], body: str = "") -> str | None:
    """The forward op a gradient op is named for: after the last gradient scope, the part
    ending ``_grad`` (TF1, and a loop's gradient body), else the longest prefix that names one;
    ``body``: the prefix of the forward loop's body, for an op of that loop's gradient."""
    scopes = list(_GRADIENT_SCOPE.finditer(node))
    tail = node[scopes[-1].end():] if scopes else node
    # the gradient of a called function's op sits under the call, as the op does
    # (``StatefulPartitionedCall/gradient_tape/<op>`` for ``StatefulPartitionedCall/<op>``)
    call = node[:scopes[0].start() + 1] if scopes and scopes[0].start() > 0 else ""
    parts = tail.split("/")

    def known(candidate: str) -> str | None:
        return (by_name.get(body + candidate) if body else None) or by_name.get(candidate) or \
            (by_name.get(call + candidate) if call else None)
    for index in range(len(parts) - 1, -1, -1):
        match = _GRAD_PART.match(parts[index])
        if match:
            found = known("/".join([*parts[:index], match.group("op")]))
            if found:
                return found
    for end in range(len(parts), 0, -1):
        found = known("/".join(parts[:end]))
        if found:
            return found
    return None


def _attribute_updates(graph: Graph, order: list[str], writes: dict[str, str], region: set[str],
                       backward: set[str], layer_of_variable: dict[str, int], layer_of, phase_of) -> None:
    """An update takes the layer of the variable it writes; a slot's update (Adam's moments),
    the layer of the nearest gradient feeding it. The arithmetic before the updates takes the
    layer of the updates it feeds where that is one layer; what feeds several layers' updates
    from their gradients is the clip (a global norm), and the rest (a learning-rate schedule)
    is shared. A write no gradient feeds, of a variable one layer's forward pass reads (a
    dropout's seed state), is that layer's forward work."""
    layer_of_write: dict[str, int | None] = {}
    stepping: dict[str, int] = {}  # writes of a layer's own state (a dropout's seed): its forward work
    for node, variable in writes.items():
        layer = layer_of_variable.get(variable)
        near = _nearest(graph, node, backward, region) if layer is None else []
        if layer is None:
            layers = {layer_of.get(n) for n in near} - {None}
            layer = layers.pop() if len(layers) == 1 else None
        if layer is None and not near:
            readers = {layer_of.get(c) for c in _reads(graph, variable) if phase_of.get(c) == Phase.FORWARD}
            if len(readers) == 1 and None not in readers:
                layer = stepping[node] = readers.pop()
        layer_of_write[node] = layer
    outside = set(graph.order) - region
    fed: dict[str, set] = defaultdict(set)  # region op -> the layers of the updates it feeds
    trains: set[str] = set()  # region ops that feed an update of training, not only a layer's state
    for node, layer in layer_of_write.items():
        for ancestor in _ancestors(graph, [node], stop=outside) | {node}:
            fed[ancestor].add(layer)
            if node not in stepping:
                trains.add(ancestor)
    # which region ops a gradient feeds, in one pass in dataflow order
    from_gradients: set[str] = set()
    for node in order:
        if node in region and any(p in backward or p in from_gradients for p in graph.producers.get(node, ())):
            from_gradients.add(node)
    for node in sorted(region, key=graph.order.__getitem__):
        layers = fed.get(node, set())
        if len(layers) == 1 and None not in layers:
            layer_of[node] = next(iter(layers))
            phase_of[node] = Phase.UPDATE if node in trains else Phase.FORWARD
            continue
        layer_of[node] = None
        phase_of[node] = Phase.CLIP if node in from_gradients else Phase.UPDATE
    # the clip's own product: one layer's gradient times what the clip computed of all of them
    for node in order:
        if node in region and phase_of.get(node) == Phase.UPDATE:
            producers = graph.producers.get(node, ())
            if any(p in backward for p in producers) and any(phase_of.get(p) == Phase.CLIP for p in producers):
                layer_of[node], phase_of[node] = None, Phase.CLIP


# --- graph walks ------------------------------------------------------------------------------
def _topological(graph: Graph) -> list[str]:
    """Nodes with every producer first (creation order breaks ties); nodes on a cycle (a TF1
    loop's back edge) in creation order after what precedes them."""
    waiting = {n: sum(1 for p in graph.producers.get(n, ()) if p in graph.order) for n in graph.order}
    ready = deque(sorted((n for n, count in waiting.items() if count == 0), key=graph.order.__getitem__))
    out, seen = [], set()
    while len(out) < len(graph.order):
        if not ready:  # a cycle: take the earliest node not yet placed
            ready.append(min((n for n in graph.order if n not in seen), key=graph.order.__getitem__))
        node = ready.popleft()
        if node in seen:
            continue
        seen.add(node)
        out.append(node)
        for consumer in graph.consumers.get(node, ()):
            if consumer in waiting and consumer not in seen:
                waiting[consumer] -= 1
                if waiting[consumer] <= 0:
                    ready.append(consumer)
    return out


def _ancestors(graph: Graph, starts, stop: set[str]) -> set[str]:
    """Every node that feeds one of ``starts``, not walking into or past ``stop``."""
    seen: set[str] = set()
    frontier = list(starts)
    while frontier:
        node = frontier.pop()
        for producer in graph.producers.get(node, ()):
            if producer not in seen and producer not in stop and producer in graph.order:
                seen.add(producer)
                frontier.append(producer)
    return seen


def _nearest(graph: Graph, start: str, targets: set[str], through: set[str]) -> list[str]:
    """The ``targets`` that feed ``start`` at the fewest edges, walking only ``through``."""
    seen, frontier = {start}, [start]
    while frontier:
        following, found = [], []
        for node in frontier:
            for producer in graph.producers.get(node, ()):
                if producer in seen:
                    continue
                seen.add(producer)
                if producer in targets:
                    found.append(producer)
                elif producer in through:
                    following.append(producer)
        if found:
            return found
        frontier = following
    return []


def _reads(graph: Graph, variable: str) -> list[str]:
    """The ops that use a variable's value: its readers, and theirs past shape-only ops."""
    out, frontier = [], [variable]
    while frontier:
        node = frontier.pop()
        for consumer in graph.consumers.get(node, ()):
            if consumer in out:
                continue
            out.append(consumer)
            if graph.types.get(consumer) in ("ReadVariableOp", *SHAPE_ONLY_OPS):
                frontier.append(consumer)
    # a call or a loop hands the variable to its function, whose ops read it (the recorded
    # graph wires them to the variable): the call itself reads nothing
    return [n for n in out if graph.types.get(n) not in ("ReadVariableOp", *SHAPE_ONLY_OPS, *_CALLS_AND_LOOPS)]


def _written(graph: Graph, node: str, variables: set[str]) -> str | None:
    producers = graph.producers.get(node, ())
    return producers[0] if producers and producers[0] in variables else None


def _elements(shape) -> int:
    return math.prod(max(d, 1) for d in shape) if shape else 1


# --- pairing two graphs' layers ---------------------------------------------------------------
@dataclass(frozen=True)
class LayerPair:
    """Layers of each side that hold the same parameters (several where one side splits
    what the other keeps in one layer); one side empty for a layer the other run lacks."""

    control: tuple[int, ...]
    test: tuple[int, ...]


# One layer against up to three on the other side (GRU's gates and candidate against one
# Keras GRU; a bidirectional layer's two directions), when their parameters agree within
# ``_TOLERANCE`` (Keras's GRU keeps a second bias: 3 x units more than TF1's GRUCell).
_MERGES = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1))
_TOLERANCE = 0.05


def pair_layers(control: list[Layer], test: list[Layer], anchors: set[tuple[int, int]] = frozenset()) -> list[LayerPair]:
    """Both sides' layers in order, paired where their parameter counts agree: an alignment
    of the two sequences that pairs the most parameters (one-to-one preferred). ``anchors``:
    (control layer, test layer) whose variables the graphs' structure paired
    (:mod:`.structure`): where layers repeat a size (attention's query, key and value), the
    dataflow says which is which; a pair the anchors contradict is not made."""
    anchored_c: dict[int, set[int]] = defaultdict(set)
    for c, t in anchors:
        anchored_c[c].add(t)
    anchored_t = {t for _, t in anchors}

    def contradicted(block_c: range, block_t: range) -> bool:
        return any(anchored_c[c] and not anchored_c[c] & set(block_t) for c in block_c) or \
            any(t in anchored_t and not any(t in anchored_c[c] for c in block_c) for t in block_t)
    n, m = len(control), len(test)
    best = [[(-1.0, 0)] * (m + 1) for _ in range(n + 1)]  # (parameters paired, -merges)
    move: dict[tuple[int, int], tuple[int, int, bool]] = {}
    best[0][0] = (0.0, 0)
    for i in range(n + 1):
        for j in range(m + 1):
            here = best[i][j]
            if here[0] < 0:
                continue
            for a, b, paired in ((1, 0, False), (0, 1, False), *((a, b, True) for a, b in _MERGES)):
                if i + a > n or j + b > m:
                    continue
                gain = 0.0
                if paired:
                    left = sum(layer.parameters for layer in control[i:i + a])
                    right = sum(layer.parameters for layer in test[j:j + b])
                    if abs(left - right) > _TOLERANCE * max(left, right) or \
                            contradicted(range(i, i + a), range(j, j + b)):
                        continue
                    gain = min(left, right)
                score = (here[0] + gain, here[1] - (a + b - 2 if paired else 0))
                if score > best[i + a][j + b]:
                    best[i + a][j + b] = score
                    move[i + a, j + b] = (a, b, paired)
    pairs, i, j = [], n, m
    while i or j:
        a, b, paired = move[i, j]
        if paired:
            pairs.append(LayerPair(tuple(range(i - a, i)), tuple(range(j - b, j))))
        i, j = i - a, j - b
    pairs = pairs[::-1] + _crossing_pairs(control, test, pairs)
    paired_c = {i for pair in pairs for i in pair.control}
    paired_t = {j for pair in pairs for j in pair.test}
    pairs += [LayerPair((layer.index,), ()) for layer in control if layer.index not in paired_c]
    pairs += [LayerPair((), (layer.index,)) for layer in test if layer.index not in paired_t]
    # in the model's order: by the first layer of each pair, the control's where it has one
    return sorted(pairs, key=lambda p: (min(p.control) if p.control else _place(p.test[0], test, control),
                                        min(p.test) if p.test else -1))


def _crossing_pairs(control: list[Layer], test: list[Layer], pairs: list[LayerPair]) -> list[LayerPair]:
    """Layers left unpaired by the ordered alignment that hold the same parameters in the
    same shapes, one of a kind on each side: two branches a port builds in the other order
    (a ResNet block's shortcut before or after its first conv)."""
    paired_c = {i for pair in pairs for i in pair.control}
    paired_t = {j for pair in pairs for j in pair.test}
    def signature(layer: Layer):
        return tuple(sorted(layer.shapes))
    left_t: dict[tuple, list[int]] = defaultdict(list)
    for layer in test:
        if layer.index not in paired_t:
            left_t[signature(layer)].append(layer.index)
    left_c: dict[tuple, list[int]] = defaultdict(list)
    for layer in control:
        if layer.index not in paired_c:
            left_c[signature(layer)].append(layer.index)
    found = [LayerPair((found_c[0],), (left_t[key][0],)) for key, found_c in left_c.items()
             if len(found_c) == 1 and len(left_t.get(key, ())) == 1]
    # then one of a kind by parameter count alone (a [64, 64] kernel against Keras's [4, 16, 64])
    taken_c = paired_c | {p.control[0] for p in found}
    taken_t = paired_t | {p.test[0] for p in found}
    by_count_c: dict[int, list[int]] = defaultdict(list)
    by_count_t: dict[int, list[int]] = defaultdict(list)
    for layer in control:
        if layer.index not in taken_c:
            by_count_c[layer.parameters].append(layer.index)
    for layer in test:
        if layer.index not in taken_t:
            by_count_t[layer.parameters].append(layer.index)
    return found + [LayerPair((c[0],), (by_count_t[count][0],)) for count, c in by_count_c.items()
                    if len(c) == 1 and len(by_count_t.get(count, ())) == 1]


def _place(index: int, layers: list[Layer], other: list[Layer]) -> float:
    """Where a layer of one side falls in the other side's order (by its share of the way)."""
    return (index + 0.5) * len(other) / max(len(layers), 1) - 0.5


__all__ = ["Attribution", "Layer", "LayerPair", "Phase", "attribute", "pair_layers"]
