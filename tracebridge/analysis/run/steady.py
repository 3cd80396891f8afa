"""Which steps are the run's steady state: the steps medians and findings are taken over.

A step that holds work a run does once is no sample of how fast the run goes: a
``tf.function``'s first call (its tracing, and the instantiation of what it traced),
an XLA compilation for that first call, variables being initialized, a ``tf.data``
iterator starting up. Left in, the first step of a Keras ``fit`` traced from its start
(seconds of tracing) decides a run's mean input wait or retracing share. By default
(``warmup=None``) such steps are found from the trace (:func:`select_steps`) and left
out, and a note names them, what they hold and how to keep them; ``warmup=N`` leaves out
the first N steps instead, and nothing else (``warmup=0`` keeps every step).

The causes, and what in the trace shows each:

- ``tracing``: a tracing (``tf.function-graph_building``) that is a first call's, not a
  retracing (:mod:`.calls`);
- ``compile``: an XLA compilation of a first call (:mod:`.calls`);
- ``variables``: variables created or initialized (``VarHandleOp`` or
  ``VarIsInitializedOp`` run eagerly, a run of ``__inference_initialize_variables``; TF1:
  the ``init`` op or a variable's ``Initializer/`` ops);
- ``input``: a ``tf.data`` iterator made (``MakeIterator::...`` events, the iterator ops);
- ``first_run``: a TF1 session's first step took ``first_step_ratio`` times the median of
  the others or more: its first ``run`` sets up kernels and memory (30-60 times a later
  run, measured) and a session's step stats show no event of it. A TF2 run's first step is
  left out only for what its events show.

Where every step holds one of them, all are kept (there is no steady state to choose).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model.schema import Category
from ...model.trace import Trace
from .breakdown import is_session_record
from .calls import compilations, tracings
from .intervals import distinct
from .vocabulary import rows_with

FIRST_STEP_RATIO = 3.0  # a first step this many times the others' median, with no other cause: a first run

CAUSE_WORDS = {"tracing": "first-call tracing", "compile": "XLA compilation", "variables": "variable initialization",
               "input": "tf.data start-up", "first_run": "a slow first run"}


@dataclass(frozen=True)
class OneTimeStep:
    """A step left out as one-time work: its position in ``trace.steps``, number, duration,
    and each cause (:data:`CAUSE_WORDS`) with what it names (functions) and its time where
    the trace times it (tracing, compilation)."""

    position: int
    number: int
    duration_ns: int
    causes: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        causes = "; ".join(f"{CAUSE_WORDS[cause]}{f' {what}' if what else ''}" for cause, what in self.causes.items())
        return f"step {self.number} ({self.duration_ns / 1e6:.1f} ms: {causes})"

    def to_dict(self) -> dict:
        return {"number": self.number, "duration_ns": self.duration_ns, "causes": dict(self.causes)}


@dataclass(frozen=True)
class StepSelection:
    """The steps a run's medians and findings are taken over: ``positions`` (indices into
    ``trace.steps``, in order); ``one_time``: the steps left out as one-time work (found
    from the trace, ``warmup`` None); ``warmup``: the first steps left out as asked (None:
    the steady state was found); ``all_one_time``: every step held one-time work, and all
    were kept."""

    positions: tuple[int, ...]
    one_time: tuple[OneTimeStep, ...] = ()
    warmup: int | None = None
    all_one_time: tuple[OneTimeStep, ...] = ()
    total: int = 0  # the run's steps

    @property
    def left_out(self) -> int:
        return self.total - len(self.positions)

    def note(self) -> str | None:
        """What was left out and why, and how to keep it (None where nothing was)."""
        if self.all_one_time:
            return (f"every step holds one-time work ({'; '.join(s.text() for s in self.all_one_time[:3])}"
                    f"{' ...' if len(self.all_one_time) > 3 else ''}): all {self.total} kept; trace more steps")
        if not self.one_time:
            return None
        shown = ", ".join(s.text() for s in self.one_time[:4]) + (" ..." if len(self.one_time) > 4 else "")
        return (f"steady state: {len(self.one_time)} of {self.total} step{'s' * (self.total != 1)} left out of the "
                f"medians and findings as one-time costs: {shown}; --warmup 0 (warmup=0) keeps every step")

    def to_dict(self) -> dict:
        return {"warmup": self.warmup, "steps": len(self.positions),
                "one_time": [s.to_dict() for s in self.one_time]}


def select_steps(trace: Trace, warmup: int | None = None, first_step_ratio: float = FIRST_STEP_RATIO) -> StepSelection:
    """The steady-state steps of ``trace`` (module docstring); ``warmup``: leave out that
    many first steps instead (all are kept where the run has no more)."""
    count = len(trace.steps)
    if warmup is not None:
        skip = warmup if count > warmup else 0
        return StepSelection(tuple(range(skip, count)), warmup=warmup, total=count)
    found = one_time_steps(trace, first_step_ratio)
    if found and len(found) == count:
        return StepSelection(tuple(range(count)), all_one_time=tuple(found), total=count)
    left = {step.position for step in found}
    return StepSelection(tuple(p for p in range(count) if p not in left), tuple(found), total=count)


def one_time_steps(trace: Trace, first_step_ratio: float = FIRST_STEP_RATIO) -> list[OneTimeStep]:
    """Every step of ``trace`` that holds one-time work, with its causes."""
    steps = trace.steps
    if not steps:
        return []
    starts = np.array([s.start_ns for s in steps], dtype=np.int64)
    causes: dict[int, dict[str, list]] = {}

    def add(position: int | None, cause: str, what=None) -> None:
        if position is not None:
            causes.setdefault(position, {}).setdefault(cause, []).append(what)

    def step_at(time_ns: int) -> int | None:
        k = int(np.searchsorted(starts, time_ns, side="right")) - 1
        return k if k >= 0 and time_ns < steps[k].end_ns else None

    for tracing in tracings(trace):
        if not tracing.retracing:
            add(step_at(tracing.start_ns), "tracing", (tracing.function, tracing.end_ns - tracing.start_ns))
    for compilation in compilations(trace):
        if compilation.first_call:
            add(step_at(trace.ops["start_ns"][compilation.row]), "compile",
                (compilation.function, compilation.end_ns - compilation.start_ns))
    ops = trace.ops
    for cause, rows in (("variables", rows_with(trace, "name", "variables")),
                        ("input", rows_with(trace, "name", "iterator_event")
                         | (rows_with(trace, "op_type", "iterator_op") & (ops["category"] == Category.OP)))):
        for start in distinct(ops["start_ns"][rows]).tolist():
            add(step_at(start), cause)
    if 0 not in causes and len(steps) >= 3 and is_session_record(trace):
        rest = float(np.median([s.duration_ns for s in steps[1:]]))
        if rest > 0 and steps[0].duration_ns >= first_step_ratio * rest:
            add(0, "first_run", f"{steps[0].duration_ns / rest:.0f}x the median step: the session's first run")
    return [OneTimeStep(p, steps[p].number, steps[p].duration_ns, {c: _what(c, items) for c, items in found.items()})
            for p, found in sorted(causes.items())]


def _what(cause: str, items: list) -> str:
    """What a cause names: the functions traced or compiled and their time, or the ratio."""
    if cause in ("tracing", "compile"):
        functions = ", ".join(dict.fromkeys(fn for fn, _ in items if fn)) or "a function"
        return f"of {functions} ({sum(ns for _, ns in items) / 1e6:.1f} ms)"
    if cause == "first_run":
        return f"({items[0]})"
    return ""


__all__ = ["CAUSE_WORDS", "FIRST_STEP_RATIO", "OneTimeStep", "StepSelection", "one_time_steps", "select_steps"]
