"""What the codemod rewrites TF1 tracing calls into.

* ``session.run(fetches, options=RunOptions(trace_level=FULL_TRACE), run_metadata=md)``
  becomes ``run_traced(session, fetches, options=..., run_metadata=md)``: the step goes
  through tracebridge's TF1 capture, which picks a trace level that works (SOFTWARE_TRACE
  on a local CPU session: the same fields without a profiler session; SOFTWARE_TRACE too
  while a TF2 profiler runs, where FULL_TRACE would fail after executing the step) and
  fills the caller's ``md`` as before.
* ``writer.add_run_metadata(md, tag, step)`` becomes ``add_run_metadata(writer, md, tag,
  step)``: the writer still gets it (TensorBoard's graph dashboard), and the same step is
  written as an XSpace under the writer's logdir, which TensorBoard 2's profile plugin reads.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

# RunOptions.TraceLevel values (a fact of config.proto): NO_TRACE 0, SOFTWARE 1, HARDWARE 2, FULL 3.
_NO_TRACE, _SOFTWARE_TRACE = 0, 1


def run_traced(session, fetches, feed_dict=None, options=None, run_metadata=None, **kwargs: Any):
    """``session.run(fetches, feed_dict, options, run_metadata, **kwargs)``, traced by
    tracebridge when ``options`` asks for a trace; returns exactly what ``session.run``
    returns. Works with ``Session`` and ``MonitoredSession``. The caller's ``options`` are
    kept (only the trace level is chosen by tracebridge) and not modified; the caller's
    ``run_metadata`` is filled. A session whose ``run`` is already wrapped by an active
    ``tracebridge.trace(session)`` is left to that capture."""
    def plain():
        return session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata, **kwargs)

    if options is None or options.trace_level == _NO_TRACE or "run" in vars(session):
        return plain()
    from ..capture.session import SessionTrace
    # An explicit SOFTWARE_TRACE is honoured; FULL and HARDWARE get the level that works here.
    level = "software" if options.trace_level == _SOFTWARE_TRACE else "auto"
    with SessionTrace(session, steps=1, trace_level=level):
        return plain()


def add_run_metadata(writer, run_metadata, tag: str, global_step: int | None = None) -> str | None:
    """``writer.add_run_metadata(run_metadata, tag, global_step)``, and the same step as an
    XSpace at ``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` for TensorBoard 2's
    profile plugin (``<run>``: the step's start time, then the tag). Returns the XSpace path
    (None for a RunMetadata without step stats).
    Raises :class:`~tracebridge.errors.OutputError` when it cannot be written (the writer
    has the event by then)."""
    writer.add_run_metadata(run_metadata, tag, global_step)
    if not run_metadata.step_stats.dev_stats:
        return None  # nothing the profile plugin could show
    from ..readers.stepstats import read_run_metadatas
    from ..writers.tensorboard import file_name, write_tensorboard_xplane
    host = file_name(socket.gethostname())
    step = global_step if global_step is not None else 0
    trace = read_run_metadatas([(step, tag, run_metadata.SerializeToString())],
                               {"source_format": "runmetadata", "host": host})
    started = (datetime.datetime.fromtimestamp(trace.start_ns / 1e9) if trace.start_ns > 0
               else datetime.datetime.now())
    # One run per call: TF names runs by time; the tag keeps steps of one second apart.
    run = f"{started:%Y_%m_%d_%H_%M_%S}_{file_name(tag)}".rstrip("_")
    return write_tensorboard_xplane(trace, writer.get_logdir(), run=run, host=host)
