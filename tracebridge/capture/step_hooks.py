"""Where ``tracebridge run`` catches a script's steps, whatever API makes them.

The script runs unmodified. These hooks wrap, at class level, the calls that make a step in
each of TensorFlow's styles, and hand the steps to the capture that already traces that
style (no second capture code):

==========================================  ===========================================  ====================================
the script's steps                          wrapped                                      captured by
==========================================  ===========================================  ====================================
TF1 ``session.run``                         ``Session.run`` (its class, ``BaseSession``)  ``SessionTrace`` on that session
``MonitoredSession.run``                    the class that defines it                    ``SessionTrace`` on the monitored one
Keras ``fit``                               ``keras.Model.fit``                          a ``TraceCallback`` added to its callbacks
Keras ``train_on_batch``                    ``keras.Model.train_on_batch``               a ``ProfileTrace``, a call a step
a ``tf.function`` called in a loop          the ``tf.function`` class's ``__call__``     ``ProfileTrace(fn)``, as ``trace(fn)``
eager code with ``Trace(.., step_num=n)``   ``tf.profiler.experimental.Trace``           a ``ProfileTrace``'s ``begin_step``/``end_step``
==========================================  ===========================================  ====================================

Why wrap the calls rather than run TF's profiler over the whole script: a TF1 session records
its steps only when each ``run`` asks for a trace level (and FULL_TRACE collides with a TF2
profiler), a ``tf.function`` loop and Keras 3's ``fit`` mark no steps the profiler could
group by, and profiling every step of a long run costs memory for nothing. Wrapping the
calls gives each style its step boundaries, and profiles only the steps asked for.

The first step wins: the first of these calls the script makes at top level chooses the API
(and, for sessions and ``tf.function``, the object); calls of the others then run untouched.
Calls made inside another wrapped call are never steps: the setup and clean-up runs of a
``MonitoredSession``, the ``tf.function`` Keras runs inside ``fit``, ``evaluate`` and
``predict``, the capture's own step markers. A ``tf.function`` defined inside TensorFlow or
Keras (a checkpoint's save function, say) is not a step either; a Keras 2 (``tf_keras``)
``fit`` is caught through its train function, a ``tf.function`` called once per batch.

Classes are wrapped when their module has been imported (:class:`AfterImport`), not before:
a script sets TensorFlow's environment (``TF_CPP_MIN_LOG_LEVEL``, ``TF_ENABLE_ONEDNN_OPTS``,
``CUDA_VISIBLE_DEVICES``, ``TF_USE_LEGACY_KERAS``) before it imports TensorFlow, and a
script that never imports it does not pay for it. :meth:`StepHooks.remove` puts every class
back as it was.

A script that runs a profiler of its own (``tf.profiler.experimental.start``, a tracebridge
capture) when its first TF2 step comes is left alone, and a note says so.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import inspect
import os
import sys
import threading
from typing import Any, Callable

from ..errors import CaptureError, TracebridgeError
from ..model.trace import Trace
from . import capture_lock, tf_internals
from .profiler_sessions import first_line
from .schedule import Schedule

_MISSING = object()


class Patch:
    """``owner.name`` replaced by ``make(original)`` until :meth:`undo`."""

    def __init__(self, owner: type, name: str, make: Callable[[Callable], Callable]):
        self.owner, self.name = owner, name
        self.saved = vars(owner).get(name, _MISSING)
        original = getattr(owner, name)
        self.replacement = functools.wraps(original)(make(original))
        setattr(owner, name, self.replacement)

    def undo(self) -> None:
        if vars(self.owner).get(self.name) is not self.replacement:
            return  # replaced again since: not ours to undo
        if self.saved is _MISSING:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.saved)


class AfterImport(importlib.abc.MetaPathFinder):
    """A finder first on ``sys.meta_path`` that runs ``then[name](module)`` once module
    ``name`` has been executed: it finds the module's spec with the finders after it, and
    wraps the loader for that one execution."""

    def __init__(self, then: dict[str, Callable[[Any], None]]):
        self._then = dict(then)

    def find_spec(self, name, path, target=None):
        then = self._then.get(name)
        if then is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            del self._then[name]
            spec.loader = _LoaderThen(spec.loader, then)
        return spec


class _LoaderThen(importlib.abc.Loader):
    """A module's own loader, then ``then(module)``; the module keeps its own loader."""

    def __init__(self, loader, then: Callable[[Any], None]):
        self._loader, self._then = loader, then

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name: str):
        return getattr(self._loader, name)


