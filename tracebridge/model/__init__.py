"""The normalized step-stats model that every reader produces and every writer consumes."""

from .devices import Device, parse_device
from .schema import Category, OpFlag, OutputFlag
from .table import Table
from .trace import Lane, Op, Step, Trace

__all__ = ["Category", "Device", "Lane", "Op", "OpFlag", "OutputFlag", "Step", "Table", "Trace", "parse_device"]
