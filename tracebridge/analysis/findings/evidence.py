"""What findings are made of: a :class:`Finding` (a kind, the share of the step time it
explains, its evidence, advice) and the :class:`Evidence` each kind rests on, a dataclass
per kind, so that no module reads another's measures by a key it could misspell. Dicts
appear only in ``to_dict``, for JSON: the fields below, in their order, are the
``evidence`` of ``--json``. :mod:`.run_measures` and :mod:`.pair_measures` measure them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import numpy as np

from ..common.tables import csv_text, ms
from ..run.memory import MemoryUse

GUIDE = "migration_guide/README.md"
Sections = list[tuple[int, int]]   # intervals of a step, [start_ns, end_ns)


def internal(**options):
    """A field the detectors use but the JSON report leaves out (a measure's share, raw
    intervals)."""
    return field(metadata={"internal": True}, **options)


@dataclass(frozen=True)
class Evidence:
    """Base of every kind's evidence. ``to_dict`` is its JSON: every field but the
    internal ones, and optional ones only where they were measured (not None)."""

    def to_dict(self) -> dict:
        return {f.name: json_ready(getattr(self, f.name)) for f in fields(self)
                if not f.metadata.get("internal") and getattr(self, f.name) is not None}


def json_ready(value):
    """``value`` for ``json.dumps``: numpy numbers as Python ones, tuples as lists,
    dataclasses (memory use) as dicts."""
    if isinstance(value, Evidence):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return json_ready({f.name: getattr(value, f.name) for f in fields(value)})
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# --- each kind's evidence: ``share`` and ``sections`` (raw intervals) stay out of the JSON ---
@dataclass(frozen=True)
class ShareEvidence(Evidence):
    share: float = internal(default=0.0)  # of the steps' time
    # each step's duration, where a share per step is judged (keyword-only: after each kind's own fields)
    step_ns: list[int] = internal(default_factory=list, kw_only=True)
    # of a pair, the test run's evidence: what its part added to the median step (the headline's
    # part, test - control) as a share of the test's median step; None: not a part's kind, or one run
    pair_share: float | None = internal(default=None, kw_only=True)


@dataclass(frozen=True)
class EagerOpsEvidence(ShareEvidence):
    ops_per_step: list[int] = field(default_factory=list)
    op_types: dict[str, int] = field(default_factory=dict)
    ops: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    sections: Sections = internal(default_factory=list)
    parts: dict[str, int] = internal(default_factory=dict)  # the steps' parts inside the sections (ns)


@dataclass(frozen=True)
class RetracingEvidence(ShareEvidence):
    """Tracings of tf.functions in the steps. A function's first tracing is no mistake: the
    finding counts ``retracings_per_step``, the tracings beyond a function's first (by the
    call's ``tracing_count`` where the trace keeps it, else by a further concrete function,
    ``__inference_<fn>_<n>``, of a function that had run one before: run_measures.retracing),
    and ``functions`` names those functions with every concrete function of each the trace
    shows. ``graph_buildings_per_step``: every tracing event (``tf.function-graph_building``)
    in each step, first tracings and tracings nested in another included."""

    retracings_per_step: list[int] = field(default_factory=list)
    functions: dict[str, list[str]] = field(default_factory=dict)   # only the retraced ones
    graph_buildings_per_step: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    sections: Sections = internal(default_factory=list)
    python_in_tracing_ns: dict[str, int] | None = None  # python_tracer_level=1 only


@dataclass(frozen=True)
class XlaCompileEvidence(ShareEvidence):
    """XLA compilations inside the steps, in time order: per compilation, its step, the
    function compiled, the time and the input shapes of its step's call (where the capture
    recorded them: ``trace(fn)``; TF's profile does not say)."""

    compilations_per_step: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    compile_ns: list[int] = field(default_factory=list)
    input_shapes: list[str | None] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    sections: Sections = internal(default_factory=list)
    # per compilation: a function's first call's (a one-time cost, not counted), else a recompilation
    first_call: list[bool] = field(default_factory=list)


@dataclass(frozen=True)
class InputWaitEvidence(ShareEvidence):
    wait_ns_per_step: list[int] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)
    sections: Sections = internal(default_factory=list)
    control_share: float | None = None          # against a control run only
    control_events: dict[str, int] | None = None


