"""The normalized step-stats model: one immutable, columnar ``Trace`` for every source.

A trace is a handful of small objects (devices, lanes, steps, metadata) and a few column
tables of events (their columns, categories and flags: :mod:`.schema`). All times are
integer nanoseconds since the Unix epoch; names are ids into one string table. Every table
is read-only and every filter returns a new trace, so a trace handed to a writer or an
analysis can never change under it.

The model imports nothing above it. A trace's conveniences (``save``, ``summary``,
``to_html``, ...) call the :class:`Consumers` that :mod:`tracebridge.formats` installs when
the package is imported.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Iterator, Mapping
from os import PathLike
from typing import Any, Protocol

import numpy as np

from .devices import Device
from .parts import Lane, Op, Step
from .schema import NO_STEP, TABLE_COLUMNS, is_string_column
from .slicing import slice_trace, with_counters_within
from .table import Table, child_take, offsets_of


class Consumers(Protocol):
    """What a trace's conveniences call in the layers above the model (writers, analyses),
    through the one registry that installs it (:mod:`tracebridge.formats`)."""

    def save(self, trace: "Trace", path: str | PathLike, /, **options: Any) -> list[str]: ...

    def to_run_metadata(self, trace: "Trace") -> Any: ...

    def to_tensorboard(self, trace: "Trace", logdir: str | PathLike, /, *, run: str | None) -> dict[str, str]: ...

    def notebook_html(self, trace: "Trace") -> str: ...

    def summary(self, trace: "Trace", /, *, top: int | None) -> Any: ...

    def info(self, trace: "Trace") -> dict[str, Any]: ...


_consumers: Consumers | None = None


def install_consumers(consumers: Consumers) -> None:
    global _consumers
    _consumers = consumers


def _installed() -> Consumers:
    if _consumers is None:  # only while tracebridge/__init__.py itself runs
        raise RuntimeError("tracebridge is still being imported: its writers are not installed yet")
    return _consumers


def _table_property(kind: str) -> property:
    """A trace's table of ``kind`` as a read-only attribute (``trace.ops``, ...)."""
    return property(lambda self: self._tables[kind], doc=f"The {kind} table (see :mod:`.schema`).")


def empty_table(kind: str) -> Table:
    return Table({name: np.zeros(0, dtype) for name, dtype in TABLE_COLUMNS[kind].items()})


