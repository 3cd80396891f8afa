"""TF1 capture: trace the ``session.run`` calls made inside ``with trace(session)``.

Works with ``tf.compat.v1.Session`` (local or with a ``grpc://`` cluster target) and with
``MonitoredSession``/``MonitoredTrainingSession``, whose ``run`` takes the same
``options``/``run_metadata`` arguments. Each traced run is one step. Runs outside the
schedule go straight to the session's own ``run``: they pay one counter increment.

Trace levels: on a local CPU session, SOFTWARE_TRACE fills the same fields as FULL_TRACE
without starting a profiler session (TF_FACTS A.2), so ``"auto"`` uses it there; it uses
FULL_TRACE when GPUs are visible or the session runs on a cluster (``grpc://`` target),
where SOFTWARE_TRACE returns no step stats at all (measured with TF 2.21).

Concurrency: FULL_TRACE and HARDWARE_TRACE start a profiler session, and TF has one per
process: such a run fails with ``AlreadyExistsError`` while another profiler runs, *after
the step has executed*, so it can never be retried. Each such run therefore takes
tracebridge's capture turn (the one a TF2 capture holds) without waiting; when it cannot
(a TF2 capture, or another thread's FULL_TRACE run, is active), or when someone else's
``tf.profiler.experimental.start`` is active, that run uses SOFTWARE_TRACE and a note says
so. SOFTWARE_TRACE runs need no turn: TF1 traces of different sessions may run at once, in
any threads; a second trace of the same session is refused with :class:`CaptureError`. A
conflict that could not be seen beforehand (a remote capture of this process) raises
CaptureError after the step ran, and later runs use SOFTWARE_TRACE.

Memory: a traced run keeps its serialized RunMetadata (7.8 KB for the demo's 35-node MLP
training step) until the trace is built; untraced runs keep nothing.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from ..errors import CaptureError
from ..model.trace import Trace
from . import capture_lock, interrupts, tf_internals
from .graph_record import record_session_graph
from .schedule import Schedule

_LEVELS = {"software": "SOFTWARE_TRACE", "hardware": "HARDWARE_TRACE", "full": "FULL_TRACE"}


class SessionTrace:
    """Context manager returned by ``tracebridge.trace(session, ...)``.

    Options (keyword-only): ``warmup`` untraced runs first, then one run in ``every``,
    ``steps`` runs at most (None: all); ``trace_level`` ``"auto"``, ``"full"``,
    ``"hardware"`` or ``"software"``. After the block, ``.trace`` is the :class:`Trace`.
    """

    def __init__(self, session, *, warmup: int = 0, every: int = 1, steps: int | None = None,
                 trace_level: str = "auto"):
        import tensorflow as tf  # capture is the one place that needs TensorFlow

        if trace_level not in ("auto", *_LEVELS):
            raise CaptureError(f"trace_level must be auto, full, hardware or software, not {trace_level!r}")
        self._tf = tf
        self._session = session
        self._schedule = Schedule(warmup=warmup, every=every, steps=steps)
        self._level = auto_trace_level(tf, session) if trace_level == "auto" else trace_level
        self._runs: list[tuple[int, str, bytes]] = []
        self._notes: dict[str, list[int]] = {}   # what happened -> [first run, how many runs]
        self._index = 0
        self._original_run = None
        self._trace: Trace | None = None
        self._active = False
        self._sigint = False  # whether this block put tracebridge's SIGINT handler in place

    # --- context --------------------------------------------------------------------
    def __enter__(self) -> "SessionTrace":
        if self._active:
            raise CaptureError("this trace is already active")
        if "run" in vars(self._session):
            raise CaptureError("this session's run() is already wrapped (nested tracebridge.trace?)")
        self._sigint = interrupts.enter()
        self._original_run = self._session.run
        self._session.run = self._run
        self._active = True
        return self

    @interrupts.deferred_in
    def __exit__(self, *exc) -> None:
        try:
            self._restore()
        finally:
            interrupts.leave(self._sigint)
        return None

    def _restore(self) -> None:
        if self._active:
            # The wrapper is an instance attribute shadowing the class method: removing it
            # gives the session back exactly as it was.
            del self._session.run
            self._active = False

    # --- results --------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The captured trace (built on first access, after or during the block)."""
        if self._trace is None or len(self._runs) != self._trace.metadata.get("runs_traced"):
            self._trace = self._build()
        return self._trace

    @property
    def runs_seen(self) -> int:
        return self._index

    def _build(self) -> Trace:
        from ..readers.stepstats import read_run_metadatas
        graph = getattr(self._session, "graph", None)
        op_types = {}
        metadata = {
            "source_format": "session", "tf_version": self._tf.__version__,
            "onednn": tf_internals.onednn_enabled(),
            "host": socket.gethostname(), "trace_level": _LEVELS[self._level],
            "runs_seen": self._index, "runs_traced": len(self._runs),
        }
        if graph is not None:
            op_types = {op.name: op.type for op in graph.get_operations()}
            # The graph as text in the metadata: formats that keep metadata keep it too.
            metadata["graph"] = json.dumps(record_session_graph(graph), separators=(",", ":"))
        if self._notes:
            metadata["notes"] = "; ".join(
                f"run {first}{f' and {count - 1} later runs' if count > 1 else ''}: {text}"
                for text, (first, count) in self._notes.items())
        if not self._runs:
            from ..model.builder import TraceBuilder
            return TraceBuilder(metadata).build()
        return read_run_metadatas(self._runs, metadata, op_types=op_types)

    # --- the wrapped run ------------------------------------------------------------
    def _run(self, fetches, feed_dict=None, options=None, run_metadata=None, **kwargs):
        index = self._index
        self._index += 1
        if not self._schedule.wants(index):
            return self._original_run(fetches, feed_dict=feed_dict, options=options,
                                      run_metadata=run_metadata, **kwargs)
        v1 = self._tf.compat.v1
        traced_options = v1.RunOptions()
        if options is not None:
            traced_options.CopyFrom(options)
        metadata = run_metadata if run_metadata is not None else v1.RunMetadata()
        level = self._level
        claimed = False
        try:  # from the claim on: an interrupt anywhere must give the turn back
            if level != "software":
                if tf_internals.tf2_profiler_running():
                    level = "software"
                    self._note(index, "a TF2 profiler was active, so SOFTWARE_TRACE was used instead "
                                      f"of {_LEVELS[self._level]}")
                else:
                    claimed = capture_lock.try_take()
                    if not claimed:
                        level = "software"
                        self._note(index, "a tracebridge capture or another thread's traced run was "
                                          f"active, so SOFTWARE_TRACE was used instead of {_LEVELS[self._level]}")
            traced_options.trace_level = getattr(v1.RunOptions, _LEVELS[level])
            result = self._original_run(fetches, feed_dict=feed_dict, options=traced_options,
                                        run_metadata=metadata, **kwargs)
        except self._tf.errors.AlreadyExistsError:
            if level == "software":
                raise
            # The step has run (TF raises after executing), so it cannot be retried.
            self._level = "software"
            self._note(index, f"{_LEVELS[level]} failed (another profiling session active)")
            raise CaptureError(f"run {index}: {_LEVELS[level]} failed after the step ran: another "
                               "profiling session is active in this process (a remote capture?); "
                               "later runs use SOFTWARE_TRACE") from None
        finally:
            if claimed:
                capture_lock.give_back()
        if not metadata.step_stats.dev_stats:
            self._note(index, f"no step stats with {_LEVELS[level]}")
            if level == "software":  # remote targets record nothing at this level
                self._level = "full"
        else:
            self._runs.append((index, f"run {index}", metadata.SerializeToString()))
        return result

    def _note(self, index: int, text: str) -> None:
        """One note per kind of event, with its first run and count: a long run that falls
        back on every step keeps two integers, not a string per step."""
        first_and_count = self._notes.setdefault(text, [index, 0])
        first_and_count[1] += 1


def tf2_profiler_active() -> bool:
    """Whether a TF2 profiler runs in this process: ``tf.profiler.experimental.start``, a
    tracebridge TF2 capture (or another thread's FULL_TRACE run)."""
    return capture_lock.held() or tf_internals.tf2_profiler_running()


def auto_trace_level(tf, session) -> str:
    """``"full"`` with GPUs or on a cluster (``grpc://`` target), where SOFTWARE_TRACE
    records nothing; else ``"software"``: FULL_TRACE's fields without a profiler session."""
    remote = tf_internals.session_target(session).startswith("grpc://")
    return "full" if remote or tf.config.list_physical_devices("GPU") else "software"


def is_session(target: Any) -> bool:
    """Session-like: a ``run`` method and a ``graph`` (Session, MonitoredSession)."""
    return callable(getattr(target, "run", None)) and hasattr(target, "graph")
