"""How often the findings are right on synthetic pairs of known truth: the power to find a
regression, and the rate of findings from noise alone. Not a timing benchmark (nothing is
timed): the statistics of analysis/common/shift.py and analysis/common/thresholds.py, measured over many
seeds of the small CNN of tests/test_detectors.py (per-op lognormal noise, sigma 0.25,
10 steps a run).

    python bench/findings_power.py                 # 100 regression seeds, 400 noise seeds
    python bench/findings_power.py --seeds 20      # quicker
    python bench/findings_power.py --confidence 0.9

The tests assert fixed seeds only (tests/test_detectors.py); this prints the rates those
seeds are drawn from.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.helpers.synthetic import CNN_OPS, cnn_step, run  # noqa: E402
from tracebridge import compare  # noqa: E402
from tracebridge.analysis.common.thresholds import Thresholds  # noqa: E402

STEPS, SIGMA = 10, 0.25
CNN_US = sum(us for _, _, us in CNN_OPS)


def pair(seed: int, slower: dict[str, float] | None = None, slow_steps: int = STEPS, **step):
    control = run([cnn_step(**step)] * STEPS, sigma=SIGMA, seed=seed)
    test = run([cnn_step(slower=slower, **step) if k < slow_steps else cnn_step(**step) for k in range(STEPS)],
               sigma=SIGMA, seed=seed + 100_000)
    return control, test


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100, help="regression seeds (noise: 4x as many)")
    parser.add_argument("--confidence", type=float, default=Thresholds().confidence)
    args = parser.parse_args()
    limits = Thresholds(confidence=args.confidence)

    def kinds(control, test) -> list[tuple[str, str]]:
        return [(f.kind, getattr(f.evidence, "op_type", "")) for f in compare(control, test, thresholds=limits).findings]

    cases = [("Conv2D 2x, every step", {"Conv2D": 2.0}, STEPS), ("Conv2D 1.6x, 9 of 10 steps", {"Conv2D": 1.6}, 9),
             ("Conv2D 1.3x, every step", {"Conv2D": 1.3}, STEPS)]
    print(f"confidence {limits.confidence}, change {limits.change}, sigma {SIGMA}, {STEPS} steps a run")
    for label, slower, slow_steps in cases:
        named = sum(("op_regression", "Conv2D") in kinds(*pair(seed, slower, slow_steps)) for seed in range(args.seeds))
        print(f"{label:32} found and named in {named}/{args.seeds} seeds")
    noise = 4 * args.seeds
    alone = sum(bool(kinds(*pair(seed))) for seed in range(noise))
    gaps = sum(bool(kinds(*pair(seed, gap_us=0.12 * CNN_US, input_us=0.02 * CNN_US))) for seed in range(noise))
    print(f"{'noise only':32} a finding in {alone}/{noise} seeds")
    print(f"{'noise only, 12% gaps, 2% input':32} a finding in {gaps}/{noise} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