class Trace:
    """An immutable profile of one or more steps, from any source tracebridge reads.

    Build one with :func:`tracebridge.load`, a capture (:func:`tracebridge.trace`) or a
    :class:`~tracebridge.model.builder.TraceBuilder`; never by mutating one.
    """

    def __init__(self, *, strings: tuple[str, ...], devices: tuple[Device, ...],
                 lanes: tuple[Lane, ...], steps: tuple[Step, ...], tables: Mapping[str, Table],
                 metadata: Mapping[str, Any] | None = None):
        self.strings = strings
        self.devices = devices
        self.lanes = lanes
        self.steps = steps
        missing = set(TABLE_COLUMNS) - set(tables)
        self._tables = {**{kind: empty_table(kind) for kind in missing}, **tables}
        self.metadata = types.MappingProxyType(dict(metadata or {}))

    # --- tables -----------------------------------------------------------------------
    ops, inputs, outputs, memory, allocations, transfers, counters = map(_table_property, (
        "ops", "inputs", "outputs", "memory", "allocations", "transfers", "counters"))

    def table(self, kind: str) -> Table:
        return self._tables[kind]

    def __len__(self) -> int:
        return self.ops.rows

    def string(self, string_id: int) -> str:
        return self.strings[string_id]

    @functools.cached_property
    def _string_ids(self) -> dict[str, int]:
        # Built once, on first use: later ids of a repeated text give way to its first.
        count = len(self.strings)
        return dict(zip(reversed(self.strings), range(count - 1, -1, -1)))

    def string_id(self, text: str) -> int:
        """The id of ``text`` in :attr:`strings` (its first, as ``strings.index`` finds),
        or -1 when the trace has no such string: -1 matches no row of a string column,
        so ``ops["name"] == trace.string_id(name)`` needs no check. A dict built once
        per trace, not a scan of the table."""
        return self._string_ids.get(text, -1)

    def event_stat(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The op rows that carry event stat ``key`` and the string ids of its values, in
        table order (both empty when no event has it)."""
        stats = self.table("event_stats")
        key_id = self.string_id(key)
        if key_id < 0 or not stats.rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        mine = stats["key"] == key_id
        return stats["op"][mine], stats["value"][mine]

    def column_strings(self, table: str, column: str) -> list[str]:
        """A string column decoded, e.g. ``trace.column_strings("ops", "name")``."""
        strings = self.strings
        return [strings[i] for i in self._tables[table][column].tolist()]

    # --- derived views ----------------------------------------------------------------
    @property
    def start_ns(self) -> int:
        return int(self.ops["start_ns"].min()) if len(self) else 0

    @property
    def end_ns(self) -> int:
        return int(self.ops["end_ns"].max()) if len(self) else 0

    @property
    def source_format(self) -> str:
        return str(self.metadata.get("source_format", "unknown"))

    def input_offsets(self) -> np.ndarray:
        """``inputs`` rows of op i are ``offsets[i]:offsets[i+1]``."""
        return offsets_of(self.inputs["op"], len(self))

    def op(self, index: int) -> Op:
        ops, strings = self.ops, self.strings
        offsets = np.searchsorted(self.inputs["op"], [index, index + 1])
        names = self.inputs["name"][offsets[0]:offsets[1]]
        step = int(ops["step"][index])
        return Op(
            index=index, name=strings[ops["name"][index]], op_type=strings[ops["op_type"][index]],
            kernel=strings[ops["kernel"][index]], device=self.devices[ops["device"][index]].name,
            lane=int(ops["lane"][index]),
            step=None if step == NO_STEP else self.steps[step].number,
            start_ns=int(ops["start_ns"][index]), end_ns=int(ops["end_ns"][index]),
            inputs=tuple(strings[i] for i in names), label=strings[ops["label"][index]],
        )

    def records(self) -> Iterator[Op]:
        """Every op as an :class:`Op`, in storage order (grouped by device block)."""
        for index in range(len(self)):
            yield self.op(index)

    def to_dataframe(self):
        """The ops as a pandas DataFrame (needs pandas: ``pip install 'tracebridge[pandas]'``)."""
        try:
            import pandas as pd
        except ImportError:
            from ..errors import MissingDependencyError
            raise MissingDependencyError("Trace.to_dataframe()", "pandas") from None
        ops = self.ops
        steps = np.array([s.number for s in self.steps] + [-1], dtype=np.int64)
        return pd.DataFrame({
            "name": self.column_strings("ops", "name"),
            "op_type": self.column_strings("ops", "op_type"),
            "kernel": self.column_strings("ops", "kernel"),
            "device": [self.devices[d].name for d in ops["device"].tolist()],
            "lane": ops["lane"],
            "step": steps[ops["step"]],
            "start_ns": ops["start_ns"],
            "end_ns": ops["end_ns"],
            "duration_ns": ops["end_ns"] - ops["start_ns"],
        })

    # --- filters: each returns a new trace ---------------------------------------------
    def filter(self, *, step: int | None = None, device: str | None = None,
               start_ns: int | None = None, end_ns: int | None = None,
               name: str | None = None, op_type: str | None = None) -> "Trace":
        """Ops that match every given condition, as a new trace.

        ``step`` is a step number as in ``trace.steps``; ``device``, ``name`` and
        ``op_type`` are regular expressions searched in the device name, op name and op
        type (or kernel type); ``start_ns``/``end_ns`` keep ops that overlap the window.
        """
        ops = self.ops
        keep = np.ones(len(self), dtype=bool)
        if step is not None:
            positions = [i for i, s in enumerate(self.steps) if s.number == step]
            keep &= np.isin(ops["step"], positions)
        if device is not None:
            pattern = re.compile(device)
            matching = [i for i, d in enumerate(self.devices) if pattern.search(d.name)]
            keep &= np.isin(ops["device"], matching)
        if start_ns is not None:
            keep &= ops["end_ns"] >= start_ns
        if end_ns is not None:
            keep &= ops["start_ns"] <= end_ns
        if name is not None:
            keep &= self._string_match(ops["name"], name)
        if op_type is not None:
            keep &= self._string_match(ops["op_type"], op_type) | self._string_match(ops["kernel"], op_type)
        kept = self._take_ops(keep)
        if step is not None:
            kept = kept._with(steps=tuple(s if s.number == step else None for s in self.steps))
        if start_ns is not None or end_ns is not None:
            kept = with_counters_within(kept, start_ns, end_ns)
        return kept

    def slice(self, *, steps=None, start=None, end=None, min_duration=None) -> "Trace":
        """A slice for a viewer: ``steps`` (``"3-5"``, ``"3,7"`` or numbers), a window
        ``start``/``end`` after the trace start and ``min_duration`` (nanoseconds, or text
        such as ``"10us"``). Ops are kept whole, with the kernels they launched; the
        metadata (``slice``, ``notes``) says what was left out and how many short events
        were dropped. See :mod:`tracebridge.model.slicing`."""
        return slice_trace(self, steps=steps, start=start, end=end, min_duration=min_duration)

    def _string_match(self, ids: np.ndarray, pattern: str) -> np.ndarray:
        regex = re.compile(pattern)
        unique = np.unique(ids)
        matching = [i for i in unique.tolist() if regex.search(self.strings[i])]
        return np.isin(ids, matching)

    def _take_ops(self, keep: np.ndarray) -> "Trace":
        tables = dict(self._tables)
        tables["ops"] = self.ops.take(keep)
        for kind in ("inputs", "outputs", "memory", "transfers", "aliases", "event_stats"):
            tables[kind] = child_take(keep, self._tables[kind], "op")
        memory_keep = keep[self.memory["op"]] if self.memory.rows else np.zeros(0, bool)
        tables["allocations"] = child_take(memory_keep, self.allocations, "memory")
        links = self._tables["links"]
        if links.rows:
            both = keep[links["producer"]] & keep[links["consumer"]]
            renumber = (np.cumsum(keep) - 1).astype(np.int32)
            kept = links.take(both)
            tables["links"] = kept.with_columns(producer=renumber[kept["producer"]],
                                                consumer=renumber[kept["consumer"]])
        return self._with(tables=tables)

    def _with(self, *, steps: tuple | None = None, tables: Mapping[str, Table] | None = None) -> "Trace":
        """A copy with some parts replaced. ``steps`` may hold None for steps to drop."""
        tables = dict(tables if tables is not None else self._tables)
        new_steps = self.steps
        if steps is not None:
            remap = np.full(len(steps) + 1, NO_STEP, dtype=np.int32)
            kept = []
            for i, s in enumerate(steps):
                if s is not None:
                    remap[i] = len(kept)
                    kept.append(s)
            ops = tables["ops"]
            tables["ops"] = ops.with_columns(step=remap[ops["step"]])
            new_steps = tuple(kept)
        return Trace(strings=self.strings, devices=self.devices, lanes=self.lanes, steps=new_steps,
                     tables=tables, metadata=self.metadata)

    def with_metadata(self, **entries: Any) -> "Trace":
        return Trace(strings=self.strings, devices=self.devices, lanes=self.lanes, steps=self.steps,
                     tables=self._tables, metadata={**self.metadata, **entries})

    # --- conveniences: the installed consumers do the work -----------------------------
    def summary(self, top: int | None = None):
        """Time per op, op type and device: see :class:`tracebridge.analysis.run.summary.Summary`."""
        return _installed().summary(self, top=top)

    def to_chrome(self, path: str | PathLike, *, dataflow: bool = True, memory: bool = False,
                  progress=None, workers: int | None = None) -> None:
        """Write a Chrome trace (``.json`` or ``.json.gz``) for chrome://tracing and Perfetto;
        ``workers``: see :func:`tracebridge.writers.chrome.write_chrome`."""
        _installed().save(self, path, to="chrome", dataflow=dataflow, memory=memory, progress=progress,
                          workers=workers)

    def to_run_metadata(self):
        """All steps as one ``RunMetadata`` message (tracebridge's own schema; its bytes
        are what ``tf.compat.v1.RunMetadata.FromString`` reads)."""
        return _installed().to_run_metadata(self)

    def to_step_stats(self):
        return self.to_run_metadata().step_stats

    def to_html(self, path: str | PathLike, *, device_pattern: str | None = None,
                title: str | None = None) -> None:
        """Write the standalone HTML timeline (tfvis's successor): one file, no network."""
        _installed().save(self, path, to="html", device_pattern=device_pattern, title=title)

    def _repr_html_(self) -> str:
        """The timeline in a sandboxed iframe (notebooks); traces above 300k ops get a hint."""
        return _installed().notebook_html(self)

    def to_tensorboard(self, logdir: str | PathLike, *, run: str | None = None) -> dict[str, str]:
        """Write an event file (one ``tagged_run_metadata`` per step) and an XSpace under
        ``logdir/plugins/profile/<run>/`` for TensorBoard's graph dashboard and xprof."""
        return _installed().to_tensorboard(self, logdir, run=run)

    def save(self, path: str | PathLike, **options: Any) -> list[str]:
        """Write to ``path`` in the format its suffix names (or ``to=``): see
        :func:`tracebridge.formats.save` for the formats and the options each takes.
        Returns the paths written (one per step with ``split_steps=True``)."""
        return _installed().save(self, path, **options)

    def info(self) -> dict[str, Any]:
        """Counts and extents, as ``tracebridge info`` prints them."""
        return _installed().info(self)

    def __repr__(self) -> str:
        """Every row counted, as events (``tracebridge info`` says how many are TF ops or kernels)."""
        counts = ((len(self), "event"), (len(self.steps), "step"), (len(self.devices), "device"))
        return f"<Trace {self.source_format}: " + ", ".join(f"{n} {word}{'s' * (n != 1)}" for n, word in counts) + ">"

    def __eq__(self, other: object) -> bool:
        """Same devices, lanes, steps and the same rows in every table (strings compared
        as text, so two traces with differently ordered string tables can be equal)."""
        if not isinstance(other, Trace):
            return NotImplemented
        if (self.devices, self.lanes, self.steps) != (other.devices, other.lanes, other.steps):
            return False
        for kind, columns in TABLE_COLUMNS.items():
            mine, theirs = self._tables[kind], other._tables[kind]
            if mine.rows != theirs.rows:
                return False
            for column in columns:
                a, b = mine[column], theirs[column]
                if is_string_column(kind, column):
                    if [self.strings[i] for i in a.tolist()] != [other.strings[i] for i in b.tolist()]:
                        return False
                elif not np.array_equal(a, b):
                    return False
        return True

    __hash__ = None  # type: ignore[assignment]
