"""The model's schema: its tables and their columns, what a row's category says, its flags.

Tables and their columns (``*`` marks a string id, ``op`` a row of ``ops``):

    ops          name* op_type* kernel* label* start_ns end_ns op_start_ns op_end_ns
                 scheduled_ns thread_id device lane step block flags category
                 temp_bytes persistent_bytes device_temp_bytes device_persistent_bytes
    inputs       op name*                     (control inputs keep their "^")
    outputs      op slot dtype shape* requested_bytes allocated_bytes allocator*
                 allocation_id ptr flags
    memory       op allocator* total_bytes peak_bytes live_bytes allocator_bytes_in_use
    allocations  memory time_ns bytes         (records of one ``memory`` row; frees < 0)
    transfers    op bytes rate_bps src* dst* tensor*
    counters     allocator* time_ns bytes_in_use
    aliases      op name*                     (the source's name for an op, where it differs:
                                               GPU tracer records annotated ``@@op#``)
    event_stats  op key* value*               (XSpace stats of an event, as text)
    links        producer consumer kind*       (XSpace: work handed across threads, tf.data
                                               elements; both ends are op rows)

Categories and flags are ``IntEnum``/``IntFlag`` members, so they compare and combine as
the integers the columns hold. Hot code uses ``int(member)`` instead: NumPy takes a member
for a 64-bit integer (which widens a ``uint8`` column combined with it), an operation on a
member costs about a microsecond, and a tuple that holds one stays tracked by the garbage
collector.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import numpy as np

NO_STEP = -1  # ops.step of an op outside every step


class Category(enum.IntEnum):
    """What an ``ops`` row is: a TF op kernel run by an executor (``OP``), a kernel or copy
    on an accelerator (``DEVICE``, ``MEMCPY``), or, from XSpace, a host annotation (``HOST``:
    TraceMe events such as ``EagerExecute``), a Python function (``PYTHON``) or a tf.data
    iterator event (``DATA``), or a line xprof derived from the device's own events
    (``DERIVED``: ``TensorFlow Ops``, ``TensorFlow Name Scope``, ``Steps``, ``XLA Modules``;
    kept for the viewers and for steps, never added to kernel time). Summaries and
    comparisons count ``OP`` rows as host time and ``DEVICE``/``MEMCPY`` rows not flagged
    ``DUPLICATE`` as device time (:mod:`.accelerator`).

    ``chrome`` is the ``"cat"`` of the category's events in Chrome traces ("Op" as in
    TF's timeline.py), so that a category survives a round trip through one."""

    OP = 0, "Op"
    DEVICE = 1, "Device"
    MEMCPY = 2, "Memcpy"
    HOST = 3, "Host"
    PYTHON = 4, "Python"
    DATA = 5, "Data"
    DERIVED = 6, "Derived"

    def __new__(cls, value: int, chrome: str):
        member = int.__new__(cls, value)
        member._value_ = value
        member.chrome = chrome
        return member

    @property
    def label(self) -> str:
        """The lower-case name summaries use: ``"op"``, ``"device"``, ..."""
        return self.name.lower()


class OpFlag(enum.IntFlag):
    """Bits of ``ops.flags``."""

    HAS_NANOS = 1            # the source gave nanosecond fields (else micros only)
    HAS_MEMORY_STATS = 2     # the source had a memory_stats message, even an empty one
    HAS_SCHEDULED = 4        # scheduled_ns came from the source
    LABEL_CANONICAL = 8      # the label is "name = kernel(inputs)" and is not stored (label id 0)
    DUPLICATE = 16           # a device record that repeats one on another lane (TF1's GPU tracer
                             # records each kernel on stream:all and stream:N, copies also on memcpy)


class OutputFlag(enum.IntFlag):
    """Bits of ``outputs.flags``: which parts of a NodeOutput the source had."""

    HAS_DESCRIPTION = 1
    HAS_SHAPE = 2
    HAS_ALLOCATION = 4
    SINGLE_REFERENCE = 8


_OP_COLUMNS = {
    "name": np.int32, "op_type": np.int32, "kernel": np.int32, "label": np.int32,
    "start_ns": np.int64, "end_ns": np.int64, "op_start_ns": np.int64, "op_end_ns": np.int64,
    "scheduled_ns": np.int64, "thread_id": np.uint32, "device": np.int32, "lane": np.int32,
    "step": np.int32, "block": np.int32, "flags": np.uint8, "category": np.uint8,
    "temp_bytes": np.int64, "persistent_bytes": np.int64,
    "device_temp_bytes": np.int64, "device_persistent_bytes": np.int64,
}
# table -> column -> dtype
TABLE_COLUMNS: dict[str, dict[str, Any]] = {
    "ops": _OP_COLUMNS,
    "inputs": {"op": np.int32, "name": np.int32},
    "outputs": {
        "op": np.int32, "slot": np.int32, "dtype": np.int32, "shape": np.int32,
        "requested_bytes": np.int64, "allocated_bytes": np.int64, "allocator": np.int32,
        "allocation_id": np.int64, "ptr": np.uint64, "flags": np.uint8,
    },
    "memory": {
        "op": np.int32, "allocator": np.int32, "total_bytes": np.int64, "peak_bytes": np.int64,
        "live_bytes": np.int64, "allocator_bytes_in_use": np.int64,
    },
    "allocations": {"memory": np.int32, "time_ns": np.int64, "bytes": np.int64},
    "transfers": {
        "op": np.int32, "bytes": np.int64, "rate_bps": np.float64, "src": np.int32,
        "dst": np.int32, "tensor": np.int32,
    },
    "counters": {"allocator": np.int32, "time_ns": np.int64, "bytes_in_use": np.int64},
    "aliases": {"op": np.int32, "name": np.int32},
    "event_stats": {"op": np.int32, "key": np.int32, "value": np.int32},
    "links": {"producer": np.int32, "consumer": np.int32, "kind": np.int32},
}
# table -> its columns that hold string ids (the ``*`` columns above)
STRING_COLUMNS: dict[str, frozenset[str]] = {
    "ops": frozenset({"name", "op_type", "kernel", "label"}), "inputs": frozenset({"name"}),
    "outputs": frozenset({"shape", "allocator"}), "memory": frozenset({"allocator"}),
    "allocations": frozenset(), "transfers": frozenset({"src", "dst", "tensor"}),
    "counters": frozenset({"allocator"}), "aliases": frozenset({"name"}),
    "event_stats": frozenset({"key", "value"}), "links": frozenset({"kind"}),
}


