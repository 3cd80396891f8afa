"""The parts every question shares: two runs side by side (PerSide and its typed statistics), kernel names, tables, XLA rows, the shift of per-step times, thresholds.
Imports nothing else of the analysis (tracebridge.model and tracebridge.errors only)."""
