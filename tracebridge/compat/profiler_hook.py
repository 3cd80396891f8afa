"""A drop-in for ``tf.compat.v1.train.ProfilerHook`` that is also a Keras callback.

As a ``SessionRunHook`` (``MonitoredSession``/``MonitoredTrainingSession(hooks=[hook])``)
it does what TF 2.21's hook does:

* steps: the global step decides, through a timer that fires every ``save_steps`` steps or
  ``save_secs`` seconds. The first run is never traced: its stale global step only starts
  the timer. A run is traced when the step it will reach (``stale + 1``) fires the timer;
  afterwards the hook reads the fresh global step, and that number names the outputs;
* outputs in ``output_dir``: ``timeline-<step>.json``, the Chrome trace TF's
  ``timeline.py`` makes of the step's StepStats (here :mod:`tracebridge.compat.timeline`,
  which gives the same text), written atomically; and ``add_run_metadata(run_metadata,
  "step_<step>")`` on the ``FileWriterCache`` writer of ``output_dir``.

Differences: the trace level is the one that works (SOFTWARE_TRACE on a local CPU session,
which records the same fields as TF's FULL_TRACE without a profiler session, and while a
TF2 profiler runs; FULL_TRACE with GPUs or on a cluster); the event writer is flushed when
the session ends; a folder that cannot be written raises OutputError when the session
starts, one deleted during training is created again for the next step, and a failed
timeline write leaves no partial file.

As a Keras callback (``model.fit(callbacks=[hook])``) the same step rule runs on the
optimizer's iteration count: the first train batch only starts the timer, and a selected
batch is profiled with tracebridge's TF2 capture. Its trace is written as
``timeline-<step>.json`` (StepStats from :mod:`tracebridge.writers.stepstats`, then the
same timeline text) and as an event file ``events.out.tfevents.<time>.<host>.step_<step>``
holding its ``tagged_run_metadata`` ``step_<step>`` (one file per traced step, each written
atomically, as TF's FileWriter needs graph mode).

Keras 3's ``CallbackList`` needs no ``keras.callbacks.Callback`` subclass: it calls
``set_model``, ``set_params`` and the ``on_*`` methods, and dispatches batch ends on a
thread only for callbacks whose ``on_*_batch_end`` are Keras's own defaults, which these
are not (the profiler must stop on the training thread). So this class subclasses
nothing, and importing it imports neither TensorFlow nor Keras.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

import numpy as np

from .._files import write_bytes
from ..errors import OutputError


class _Timer:
    """TF's SecondOrStepTimer rule: fire for the first step seen, then once ``every_steps``
    steps or ``every_secs`` seconds have passed since the last step it fired for."""

    def __init__(self, every_secs: float | None, every_steps: int | None):
        self.every_secs, self.every_steps = every_secs, every_steps
        self.last_step: int | None = None
        self.last_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self.last_step is None:
            return True
        if self.last_step == step:
            return False
        if self.every_secs is not None and time.time() >= self.last_time + self.every_secs:
            return True
        return self.every_steps is not None and step >= self.last_step + self.every_steps

    def update_last_triggered_step(self, step: int) -> None:
        self.last_step, self.last_time = step, time.time()


class ProfilerHook:
    """Profile every ``save_steps`` steps or every ``save_secs`` seconds (exactly one) into
    ``output_dir``; ``show_dataflow`` and ``show_memory`` as in ``timeline.py``.

    Use it as ``MonitoredTrainingSession(hooks=[hook])`` or ``model.fit(callbacks=[hook])``.
    """

    def __init__(self, save_steps: int | None = None, save_secs: float | None = None,
                 output_dir: str | os.PathLike = "", show_dataflow: bool = True,
                 show_memory: bool = False):
        if (save_steps is None) == (save_secs is None):
            # ValueError, as TF raises: training scripts may catch it.
            given = "both" if save_steps is not None else "neither"
            raise ValueError(f"ProfilerHook needs exactly one of save_steps and save_secs; {given} given")
        self._timer = _Timer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = os.fspath(output_dir)
        self._show_dataflow, self._show_memory = show_dataflow, show_memory
        self._next_step: int | None = None   # the global step the next run will reach
        self._request = False                # this run is traced
        # SessionRunHook side
        self._global_step_tensor = None
        self._writer = None
        self._level: int | None = None
        # Keras side
        self.model = None
        self.params: dict = {}
        self._keras_step = 0                 # the optimizer's iterations before this batch
        self._batch_begin = 0
        self._profile = None
        self._guard = None

    # --- both sides -----------------------------------------------------------------------
    def _prepare_output_dir(self) -> None:
        """Create the output folder, again if it was deleted meanwhile (the next outputs
        then land in it); OutputError if it cannot be created or written into."""
        if not self._output_dir:
            return  # TF's default: the current folder
        try:
            os.makedirs(self._output_dir, exist_ok=True)
        except OSError as error:
            raise OutputError(f"{self._output_dir}: cannot create the output folder "
                              f"({error.strerror or error})") from None
        if not os.access(self._output_dir, os.W_OK | os.X_OK):
            raise OutputError(f"{self._output_dir}: cannot write into the output folder (permission denied)")

    def _path(self, name: str) -> str:
        return os.path.join(self._output_dir, name)

    def _write_timeline(self, step: int, step_stats) -> None:
        """``step_stats``: TF's or tracebridge's StepStats message."""
        from .timeline import Timeline
        text = Timeline(step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory)
        self._prepare_output_dir()
        write_bytes(self._path(f"timeline-{step}.json"), text.encode("utf-8"))

    def _advance(self, stale: int, fresh: Callable[[], int], record: Callable[[int], None],
                 steps: int = 1) -> None:
        """TF's after_run: ``stale`` is the global step read during the run, which made
        ``steps`` steps; ``fresh()`` reads it again (only for traced runs); ``record(step)``
        writes the outputs."""
        if self._next_step is None:
            self._timer.update_last_triggered_step(stale)  # start the timer, trace nothing yet
        global_step = stale + steps
        if self._request:
            global_step = fresh()
            self._timer.update_last_triggered_step(global_step)
            record(global_step)
        self._next_step = global_step + 1

    def _wants_next(self) -> bool:
        return self._next_step is not None and self._timer.should_trigger_for_step(self._next_step)

    # --- SessionRunHook -------------------------------------------------------------------
    def begin(self) -> None:
        import tensorflow as tf

        from ..capture.tf_internals import global_step_read_tensor
        self._next_step = None
        self._prepare_output_dir()
        self._global_step_tensor = global_step_read_tensor(tf)  # the tensor TF's hook reads
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")
        # The writer is looked up here rather than in __init__: in Keras mode there is no
        # graph for a FileWriter, and a cached writer closed by FileWriterCache.clear()
        # between sessions would drop events.
        self._writer = tf.compat.v1.summary.FileWriterCache.get(self._output_dir)
        self._level = None

    def after_create_session(self, session, coord) -> None:
        pass

    def before_run(self, run_context):
        import tensorflow as tf

        v1 = tf.compat.v1
        self._request = self._wants_next()
        options = None
        if self._request:
            options = v1.RunOptions(trace_level=self._trace_level(tf, run_context.session))
        return v1.train.SessionRunArgs({"global_step": self._global_step_tensor}, options=options)

    def after_run(self, run_context, run_values) -> None:
        def record(step: int) -> None:
            self._write_timeline(step, run_values.run_metadata.step_stats)
            self._writer.add_run_metadata(run_values.run_metadata, f"step_{step}")

        self._advance(int(run_values.results["global_step"]),
                      lambda: int(run_context.session.run(self._global_step_tensor)), record)

    def end(self, session) -> None:
        if self._writer is not None:
            self._writer.flush()

    def _trace_level(self, tf, session) -> int:
        """SOFTWARE_TRACE on a local CPU session (FULL_TRACE's fields, no profiler session)
        and while a TF2 profiler runs (FULL_TRACE would fail after executing the step);
        FULL_TRACE with GPUs or a cluster target, where SOFTWARE_TRACE records nothing."""
        from ..capture.session import auto_trace_level, tf2_profiler_active
        levels = tf.compat.v1.RunOptions
        if self._level is None:
            self._level = levels.FULL_TRACE if auto_trace_level(tf, session) == "full" else levels.SOFTWARE_TRACE
        return levels.SOFTWARE_TRACE if tf2_profiler_active() else self._level

    # --- Keras callback -------------------------------------------------------------------
    def set_model(self, model) -> None:
        self.model = model

    def set_params(self, params) -> None:
        self.params = params

    def on_train_begin(self, logs=None) -> None:
        from ..capture.call_ties import StepGuard
        self._prepare_output_dir()
        self._discard_profile()  # a fit that raised mid-batch left its capture open
        # Keras calls no callback when a step raises: the guard stops the capture then.
        self._guard = StepGuard(self.model, "train_function", self._discard_profile)
        self._next_step = None
        iterations = getattr(getattr(self.model, "optimizer", None), "iterations", None)
        self._keras_step = int(np.asarray(iterations)) if iterations is not None else 0

    def on_train_batch_begin(self, batch, logs=None) -> None:
        self._batch_begin = batch
        self._request = self._wants_next()
        if self._request:
            from ..capture.profiler import ProfileTrace
            self._profile = ProfileTrace(steps=1, step_name="train")
            self._profile.tie_to_call()  # a fit that raises elsewhere: its watch thread stops it
            try:
                self._profile.begin_step(self._next_step)
            except BaseException:  # refused, or Ctrl-C landing here: nothing may stay open
                self._discard_profile()
                raise

    def on_train_batch_end(self, batch, logs=None) -> None:
        stale = self._keras_step
        steps = max(batch - self._batch_begin, 0) + 1  # more than 1 with steps_per_execution > 1
        self._keras_step = stale + steps

        def record(step: int) -> None:
            profile = self._profile
            try:
                profile.end_step()
            except BaseException:
                self._discard_profile()
                raise
            self._profile = None
            self._write_keras_step(step, profile.trace)

        self._advance(stale, lambda: self._keras_step, record, steps)

    def on_train_end(self, logs=None) -> None:
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.remove()
        self._discard_profile()

    def _discard_profile(self) -> None:
        profile, self._profile = self._profile, None
        if profile is not None:
            profile.abort()

    def _write_keras_step(self, step: int, trace) -> None:
        from ..writers.tensorboard import file_name, write_events
        self._write_timeline(step, trace.to_run_metadata().step_stats)
        host = file_name(socket.gethostname())
        write_events(trace, self._path(f"events.out.tfevents.{int(time.time()):010d}.{host}.step_{step}"),
                     tag=f"step_{step}")

    # Keras calls these on every callback; the hook has nothing to do there.
    def _ignore(self, *args: Any, **kwargs: Any) -> None:
        pass

    on_epoch_begin = on_epoch_end = on_batch_begin = on_batch_end = _ignore
    on_test_begin = on_test_end = on_test_batch_begin = on_test_batch_end = _ignore
    on_predict_begin = on_predict_end = on_predict_batch_begin = on_predict_batch_end = _ignore