@dataclass(frozen=True)
class HostGapsEvidence(ShareEvidence):
    gap_ns_per_step: list[int] = field(default_factory=list)
    longest_gap_ns_per_step: list[int] = field(default_factory=list)
    call_overhead_ns_per_step: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    python_in_gaps_ns: dict[str, int] | None = None  # python_tracer_level=1 only
    control_share: float | None = None                # against a control run only


@dataclass(frozen=True)
class FrameworkEvidence(ShareEvidence):
    """The framework's time between ops per step (the step's ``framework`` part), the ops'
    time per step beside it, ``tf.function`` calls per step, and the API that ran the steps
    (analysis/run/breakdown.py, ``api_of``: ``keras_fit``, ``tf_function``, ``session``...)."""

    framework_ns_per_step: list[int] = field(default_factory=list)
    ops_ns_per_step: list[int] = field(default_factory=list)
    calls_per_step: list[int] = field(default_factory=list)
    api: str = "unknown"
    steps: list[int] = field(default_factory=list)
    control_share: float | None = None                # against a control run only


@dataclass(frozen=True)
class DeviceIdleEvidence(ShareEvidence):     # share: of the time the busiest device waits on the host
    device: str = ""
    idle_share: float = 0.0
    waiting_on_host_share_by_device: dict[str, float] = field(default_factory=dict)
    windows: int = 0
    steps: list[int] = field(default_factory=list)
    waiting_share_per_window: list[float] = field(default_factory=list)  # the busiest device's, each window
    control_share: float | None = None                # against a control run only


@dataclass(frozen=True)
class LeftBehindEvidence(Evidence):
    """Bytes in use at each step's end, rising from step to step."""

    in_use_at_step_end: list[int]
    steps: list[int]
    peaks: dict[str, int]


# --- a pair's kinds ---------------------------------------------------------------------
@dataclass(frozen=True)
class FusionEvidence(Evidence):
    """Fusion rows one way: a fused kernel on one side, its parts on the other."""

    share: float = internal()           # of the test step: time lost (or saved, for gains)
    delta_total_ns: float = internal()  # the rows' change per step, all together
    ops: list[str] = field(default_factory=list)
    delta_ns: list[float] = field(default_factory=list)
    control_ops: list[list[str]] = field(default_factory=list)
    test_ops: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class XlaFusionEvidence(Evidence):
    """What XLA computed in fused kernels that the other run ran as separate ops: per row
    of the comparison's ``xla`` rule, the XLA run's instructions (its thunks or kernels),
    the TF ops they compute, their time, and the other run's separate ops and their times
    (medians per step)."""

    share: float = internal()           # of the test step: the time the fusions save (or cost)
    saved_ns: float = internal()        # per step: the other run's ops less the fusions
    xla_run: str = "test"               # the run that ran XLA
    ops: list[str] = field(default_factory=list)            # the rows' keys
    instructions: list[list[str]] = field(default_factory=list)
    tf_ops: list[list[str]] = field(default_factory=list)
    xla_ns: list[float] = field(default_factory=list)
    separate_ops: list[list[str]] = field(default_factory=list)
    separate_ns: list[list[float]] = field(default_factory=list)


@dataclass(frozen=True)
class RegressionEvidence(Evidence):
    """Aligned ops of one op type, slower beyond noise."""

    op_type: str
    scope: str                          # the top-level scopes of its ops, ", " between
    ops: list[str]
    control_median_ns: float
    test_median_ns: float
    shared_delta_ns: float              # the change in shared time (:func:`shared_times`)
    cause: str | None = None            # what the trace shows of why, where it shows it
    shift: Any = internal(default=None)  # the group's per-step shift (shift.Shift): the finding's interval


@dataclass(frozen=True)
class WorkingSetEvidence(Evidence):
    """The smallest test step's working set against the control's median step."""

    control: MemoryUse
    test: MemoryUse
    control_working_set: float
    test_least_working_set: int
    steps: list[int]


