"""A minimal immutable column table: named numpy arrays of equal length.

Every per-event table of a :class:`~tracebridge.model.trace.Trace` is one of these. Child
tables (inputs, outputs, memory, ...) carry the row number of their parent in a column,
so a filter is one boolean mask per table and never a Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np


class Table(Mapping):
    """Read-only columns of equal length. ``table["start_ns"]`` is a read-only array."""

    __slots__ = ("_columns", "_length")

    def __init__(self, columns: Mapping[str, np.ndarray]):
        lengths = {len(array) for array in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal length: { {k: len(v) for k, v in columns.items()} }")
        frozen = {}
        for name, array in columns.items():
            array = np.asarray(array)
            if array.flags.writeable:
                array = array.view()
                array.flags.writeable = False
            frozen[name] = array
        self._columns = frozen
        self._length = lengths.pop() if lengths else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:  # number of columns, as for any Mapping
        return len(self._columns)

    @property
    def rows(self) -> int:
        return self._length

    def take(self, selector: np.ndarray) -> "Table":
        """Rows chosen by a boolean mask or an index array, as a new table."""
        return Table({name: array[selector] for name, array in self._columns.items()})

    def with_columns(self, **columns: np.ndarray) -> "Table":
        merged = dict(self._columns)
        merged.update(columns)
        return Table(merged)

    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._columns.values())

    def __repr__(self) -> str:
        return f"Table({self._length} rows: {', '.join(self._columns)})"


def child_take(parent_keep: np.ndarray, child: Table, parent_column: str) -> Table:
    """Keep the child rows whose parent row survives, renumbering the parent column."""
    if child.rows == 0:
        return child
    renumber = np.cumsum(parent_keep, dtype=np.int64) - 1
    parents = child[parent_column]
    keep = parent_keep[parents]
    kept = child.take(keep)
    return kept.with_columns(**{parent_column: renumber[kept[parent_column]].astype(parents.dtype)})


def offsets_of(parents: np.ndarray, parent_rows: int) -> np.ndarray:
    """For a child column sorted by parent, ``offsets[i]:offsets[i+1]`` are parent i's rows."""
    return np.searchsorted(parents, np.arange(parent_rows + 1), side="left")
