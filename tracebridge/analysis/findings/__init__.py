"""Why a run is slow, alone or against a control run: the kinds and their detectors (kinds.py), their evidence and measures, advise() and comparison_findings.
May import common, run and compare (a pair's findings read its Comparison)."""

from .kinds import (ADVICE, DETECTORS, KINDS, ComparisonFindings, Detector, Finding, Findings, Run, RunPair, Thresholds,
                    advise, comparison_findings, few_steps_note)

__all__ = ["ADVICE", "DETECTORS", "KINDS", "ComparisonFindings", "Detector", "Finding", "Findings", "Run", "RunPair",
           "Thresholds", "advise", "comparison_findings", "few_steps_note"]
