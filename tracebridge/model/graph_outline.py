"""A recorded graph (metadata key ``graph``, capture/graph_record.py) in one short line.

The graph is JSON text that grows with the model (860 kB for ResNet-50): ``info``'s text
and the HTML pages' run panel show this outline; ``info --json`` keeps the graph itself.
"""

from __future__ import annotations

import json


def graph_outline(text: object) -> str:
    """``recorded graph: 1,234 nodes, 56 variables (860 kB)``; what the text holds if it
    is not a graph record (``unreadable``) rather than the text itself."""
    size = len(str(text))
    kilobytes = f"{size / 1000:,.0f} kB" if size >= 1000 else f"{size} B"
    try:
        record = json.loads(str(text))
        nodes, variables = len(record["nodes"]), len(record["variables"])
    except (ValueError, KeyError, TypeError):
        return f"recorded graph: unreadable ({kilobytes})"
    return f"recorded graph: {nodes:,} nodes, {variables:,} variables ({kilobytes}; info --json prints it)"
