"""What TF 2.21 records of ``tf.function`` calls: the calls, their tracings and XLA
compilations, and which of those belong to a function's first call (a one-time cost) and
which happen again (retracing, recompiling).

A tracing is a ``tf.function-graph_building`` host event, inside the call's host event
(named after the Python function, with ``tf_function_call`` and ``tracing_count`` stats in a
profile), and it runs as a new concrete function, ``__inference_<fn>_<n>`` with a new ``n``.
A first call can trace more than once: a function that creates variables (a Keras model
built on its first call, an optimizer's slots) is traced, its initializers run as a function
of their own (``initialize_variables``), and it is traced again; ``tracing_count`` then says
2 after the first call. A call is a function's first when the tracings it holds account for
every tracing ``tracing_count`` reports (``count <= tracings held``); a later call that
traces is a retracing. Without stats (Chrome JSON) the concrete functions tell: a tracing is
a retracing when the first new concrete function after it belongs to a function that ran
another concrete function earlier in the trace.

An XLA compilation is a backend compile event (:data:`COMPILE_EVENTS`), timed from the start
of the call that compiles and runs the function (TF's lowering to HLO and the HLO passes
come first). It is a first call's when the call holding it is the function's first (above),
or, without stats, when it is the function's first compilation in the trace.

Used by the findings (``retracing``, ``xla_compile``), by the steady-state choice of steps
(:mod:`.steady`) and by the step breakdown (:mod:`.breakdown`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ...model.schema import Category
from ...model.trace import Trace
from .vocabulary import COMPILE_EVENTS, FUNCTION, GRAPH_BUILDING, kept, named, rows_among, rows_with
from .vocabulary import flags as flags_of


@dataclass(frozen=True)
class Tracing:
    """One outermost tracing: its row, its span (the tracing, then the new concrete
    function's instantiation, up to the ``FunctionRun`` that follows on any thread, or the
    tracing's own end where none follows before ``limit_ns``), its function where the trace
    tells, and whether it is a retracing."""

    row: int
    start_ns: int
    end_ns: int
    function: str | None
    retracing: bool


@dataclass(frozen=True)
class Compilation:
    """One outermost XLA compilation (:data:`COMPILE_EVENTS`): its compile event, its span
    (from the start of the call that compiles and runs the function), the function, the
    event's name, and whether it is a first call's."""

    row: int
    start_ns: int
    end_ns: int
    function: str
    event: str
    first_call: bool


def function_name(name: str) -> str:
    """``step`` for ``__inference_step_39``; other names as they are."""
    match = FUNCTION.match(name)
    return match.group("fn") if match else name


def tracings(trace: Trace) -> list[Tracing]:
    """Every outermost tracing of the trace, in time order (module docstring)."""
    return kept(trace, "tracings", lambda: _tracings(trace))


def _tracings(trace: Trace) -> list[Tracing]:
    ops = trace.ops
    rows = outermost(ops, np.flatnonzero(named(trace, GRAPH_BUILDING)))
    if not len(rows):
        return []
    firsts = first_runs(trace)
    versions = _new_versions(ops, rows, firsts)
    counts = tracing_counts(trace)
    held = _tracings_held(ops, rows, counts)
    run_starts = np.sort(ops["start_ns"][named(trace, "FunctionRun")])
    found = []
    for row in rows.tolist():
        fn, again = versions.get(row, (None, False))
        call = held.get(row)
        if call is not None:  # the call's stats say it, and name the function traced
            call_row, inside = call
            again = counts[call_row] > inside
            fn = trace.strings[int(ops["name"][call_row])]
        start, end = int(ops["start_ns"][row]), int(ops["end_ns"][row])
        later = run_starts[np.searchsorted(run_starts, end):]
        found.append(Tracing(row, start, int(later[0]) if len(later) else end, fn, bool(again)))
    return found


def first_call_rows(trace: Trace) -> set[int]:
    """The rows of ``tf.function`` calls that are their function's first call, where the
    trace keeps ``tracing_count`` (module docstring)."""
    counts = tracing_counts(trace)
    if not counts:
        return set()
    ops = trace.ops
    rows = outermost(ops, np.flatnonzero(named(trace, GRAPH_BUILDING)))
    per_call: dict[int, int] = defaultdict(int)
    for call_row, inside in _tracings_held(ops, rows, counts).values():
        per_call[call_row] = inside
    return {call for call, inside in per_call.items() if counts[call] <= inside}


def compilations(trace: Trace) -> list[Compilation]:
    """Every outermost XLA compilation of the trace, in time order (module docstring)."""
    return kept(trace, "compilations", lambda: _compilations(trace))


def _compilations(trace: Trace) -> list[Compilation]:
    ops = trace.ops
    rows = outermost(ops, np.flatnonzero(rows_with(trace, "name", "compile")))
    if not len(rows):
        return []
    is_op = ops["category"] == Category.OP
    calls = tracing_counts(trace)
    firsts = first_call_rows(trace)
    compiled_before: set[str] = set()
    found = []
    for row in rows.tolist():
        holders = holders_of(ops, row)
        names = [trace.strings[int(ops["name"][h])] for h in holders.tolist()]
        # the function call that compiles and runs it (an op, or an annotation where the XSpace
        # reader credits its time to the XLA thunks inside), else the TF op around it
        owner = innermost(ops, [h for h, name in zip(holders.tolist(), names) if FUNCTION.match(name)])
        if owner is None:
            owner = row if is_op[row] else innermost(ops, holders[is_op[holders]])
        if owner is None:  # compiled by an asynchronous op (Keras fit's jit_compile): from its start
            owner = innermost(ops, holders)
        around = holders_of(ops, row, any_lane=True)
        named_by = owner if owner is not None and FUNCTION.match(trace.strings[int(ops["name"][owner])]) else \
            innermost(ops, [h for h in around.tolist() if FUNCTION.match(trace.strings[int(ops["name"][h])])])
        function = function_name(trace.strings[int(ops["name"][named_by if named_by is not None else row])])
        call = innermost(ops, [h for h in around.tolist() if h in calls])
        first = call in firsts if call is not None else function not in compiled_before
        compiled_before.add(function)
        start = int(ops["start_ns"][owner]) if owner is not None else int(ops["start_ns"][row])
        found.append(Compilation(row, start, int(ops["end_ns"][row]), function,
                                 trace.strings[int(ops["name"][row])], first))
    return found


def first_runs(trace: Trace) -> list[tuple[int, str, str]]:
    """Each concrete function's first run in the trace, in time order: its start, its
    function and its name (``__inference_<fn>_<n>``). TF 2.21 names the function run by an
    ``EagerLocalExecute: __inference_...`` event (host_tracer_level 2 and up), and by the
    ``eager_op`` stat of the ``EagerExecute`` event around it (level 1 too)."""
    ops = trace.ops
    runs = [(int(row), trace.strings[int(ops["name"][row])].removeprefix("EagerLocalExecute: "))
            for row in np.flatnonzero(rows_with(trace, "name", "function")).tolist()]
    rows, values = trace.event_stat("eager_op")
    runs += [(int(row), trace.strings[value]) for row, value in zip(rows.tolist(), values.tolist())
             if FUNCTION.match(trace.strings[value])]
    firsts, seen = [], set()
    for row, name in sorted(runs, key=lambda run: int(ops["start_ns"][run[0]])):
        if name not in seen:
            seen.add(name)
            firsts.append((int(ops["start_ns"][row]), FUNCTION.match(name).group("fn"), name))
    return firsts


def _new_versions(ops, rows: np.ndarray, firsts: list[tuple[int, str, str]]) -> dict[int, tuple[str, bool]]:
    """Per tracing, the first new concrete function (``firsts``) that runs after it ends (a
    function runs what was traced for it; others may run inside its tracing, a first call's
    ``initialize_variables``) and before the next tracing starts: its function, and whether
    that function ran another concrete function before."""
    starts = np.array([start for start, _, _ in firsts], dtype=np.int64)
    earlier, again = set(), []
    for _, fn, _ in firsts:
        again.append(fn in earlier)
        earlier.add(fn)
    found = {}
    bounds = ops["start_ns"][rows].tolist() + [np.iinfo(np.int64).max]
    for row, until in zip(rows.tolist(), bounds[1:]):
        first = int(np.searchsorted(starts, int(ops["end_ns"][row]), side="left"))
        if first < len(firsts) and firsts[first][0] < until:
            found[row] = (firsts[first][1], again[first])
    return found


def _tracings_held(ops, rows: np.ndarray, counts: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Per tracing (outermost ``rows``), the innermost call with a ``tracing_count`` that
    holds it, and how many of ``rows`` that call holds."""
    if not counts:
        return {}
    held = {}
    for row in rows.tolist():
        call = innermost(ops, [h for h in holders_of(ops, row).tolist() if h in counts])
        if call is not None:
            held[row] = call
    inside: dict[int, int] = defaultdict(int)
    for call in held.values():
        inside[call] += 1
    return {row: (call, inside[call]) for row, call in held.items()}


def tracing_counts(trace: Trace) -> dict[int, int]:
    """The rows of tf.function calls with TF's ``tracing_count`` stat: the tf.function
    object's tracings (concrete functions) so far, after this call."""
    rows, values = trace.event_stat("tracing_count")
    counts = {}
    for row, value in zip(rows.tolist(), values.tolist()):
        text = trace.strings[value]
        if text.isdigit():
            counts[int(row)] = int(text)
    return counts


def function_calls(trace: Trace) -> np.ndarray:
    """Rows that are ``tf.function`` calls: TF 2.21 records a call as a host event named
    after the Python function (``train_step``; Keras: ``multi_step_on_iterator``) around
    ``EagerLocalExecute: __inference_<function>_<n>`` on the same lane. Found by those
    names, not by the call's ``tf_function_call`` stat, so that a trace read back from
    Chrome JSON (which keeps no event stats) gives the same answer."""
    return kept(trace, "function_calls", lambda: _function_calls(trace))


def _function_calls(trace: Trace) -> np.ndarray:
    ops, strings = trace.ops, trace.strings
    calls = np.zeros(len(trace), dtype=bool)
    function_of = {i: FUNCTION.match(strings[i]).group("fn")
                   for i in np.flatnonzero(flags_of(trace)["function"]).tolist()}
    if not function_of:
        return calls
    called_names = set(function_of.values())
    called = sorted(called_names)
    caller_ids = [i for i, text in enumerate(strings) if text in called_names]
    runs = np.flatnonzero(rows_among(ops["name"], list(function_of)))
    callers = np.flatnonzero(rows_among(ops["name"], caller_ids) & (ops["category"] == Category.HOST))
    if not len(runs) or not len(callers):
        return calls
    # Each row's place, the function with the device and lane, as one number (a few
    # thousand calls: no Python loop over them): name ids of runs and callers alike map to
    # the function's index.
    named = np.array(sorted([*function_of, *caller_ids]), dtype=np.int64)
    function = np.array([called.index(function_of.get(i) or strings[i]) for i in named.tolist()], dtype=np.int64)
    devices, lanes = int(ops["device"].max()) + 1, int(ops["lane"].max()) + 1

    def places(rows: np.ndarray) -> np.ndarray:
        which = function[np.searchsorted(named, ops["name"][rows])]
        return (which * devices + ops["device"][rows]) * lanes + ops["lane"][rows]

    run_places, caller_places = places(runs), places(callers)
    start, end = ops["start_ns"], ops["end_ns"]
    for where in np.intersect1d(run_places, caller_places).tolist():
        inside = runs[run_places == where]
        inside = inside[np.argsort(start[inside], kind="stable")]
        rows = callers[caller_places == where]
        # Calls on a lane do not overlap: the first run that starts in a call is its own.
        first = np.searchsorted(start[inside], start[rows], side="left")
        found = first < len(inside)
        rows, first = rows[found], inside[first[found]]
        calls[rows[end[first] <= end[rows]]] = True
    return calls


def outermost(ops, rows: np.ndarray) -> np.ndarray:
    """``rows`` less those nested in another of them on the same lane, in time order."""
    rows = rows[np.lexsort((-ops["end_ns"][rows], ops["start_ns"][rows]))]
    reach: dict[tuple[int, int], int] = {}  # per lane: the end of the last outermost row
    kept = []
    for row in rows.tolist():
        lane = (int(ops["device"][row]), int(ops["lane"][row]))
        if int(ops["start_ns"][row]) < reach.get(lane, int(ops["start_ns"][row])):
            continue
        reach[lane] = int(ops["end_ns"][row])
        kept.append(row)
    return np.array(kept, dtype=np.int64)


def holders_of(ops, row: int, any_lane: bool = False) -> np.ndarray:
    """The other rows on ``row``'s lane (``any_lane``: on any lane) whose time holds it."""
    start, end = ops["start_ns"][row], ops["end_ns"][row]
    holding = (ops["start_ns"] <= start) & (ops["end_ns"] >= end)
    if not any_lane:
        holding &= (ops["lane"] == ops["lane"][row]) & (ops["device"] == ops["device"][row])
    holders = np.flatnonzero(holding)
    return holders[holders != row]


def innermost(ops, rows) -> int | None:
    """The one of ``rows`` that starts last: the innermost of nested rows."""
    rows = np.asarray(rows, dtype=np.int64)
    return int(rows[np.argmax(ops["start_ns"][rows])]) if len(rows) else None


__all__ = ["COMPILE_EVENTS", "Compilation", "FUNCTION", "GRAPH_BUILDING", "Tracing", "compilations",
           "first_call_rows", "first_runs", "function_calls", "function_name", "holders_of", "innermost",
           "named", "outermost", "tracing_counts", "tracings"]
