"""CSV text of a table: the ``--csv`` twin of every text table the CLI prints (issue 25,
"output that pipes"). One header row, then one row per table row, as the csv module
writes it (quoting names with commas), with ``\\n`` line ends."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def plural(count: int, word: str) -> str:
    """``1 step``, ``3 steps``: a count with its noun, as the text tables say it."""
    return f"{count} {word}{'' if count == 1 else 's'}"
