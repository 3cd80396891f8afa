"""Every threshold a finding or a change is decided on, and the noise settings, in one
place: :class:`Thresholds`. ``compare``, ``advise`` and ``doctor`` take one; the CLI sets
the fields users tune (``--threshold``, ``--noise-floor``, ``--min-steps``,
``--confidence``); ``--json`` echoes the values used.

Each default says where it comes from: the measures of good ports and ports with one
mistake (``tests/test_findings.py``, captured with TF 2.21 on a loaded 2-core machine),
and the exact synthetic pairs of ``tests/test_detectors.py`` (noise-only pairs over many
seeds get no finding; a 1.6x regression of one op type in 9 of 10 steps is found).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ...errors import OptionError
from ...model.slicing import parse_duration


@dataclass(frozen=True)
class Thresholds:
    # --- noise: how a change is told from the step-to-step spread --------------------------
    # A row or a step changed when its shift's interval (analysis/common/shift.py) clears this share
    # of the control's median, and noise_ns: a smaller change is of no consequence even when
    # certain. The interval itself is the runs' own spread: no constant stands in for it.
    change: float = 0.1
    # A change this small is noise whatever its share: TF1 records whole microseconds, and
    # a 2 us op moved by one tick is 50%.
    noise_ns: int = 2_000
    # Fewer steps than this on a side, and timing findings are withheld (a note says so):
    # three steps a side is the fewest whose orderings can say anything at 95% (1 in 20).
    min_steps: int = 3
    # The one-sided confidence of every interval a timing finding is decided on.
    confidence: float = 0.95

    # --- one run's kinds (shares of step time unless said otherwise) ------------------------
    # Eager ops: a few ops outside a tf.function (a tf.constant of the batch) are normal and
    # cost well under 1% of a step; a forgotten tf.function puts nearly the whole step in
    # eager ops.
    eager_min_share: float = 0.05
    eager_min_ops_per_step: int = 3
    # Retracing: a function traced again after its first tracing for an input signature.
    # Any share counts, since a good port traces nothing once warm.
    retrace_min_tracings: int = 1
    # XLA compilation: a function's first compilation in the traced steps is a first call (or
    # one new input shape); any compilation of it beyond that is a function that recompiles.
    # A compilation of even a two-matmul function took 110-160 ms on a 2-core machine (TF 2.21
    # CPU), so any count is worth a finding.
    xla_min_recompilations: int = 1
    # Host gaps: good tf.function ports measured 12-16% of their steps outside any op
    # (dispatch, executor hand-offs) and TF1 sessions 2-6%; Python work of a few ms measured
    # 50%+. A single run needs 30% (the lower bound of its steps' median share); against a
    # control, 15 points more than the control's (the lower bound of the shift).
    host_gap_min_share: float = 0.30
    host_gap_min_extra: float = 0.15
    # Input wait: a prefetched pipeline blocks a step for well under 2%.
    input_min_share: float = 0.10
    input_min_extra: float = 0.05
    # Framework overhead: the framework's time between ops (a step's "framework" part). A small
    # MLP trained with Keras 3 fit (batch 32) measured 55-75% of its steps there on a loaded
    # 2-core machine (TF 2.21), a tf.function loop of it 45-50%, its TF1 session's executor
    # gaps 10-15%; the performance examples' small CNN as a good tf.function port 20-25% (1-2 ms
    # a call). A single run needs 40% (the lower bound of its steps' median share) and more
    # framework than op time (the framework, not the ops, bounds the step); against a control,
    # 15 points more than the control's (the lower bound of the shift), as host gaps.
    framework_min_share: float = 0.40
    framework_min_extra: float = 0.15
    # Device idle: xprof's overview calls a step "highly input bound" from 20% of it waiting
    # on the host; the corpus' TPU inference profile waits 12%; the multi-worker GPU job's
    # GPU:6 idles 30% of its 21.3 ms step while the host works in 28% of it.
    device_idle_min_share: float = 0.25
    device_idle_min_extra: float = 0.10

    # --- a pair's kinds --------------------------------------------------------------------
    # Op regression: a group of aligned ops (one op type, one top scope) slower with the
    # interval's confidence must explain this share of the test step in shared time. Good
    # ports on a loaded 2-core machine showed groups of up to 6.4% (gradient ops sharing the
    # cores side by side); float64 ports' largest groups measured 8.7-18.6%.
    regression_min_share: float = 0.05
    # ... and the matched ops together must explain this share of the steps' slowdown in
    # shared time: ports slowed by other processes had their ops explain at most 30% of it,
    # float64 ports 85-90%.
    regression_min_explained: float = 0.4
    # Memory: a step's working set in the smallest test step more than 50% and 1 MiB above
    # the control's median step. Good TF2 ports of the small CNN measured 0% (plain build)
    # and up to 35% (oneDNN) above the TF1 session's, a float64 port 900%.
    memory_min_growth: float = 0.50
    memory_min_bytes: int = 1 << 20
    # Memory left behind: the bytes in use at step ends rising after most steps
    # (memory_rising_share of them, each by memory_min_step_rise); the allocator's own
    # fluctuation measured up to 0.7 MiB down between steps.
    memory_min_step_rise: int = 1 << 18
    memory_rising_share: float = 0.75

    # --- many hosts ------------------------------------------------------------------------
    # A straggler: a host whose median step exceeds all hosts' median by more than this share
    # (summary --by-host --threshold).
    straggler: float = 0.1

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise OptionError(f"thresholds: {f.name}={value!r} must be a number, 0 or more")
        if not 0.5 <= self.confidence < 1.0:
            raise OptionError(f"thresholds: confidence={self.confidence!r} must be in [0.5, 1)")
        if self.min_steps < 1:
            raise OptionError(f"thresholds: min_steps={self.min_steps!r} must be 1 or more")

    def margin(self, control_ns: float) -> float:
        """The least change that counts for a row or step whose control median is ``control_ns``."""
        return max(self.change * control_ns, float(self.noise_ns))

    def with_options(self, *, noise_floor: str | None = None, **changes) -> "Thresholds":
        """A copy with the fields given that are not None (the CLI's unset flags are None);
        ``noise_floor``: ``noise_ns`` as a duration's text ("2us", "0.5ms")."""
        if noise_floor is not None:
            changes["noise_ns"] = parse_duration(noise_floor, "noise floor")
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise OptionError(f"thresholds: no such setting {unknown[0]!r} (settings: {', '.join(sorted(known))})")
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT = Thresholds()

__all__ = ["DEFAULT", "Thresholds"]
