"""The result of comparing two runs: aligned rows and what they add up to, as text, JSON
or CSV (:func:`tracebridge.analysis.compare.compare` builds it)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ...model.trace import Trace
from ..common.types import Groups, PerSide, StepStats, TimeBasis
from ..run.memory import MemoryUse
from ..common.shift import Shift
from ..common.thresholds import DEFAULT, Thresholds
from ..common.tables import csv_text, ms, plural
from .layers import LayerMap, LayerRow
from ..run.breakdown import PARTS, Breakdown, step_breakdown
from ..run.steady import StepSelection


# The Row fields that hold one value per run (flattened, control first, as ``control_<name>``
# and ``test_<name>`` in its JSON and CSV).
PAIRED = ("names", "count", "total_ns", "self_ns", "median_ns", "p90_ns", "min_ns", "device_ns", "host_ns")


@dataclass
class Row:
    """One aligned op (or group of ops) of both runs; times in nanoseconds."""

    key: str
    rule: str
    op_type: str
    names: PerSide[tuple[str, ...]]
    count: PerSide[int] = PerSide(0, 0)
    total_ns: PerSide[int] = PerSide(0, 0)
    self_ns: PerSide[int] = PerSide(0, 0)
    median_ns: PerSide[float] = PerSide(0.0, 0.0)
    p90_ns: PerSide[float] = PerSide(0.0, 0.0)
    min_ns: PerSide[float] = PerSide(0.0, 0.0)
    delta_ns: float = 0.0
    ratio: float | None = None
    # ``+``/``-`` when the interval of the per-step shift (test - control, Hodges-Lehmann
    # bounds, analysis/common/shift.py) clears the thresholds' margin; ``=`` otherwise
    change: str = "="
    delta_low_ns: float | None = None
    delta_high_ns: float | None = None
    # Both kinds of time of the row's ops (totals), whichever the comparison aligned on.
    device_ns: PerSide[int] = PerSide(0, 0)
    host_ns: PerSide[int] = PerSide(0, 0)
    confidence: float = 0.0  # how sure the pairing is, 0..1 (0 for unmatched rows): the rule's confidence

    @property
    def matched(self) -> bool:
        """The row has ops in both runs."""
        return bool(self.names.control and self.names.test)

    def to_dict(self) -> dict:
        """The row flat, as its JSON and CSV have it: each per-run field as ``control_<name>``
        then ``test_<name>``, in the fields' order."""
        out: dict = {}
        for name in Row.__dataclass_fields__:
            value = getattr(self, name)
            if name in PAIRED:
                out[f"control_{name}"], out[f"test_{name}"] = value.control, value.test
            else:
                out[name] = value
        return out


# compare --csv: a column per flat Row field (Row.to_dict's keys)
ROW_COLUMNS = tuple(column for name in Row.__dataclass_fields__
                    for column in ((f"control_{name}", f"test_{name}") if name in PAIRED else (name,)))


def row_cells(row: dict) -> list:
    """A row (as ``Row.to_dict()``, or its JSON) as CSV cells: each list of names one cell, ';' between."""
    return [";".join(row[column]) if column in ("control_names", "test_names") else row[column]
            for column in ROW_COLUMNS]


class Finder(Protocol):
    """How a comparison's findings are found, handed to :func:`~tracebridge.analysis.compare.compare`
    by its caller (``tracebridge.analysis.findings.comparison_findings``): the findings read
    comparisons, so the comparison cannot import them and is told them instead."""

    def __call__(self, comparison: Comparison) -> Any:
        """The comparison's findings (a ``Findings``)."""

    def withheld(self, steps: PerSide[int], limits: Thresholds) -> str | None:
        """The note that timing findings were withheld for want of steps (each run's
        count), or None."""