# --- what caught the steps: one of these, made by the first step ----------------------------

class Source:
    """The API that made the first step, and the capture that traces its steps."""

    api: str = ""
    owner: Any = None  # the session or tf.function whose calls are the steps (None: any)

    def finish(self) -> Trace:
        """Stop capturing and give the trace."""
        raise NotImplementedError


class SessionSource(Source):
    """``session.run`` calls (a Session or a MonitoredSession), traced by ``SessionTrace``."""

    def __init__(self, session, schedule: Schedule, api: str):
        from .session import SessionTrace
        self.api, self.owner = api, session
        self.capture = SessionTrace(session, warmup=schedule.warmup, steps=schedule.steps)
        self.capture.__enter__()

    def finish(self) -> Trace:
        self.capture.__exit__(None, None, None)
        return self.capture.trace


class ProfileSource(Source):
    """TF2 steps traced by one ``ProfileTrace`` (of ``function`` when given)."""

    def __init__(self, api: str, schedule: Schedule, function=None, step_name: str = "train"):
        from .profiler import ProfileTrace
        _refuse_when_profiling()
        self.api, self.owner = api, function
        self.capture = ProfileTrace(function, warmup=schedule.warmup, steps=schedule.steps, step_name=step_name,
                                    keep_on_error=True)

    def finish(self) -> Trace:
        self.capture.stop()
        return self.capture.trace


class FunctionSource(ProfileSource):
    """The calls of one ``tf.function``, each a step, as ``trace(fn)`` traces them."""


class BatchSource(ProfileSource):
    """Keras ``train_on_batch`` calls, each a step (Keras calls no callback there)."""


class MarkerSource(ProfileSource):
    """Eager steps the script marks with ``tf.profiler.experimental.Trace(name, step_num=n)``."""


class KerasFitSource(Source):
    """Batches of Keras ``fit``, traced by one ``TraceCallback`` added to every ``fit``."""

    api = "Keras fit"

    def __init__(self, schedule: Schedule):
        from ..keras import TraceCallback
        _refuse_when_profiling()
        self.callback = TraceCallback(warmup=schedule.warmup, steps=schedule.steps, keep_on_error=True)

    def add_to(self, callbacks):
        """``fit``'s ``callbacks`` argument with the capture's callback in it."""
        if callbacks is None:
            return [self.callback]
        if isinstance(callbacks, (list, tuple)):
            return [*callbacks, self.callback] if self.callback not in callbacks else callbacks
        if self.callback not in getattr(callbacks, "callbacks", ()):  # a keras CallbackList
            callbacks.append(self.callback)
        return callbacks

    def finish(self) -> Trace:
        return self.callback.trace  # its capture stopped at the end of each fit


def _refuse_when_profiling() -> None:
    if capture_lock.held() or tf_internals.tf2_profiler_running():
        raise CaptureError("the script runs a profiler of its own (tf.profiler.experimental.start or a "
                           "tracebridge capture); its steps were left alone")


# --- the hooks ----------------------------------------------------------------------------

