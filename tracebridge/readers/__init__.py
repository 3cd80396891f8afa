"""Readers: every input format tracebridge reads, into the model, without TensorFlow.

One module per format (``stepstats``, ``pbtxt``, ``pickles``, ``events``, ``chrome``,
``xspace``), each with ``read(source, parallelism) -> Trace``; :mod:`.sources` says what a
source is and how formats are told apart, :mod:`tracebridge.formats` lists them, and
``tracebridge.load`` picks one. Every reader turns a malformed file into one
:class:`~tracebridge.errors.TraceFormatError` that names the file and the place.
"""

from __future__ import annotations

from .sources import profile_runs

__all__ = ["profile_runs"]
