"""CSV text of a table: the ``--csv`` twin of every text table the CLI prints (issue 25,
"output that pipes"). One header row, then one row per table row, as the csv module
writes it (quoting names with commas), with ``\\n`` line ends."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def ms(ns: float | None, signed: bool = False, unit: str = " ms", digits: int = 3,
       missing: str | None = None) -> str:
    """Nanoseconds as milliseconds, ``12.346 ms``: ``signed`` with its sign (``+0.250``),
    ``unit`` after the number (``"ms"`` for the compare table, ``""`` for none); with
    ``missing``, what None or a value that is not finite reads as (``"?"``)."""
    if missing is not None and (ns is None or not math.isfinite(ns)):
        return missing
    return f"{ns / 1e6:{'+' if signed else ''}.{digits}f}{unit}"


def plural(count: int, word: str) -> str:
    """``1 step``, ``3 steps``: a count with its noun, as the text tables say it."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def human_bytes(count: int) -> str:
    """Bytes in binary units, as a reader takes them in: ``512 B``, ``3.4 KiB``, ``15.0 GiB``
    (three significant digits at least; the exact count stays in ``--json`` and ``--csv``)."""
    value, unit = float(count), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{int(value)} B" if unit == "B" else f"{value:.{1 if abs(value) >= 10 else 2}f} {unit}"