class StepHooks:
    """The wrapped classes of one ``tracebridge run``, and what they caught.

    :meth:`install` before the script runs, :meth:`finish` and :meth:`remove` after it.
    ``source`` is what caught the steps (None: no step reached); ``notes`` what went wrong
    on the way (a hook that could not be set, a capture refused)."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.source: Source | None = None
        self.notes: list[str] = []
        self._refused = False  # a capture was refused: the script's steps are left alone
        self._lock = threading.Lock()
        self._local = threading.local()  # .depth: wrapped calls running in this thread
        self._patches: list[Patch] = []
        self._finder: AfterImport | None = None
        self._markers: dict[int, Any] = {}  # id -> a script's step marker replaced by the capture's
        self._framework_roots: tuple[str, ...] = ()

    # --- installing -------------------------------------------------------------------
    def install(self) -> None:
        pending = {}
        for name, wrap in (("tensorflow", self._wrap_tensorflow), ("keras", self._wrap_keras)):
            wrap = functools.partial(self._safely, wrap)
            if name in sys.modules:
                wrap(sys.modules[name])
            else:
                pending[name] = wrap
        self._finder = AfterImport(pending)
        sys.meta_path.insert(0, self._finder)

    def remove(self) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        while self._patches:
            self._patches.pop().undo()

    def _safely(self, wrap: Callable[[Any], None], module) -> None:
        """Wrap a module's classes; a failure is noted, never raised into the script's import."""
        try:
            wrap(module)
        except Exception as error:
            self.notes.append(f"steps made through {module.__name__} are not caught: {first_line(error)}")

    def _patch(self, owner: type, name: str, make: Callable[[Callable], Callable]) -> None:
        self._patches.append(Patch(owner, name, make))

    def _wrap_tensorflow(self, tf) -> None:
        self._framework_roots += (os.path.dirname(tf.__file__) + os.sep,)
        session = tf_internals.defining_class(tf.compat.v1.Session, "run")
        self._patch(session, "run", functools.partial(self._session_run, "TF1 Session.run", None))
        monitored = tf_internals.defining_class(tf.compat.v1.train.MonitoredSession, "run")
        self._patch(monitored, "run", functools.partial(self._session_run, "TF1 MonitoredSession.run",
                                                        self.framework_call))
        for name in ("__init__", "close", "__exit__"):  # their runs are set-up and clean-up, no steps
            self._patch(monitored, name, self.framework_call)
        self._patch(tf_internals.function_class(tf), "__call__", functools.partial(self._function_call, tf))
        marker = tf.profiler.experimental.Trace
        self._patch(marker, "__init__", self._marker_init)
        self._patch(marker, "__exit__", self._marker_exit)

    def _wrap_keras(self, keras) -> None:
        self._framework_roots += (os.path.dirname(keras.__file__) + os.sep,)
        self._patch(keras.Model, "fit", self._fit)
        self._patch(keras.Model, "train_on_batch", self._train_on_batch)
        for name in ("evaluate", "predict", "test_on_batch", "predict_on_batch"):
            self._patch(keras.Model, name, self.framework_call)

    # --- finishing --------------------------------------------------------------------
    def finish(self) -> Trace | None:
        """Stop the capture and give its trace (None when no step was reached)."""
        return None if self.source is None else self.source.finish()

    # --- who may claim ----------------------------------------------------------------
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @contextlib.contextmanager
    def inside(self):
        """A wrapped call runs: the calls it makes are not steps."""
        self._local.depth = self._depth() + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    def _claim(self, make: Callable[[], Source]) -> Source | None:
        """The source of the steps: made by ``make`` if this is the first step reached at
        top level, else the one made before (None after a refusal)."""
        if self.source is not None or self._refused or self._depth():
            return self.source
        with self._lock:
            if self.source is None and not self._refused:
                try:
                    self.source = make()
                except TracebridgeError as error:
                    self._refused = True
                    self.notes.append(str(error))
        return self.source

    def _mine(self, kind: type, owner=None) -> Source | None:
        source = self.source
        return source if isinstance(source, kind) and (owner is None or source.owner is owner) else None

    # --- the wrappers -------------------------------------------------------------------
    def framework_call(self, original: Callable) -> Callable:
        """A call whose inner calls are not steps."""
        def call(*args, **kwargs):
            with self.inside():
                return original(*args, **kwargs)
        return call

    def _session_run(self, api: str, wrap_inner: Callable | None, original: Callable) -> Callable:
        inner = wrap_inner(original) if wrap_inner else original

        def run(session, *args, **kwargs):
            if self.source is None and not self._depth():
                self._claim(lambda: SessionSource(session, self.schedule, api))
                if self._mine(SessionSource, session):
                    # SessionTrace now wraps this session's run: it traces the call, then calls here again
                    return session.run(*args, **kwargs)
            return inner(session, *args, **kwargs)
        return run

    def _function_call(self, tf, original: Callable) -> Callable:
        def call(function, *args, **kwargs):
            if self._depth() or not tf.executing_eagerly():
                return original(function, *args, **kwargs)
            if self.source is None and self._written_by_the_script(function):
                self._claim(lambda: FunctionSource(f"tf.function {_name(function)}", self.schedule, function))
            source = self._mine(FunctionSource, function)
            if source is None:
                return original(function, *args, **kwargs)
            with self.inside():
                return source.capture(*args, **kwargs)  # trace(fn)'s call: a step, calling here again
        return call

    def _written_by_the_script(self, function) -> bool:
        """Not a ``tf.function`` of TensorFlow's or Keras's own."""
        python_function = inspect.unwrap(getattr(function, "python_function", function))
        code = getattr(getattr(python_function, "__func__", python_function), "__code__", None)
        return code is None or not code.co_filename.startswith(self._framework_roots)

    def _marker_init(self, original: Callable) -> Callable:
        def init(marker, name, **kwargs):
            step = kwargs.get("step_num")
            if step is None or self._depth():
                return original(marker, name, **kwargs)
            self._claim(lambda: MarkerSource(f"eager steps marked Trace({name!r}, step_num=...)", self.schedule,
                                             step_name=name))
            source = self._mine(MarkerSource)
            if source is None:
                return original(marker, name, **kwargs)
            with self.inside():  # the capture's marker stands in for the script's
                source.capture.begin_step(_step_number(step))
            tf_internals.silence_marker(marker)
            self._markers[id(marker)] = marker
        return init

    def _marker_exit(self, original: Callable) -> Callable:
        def exit_(marker, exc_type, exc, tb):
            if self._markers.pop(id(marker), None) is None:
                return original(marker, exc_type, exc, tb)
            with self.inside():
                try:
                    self.source.capture.end_step(failed=exc_type is not None)
                except TracebridgeError as error:
                    if exc_type is None:
                        raise
                    self.notes.append(f"stopping the profiler after the step failed failed too: {first_line(error)}")
            return None
        return exit_

    def _fit(self, original: Callable) -> Callable:
        signature = inspect.signature(original)

        def fit(model, *args, **kwargs):
            if self.source is None:
                self._claim(lambda: KerasFitSource(self.schedule))
            source = self._mine(KerasFitSource)
            if source is not None and not self._depth():
                bound = signature.bind(model, *args, **kwargs)
                bound.arguments["callbacks"] = source.add_to(bound.arguments.get("callbacks"))
                args, kwargs = bound.args[1:], bound.kwargs
            with self.inside():
                return original(model, *args, **kwargs)
        return fit

    def _train_on_batch(self, original: Callable) -> Callable:
        def train_on_batch(model, *args, **kwargs):
            if self.source is None:
                self._claim(lambda: BatchSource("Keras train_on_batch", self.schedule))
            source = self._mine(BatchSource)
            with self.inside():
                if source is None or self._depth() > 1:
                    return original(model, *args, **kwargs)
                with source.capture.step():
                    return original(model, *args, **kwargs)
        return train_on_batch


def _name(function) -> str:
    return getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or type(function).__name__


def _step_number(value) -> int | None:
    """The script's ``step_num`` as the step's number (None: the capture counts)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
