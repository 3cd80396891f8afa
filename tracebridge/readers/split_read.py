"""Reading a RunMetadata's node chunks in two processes.

A forked worker reads the second half of the chunks into a :class:`_WorkerBuilder`, which
stands in for the trace builder and keeps the rows it would have added; they come back as
:class:`_WorkerRows` (with the worker's new strings) while this process reads the first
half, and are added after it. The chunks are the same as in one process, so the trace is
the same, string ids included. Whether to fork is the caller's
:class:`~tracebridge.options.Parallelism`; :mod:`tracebridge._fork` does the forking.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import tempfile
import traceback
import warnings
from itertools import islice

import numpy as np

from .._fork import ChildFailed, ForkedJob
from ..model.builder import TraceBuilder
from ..model.schema import TABLE_COLUMNS, is_string_column
from ..options import Parallelism
from .wire import intern_all

PARALLEL_MIN_NODES = 60_000


def read_chunks(builder: TraceBuilder, chunks: list[tuple[int, int]], read, nodes: int,
                parallelism: Parallelism) -> None:
    """``read(target, chunks)`` for all chunks into ``builder``, with two processes when
    ``parallelism`` splits this many nodes."""
    # Two processes: a forked worker reads the second half of the chunks into a
    # _WorkerBuilder, this process the first half; then the worker's rows are added after it.
    # Chunks are the same as in one process, so the trace is the same, string ids too.
    split = (len(chunks) + 1) // 2  # the worker also pickles its part: it gets no more
    worker_first_op = builder.op_count + (chunks[split][0] if split < len(chunks) else 0)

    def second_half():
        worker_builder = _WorkerBuilder(builder.strings, worker_first_op)
        read(worker_builder, chunks[split:])
        return worker_builder.rows_read()

    if len(chunks) < 2 or not parallelism.splits(nodes, PARALLEL_MIN_NODES):
        read(builder, chunks)
        return
    fd, result_path = tempfile.mkstemp(prefix="tracebridge-", suffix=".pickle")
    os.close(fd)
    try:
        worker = ForkedJob.start(functools.partial(_run_and_pickle, second_half, result_path))
        if worker is None:
            read(builder, chunks)
            return
        with worker:
            read(builder, chunks[:split])
            try:
                worker.wait()
                outcome = _load_outcome(result_path)
            except ChildFailed:
                outcome = None
        if outcome is None:  # the worker died (killed, out of memory): read its part here
            warnings.warn("tracebridge: the reader's worker process failed; reading on in one process",
                          RuntimeWarning, stacklevel=2)
            read(builder, chunks[split:])
        elif outcome[0] == "error":
            error, detail = outcome[1], outcome[2]
            if detail and hasattr(error, "add_note"):
                error.add_note(f"raised in the reader's worker process:\n{detail}")
            raise error
        else:
            outcome[1].add_to(builder)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(result_path)


class _WorkerBuilder:
    """Stands in for the :class:`TraceBuilder` in the worker process: keeps the rows that
    :func:`_add_nodes` adds, in order, to be added to the real builder later. String ids are ids in the worker's copy of the string table;
    op numbers start where the worker's first op will be; memory rows count from 0."""

    def __init__(self, strings, first_op: int):
        self.strings = strings
        self._base = len(strings)
        self._first_op = first_op
        self._rows: dict[str, int] = {}
        self._records: list[tuple] = []

    @property
    def op_count(self) -> int:
        return self._first_op + self._rows.get("ops", 0)

    def rows(self, kind: str) -> int:
        return self._rows.get(kind, 0)

    def extend(self, kind: str, /, **columns) -> None:
        dtypes = TABLE_COLUMNS[kind]
        columns = {c: np.asarray(v, dtype=dtypes[c]) for c, v in columns.items()}
        self._rows[kind] = self.rows(kind) + len(next(iter(columns.values())))
        self._records.append(("extend", kind, columns, ()))

    def add_row(self, kind: str, /, **values) -> None:
        texts = tuple(k for k, v in values.items() if isinstance(v, str))
        values = {k: self.strings[v] if k in texts else v for k, v in values.items()}
        self._rows[kind] = self.rows(kind) + 1
        self._records.append(("row", kind, values, texts))

    def rows_read(self) -> "_WorkerRows":
        return _WorkerRows(list(islice(self.strings, self._base, None)), self._base, self._first_op,
                           self._records)


class _WorkerRows:
    """What the worker read, to be added to the real builder after this process's part."""

    def __init__(self, new_strings: list[str], base: int, first_op: int, records: list[tuple]):
        self.new_strings, self.base, self.first_op, self.records = new_strings, base, first_op, records

    def add_to(self, builder: TraceBuilder) -> None:
        if builder.op_count != self.first_op:
            raise RuntimeError(f"worker rows start at op {self.first_op}, not {builder.op_count}")
        # The worker's new strings, interned in its order: ids come out as in one process.
        remap = np.arange(self.base + len(self.new_strings), dtype=np.int64)
        remap[self.base:] = intern_all(builder.strings, self.new_strings)
        memory_base = builder.rows("memory")
        for action, kind, values, texts in self.records:
            if action == "extend":
                values = {c: remap[v] if is_string_column(kind, c) else v for c, v in values.items()}
                if kind == "allocations":
                    values["memory"] = values["memory"] + memory_base
                builder.extend(kind, **values)
            else:
                builder.add_row(kind, **{k: int(remap[v]) if k in texts else v for k, v in values.items()})


def _run_and_pickle(job, path: str) -> None:
    """In the worker: run ``job`` and pickle its outcome (its result, or the exception it
    raised, which the parent raises again) to ``path``, a file this process created."""
    try:
        outcome = ("ok", job(), None)
    except Exception as error:  # noqa: BLE001 - re-raised in the parent
        outcome = ("error", error, traceback.format_exc())
    with open(path, "wb") as handle:
        try:
            pickle.dump(outcome, handle, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an exception that cannot be pickled
            handle.seek(0)
            handle.truncate()
            pickle.dump(("error", RuntimeError(outcome[2] or traceback.format_exc()), None), handle)


def _load_outcome(path: str):
    """The worker's outcome. This pickle is tracebridge's own, written by its own child
    process into a private temporary file (mode 0600), never input data."""
    with open(path, "rb") as handle:
        return pickle.load(handle)