@dataclass
class Comparison:
    """``control`` against ``test``: aligned rows and, per run, coverage, step statistics,
    memory and kernels; groupings of the rows; the options it was made with."""

    control: Trace
    test: Trace
    rows: list[Row]
    coverage: PerSide[float]                # the share of each run's compared time matched
    step_pairs: list[tuple[int, int]]
    steps: PerSide[StepStats]
    groups: Groups
    memory: PerSide[MemoryUse]
    kernels: PerSide[str]                   # "oneDNN", "plain" or "unknown"
    time: TimeBasis                         # DEVICE (kernels per TF op) or HOST (TF ops)
    rule_shares: dict[str, PerSide[float]]  # per rule, the share of each run's time its rows matched
    warmup: PerSide[int]                    # steps left out of each run: one-time work, or the warm-up asked for
    thresholds: Thresholds = DEFAULT        # every threshold and noise setting the rows and findings used
    # the step durations' shift (test - control) and its interval
    step_shift: Shift | None = None
    # each row's per-step totals on each side (by the row's key), as the findings test them
    row_steps: dict[str, PerSide[Any]] = field(default_factory=dict, repr=False, compare=False)
    notes: list[str] = field(default_factory=list)
    # time per layer and phase (compare.layers), where both runs recorded their graphs
    layers: list[LayerRow] = field(default_factory=list)
    layer_map: LayerMap | None = field(default=None, repr=False, compare=False)
    # How the findings are measured (compare()'s caller hands in findings.comparison_findings):
    # the comparison sits below the findings, which read comparisons, so it does not import them.
    find: Finder | Callable[["Comparison"], Any] | None = field(default=None, repr=False, compare=False)
    # --- where the step time goes (issue 33): the steps each run's statistics are over (its
    # steady state, or after the warm-up asked for: analysis/run/steady.py)
    steady: PerSide[StepSelection] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def breakdown(self) -> PerSide[Breakdown]:
        """Each run's steps split into parts (analysis/run/breakdown.py), its median step's
        parts over the steps the statistics are over."""
        def kept(side: str):
            return getattr(self.steady, side).positions if self.steady is not None else None
        return PerSide.of(lambda side: step_breakdown(getattr(self, side), kept(side)))

    def part_delta(self, part: str) -> float:
        """What ``part`` added to the median step: the test's part less the control's (the
        parts of the difference add up to it)."""
        return self.breakdown.test.parts[part] - self.breakdown.control.parts[part]

    def explained_ns(self) -> float:
        """How much of the median step's difference the findings explain: per part, what they
        claim of it (each finding's ``parts``), at most what the part added, so that no two
        findings count the same time."""
        test_ns = self.steps.test.median_ns
        claimed: dict[str, float] = {}
        for finding in self.findings:
            for part, share in (getattr(finding, "parts", None) or {}).items():
                claimed[part] = claimed.get(part, 0.0) + share * test_ns
        return sum(min(max(self.part_delta(part), 0.0), ns) for part, ns in claimed.items() if part in PARTS)

    @property
    def threshold(self) -> float:
        """The share a row or step must move by to change (``thresholds.change``)."""
        return self.thresholds.change

    @property
    def noise_ns(self) -> int:
        """A change this small is noise, whatever its share (``thresholds.noise_ns``)."""
        return self.thresholds.noise_ns

    @property
    def timing_judged(self) -> bool:
        """Both runs have the steps (``thresholds.min_steps``) that timing findings need."""
        return min(self.steps.control.count, self.steps.test.count) >= self.thresholds.min_steps

    @property
    def unmatched(self) -> PerSide[list[Row]]:
        """Each run's rows that found no counterpart in the other run."""
        return PerSide([r for r in self.rows if not r.names.test], [r for r in self.rows if not r.names.control])

    @functools.cached_property
    def findings(self):
        """Why the test run is slower: what ``find`` finds, the comparison's caller's
        :func:`tracebridge.analysis.findings.comparison_findings` (measured once, when first
        asked)."""
        if self.find is None:
            raise ValueError("this comparison was made without a way to find findings: pass "
                             "find=tracebridge.analysis.findings.comparison_findings to compare(), "
                             "as tracebridge.compare does")
        return self.find(self)

    def _steps_dict(self) -> dict:
        """Each run's step statistics and its median step's parts (``steps.<side>.parts``)."""
        out = self.steps.to_dict(StepStats.to_dict)
        for side, breakdown in self.breakdown.items():
            selection = getattr(self.steady, side) if self.steady is not None else None
            out[side].update({"parts": dict(breakdown.parts), "api": breakdown.api, "device": breakdown.device,
                              "one_time": [s.to_dict() for s in selection.one_time] if selection else [],
                              "breakdown_notes": list(breakdown.notes)})
        return out

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings],
                "coverage": self.coverage.to_dict(), "steps": self._steps_dict(),
                "step_shift": self.step_shift.to_dict() if self.step_shift else None,
                "step_pairs": self.step_pairs, "threshold": self.threshold,
                "thresholds": self.thresholds.to_dict(), "rows": [r.to_dict() for r in self.rows],
                "unmatched": self.unmatched.to_dict(lambda rows: [r.key for r in rows]),
                "groups": self.groups.to_dict(), "memory": self.memory.to_dict(lambda m: m.peaks),
                "kernels": self.kernels.to_dict(), "time": self.time.value,
                "rule_shares": {rule: share.to_dict() for rule, share in self.rule_shares.items()},
                "notes": self.notes, "headline": self.headline().to_dict(),
                "layers": [layer.to_dict() for layer in self.layers],
                "variables": self.layer_map.variables() if self.layer_map is not None else []}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self, sort: str | None = None) -> str:
        """Every row (no ``top``: a file is for all of them), in alignment order, or ranked
        as the text table ranks them by ``sort``."""
        rows = self.ranked(sort) if sort else self.rows
        return csv_text(ROW_COLUMNS, (row_cells(row.to_dict()) for row in rows))

    def headline(self) -> Headline:
        """The step time of each run, the difference and how much of it the findings explain."""
        c, t = self.steps
        delta = t.median_ns - c.median_ns
        # Each finding claims parts of the step; a part counts at most what it added, so that
        # together they explain at most the whole difference (of a slower test run).
        explained = min(self.explained_ns(), delta) / delta if delta > 0 else None
        parts = self.breakdown
        return Headline(control_ns=c.median_ns, test_ns=t.median_ns, delta_ns=delta,
                        findings=len(self.findings), explained=explained, timing_judged=self.timing_judged,
                        parts={part: self.part_delta(part) for part in PARTS},
                        control_parts=dict(parts.control.parts), test_parts=dict(parts.test.parts))

    def ranked(self, sort: str = "change") -> list[Row]:
        """The rows as the text table lists them: matched rows by ``sort`` (one of
        :data:`SORTS`), then the rows of one run only, longest first."""
        return sorted(self.rows, key=SORTS[sort])

    def to_text(self, top: int = 25, sort: str = "change") -> str:
        c, t = self.steps
        lines = [
            self.headline().to_text(),
            f"control: {self.control.source_format}, {plural(c.count, 'step')}, median step {ms(c.median_ns, unit='ms')}",
            f"test:    {self.test.source_format}, {plural(t.count, 'step')}, median step {ms(t.median_ns, unit='ms')}",
            *self._step_shift_lines(),
            f"coverage: control {self.coverage.control:.1%}, test {self.coverage.test:.1%} "
            f"of {'device' if self.time is TimeBasis.DEVICE else 'op'} time matched",
        ]
        kernels = self.kernels
        if kernels.control != kernels.test and "unknown" not in kernels:
            lines.append(f"kernels: control {kernels.control}, test {kernels.test}: "
                         "kernels are compared by their plain names (_MklMatMul as MatMul)")
        if self.rule_shares:
            shares = ", ".join(f"{rule} {share.control:.1%}/{share.test:.1%}"
                               for rule, share in self.rule_shares.items())
            lines.append(f"matched by rule (control/test op time): {shares}")
        lines += [f"note: {note}" for note in self.notes]
        lines += [f"note: {side}: {note}" for side, breakdown in self.breakdown.items() for note in breakdown.notes]
        lines += [f"note: {side}: device busy {ms(b.device['busy_ns'], unit='ms')}, idle "
                  f"{ms(b.device['idle_ns'], unit='ms')} of the median step: {b.device['bound']}-bound"
                  for side, b in self.breakdown.items() if b.device]
        lines += ["", self.findings.to_text()]
        if self.layers:
            lines += ["", *self._layer_lines()]
        lines += [
            "",
            f"{'':2}{'control':>11}{'test':>11}{'delta':>11}{'ratio':>8}{'conf':>6}  {'rule':13} op",
        ]
        ranked = self.ranked(sort)
        for row in ranked[:top]:
            ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
            lines.append(f"{row.change:2}{ms(row.median_ns.control, unit='ms'):>11}{ms(row.median_ns.test, unit='ms'):>11}"
                         f"{ms(row.delta_ns, signed=True, unit='ms'):>11}{ratio:>8}{row.confidence:>6.2f}  "
                         f"{row.rule:13} {row.key}")
        if len(ranked) > top:
            left = ranked[top:]
            alone = sum(1 for r in left if not (r.names.control and r.names.test))
            lines.append(f"  ... {len(left)} more rows ({alone} in one run only; --top N shows more)")
        for side, rows in self.unmatched.items():
            if rows:
                shown = ", ".join(f"{r.key} ({ms(getattr(r.total_ns, side), unit='ms')})" for r in rows[:10])
                lines.append(f"unmatched in {side}: {shown}{' ...' if len(rows) > 10 else ''}")
        return "\n".join(lines)

    def _layer_lines(self, rows_per_layer: int = 3) -> list[str]:
        """The layer table: time per step in each layer and phase, the model's order; under
        each, the op rows that moved most of its difference (``rows_per_layer`` at most, each
        of a tenth of it or more; the op table below has them all)."""
        lines = ["by layer (time per step; under each layer, the op rows that moved it most):",
                 f"{'control':>11}{'test':>11}{'delta':>11}  layer and phase"]
        by_key = {row.key: row for row in self.rows}
        for layer in self.layers:
            lines.append(f"{ms(layer.control_total_ns, unit='ms'):>11}{ms(layer.test_total_ns, unit='ms'):>11}"
                         f"{ms(layer.delta_ns, signed=True, unit='ms'):>11}  {layer.label}")
            moved = sorted((by_key[key] for key in layer.rows if key in by_key), key=lambda r: -abs(r.delta_ns))
            for row in moved[:rows_per_layer]:
                if abs(row.delta_ns) >= max(0.1 * abs(layer.delta_ns), self.noise_ns):
                    lines.append(f"{'':33}    {ms(row.delta_ns, signed=True, unit='ms')} {row.change} {row.key}")
        return lines

    def _step_shift_lines(self) -> list[str]:
        """The step durations' shift and its bounds, where both runs have the steps for them."""
        moved = self.step_shift
        if moved is None or not self.timing_judged:
            return []
        return [f"step shift: {ms(moved.estimate_ns, signed=True, unit='ms')} ({100 * moved.level:.4g}% bounds "
                f"{ms(moved.low_ns, signed=True, unit='ms')} to {ms(moved.high_ns, signed=True, unit='ms')} over "
                f"{moved.control_steps}/{moved.test_steps} steps)"]

    __str__ = to_text


