"""The alignment rules beyond names: the Matcher they run in, and the rules for XLA, recorded graphs, fusions, eager ops, optimizers and loop control flow.
Part of compare: may import compare's own modules, common, graphs and run (never findings)."""
