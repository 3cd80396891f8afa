"""A Keras callback that traces chosen batches of ``fit``, ``evaluate`` and ``predict``.

Keras 3's ``fit`` marks no steps for the profiler, and Keras's own ``TensorBoard(profile_batch=...)``
fails when tensorboard is not installed (tensorflow-cpu 2.21 does not install it). This
callback marks every traced batch as a step (``train``/``test``/``predict`` with its
running batch number) and profiles only the selected ones::

    callback = tracebridge.keras.TraceCallback(warmup=2, steps=3)
    model.fit(x, y, callbacks=[callback])
    callback.trace.save("fit.json")

When ``fit`` (or ``evaluate``, ``predict``) raises, Keras calls no callback: a step that
raises (a model error, or Ctrl-C landing in it) stops the capture at once through a guard
around the model's step function; an exception elsewhere (another callback, the data, or
Ctrl-C between the callbacks and the step, which is common) is seen by the capture's
watch thread within a fraction of a second (see
:meth:`~tracebridge.capture.profiler.ProfileTrace.tie_to_call`), and the next tracebridge
capture or use of this callback would stop it too. Its data is then dropped (kept with
``keep_on_error=True``), as for any failed step, and the exception propagates unchanged.

What ran is recorded too, as ``trace(fn)`` records it: the graph of Keras's step function
(``multi_step_on_iterator`` and the ``one_step_on_data`` it calls, so ``compare`` aligns a
``fit`` run with its TF1 model by structure), and, under ``jit_compile=True``, the
optimized HLO of the compiled step, which links XLA's thunk events to the TF ops they
compute (``trace.metadata["hlo_modules"]``).

Importing this module imports Keras (and TensorFlow).
"""

from __future__ import annotations

from typing import Any

import keras

from .capture.call_ties import StepGuard
from .capture.profiler import ProfileTrace
from .errors import CaptureError
from .model.trace import Trace

_MODES = ("train", "test", "predict")
_STEP_FUNCTIONS = {"train": "train_function", "test": "test_function", "predict": "predict_function"}


def _closure(function) -> dict[str, Any]:
    """The variables a Python function closes over, by name (empty for other callables)."""
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None)
    if code is None or not cells:
        return {}
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars, cells)}


def step_tf_function(step_function, args: tuple):
    """The ``tf.function`` Keras 3's step function (``model.train_function``...) ran for
    ``args``, and the arguments it took: ``(function, args)``, or ``(None, ())``.

    Keras builds the step function as a closure over two ``tf.function`` objects
    (``keras/src/backend/tensorflow/trainer.py``): ``multi_step_on_iterator``, which it
    runs on a ``tf.data`` iterator and which calls the other, and ``one_step_on_data``
    (wrapped to convert optionals), which it runs on each batch of any other iterable.
    The closure is read by the names Keras gives them."""
    import tensorflow as tf
    if len(args) != 1:
        return None, ()
    on_iterator = _closure(step_function).get("multi_step_on_iterator")
    if isinstance(args[0], (tf.data.Iterator, tf.distribute.DistributedIterator)) and \
            hasattr(on_iterator, "get_concrete_function"):
        return on_iterator, args
    return None, ()


def compiled_step(step_function, iterator):
    """Under ``jit_compile=True``: the ``tf.function`` XLA compiles (Keras's
    ``one_step_on_data``, unwrapped) and a batch of the iterator's shapes to get its HLO
    for (zeros: the HLO depends on shapes, not values), or None for the batch where the
    iterator's shapes are not static. ``(None, None)`` without XLA."""
    import tensorflow as tf
    from .capture import tf_internals
    one_step = getattr(_closure(step_function).get("one_step_on_data"), "__wrapped__", None)
    if not tf_internals.jit_compiled(one_step):
        return None, None
    specs = tf.nest.flatten(getattr(iterator, "element_spec", None))
    if not specs or not all(isinstance(s, tf.TensorSpec) and s.shape.is_fully_defined() for s in specs):
        return one_step, None
    zeros = [tf.zeros(s.shape, s.dtype) for s in specs]
    return one_step, tf.nest.pack_sequence_as(iterator.element_spec, zeros)