@dataclass
class Finding:
    kind: str
    share: float            # of the test run's (or the run's) step time
    summary: str            # what was measured, one line
    evidence: Evidence
    advice: str = ""
    link: str = ""
    of: str = "the step time"           # what the share is a share of
    # the most fixing it could save per step: its share of a step, and of a comparison no
    # more than the test run's step is slower than the control's (None: not measured)
    saves_at_most_ns: float | None = None
    # what a timing finding was decided on: the bounds over steps (analysis/common/shift.py), what
    # they are bounds of, their confidence and the steps behind them
    interval: dict | None = None
    # the parts of the step it explains (analysis/run/breakdown.py), each as a share of the same
    # step as ``share``: a comparison's headline counts each part once, however many findings claim it
    parts: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        evidence = self.evidence.to_dict()
        if self.interval is not None:
            evidence["interval"] = json_ready(self.interval)
        return {"kind": self.kind, "share": self.share, "summary": self.summary,
                "evidence": evidence, "advice": self.advice, "link": self.link,
                "of": self.of, "saves_at_most_ns": self.saves_at_most_ns, "parts": dict(self.parts),
                "guide": guide_command(self.kind)}

    def to_text(self) -> str:
        saves = "" if self.saves_at_most_ns is None else \
            f"; fixing it saves at most {self.saves_at_most_ns / 1e6:.3f} ms a step"
        return (f"{self.share:6.1%}  {self.kind:14} {self.summary}\n"
                f"        {self.share:.1%} of {self.of}{saves}{interval_text(self.interval)}\n"
                f"        fix: {self.advice} ({self.link}; `{guide_command(self.kind)}` prints it)")


def interval_text(interval: dict | None) -> str:
    """What a timing finding was decided on, in a few words: its bounds and the steps."""
    if not interval:
        return ""
    if "control_steps" in interval:
        steps = f"{interval['control_steps']}/{interval['test_steps']} steps"
        low, high = interval.get("low_ns", interval.get("low")), interval.get("high_ns", interval.get("high"))
    else:
        steps, low, high = f"{interval['steps']} steps", interval["low"], interval["high"]
    if "low_ns" in interval:
        bounds = f"{ms(low, signed=True, unit='', missing='?')} to {ms(high, signed=True, unit='', missing='?')} ms"
    else:
        bounds = f"{_pct(low)} to {_pct(high)}"
    return f"; {100 * interval['confidence']:.4g}% bounds {bounds} over {steps}"


def _pct(share: float | None) -> str:
    return "?" if share is None or not np.isfinite(share) else f"{share:.0%}"


def guide_command(kind: str) -> str:
    """The command that prints a finding's section of the migration guide, which ships
    inside the package (tracebridge/guide/)."""
    return f"tracebridge guide {kind}"


class Findings(list):
    """Findings ranked by share, with text and JSON forms; ``notes``: what was not judged
    and why (too few steps for timing findings); ``thresholds``: the settings used."""

    def __init__(self, found=(), notes: list[str] | None = None, thresholds=None):
        super().__init__(found)
        self.notes = list(notes or [])
        self.thresholds = thresholds

    def to_text(self) -> str:
        notes = [f"note: {note}" for note in self.notes]
        if not self:
            return "\n".join(notes + ["findings: none"])
        return "\n".join(notes + ["findings (what share of a step each one takes, and the most fixing it could save):"]
                         + [f.to_text() for f in self])

    def to_dict(self) -> dict:
        """``advise --json``: the findings, the notes and the thresholds they were judged by."""
        return {"findings": [f.to_dict() for f in self], "notes": self.notes,
                "thresholds": self.thresholds.to_dict() if self.thresholds is not None else None}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        return csv_text(FINDING_COLUMNS, (finding_row(f.to_dict()) for f in self))

    __str__ = to_text


# A finding's CSV row: what its text says (the evidence is JSON's alone).
FINDING_COLUMNS = ("kind", "share", "of", "saves_at_most_ns", "summary", "advice", "link", "guide")


def finding_row(finding: dict) -> list:
    """A finding (as ``Finding.to_dict``) as a row of :data:`FINDING_COLUMNS`; what it saves
    in whole nanoseconds, as every other ``_ns`` column."""
    saves = finding["saves_at_most_ns"]
    return [round(saves) if column == "saves_at_most_ns" and saves is not None else finding[column]
            for column in FINDING_COLUMNS]


__all__ = ["FINDING_COLUMNS", "GUIDE", "DeviceIdleEvidence", "EagerOpsEvidence", "Evidence", "Finding", "Findings",
           "FrameworkEvidence",
           "FusionEvidence", "HostGapsEvidence", "InputWaitEvidence", "LeftBehindEvidence",
           "RegressionEvidence", "RetracingEvidence", "ShareEvidence", "WorkingSetEvidence", "XlaCompileEvidence",
           "XlaFusionEvidence", "finding_row", "guide_command", "internal", "json_ready"]
