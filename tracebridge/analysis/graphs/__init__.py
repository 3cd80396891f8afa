"""How two recorded graphs correspond: the graph a run recorded, and the structural alignment of two (anchors, dataflow, regions).
May import common only (and needs nothing of it today)."""
