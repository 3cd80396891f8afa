"""The analysis is a house of rooms, one subpackage per question, and its modules import
one another one way only: each room imports only the rooms ROOM_IMPORTS names, and no
module imports itself back, not even through an import made inside a function or only for
type checking (structure.py and structure_regions.py once imported each other, ``Graph``
one way and ``op_kind`` the other; compare.py once imported the findings, which read
comparisons: now compare()'s caller hands the findings in)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter

from tests.test_imports import PACKAGE, _imports

ANALYSIS = PACKAGE / "analysis"
PREFIX = "tracebridge.analysis"

# Room (a subpackage of tracebridge.analysis) -> the rooms its modules import, lazily or
# not. Exactly these: a new crossing fails until it is named here, and one no longer used
# must be struck out. "" is the analysis package itself (its __init__ and loose modules).
ROOM_IMPORTS = {
    "": set(),
    # the parts every question shares: PerSide, kernels, tables, XLA rows, shift, thresholds
    "common": set(),
    # what one run is: summary, doctor, memory
    "run": {"common", "graphs"},  # info lists the layers of a recorded graph
    # how two recorded graphs correspond (it may import common; today it needs nothing)
    "graphs": set(),
    # how two runs differ: reads each run's summary, doctor notes and memory, aligns graphs;
    # never the findings (they read comparisons; compare()'s caller injects them)
    "compare": {"common", "graphs", "run"},
    # why a run is slow: measures runs and reads comparisons
    "findings": {"common", "compare", "run"},
    # many hosts: may import any room (these are the ones it uses)
    "hosts": {"common", "compare", "findings", "run"},
}
LOOSE_AT_MOST = 3  # modules directly in analysis/, besides __init__


def _module(path) -> str:
    parts = path.relative_to(ANALYSIS).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PREFIX,) + parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and (ANALYSIS / parts[2]).is_dir() else ""


def analysis_imports() -> dict[str, set[str]]:
    """Analysis module -> the analysis modules it imports (by dotted name), lazy imports
    included; importing a module of another room also runs that room's ``__init__``."""
    modules = {_module(path): path for path in ANALYSIS.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for module, _lazy in _imports(path):
            if module not in modules or module == name:
                continue
            edges.add(module)
            parts = module.split(".")
            for n in range(3, len(parts)):  # the packages above it, when entered from outside
                parent = ".".join(parts[:n])
                if parent in modules and _room(parent) != _room(name):
                    edges.add(parent)
        graph[name] = edges
    return graph


def test_analysis_has_no_import_cycle():
    graph = analysis_imports()
    structure = f"{PREFIX}.graphs.structure"
    assert graph[structure] >= {f"{PREFIX}.graphs.structure_regions"}  # the check sees edges
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None
    assert set(order) == set(graph)


def test_a_cycle_would_be_found():
    graph = analysis_imports()
    graph[f"{PREFIX}.graphs.structure_regions"].add(f"{PREFIX}.graphs.structure")
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError:
        return
    raise AssertionError("a cycle went unnoticed")


def test_rooms_import_only_what_the_table_allows():
    used: dict[str, set[str]] = {room: set() for room in ROOM_IMPORTS}
    for name, imported in analysis_imports().items():
        room = _room(name)
        assert room in ROOM_IMPORTS, f"{name}: a new room; give it a line in ROOM_IMPORTS"
        for module in imported:
            target = _room(module)
            if target == room:
                continue
            assert target in ROOM_IMPORTS[room], f"{name} imports {module}: not in ROOM_IMPORTS[{room!r}]"
            used[room].add(target)
    stale = {room: allowed - used[room] for room, allowed in ROOM_IMPORTS.items() if allowed - used[room]}
    assert stale == {}, f"allowed but no longer used (strike them out): {stale}"


def test_the_table_has_no_cycle_and_compare_never_reaches_findings():
    TopologicalSorter({room: allowed - {room} for room, allowed in ROOM_IMPORTS.items()}).prepare()
    reach, todo = set(), ["compare"]
    while todo:
        for target in ROOM_IMPORTS[todo.pop()] - reach:
            reach.add(target)
            todo.append(target)
    assert "findings" not in reach


def test_a_crossing_outside_the_table_would_be_found():
    graph = analysis_imports()
    graph[f"{PREFIX}.compare.core"].add(f"{PREFIX}.findings.kinds")
    room, target = _room(f"{PREFIX}.compare.core"), _room(f"{PREFIX}.findings.kinds")
    assert (room, target) == ("compare", "findings") and target not in ROOM_IMPORTS[room]


def test_each_room_says_what_it_answers_and_may_import():
    rooms = {path.parent for path in ANALYSIS.rglob("__init__.py")} - {ANALYSIS}
    assert {room.name for room in rooms if room.parent == ANALYSIS} == set(ROOM_IMPORTS) - {""}
    for room in rooms:
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) == 2, f"{room}: a two-line docstring (what it answers, what it imports)"
    loose = [path.name for path in ANALYSIS.glob("*.py") if path.name != "__init__.py"]
    assert len(loose) <= LOOSE_AT_MOST, loose
