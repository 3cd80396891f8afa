"""Dataflow edges: which op produced each data input of an op, found by name.

TF names an op's inputs by the producer's name (``x``, ``x:1`` for its second output,
``^x`` for a control input); the Chrome writer draws these edges as flow arrows, as
timeline.py's ``show_dataflow`` does. The edges follow from the trace's own columns (op
names, inputs, steps) and, for a TF2 capture, whose XSpace records no inputs, from the
graph the capture recorded (``metadata["graph"]``: each node's data inputs), and nothing
else, so they are the model's, beside its lanes and devices: a writer draws them without
depending on the analysis layer.
"""

from __future__ import annotations

import json

import numpy as np

from .schema import Category
from .trace import Trace


def dataflow_edges(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(consumer, producer)`` op rows for every data input whose producer is in the
    same step. Input ``x:1`` is produced by ``x``; partitioning suffixes (``x/_3``) are
    dropped as timeline.py drops them; control inputs (``^x``) carry no data.

    An input names its producer by text: the op whose name is the first string with
    that text (after dropping the suffixes), looked up by (step, name). A trace without
    inputs takes them from its recorded graph (:func:`_graph_inputs`)."""
    inputs = trace.inputs
    if not inputs.rows:
        return _graph_inputs(trace)
    strings = trace.strings
    index = _TextIndex(strings)
    # A plain input text is a string itself: its producer name is the first string with
    # that text. Texts with ":" or a leading "^" are looked at one by one.
    producer_of = index.first.copy()
    for i in _ids_containing(strings, (":", "^")):
        found = _producer_name(strings[i], index)
        producer_of[i] = -1 if found is None else found
    wanted = producer_of[inputs["name"]]
    consumer = inputs["op"].astype(np.int64)
    keep = wanted >= 0
    return _producers(trace, consumer[keep], wanted[keep])


def _graph_inputs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The edges of :func:`dataflow_edges` where the inputs come from the recorded graph
    (capture/graph_record.py: nodes ``[name, type, [data inputs], shape]``): each TF op
    row named as a node consumes what the node's inputs name, produced by TF op rows (a
    kernel carries its TF op's name too, but the op is the producer)."""
    empty = np.zeros(0, dtype=np.int64)
    text = trace.metadata.get("graph")
    if not isinstance(text, str) or not len(trace):
        return empty, empty
    try:
        nodes = json.loads(text)["nodes"]
        pairs = [(node[0], found) for node in nodes for found in node[2]]
    except (ValueError, KeyError, TypeError, IndexError):
        return empty, empty  # not a graph record: no arrows, the trace itself is fine
    index = _TextIndex(trace.strings)
    edges = []
    for name, source in pairs:
        consumer = index.get(name) if isinstance(name, str) else None
        producer = _producer_name(source, index) if isinstance(source, str) and consumer is not None else None
        if producer is not None:
            edges.append((consumer, producer))
    if not edges:
        return empty, empty
    edges_array = np.array(sorted(set(edges)), dtype=np.int64)
    names, sources = edges_array[:, 0], edges_array[:, 1]
    ops = trace.ops
    is_op = ops["category"] == int(Category.OP)
    rows = np.flatnonzero(is_op)
    lo = np.searchsorted(names, ops["name"][rows], side="left")
    counts = np.searchsorted(names, ops["name"][rows], side="right") - lo
    consumer = np.repeat(rows, counts)
    at = np.repeat(lo, counts) + np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return _producers(trace, consumer, sources[at], among=is_op)


def _producers(trace: Trace, consumer: np.ndarray, wanted: np.ndarray,
               among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(consumer, producer)`` where the op a consumer wants (the string id of its name)
    ran in the consumer's step: of the rows ``among`` (a mask; default all), the first of
    that (step, name)."""
    strings = trace.strings
    # Look producers up by (step, name): names repeat from step to step. The first op
    # of each key is the producer.
    ops = trace.ops
    width = np.int64(len(strings) + 1)
    op_keys = (ops["step"].astype(np.int64) + 1) * width + ops["name"]
    if among is not None:  # rows that may not produce get keys no consumer looks for
        op_keys = np.where(among, op_keys, -1 - np.arange(len(op_keys), dtype=np.int64))
    keys = (ops["step"][consumer].astype(np.int64) + 1) * width + wanted
    if len(op_keys) and int(op_keys.min()) >= 0 and int(op_keys.max()) < 4 * len(op_keys) + 1_000_000:
        # a table indexed by key (one step, or few): no sort when keys are unique
        table = np.full(int(op_keys.max()) + 1, -1, dtype=np.int64)
        table[op_keys] = np.arange(len(op_keys))
        if np.array_equal(table[op_keys], np.arange(len(op_keys))):
            producer = table[np.minimum(keys, len(table) - 1)]
            found = (keys < len(table)) & (producer >= 0)
            return consumer[found], producer[found]
    order = np.argsort(op_keys, kind="stable")
    sorted_keys = op_keys[order]
    where = np.searchsorted(sorted_keys, keys)
    found = (where < len(sorted_keys)) & (sorted_keys[np.minimum(where, len(sorted_keys) - 1)] == keys)
    producer = order[np.minimum(where, len(order) - 1)][found]
    return consumer[found], producer


class _TextIndex:
    """Text -> first string id of that text, for a string table, without building a
    dict of a million strings. ``first[i]``: the first id with the text of id ``i`` (``i``
    itself unless the table repeats a text). For :meth:`get`, strings are grouped by their
    (cached) hash with numpy, built on first use, and only equal hashes are compared."""

    def __init__(self, strings: tuple[str, ...]):
        self.strings = strings
        self.first = np.arange(len(strings), dtype=np.int64)
        self._sorted = None
        if len(set(strings)) != len(strings):  # repeated texts (not from a TraceBuilder)
            self._index()
            same = np.flatnonzero(self._sorted[1:] == self._sorted[:-1])
            for k in same.tolist():  # equal hashes: equal texts (or a collision)
                later = int(self._order[k + 1])
                for j in range(k, -1, -1):
                    if self._sorted[j] != self._sorted[k + 1]:
                        break
                    earlier = int(self._order[j])
                    if strings[earlier] == strings[later]:
                        self.first[later] = self.first[earlier]
                        break

    def _index(self) -> None:
        hashes = np.fromiter(map(hash, self.strings), dtype=np.int64, count=len(self.strings))
        self._order = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._order]

    def get(self, text: str) -> int | None:
        if self._sorted is None:
            self._index()
        h = hash(text)
        at = int(np.searchsorted(self._sorted, h))
        while at < len(self._sorted) and self._sorted[at] == h:
            i = int(self._order[at])
            if self.strings[i] == text:
                return int(self.first[i])
            at += 1
        return None


def _ids_containing(strings: tuple[str, ...], needles: tuple[str, ...]) -> list[int]:
    """Ids of the strings that contain any of ``needles``; one scan of the joined text
    decides whether to look further."""
    joined = "\0".join(strings)
    if not any(needle in joined for needle in needles):
        return []
    return [i for i, text in enumerate(strings) if any(needle in text for needle in needles)]


def _producer_name(text: str, names) -> int | None:
    """The string id of the op name an input refers to, or None (``names.get(text)``
    gives the first string id of a text)."""
    if text.startswith("^"):
        return None
    base = text.rsplit(":", 1)[0] if ":" in text and text.rsplit(":", 1)[1].isdigit() else text
    found = names.get(base)
    if found is None and "/_" in base:
        found = names.get(base[:base.rfind("/_")])
    return found
