"""TF2 capture: ``trace(fn)`` and ``with trace() as t:`` over ``tf.profiler``.

Two ways to run a profiling session (:mod:`.profiler_sessions`), chosen by the options:

* default: ``tf.profiler.experimental.start/stop`` into a private folder;
* with ``host_tracer_level``, ``python_tracer_level`` or ``device_tracer_level``: TF 2.21's
  ``start(options=...)`` drops every level (the log says ``host_tracer_level expects an i
  value``), so tracebridge starts a profiler server on loopback in this process and
  captures through xprof's client, which sends typed values. That client captures for a
  fixed duration; when the traced block ends, a ``Terminate`` call to the server ends the
  capture early. The levels applied are read back from the profile's recorded options
  (``trace.metadata["host_tracer_level"]``...).

Steps: each call of a traced function, or each ``t.step()`` block, is one step, marked
as TF's tools expect (:func:`.tf_internals.step_marker`). With a schedule
(``warmup``/``every``/``steps``) only selected steps are profiled; consecutive selected
steps share one profiling session.

Lifecycle: every call is an event of the table in :mod:`.lifecycle`, bound to this
class's methods in :attr:`ProfileTrace.LIFECYCLE`. A with-block profiles until it ends; a
traced function or a callback's capture until its schedule selects no further step, or
until :meth:`ProfileTrace.stop`. Reading ``.trace`` stops nothing: while the capture runs
it raises :class:`CaptureError`.
:meth:`ProfileTrace.discard` stops and keeps nothing.

Files: each profiling session writes into a folder of its own (a temporary one, or
``<logdir>/session-<n>``, a new ``n`` each time); when it stops, its XSpace files are read
into memory and a temporary folder is removed at once. A session that fails or is
discarded removes its folder, in the user's logdir too: no partial profile stays. The
profiler keeps its data in memory until it stops, so a folder deleted while the code runs
is simply written again (TF creates it); one that cannot be written raises
:class:`OutputError`, when the session starts if possible, else when it stops.

Conflicts and threads: TF has one profiler per process, so tracebridge runs one capture
at a time (:mod:`.capture_lock`): a second one started meanwhile, from any thread or
nested, gets :class:`CaptureError` at once. A TF1 run traced with FULL_TRACE holds the same
turn while it runs (see :mod:`.session`). A profiler started by someone else
(``tf.profiler.experimental.start``, a remote capture) gives a CaptureError too and is left
running as it was.

Failures: if the traced code raises (KeyboardInterrupt included), the profiler is stopped
(its data kept when ``keep_on_error=True``) and the exception propagates unchanged; a
failure to stop is then only noted in ``trace.metadata["notes"]``. An interrupt landing in
tracebridge's own code is raised once the cleanup has run (see :mod:`.interrupts` for the
one moment that needs a SIGINT handler of tracebridge's while a with-block is open).
Keras calls no callback when ``fit`` raises: a callback's capture (see
:meth:`ProfileTrace.tie_to_call`) is stopped by the callback's step guard when the step
raised, else within ``WATCH_INTERVAL_S`` by its watch thread, which sees the call that
drove it gone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sys
import threading
import time
import weakref
from typing import Any, Callable

from ..errors import CaptureError
from ..model.hlo import HLO_MODULES
from ..model.schema import STEP_INPUTS
from ..model.trace import Trace
from . import capture_lock, interrupts, tf_internals
from .call_ties import CallTie
from .graph_record import input_shapes, record_function_graph
from .hlo_record import HloRecorder
from .lifecycle import Action, Event, Lifecycle, State
from .schedule import Schedule
from .profiler_sessions import LocalSession, ServerSession, Session, first_line, new_session_folder

_MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
_MAX_STEP_INPUTS = 10_000  # steps whose input shapes a capture keeps (a few dozen bytes each)
WATCH_INTERVAL_S = 0.2  # how soon a callback's capture stops after the Keras call that drove it raised
ANOTHER_CAPTURE = ("another tracebridge capture is running in this process; captures are not "
                   "nested or concurrent (TF has one profiler)")
STILL_RUNNING = "capture still running; call stop() or leave the with-block"
# (inside a with-block, a session running, a step marked) -> the capture's state
_STATES = {(False, False, False): State.IDLE, (False, True, False): State.RECORDING,
           (False, True, True): State.IN_STEP, (True, False, False): State.BLOCK,
           (True, True, False): State.BLOCK_RECORDING, (True, True, True): State.BLOCK_IN_STEP}


def enable_cpu_memory_events() -> None:
    """Make TensorFlow record CPU allocations (``MemoryAllocation`` events), which it does
    only with ``TF_CPU_ALLOCATOR_USE_BFC=true`` set before it starts. Call before
    ``import tensorflow``; raises :class:`CaptureError` if TensorFlow is already loaded."""
    if os.environ.get(_MEMORY_ENV) == "true":
        return
    if "tensorflow" in sys.modules:
        raise CaptureError(f"CPU memory events need {_MEMORY_ENV}=true before TensorFlow starts; "
                           "TensorFlow is already imported in this process (set the variable in "
                           "the environment, or call enable_cpu_memory_events() first)")
    os.environ[_MEMORY_ENV] = "true"


class ProfileTrace:
    """A TF2 capture: a context manager, and, given ``fn``, a traced callable.

    Options (keyword-only): ``warmup``, ``every``, ``steps`` (see :class:`Schedule`);
    ``step_name`` ("train"); ``host_tracer_level`` (1-3), ``python_tracer_level`` (0-1),
    ``device_tracer_level`` (0-1); ``include_dataset_ops`` (True); ``keep_on_error``
    (False); ``logdir`` (keep the raw profile there, in ``session-<n>`` folders, instead of
    a temporary folder). ``.trace`` is the captured :class:`Trace`, once the capture has
    stopped: at the end of the with-block, after the schedule's last step, or after
    :meth:`stop`.
    """

    def __init__(self, fn: Callable | None = None, *, warmup: int = 0, every: int = 1,
                 steps: int | None = None, step_name: str = "train",
                 host_tracer_level: int | None = None, python_tracer_level: int | None = None,
                 device_tracer_level: int | None = None, include_dataset_ops: bool = True,
                 keep_on_error: bool = False, logdir: str | os.PathLike | None = None):
        import tensorflow as tf  # captures are the one place that needs TensorFlow

        self._tf = tf
        self._mark = tf_internals.step_marker(tf)
        self._fn = fn
        self._schedule = Schedule(warmup=warmup, every=every, steps=steps)
        self._whole_block = self._schedule == Schedule()  # a with-block profiled as one session
        self._step_name = step_name
        levels = {"host_tracer_level": host_tracer_level, "python_tracer_level": python_tracer_level,
                  "device_tracer_level": device_tracer_level}
        self._levels = {k: int(v) for k, v in levels.items() if v is not None}
        for key, value in self._levels.items():
            if not 0 <= value <= 3:
                raise CaptureError(f"{key} must be between 0 and 3, not {value}")
        self._include_dataset_ops = include_dataset_ops
        self._keep_on_error = keep_on_error
        self._user_logdir = None if logdir is None else os.fspath(logdir)
        # What runs; the state is read from these three (see the ``state`` property).
        self._in_block = False
        self._session_slot: list[Session | None] = [None]  # the running session (see _session)
        self._marker = None                        # the open step's marker
        # Steps, results, and the tie to a framework call.
        self._index = 0           # steps begun so far
        self._current = -1        # index of the step begun last
        self._step_number = 0     # its number, for its marker
        self._files: list[tuple[str, bytes]] = []   # the XSpace files of every stopped session
        self._notes: list[str] = []
        self._hlo_gaps: list[str] = []  # notes that stand only if the trace ends up without HLO (note(unless_hlo=True))
        self._graph: str | None = None  # the traced tf.function's graph, recorded at its first traced call
        self._step_inputs: dict[str, str] = {}  # step number -> its call's input shapes (traced functions)
        self._hlo = HloRecorder()  # the HLO of a jit_compile function, per input shapes run in traced steps
        self._hlo_modules: list[dict] = []
        self._trace: Trace | None = None
        self._orphan: weakref.finalize | None = None
        self._sigint = False  # whether this with-block put tracebridge's SIGINT handler in place
        self._driver: CallTie | None = None
        self._watcher: threading.Thread | None = None
        self._lock = threading.RLock()
        if fn is not None:
            functools.update_wrapper(self, fn)

    @property
    def _session(self) -> "Session | None":
        """The running session, kept in a one-item list that the capture's finalizer shares
        (see _take_turn): the finalizer must not hold the capture itself."""
        return self._session_slot[0]

    @_session.setter
    def _session(self, session: "Session | None") -> None:
        self._session_slot[0] = session

    @property
    def state(self) -> State:
        running = self._session is not None
        return _STATES[self._in_block, running, running and self._marker is not None]

    # --- the with-block ---------------------------------------------------------------
    def __enter__(self) -> "ProfileTrace":
        event = Event.ENTER_WHOLE_BLOCK if self._whole_block else Event.ENTER
        self.LIFECYCLE.check(self.state, event)
        self._sigint = interrupts.enter()
        try:
            self.LIFECYCLE.run(self, event)
        except BaseException:  # __exit__ will not run: undo everything here
            try:
                with contextlib.suppress(Exception):
                    self.LIFECYCLE.run(self, Event.ENTER_FAILED)
            finally:
                self._leave_interrupts()
            raise
        return self

    @interrupts.deferred_in
    def __exit__(self, exc_type, exc, tb) -> None:
        failed = exc_type is not None
        try:
            self.LIFECYCLE.run(self, Event.EXIT_FAILED if failed else Event.EXIT)
        except Exception as error:
            if not failed:
                raise
            # The block's own exception propagates unchanged; this one is only noted.
            self._notes.append(f"stopping the profiler after the error failed too: {first_line(error)}")
        finally:
            self._leave_interrupts()
        return None

    def _leave_interrupts(self) -> None:
        entered, self._sigint = self._sigint, False
        interrupts.leave(entered)

    # --- steps ------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, number: int | None = None):
        """Mark one step; profiled if the schedule selects it. Yields the step number."""
        try:
            number = self.begin_step(number)
            yield number
        except BaseException:
            self._fail_step()
            raise
        self.end_step()

    def begin_step(self, number: int | None = None) -> int:
        """Open a step (for callers without a ``with``, such as the Keras callback)."""
        index = self._index
        self._index += 1
        self._current = index
        self._step_number = index if number is None else number
        self.LIFECYCLE.run(self, Event.STEP if self._schedule.wants(index) else Event.STEP_SKIPPED)
        return self._step_number

    def end_step(self, failed: bool = False) -> None:
        """Close the step opened by :meth:`begin_step`; stops profiling when the schedule
        selects no next step, or when the step failed (keeping its data if asked)."""
        if self._in_block and self._whole_block:
            event = Event.STEP_ENDED  # the block's one session outlives its steps, failed ones too
        elif failed:
            event = Event.STEP_FAILED
        else:
            event = Event.STEP_ENDED if self._schedule.wants(self._current + 1) else Event.LAST_STEP_ENDED
        self.LIFECYCLE.run(self, event)

    def _fail_step(self) -> None:
        """End the open step after the traced code raised. A failure to stop is noted, not
        raised: the code's own exception must propagate unchanged."""
        try:
            self.end_step(failed=True)
        except Exception as error:
            self._notes.append(f"stopping the profiler after the error failed too: {first_line(error)}")

    # --- stopping ---------------------------------------------------------------------
    def stop(self) -> None:
        """Stop profiling now and keep what was recorded: the open step is closed, the
        running session stopped and the profiler given back. For a traced function or a
        callback's capture; a with-block's capture stops when the block ends (stop() there
        raises :class:`CaptureError`). A later step the schedule selects starts again."""
        self.LIFECYCLE.run(self, Event.STOP)

    def pause(self) -> None:
        """Stop the running session between steps, keeping its data; the schedule starts a
        new one at the next selected step (Keras runs validation inside ``fit``, and TF has
        one profiler). Does nothing inside a step or a with-block."""
        self.LIFECYCLE.run(self, Event.PAUSE)

    def abort(self) -> None:
        """Stop now, as after a failed step (data kept only with ``keep_on_error``): for a
        callback whose framework call ended by an exception. Never raises."""
        with self._lock:  # the watch thread may abort too
            try:
                self.LIFECYCLE.run(self, Event.ABORT)
            except Exception as error:  # noted: the caller is cleaning up after another error
                self._notes.append(f"stopping the abandoned capture failed: {first_line(error)}")

    def discard(self) -> None:
        """Stop now and keep nothing: the running session's profile and those of sessions
        stopped before are dropped, whatever ``keep_on_error`` says. Inside a with-block
        this ends the block's capture and gives the profiler back (the block's end then has
        nothing left to stop)."""
        try:
            self.LIFECYCLE.run(self, Event.DISCARD)
        finally:
            if self._sigint:
                self._leave_interrupts()

    # --- the tie to a framework call (Keras; see call_ties) ---------------------------
    def tie_to_call(self) -> None:
        """Tie this capture to the framework call that drives it: the first frame above the
        callback methods (``on_*``) and tracebridge's own, a Keras ``fit`` for instance.
        While a session of a tied capture runs, a watch thread checks a few times a second
        that the call is still on its thread's stack, and stops the capture once it is
        gone; a later capture that finds it still holding the profiler stops it too
        instead of being refused."""
        tie = CallTie.above(sys._getframe(1))
        with self._lock:
            self._driver = tie

    def _abandoned(self) -> bool:
        """Tied to a framework call that has ended (by an exception: else it would have
        stopped this capture)."""
        return self._driver is not None and not self._driver.running()

    def _watch(self) -> None:
        """Start the watch thread of a tied capture (see :meth:`tie_to_call`); it ends with
        the session, or once it has stopped the capture."""
        if self._driver is None or (self._watcher is not None and self._watcher.is_alive()):
            return
        capture_ref, driver = weakref.ref(self), self._driver

        def watch():
            while True:
                time.sleep(WATCH_INTERVAL_S)
                capture = capture_ref()
                if capture is None or capture._session is None or capture._driver is not driver:
                    return
                if not driver.running():
                    with capture._lock:  # the call is gone for good: only a new tie changes this
                        if capture._driver is driver:
                            capture.abort()
                    return
                del capture

        self._watcher = threading.Thread(target=watch, name="tracebridge-watch", daemon=True)
        self._watcher.start()

    # --- the traced callable --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any):
        if self._fn is None:
            raise CaptureError("this trace wraps no function; use it as a context manager")
        if self._session is None and not self._schedule.wants(self._index):
            self._index += 1  # an unselected call costs this and nothing more
            return self._fn(*args, **kwargs)
        try:
            number = self.begin_step()  # not self.step(): a generator context manager costs microseconds a call
            self._note_inputs(number, args, kwargs)
            result = self._fn(*args, **kwargs)
        except BaseException:
            self._fail_step()
            raise
        self.end_step()
        self.record_graph(self._fn, args, kwargs)
        return result

    def _note_inputs(self, number: int, args: tuple, kwargs: dict) -> None:
        """The input shapes of a profiled call, by step number (the xla_compile finding
        names the shapes that made XLA compile); at most ``_MAX_STEP_INPUTS`` steps."""
        if self._session is None or len(self._step_inputs) >= _MAX_STEP_INPUTS:
            return
        try:
            signature = self._step_inputs[str(number)] = input_shapes(args, kwargs)
        except Exception:  # a value TF cannot flatten: the shapes are only missing
            return
        self._hlo.note_call(self._fn, args, kwargs, signature)

    def record_hlo(self, function: Callable, args: tuple, kwargs: dict) -> None:
        """Record the optimized HLO of ``function`` (a ``tf.function(jit_compile=True)``)
        for these arguments' shapes, when the trace is built (the Keras callback calls it
        for Keras's compiled step)."""
        try:
            self._hlo.note_call(function, args, kwargs, input_shapes(args, kwargs))
        except Exception as error:
            self._notes.append(f"HLO not recorded: {first_line(str(error))}")

    @property
    def graph_recorded(self) -> bool:
        """Whether :meth:`record_graph` has run (whether or not it found a graph)."""
        return self._graph is not None

    def note(self, text: str, unless_hlo: bool = False) -> None:
        """A note for ``trace.metadata["notes"]``; ``unless_hlo``: only if the trace has no
        HLO modules in the end (the profile's ``/host:metadata`` may hold what capture could
        not record: TF 2.21 lists there every module the process compiled, HLO included)."""
        (self._hlo_gaps if unless_hlo else self._notes).append(text)

    def record_graph(self, function: Callable | None, args: tuple, kwargs: dict) -> None:
        """Record the graph ``function`` (a ``tf.function``) ran for these arguments, once:
        call it after a traced call, which traced the function (no retrace here). The
        traced function's own wrapper calls it; the Keras callback calls it with the
        ``tf.function`` inside Keras's step function."""
        if self._graph is not None:
            return
        try:
            record = None if function is None else record_function_graph(function, args, kwargs)
        except Exception as error:  # the comparison falls back to names; the capture stands
            self._notes.append(f"graph not recorded: {first_line(str(error))}")
            self._graph = ""
            return
        self._graph = json.dumps(record, separators=(",", ":")) if record else ""

    # --- results --------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The captured trace. Reading it stops nothing: while the capture runs it raises
        :class:`CaptureError` (stop it with :meth:`stop`, or leave the with-block). A
        capture tied to a framework call that ended by an exception is not running but
        abandoned: it is aborted first, as its watch thread would a moment later."""
        if self.state is not State.IDLE and self._abandoned():
            self.abort()
        if self.state is not State.IDLE:
            raise CaptureError(STILL_RUNNING)
        if self._trace is None:
            self._trace = self._build()
        return self._trace

    def _build(self) -> Trace:
        from ..readers.xspace import read_xspace_files
        metadata = {"source_format": "tf2", "tf_version": self._tf.__version__,
                    "onednn": tf_internals.onednn_enabled(),
                    "host": socket.gethostname(), "steps_seen": self._index,
                    "capture": "profiler server" if self._levels else "tf.profiler"}
        if not self._files:
            from ..model.builder import TraceBuilder
            return TraceBuilder({**metadata, "notes": "; ".join(self._notes or ["nothing was profiled"])}).build()
        if self._graph:
            metadata["graph"] = self._graph
        if self._step_inputs:
            metadata[STEP_INPUTS] = json.dumps(self._step_inputs, separators=(",", ":"))
        self._hlo_modules += self._hlo.entries(self._notes)
        if self._hlo_modules:
            metadata[HLO_MODULES] = list(self._hlo_modules)
        trace = read_xspace_files([(path, data, None) for path, data in self._files], metadata)
        from ..analysis.run.doctor import trace_notes
        # The doctor's memory check says what is missing and why (one place for that text).
        notes = list(self._notes) + ([] if trace.metadata.get(HLO_MODULES) else self._hlo_gaps) + \
            trace_notes(trace, codes=("no_memory_records",))
        if notes:
            previous = trace.metadata.get("notes")
            trace = trace.with_metadata(notes="; ".join(([previous] if previous else []) + notes))
        return trace

    # --- the actions of the lifecycle table (lifecycle.Action) ----------------------------
    def _take_turn(self) -> None:
        if capture_lock.held_by(self):
            return
        if not capture_lock.try_take(self):
            holder = capture_lock.holder()
            if not isinstance(holder, ProfileTrace) or not holder._abandoned():
                raise CaptureError(ANOTHER_CAPTURE)
            holder.abort()  # its Keras call raised and left it running
            if not capture_lock.try_take(self):
                raise CaptureError(ANOTHER_CAPTURE)
        # Dropped while holding the turn (a traced function never stopped): its session is
        # stopped and the turn given back. A finalizer for that time only, not a __del__:
        # Python code run at garbage collection swallows a KeyboardInterrupt.
        self._orphan = weakref.finalize(self, _stop_orphan, self._session_slot)

    def _give_turn_back(self) -> None:
        if capture_lock.held_by(self):
            self._orphan.detach()
            capture_lock.give_back(self)

    def _open_block(self) -> None:
        self._in_block = True

    def _close_block(self) -> None:
        self._in_block = False

    def _start_session(self) -> None:
        """Undoes itself on failure: the session is aborted and, outside a with-block, the
        turn given back."""
        try:
            folder, temporary = new_session_folder(self._user_logdir)
            session_type = ServerSession if self._levels else LocalSession
            session = session_type(self._tf, folder, temporary, self._levels, self._include_dataset_ops)
            try:
                session.start()
                self._session = session
                self._watch()
            except BaseException:  # an interrupt may land after the profiler started: undo it
                self._session = None
                session.abort()
                raise
        except BaseException:
            if not self._in_block:
                self._give_turn_back()
            raise

    def _mark_step(self) -> None:
        self._marker = self._mark(self._step_name, self._step_number)
        self._marker.__enter__()

    def _unmark_step(self) -> None:
        marker, self._marker = self._marker, None
        if marker is not None:
            marker.__exit__(None, None, None)

    def _forget_step(self) -> None:
        self._marker = None  # dropped after the stop: the unfinished step is not recorded

    def _save_session(self) -> None:
        self._stop_session(save=True)

    def _fail_session(self) -> None:
        self._stop_session(save=self._keep_on_error)

    def _drop_session(self) -> None:
        self._stop_session(save=False)

    def _forget_profiles(self) -> None:
        self._files.clear()
        self._step_inputs.clear()
        self._hlo.clear()
        self._hlo_modules.clear()
        self._trace = None

    def _stop_session(self, save: bool) -> None:
        session = self._session
        if session is None:
            return
        try:
            files = session.stop_and_collect(save)
        except BaseException:
            session.abort()  # an interrupt half-way: whatever still runs is stopped
            raise
        finally:
            self._session = None
        if files:
            self._files.extend(files)
            self._trace = None

    # Built with the class: a method renamed here fails now, not when its action first runs.
    LIFECYCLE = Lifecycle({
        Action.TAKE_TURN: _take_turn, Action.OPEN_BLOCK: _open_block, Action.START: _start_session,
        Action.MARK: _mark_step, Action.UNMARK: _unmark_step, Action.FORGET_MARK: _forget_step,
        Action.SAVE: _save_session, Action.FAIL: _fail_session, Action.DROP: _drop_session,
        Action.FORGET_DATA: _forget_profiles, Action.GIVE_TURN_BACK: _give_turn_back,
        Action.CLOSE_BLOCK: _close_block,
    })


def _stop_orphan(session_slot: list) -> None:
    """A capture was dropped while holding the capture turn: stop its session, give the
    turn back."""
    session, session_slot[0] = session_slot[0], None
    if session is not None:
        session.abort()
    capture_lock.give_back()

