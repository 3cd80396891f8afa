"""Notebooks: the code cells are migrated as one module, so that an import in one cell
resolves names in the others, then split back into their cells.

IPython lines (``%magic``, ``!shell``, ``?help``) are not Python: they are hidden as comments
for the codemod and restored after. Cells the codemod does not change keep their exact text;
the notebook is re-serialized only when something changed.
"""

from __future__ import annotations

import json
import re

from ..errors import MigrationError
from . import Migration, migrate_source, one_line

_CELL = "# tracebridge-notebook-cell {}"
_CELL_LINE = re.compile(r"^# tracebridge-notebook-cell (\d+)\n", re.M)
# Indentation is [^\S\n]*, not \s*: \s* would also match newlines, and on a run of blank
# lines every line start would scan (and backtrack over) all the blank lines after it.
_IPYTHON = re.compile(r"^([^\S\n]*)([%!?].*)$", re.M)
_HIDE = r"\1# tracebridge-ipython: \2"
_HIDDEN = re.compile(r"^([^\S\n]*)# tracebridge-ipython: (.*)$", re.M)


def migrate_notebook(text: str, path: str) -> Migration:
    try:
        notebook = json.loads(text)
        cells = notebook["cells"]
        numbers = [i + 1 for i, c in enumerate(cells) if c["cell_type"] == "code"]  # as notebook UIs count
        code_cells = [c for c in cells if c["cell_type"] == "code"]
        sources = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in code_cells]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise MigrationError(f"{path}: not a Jupyter notebook: {one_line(str(error))}") from None
    except RecursionError:  # json.loads on a document nested thousands deep
        raise MigrationError(f"{path}: not a Jupyter notebook: JSON nested too deeply") from None

    joined = "".join(f"{_CELL.format(i)}\n{_IPYTHON.sub(_HIDE, source)}\n" for i, source in enumerate(sources))
    try:
        result = migrate_source(joined, path, notebook=True)
    except MigrationError as error:
        raise MigrationError(f"{error} (in the code cells joined)") from None
    pieces = _CELL_LINE.split(result.code)[1:]
    migrated = [_HIDDEN.sub(r"\1\2", pieces[k + 1])[:-1] for k in range(0, len(pieces), 2)]
    if len(migrated) != len(sources):
        raise MigrationError(f"{path}: the codemod moved a cell boundary; notebook left as it is")

    changed = False
    for cell, before, after in zip(code_cells, sources, migrated):
        if after != before:
            cell["source"] = after.splitlines(keepends=True)
            changed = True
    new_text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n" if changed else text
    # Report lines point at the joined cells: say which cell and the line in it.
    starts = [m.start() for m in _CELL_LINE.finditer(joined)]
    line_starts = [joined.count("\n", 0, s) + 2 for s in starts]

    def located(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
        found = []
        for line, message in lines:
            cell = max((i for i, start in enumerate(line_starts) if start <= line), default=0)
            found.append((0, f"cell {numbers[cell]}, line {max(line - line_starts[cell] + 1, 1)}: {message}"))
        return found
    return Migration(path, text, new_text, located(result.report), located(result.missing))
