"""A Keras callback that traces chosen batches of ``fit``, ``evaluate`` and ``predict``.

Keras 3's ``fit`` marks no steps for the profiler, and Keras's own ``TensorBoard(profile_batch=...)``
fails when tensorboard is not installed (tensorflow-cpu 2.21 does not install it). This
callback marks every traced batch as a step (``train``/``test``/``predict`` with its
running batch number) and profiles only the selected ones::

    callback = tracebridge.keras.TraceCallback(warmup=2, steps=3)
    model.fit(x, y, callbacks=[callback])
    callback.trace.save("fit.json")

Importing this module imports Keras (and TensorFlow).
"""

from __future__ import annotations

from typing import Any

import keras

from .capture.profiler import ProfileTrace
from .errors import CaptureError
from .model.trace import Trace

_MODES = ("train", "test", "predict")


class TraceCallback(keras.callbacks.Callback):
    """Trace batches of ``fit`` (``train``), ``evaluate`` (``test``) and ``predict``.

    ``modes``: which of those to trace (default: ``("train",)``). Batches are counted across
    epochs per mode, and ``warmup``/``every``/``steps`` select among them. Other options are
    :class:`~tracebridge.capture.profiler.ProfileTrace`'s (tracer levels, ``keep_on_error``).
    After the run, ``.trace`` is the :class:`Trace` of all traced batches.
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
        self._open: str | None = None

    def _begin(self, mode: str) -> None:
        if mode in self._captures:
            self._captures[mode].begin_step()
            self._open = mode

    def _end(self, mode: str) -> None:
        if self._open == mode:
            self._captures[mode].end_step()
            self._open = None

    def _finish(self, mode: str) -> None:
        if mode in self._captures:
            self._end(mode)
            self._captures[mode].finish()

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