class TraceCallback(keras.callbacks.Callback):
    """Trace batches of ``fit`` (``train``), ``evaluate`` (``test``) and ``predict``.

    ``modes``: which of those to trace (default: ``("train",)``). Batches are counted across
    epochs per mode, and ``warmup``/``every``/``steps`` select among them. Other options are
    :class:`~tracebridge.capture.profiler.ProfileTrace`'s (tracer levels, ``keep_on_error``).
    After the run, ``.trace`` is the :class:`Trace` of all traced batches. Validation inside
    ``fit`` pauses the train capture (TF has one profiler); it resumes at the next batch.
    """

    def __init__(self, *, modes: tuple[str, ...] = ("train",), warmup: int = 0, every: int = 1,
                 steps: int | None = None, **options: Any):
        super().__init__()
        unknown = set(modes) - set(_MODES)
        if unknown:
            raise CaptureError(f"modes must be among {', '.join(_MODES)}, not {sorted(unknown)}")
        self._modes = tuple(modes)
        self._captures = {mode: ProfileTrace(warmup=warmup, every=every, steps=steps, step_name=mode,
                                             **options) for mode in self._modes}
        self._guards: dict[str, StepGuard] = {}
        self._open: str | None = None

    def _start(self, mode: str) -> None:
        capture = self._captures.get(mode)
        if capture is None:
            return
        self._abort(mode)  # what an earlier call that raised left open, if anything
        for other, paused in self._captures.items():
            if other != mode:
                paused.pause()
        capture.tie_to_call()
        self._guards[mode] = StepGuard(self.model, _STEP_FUNCTIONS[mode], lambda: self._abort(mode),
                                       on_return=lambda step, args, kwargs: self._record(mode, step, args))

    def _record(self, mode: str, step_function, args: tuple) -> None:
        """Record the graph that ran in ``mode``'s steps (once; see ProfileTrace.record_graph)."""
        capture = self._captures[mode]
        if capture.graph_recorded:
            return
        function, function_args = step_tf_function(step_function, args)
        if function is None:
            capture.note("graph not recorded: Keras's step function runs no tf.function "
                         "(run_eagerly, or a Keras version tracebridge does not know)")
            capture.record_graph(None, (), {})
            return
        capture.record_graph(function, function_args, {})
        try:
            compiled, batch = compiled_step(step_function, args[0])
        except Exception as error:  # the capture stands without HLO; fit goes on
            capture.note(f"HLO not recorded: {str(error).splitlines()[0][:200] if str(error) else type(error).__name__}")
            return
        if compiled is not None:
            if batch is None:  # a partial last batch, or tf.data's batch() without drop_remainder
                capture.note("HLO not recorded: the batches' shapes are not static and the profile lists no HLO",
                             unless_hlo=True)
            else:
                capture.record_hlo(compiled, (batch,), {})

    def _abort(self, mode: str) -> None:
        if self._open == mode:
            self._open = None
        self._captures[mode].abort()

    def _begin(self, mode: str) -> None:
        if mode in self._captures:
            try:
                self._captures[mode].begin_step()
            except BaseException:  # refused, or Ctrl-C landing here: nothing may stay open
                self._abort(mode)
                raise
            self._open = mode

    def _end(self, mode: str) -> None:
        if self._open == mode:
            self._open = None
            try:
                self._captures[mode].end_step()
            except BaseException:
                self._abort(mode)
                raise

    def _finish(self, mode: str) -> None:
        guard = self._guards.pop(mode, None)
        if guard is not None:
            guard.remove()
        if mode in self._captures:
            self._end(mode)
            self._captures[mode].stop()

    def on_train_begin(self, logs=None):
        self._start("train")

    def on_test_begin(self, logs=None):
        self._start("test")

    def on_predict_begin(self, logs=None):
        self._start("predict")

    def on_train_batch_begin(self, batch, logs=None):
        self._begin("train")

    def on_train_batch_end(self, batch, logs=None):
        self._end("train")

    def on_test_batch_begin(self, batch, logs=None):
        self._begin("test")

    def on_test_batch_end(self, batch, logs=None):
        self._end("test")

    def on_predict_batch_begin(self, batch, logs=None):
        self._begin("predict")

    def on_predict_batch_end(self, batch, logs=None):
        self._end("predict")

    def on_train_end(self, logs=None):
        self._finish("train")

    def on_test_end(self, logs=None):
        self._finish("test")

    def on_predict_end(self, logs=None):
        self._finish("predict")

    @property
    def trace(self) -> Trace:
        """Every traced batch of every mode, merged into one trace."""
        traces = [self._captures[mode].trace for mode in self._modes]
        traced = [t for t in traces if len(t)]
        if len(traced) <= 1:
            return traced[0] if traced else traces[0]
        from .model.merge import merge_traces
        return merge_traces(traced)
