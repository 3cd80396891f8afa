"""The normalized step-stats model that every reader produces and every writer consumes."""

from .devices import Device, parse_device
from .table import Table
from .trace import Lane, Op, Step, Trace

__all__ = ["Device", "Lane", "Op", "Step", "Table", "Trace", "parse_device"]