@dataclass(frozen=True)
class Headline:
    """Step time per run (medians after the warm-up), the difference, and the share of it
    the findings explain (None where the test run is not slower)."""

    control_ns: float
    test_ns: float
    delta_ns: float
    findings: int
    explained: float | None
    timing_judged: bool = True  # False: too few steps, timing findings were withheld (a note says so)
    # the difference split into the steps' parts (add up to delta_ns), and each run's median step's parts
    parts: dict[str, float] | None = None
    control_parts: dict[str, float] | None = None
    test_parts: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def parts_lines(self) -> list[str]:
        """The two lines under the headline: each run's median step by part, and the
        difference by part (they add up to it)."""
        if not self.parts or self.control_parts is None or self.test_parts is None:
            return []
        each = ", ".join(f"{part} {self.control_parts[part] / 1e6:.3f} -> {self.test_parts[part] / 1e6:.3f}"
                         for part in PARTS)
        ranked = sorted(PARTS, key=lambda part: -abs(self.parts[part]))
        moved = ", ".join(f"{part} {self.parts[part] / 1e6:+.3f}" for part in ranked)
        return [f"  parts (ms, control -> test): {each}",
                f"  difference by part (ms): {moved} = {sum(self.parts.values()) / 1e6:+.3f}"]

    def to_text(self) -> str:
        change = f" ({self.delta_ns / self.control_ns:+.1%})" if self.control_ns > 0 else ""
        line = (f"step time: control {ms(self.control_ns, unit='ms')} -> test {ms(self.test_ns, unit='ms')}: "
                f"{ms(self.delta_ns, signed=True, unit='ms')}{change}")
        if self.explained is not None:
            found = (f"{self.findings} finding(s) explain up to {self.explained:.0%} of the difference"
                     if self.findings else "no finding explains the difference")
            if not self.timing_judged:
                found += " (timing findings withheld: too few steps, see the note)"
        else:
            found = f"the test run is not slower; {self.findings} finding(s)"
        return "\n".join([line, found, *self.parts_lines()])


def _matched(row: Row) -> bool:
    return bool(row.names.control and row.names.test)


def _longest(row: Row) -> float:
    return max(row.median_ns.control, row.median_ns.test)


# How the text table ranks rows (compare --sort): matched rows by the measure, then the rows
# of one run only, by time (a 2 us Const that exists on one side is no change to look at first).
SORTS: dict[str, Callable[[Row], tuple]] = {
    "change": lambda r: (not _matched(r), -abs(r.delta_ns) if _matched(r) else -_longest(r), r.key),
    "slower": lambda r: (not _matched(r), -r.delta_ns if _matched(r) else -_longest(r), r.key),
    "faster": lambda r: (not _matched(r), r.delta_ns if _matched(r) else -_longest(r), r.key),
    "control": lambda r: (-r.median_ns.control, r.key),
    "test": lambda r: (-r.median_ns.test, r.key),
    "name": lambda r: (r.key,),
}



__all__ = ["SORTS", "Comparison", "Headline", "Row"]
