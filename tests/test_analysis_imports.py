"""The analysis modules import one another one way only: no cycle, not even through an
import made only for type checking (structure.py and structure_regions.py once imported
each other, ``Graph`` one way and ``op_kind`` the other)."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from tests.test_imports import PACKAGE, _imports


def analysis_imports() -> dict[str, set[str]]:
    """Analysis module -> the analysis modules it imports (by dotted name)."""
    prefix = "tracebridge.analysis."
    modules = {prefix + path.stem: path for path in (PACKAGE / "analysis").glob("*.py") if path.stem != "__init__"}
    return {name: {module for module, _lazy in _imports(path) if module in modules and module != name}
            for name, path in modules.items()}


def test_analysis_has_no_import_cycle():
    graph = analysis_imports()
    assert graph["tracebridge.analysis.structure"] >= {"tracebridge.analysis.structure_regions"}  # the check sees edges
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None
    assert set(order) == set(graph)


def test_a_cycle_would_be_found():
    graph = analysis_imports()
    graph["tracebridge.analysis.structure_regions"].add("tracebridge.analysis.structure")
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError:
        return
    raise AssertionError("a cycle went unnoticed")