def is_string_column(table: str, column: str) -> bool:
    return column in STRING_COLUMNS[table]

# Where a trace keeps the graph its capture recorded (capture/graph_record.py): the metadata
# key "graph" (JSON text), written by the XSpace writer as this Task Environment stat.
GRAPH_STAT = "tracebridge_graph"
# The input shapes of each traced call of a function (``trace(fn)``), by step number: the
# metadata key (JSON text: {"<step>": "float32[8,64], int32[8]"}). XLA compiles once per
# input shape, and TF's profile says when it compiles, not for which shapes.
STEP_INPUTS = "step_inputs"
# What a capture recorded beside the profile (JSON text each), as the XSpace writer keeps it:
# metadata key -> Task Environment stat (xprof ignores stats it does not know).
METADATA_STATS = {"graph": GRAPH_STAT, STEP_INPUTS: "tracebridge_step_inputs"}

# The stats TF 2.21 puts on a tf.function call's host event (``train_step``,
# ``multi_step_on_iterator``): whether it traced and whether XLA compiles it ("traced-nonXla"),
# and the function's tracings so far. Which tracings and XLA compilations are a function's
# first call rests on them (analysis/run/calls.py), so tracebridge's own files keep them
# (Chrome JSON: the event's args; XSpace: its stats).
CALL_STATS = ("tf_function_call", "tracing_count")

# Ops that ran eagerly have no node names: readers name them ``eager/<Type>_<n>``
# (readers/eager_ops.py), and analyses know them by this scope.
EAGER_SCOPE = "eager/"


def is_eager_name(name: str) -> bool:
    return name.startswith(EAGER_SCOPE)


# Ops TensorFlow and Keras themselves run eagerly around a step that is a tf.function, by
# design, whatever the user wrote (TF 2.21 and Keras 3.15 on a CPU, captured in
# tests/test_doctor_healthy.py): tf.data's iterator protocol (``next(iterator)`` runs
# IteratorGetNext eagerly; ``get_next_as_optional`` IteratorGetNextAsOptional), Keras 3
# ``fit``'s check of the Optional its step function returns (OptionalHasValue and
# OptionalGetValue after every step, outside the tf.function), the iterator's creation each
# epoch, and the input pipeline's construction (every ``*Dataset`` op). They are the input
# pipeline's work, which ``input_wait`` measures, not a step left without tf.function: the
# eager-op checks (doctor's ``ops_without_time``, the ``eager_ops`` finding) leave them out.
# Seen in those captures: IteratorGetNext, IteratorGetNextAsOptional, OptionalHasValue,
# OptionalGetValue, AnonymousIteratorV3, MakeIterator and the *Dataset ops; the others below
# are their other versions, and the resources tf.data makes with a pipeline (a shuffle's seed
# generator, a tf.distribute iterator).
FRAMEWORK_EAGER_OPS = frozenset({
    "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
    "OptionalHasValue", "OptionalGetValue", "OptionalNone", "OptionalFromValue",
    "AnonymousIterator", "AnonymousIteratorV2", "AnonymousIteratorV3", "MakeIterator", "DeleteIterator",
    "AnonymousMultiDeviceIterator", "AnonymousMultiDeviceIteratorV3", "MultiDeviceIteratorInit",
    "MultiDeviceIteratorGetNextFromShard", "DeleteMultiDeviceIterator", "DatasetCardinality",
    "AnonymousSeedGenerator", "AnonymousRandomSeedGenerator", "DeleteSeedGenerator",
    "DeleteRandomSeedGenerator", "DummySeedGenerator",
})
_DATASET_OP = re.compile(r"Dataset(?:V\d+)?$")  # TensorDataset, ParallelMapDatasetV2, ...


def is_framework_eager_op(op_type: str) -> bool:
    """Whether an eager op of ``op_type`` is one TF or Keras runs itself
    (:data:`FRAMEWORK_EAGER_OPS`, dataset construction)."""
    return op_type in FRAMEWORK_EAGER_OPS or bool(_DATASET_OP.search(op_type))
