"""The names TF 2.21 gives what it records, as the step breakdown (:mod:`.breakdown`), the
steady state (:mod:`.steady`) and the calls (:mod:`.calls`) look for them, and each trace's
strings classified once (:func:`flags`).

A trace of a million ops has hundreds of thousands of distinct strings: each is tested
once, behind a cheap substring screen, and the answers are kept with the trace (traces are
immutable) for every later question, so that a summary's breakdown costs a fraction of a
second, not a regular expression per string per question.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable

import numpy as np

from ...model.schema import is_eager_name, is_framework_eager_op
from ...model.trace import Trace

GRAPH_BUILDING = "tf.function-graph_building"   # TF 2.21's host event while a function is traced
FUNCTION = re.compile(r"^(?:EagerLocalExecute: )?__inference_(?P<fn>.+)_(?P<n>\d+)$")
# One XLA compilation: the backend's compile (TF 2.21 on CPU: ``CpuCompiler::RunBackend``,
# after the HLO pass pipelines, inside the op that runs the compiled function), a PjRt
# client's compile (JAX), or TF's ``_XlaCompile`` op (autoclustering).
COMPILE_EVENTS = re.compile(r"^(?:\w*Compiler::RunBackend|\w*Client::Compile(?:AndLoad)?|_?XlaCompile)$")
INPUT_EVENTS = ("IteratorGetNextOp::DoCompute",)   # TF2: the time a step blocks on tf.data
INPUT_OP_TYPES = re.compile(r"^(?:QueueDequeue(?:Many|UpTo)?(?:V2)?|IteratorGetNext(?:Sync)?)$")
# Keras 3's step functions and tf_keras's: the steps are Keras fit's.
KERAS_FUNCTIONS = re.compile(r"^(?:EagerLocalExecute: )?(?:__inference_)?(?:multi_step_on_iterator|"
                             r"one_step_on_iterator|one_step_on_data|train_function)(?:_\d+)?$")
# Variables created or initialized: Keras 3 and tf.function's first call (eager
# VarHandleOp/VarIsInitializedOp, the lifted initializers' function), TF1's init op and initializers.
VARIABLES = re.compile(r"^eager/(?:VarHandleOp|VarIsInitializedOp)(?:_\d+)?$|"
                       r"^(?:EagerLocalExecute: )?__inference_initialize_variables_\d+$|^init$|(?:^|/)Initializer/")
# A tf.data iterator made: TF makes one of a pipeline's root once (``MakeIterator::RootDataset``;
# Keras's data adapter makes one of a TensorDataset inside every step, which is no start-up), and
# the ops that make one (eagerly, or in a TF1 graph).
ITERATOR_EVENTS = ("MakeIterator::RootDataset",)
ITERATOR_OPS = re.compile(r"^(?:AnonymousIterator(?:V\d)?|MakeIterator|AnonymousMultiDeviceIterator(?:V\d)?|"
                          r"MultiDeviceIteratorInit)$")

# flag -> whether a string has it: a cheap screen first, the full test only where it passes
_TESTS: dict[str, Callable[[str], bool]] = {
    "graph_building": lambda t: t == GRAPH_BUILDING,
    "function": lambda t: "__inference_" in t and bool(FUNCTION.match(t)),
    "compile": lambda t: ("Compile" in t or "RunBackend" in t) and bool(COMPILE_EVENTS.match(t)),
    "input_event": lambda t: t in INPUT_EVENTS,
    "input_op": lambda t: ("Queue" in t or "IteratorGetNext" in t) and bool(INPUT_OP_TYPES.match(t)),
    "eager": is_eager_name,
    "framework_eager_op": lambda t: ("Iterator" in t or "Optional" in t or "Dataset" in t or "SeedGenerator" in t)
    and is_framework_eager_op(t),
    "keras": lambda t: ("step_on" in t or "train_function" in t) and bool(KERAS_FUNCTIONS.match(t)),
    "variables": lambda t: ("VarHandleOp" in t or "VarIsInitializedOp" in t or "Initializer/" in t or t == "init"
                            or "initialize_variables" in t)
    and bool(VARIABLES.search(t)),
    "iterator_event": lambda t: t in ITERATOR_EVENTS,
    "iterator_op": lambda t: "Iterator" in t and bool(ITERATOR_OPS.match(t)),
}

# A string none of the tests can pass holds none of these words (or is ``init``): the strings
# that do are found by searching all of them at once, joined, one word at a time.
_SCREEN = ("__inference_", "Compile", "RunBackend", "Queue", "eager/", "Iterator", "Optional", "Dataset",
           "SeedGenerator", "step_on", "train_function", "VarHandleOp", "VarIsInitializedOp", "Initializer/",
           "initialize_variables", GRAPH_BUILDING)

_KEPT: dict[int, dict] = {}  # id of a live trace -> what was kept for it (dropped with the trace)


def kept(trace: Trace, key: str, make: Callable[[], object]):
    """``make()``, once per trace: what is kept with the trace for later questions (a trace
    never changes). Arrays kept are read-only."""
    store = _KEPT.get(id(trace))
    if store is None:
        store = _KEPT[id(trace)] = {}
        weakref.finalize(trace, _KEPT.pop, id(trace), None)
    if key not in store:
        value = make()
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        store[key] = value
    return store[key]


def flags(trace: Trace) -> dict[str, np.ndarray]:
    """Per flag of :data:`_TESTS`, whether each string of ``trace`` has it (by string id)."""
    def classify() -> dict[str, np.ndarray]:
        out = {flag: np.zeros(len(trace.strings), dtype=bool) for flag in _TESTS}
        tests = list(_TESTS.items())
        strings = trace.strings
        for index in _screened(strings):
            text = strings[index]
            for flag, test in tests:
                if test(text):
                    out[flag][index] = True
        for array in out.values():
            array.setflags(write=False)
        return out
    return kept(trace, "vocabulary", classify)


def _screened(strings) -> list[int]:
    """The indices of the strings that hold a word of :data:`_SCREEN`, or are ``init``: each
    word searched for in all strings joined (a fast literal search), its places mapped back
    to the strings that hold them."""
    if not strings:
        return []
    joined = "\n".join(strings)
    starts = np.cumsum([0] + [len(text) + 1 for text in strings[:-1]])
    found = {index for index, text in enumerate(strings) if text == "init"} if "init" in strings else set()
    for word in _SCREEN:
        at, places = joined.find(word), []
        while at >= 0:
            places.append(at)
            at = joined.find(word, at + 1)
        if places:
            found.update((np.searchsorted(starts, places, side="right") - 1).tolist())
    return sorted(found)


def rows_with(trace: Trace, column: str, flag: str) -> np.ndarray:
    """Rows whose ``column`` string (``name``, ``op_type``) has ``flag``."""
    if not len(trace):
        return np.zeros(0, dtype=bool)
    having = flags(trace)[flag]
    ids = np.flatnonzero(having)
    return rows_among(trace.ops[column], ids) if len(ids) <= _FEW else having[trace.ops[column]]


_FEW = 16  # ids that rows_among compares one by one


def rows_among(values: np.ndarray, ids) -> np.ndarray:
    """Whether each of ``values`` (ids: a column of string, lane or step ids) is one of
    ``ids``. A few are compared one by one: a pass of 3M rows takes half a millisecond, where
    ``np.isin`` takes 20 and a flag per id looked up 5; no id at all costs no pass."""
    ids = np.asarray(ids).ravel().tolist()
    if len(ids) > _FEW:
        return np.isin(values, ids)
    if not ids:
        return np.zeros(len(values), dtype=bool)
    found = values == ids[0]
    for value in ids[1:]:
        found |= values == value
    return found


def named(trace: Trace, name: str) -> np.ndarray:
    """Rows named ``name``."""
    return trace.ops["name"] == trace.string_id(name)


__all__ = ["COMPILE_EVENTS", "FUNCTION", "GRAPH_BUILDING", "INPUT_EVENTS", "INPUT_OP_TYPES", "ITERATOR_EVENTS",
           "ITERATOR_OPS", "KERAS_FUNCTIONS", "VARIABLES", "flags", "kept", "named", "rows_among", "rows_with"]
