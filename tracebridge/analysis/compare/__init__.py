"""How two runs of the same model differ: compare() aligns their ops (rules/ holds the rules) and gives per-step statistics and coverage.
May import common, graphs and run, never findings (they read comparisons): compare()'s caller injects the findings as find=findings.comparison_findings (tracebridge.compare, the CLI, hosts do); without it a comparison has no findings."""

from .core import RULE_CONFIDENCE, Comparison, Finder, PerSide, Row, Thresholds, TimeBasis, compare, pair_key, self_times

__all__ = ["RULE_CONFIDENCE", "Comparison", "Finder", "PerSide", "Row", "Thresholds", "TimeBasis", "compare", "pair_key",
           "self_times"]
