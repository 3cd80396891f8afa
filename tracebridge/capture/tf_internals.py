"""Every private TensorFlow and xprof name tracebridge relies on, and nothing else.

TensorFlow's public API cannot do a few things a capture needs: tell whether
``tf.profiler.experimental.start`` is running, undo what an interrupted start or stop left
behind, mark a step the way TF's tools group steps, send tracer levels that really apply,
end a server-side capture early, read the global step as TF's ProfilerHook does, find the
cluster target of a MonitoredSession. Each of those touches is one function here, and the
rest of tracebridge calls only these functions (``tests/test_imports.py`` fails if another
module names a private TF or xprof attribute). When TF or xprof changes one of them, this
module is the one to update.

Each function says which versions it was verified with: TensorFlow 2.21.0 and xprof
(``tensorboard-plugin-profile``) 2.24.2. An internal that has gone missing raises
:class:`CaptureError` naming the installed version, instead of an AttributeError from deep
inside a capture. Nothing here imports TensorFlow at import time: remote capture uses
xprof's client in a process without TensorFlow.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import importlib.util
import sys
import time
from typing import Any, Callable

from ..errors import CaptureError, MissingDependencyError

VERIFIED_TF = "2.21.0"
VERIFIED_XPROF = "2.24.2"


def _installed(*distributions: str) -> str:
    for name in distributions:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return "(version unknown)"


def _tf_version() -> str:
    tf = sys.modules.get("tensorflow")
    return getattr(tf, "__version__", None) or _installed("tensorflow", "tensorflow-cpu")


def _missing_in_tf(what: str) -> CaptureError:
    return CaptureError(f"TensorFlow {_tf_version()} has no {what}, which tracebridge's capture "
                        f"relies on (verified with TensorFlow {VERIFIED_TF})")


# --- tf.profiler.experimental's session object ---------------------------------------------

def _profiler_v2():
    try:
        from tensorflow.python.profiler import profiler_v2
    except ImportError:
        raise _missing_in_tf("tensorflow.python.profiler.profiler_v2 module") from None
    if not hasattr(profiler_v2, "_profiler"):
        raise _missing_in_tf("profiler_v2._profiler (the session of tf.profiler.experimental.start)")
    return profiler_v2


def tf2_profiler_session() -> Any:
    """The object ``tf.profiler.experimental.start`` keeps while its profiler runs
    (``profiler_v2._profiler``); None when none runs. TF exposes no public "is the
    profiler running" call. Verified with TF 2.21.0: ``start()`` sets it before the native
    start and keeps it when that start is refused; ``stop()`` clears it only after the
    export returns."""
    return _profiler_v2()._profiler


def tf2_profiler_running() -> bool:
    """Whether ``tf.profiler.experimental.start`` has a profiler running. A TensorFlow
    without the v2 profiler module cannot conflict with it: False. Verified with TF 2.21.0."""
    try:
        from tensorflow.python.profiler import profiler_v2  # noqa: F401
    except ImportError:
        return False
    return tf2_profiler_session() is not None


def forget_tf2_profiler(session: Any = None) -> None:
    """Make TF forget its profiler session object (only if it is still ``session``, when
    given); dropping the object stops its native profiler. Needed after a refused start
    (TF 2.21.0 keeps the object then, and refuses every later start) and after a start or
    stop interrupted half-way. Verified with TF 2.21.0."""
    profiler_v2 = _profiler_v2()
    if session is None or profiler_v2._profiler is session:
        profiler_v2._profiler = None


# --- step markers ---------------------------------------------------------------------------

def step_marker(tf) -> Callable[[str, int], Any]:
    """A function ``mark(name, number)`` giving the context manager that marks one step:
    ``tf.profiler.experimental.Trace(name, step_num=number, _r=1)``. ``_r=1`` makes it a
    root event, the one TF's tools (and tracebridge's XSpace reader) group into steps, as
    TF's own docstring example does. Checked once here: a traced call pays one call.
    Verified with TF 2.21.0."""
    trace = getattr(getattr(tf.profiler, "experimental", None), "Trace", None)
    if trace is None:
        raise _missing_in_tf("tf.profiler.experimental.Trace")

    def mark(name: str, number: int):
        return trace(name, step_num=number, _r=1)

    return mark


# --- xprof's capture client -----------------------------------------------------------------

def xprof_capture(purpose: str) -> Callable[..., None]:
    """xprof's capture client as ``capture(address, logdir, include_dataset_ops,
    duration_ms, attempts, options)``: one Profile request to a profiler server, its profile
    written under ``logdir/plugins/profile/<session id>/``. It sends tracer levels as typed
    values (TF's own ``tf.profiler.experimental.client.trace`` drops them in TF 2.21) and
    needs no TensorFlow. Its only Python entry is the private
    ``xprof.convert._pywrap_profiler_plugin.trace``. Verified with xprof 2.24.2.
    MissingDependencyError without xprof (``purpose`` says what needed it)."""
    if importlib.util.find_spec("xprof") is None:
        raise MissingDependencyError(purpose, "tf")
    try:
        from xprof.convert import _pywrap_profiler_plugin as plugin
        trace = plugin.trace
    except (ImportError, AttributeError):
        raise CaptureError(f"xprof {_installed('xprof', 'tensorboard-plugin-profile')} has no "
                           f"_pywrap_profiler_plugin.trace, which {purpose} relies on (verified with "
                           f"xprof {VERIFIED_XPROF})") from None

    def capture(address: str, logdir: str, include_dataset_ops: bool, duration_ms: int,
                attempts: int, options: dict) -> None:
        trace(address, logdir, "", include_dataset_ops, duration_ms, attempts, options)

    return capture


# --- ending a server-side capture early -----------------------------------------------------
#
# xprof's client names a capture after its own clock when it sends the request
# ("%Y_%m_%d_%H_%M_%S", local time: also the run folder's name) and neither takes nor
# returns that session id: the call blocks for the whole capture and returns nothing (xprof
# 2.24.2). Its continuous-profiling calls, which need no id, start against TF 2.21.0's
# server but their snapshot writes no profile (tried). So the id is inferred from the time
# the call began.
# The server remembers a Terminate for an id that is not running and applies it to the next
# capture with that id: a later capture must not start in a second already terminated.

_last_server_session_id: str | None = None


def server_session_id() -> str:
    """A session id for one capture through this process's profiler server, passed to
    xprof's client as ``options["session_id"]`` (accepted by xprof 2.24.2's client, which
    otherwise names the capture after its clock), so that :func:`end_server_capture` ends
    exactly that capture. It has the form of the client's own ids, the local time to the
    second, so run folders keep their usual names, and is never the same twice in this
    process: the server keeps a ``Terminate`` for an id that is not running and would apply
    it to the next capture with that id. Waits for the next second when needed."""
    global _last_server_session_id
    while True:
        now = datetime.datetime.now()
        session_id = now.strftime("%Y_%m_%d_%H_%M_%S")
        if session_id != _last_server_session_id:
            _last_server_session_id = session_id
            return session_id
        time.sleep(1 - now.microsecond / 1e6)


def end_server_capture(address: str, session_id: str) -> None:
    """End the capture ``session_id`` early with the profiler server's ``Terminate`` RPC
    (``/tensorflow.ProfilerService/Terminate``), which neither TF nor xprof wraps in Python.
    Best effort: a capture it did not reach runs to its duration, and its caller reports
    that. Verified with TF 2.21.0's profiler server and xprof 2.24.2's client."""
    import grpc

    from .. import protos
    channel = grpc.insecure_channel(address)
    try:
        call = channel.unary_unary("/tensorflow.ProfilerService/Terminate",
                                   request_serializer=lambda message: message.SerializeToString(),
                                   response_deserializer=lambda data: data)
        with contextlib.suppress(grpc.RpcError):
            call(protos.TerminateRequest(session_id=session_id), timeout=10)
    finally:
        channel.close()


# --- TF1 sessions ---------------------------------------------------------------------------

def global_step_read_tensor(tf) -> Any:
    """The tensor TF's ProfilerHook reads the global step through:
    ``training_util._get_or_create_global_step_read()``, the global step plus 0, created
    once per graph and shared with TF's other hooks, so that the value read is the one
    before the step's update. Verified with TF 2.21.0. Unlike the other internals, this
    one has a public stand-in: a TensorFlow without it gets the global step variable
    (``tf.compat.v1.train.get_global_step()``). None when the graph has no global step."""
    try:
        from tensorflow.python.training import training_util
    except ImportError:
        training_util = None
    read = getattr(training_util, "_get_or_create_global_step_read", None)
    return read() if read is not None else tf.compat.v1.train.get_global_step()


def session_target(session: Any, depth: int = 6) -> str:
    """The master a TF1 session runs on (``""`` in-process, ``"grpc://host:port"``):
    ``Session.sess_str``, public, but MonitoredSession and its wrappers (recoverable,
    coordinated, hooked) keep the session they wrap in the private ``_sess``, and
    MonitoredSession itself has no ``sess_str``. Verified with TF 2.21.0. A session-like
    object of another library that has neither gives ``""``; a TensorFlow one raises
    CaptureError."""
    for _ in range(depth):
        target = getattr(session, "sess_str", None)
        if isinstance(target, (str, bytes)):
            return target.decode() if isinstance(target, bytes) else target
        if not hasattr(session, "_sess"):
            if type(session).__module__.startswith("tensorflow."):
                raise _missing_in_tf(f"{type(session).__name__}._sess (the session a MonitoredSession wraps)")
            break
        session = session._sess
        if session is None:  # a closed MonitoredSession
            break
    return ""


# --- which kernels this TensorFlow runs ------------------------------------------------------

def onednn_enabled() -> bool | None:
    """Whether the running TensorFlow computes with oneDNN kernels (``_MklMatMul`` and the
    like), which tensorflow-cpu turns on by default only on some CPUs and
    ``TF_ENABLE_ONEDNN_OPTS`` switches; None when this TensorFlow cannot say. Recorded with
    captures, since kernel names and fusions follow it. Verified with TensorFlow 2.21.0:
    ``tensorflow.python.util._pywrap_util_port.IsMklEnabled()``."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def jit_compiled(function: Any) -> bool:
    """Whether ``function`` is a ``tf.function(jit_compile=True)``: its private
    ``_jit_compile`` (TF 2.21.0; the public API has no reader for the flag)."""
    return getattr(function, "_jit_compile", None) is True


# --- what `tracebridge run` wraps ------------------------------------------------------------
#
# `tracebridge run` wraps, at class level, the calls a script's steps go through. The classes
# are reached from public objects (no private module path is named), but which class in a
# public class's ancestry defines a method, and the class of tf.function objects, are TF's
# internals: verified with TF 2.21.0 and Keras 3.15.

def defining_class(cls: type, name: str) -> type:
    """The class in ``cls``'s ancestry that defines ``name``: wrapping it there covers
    every subclass that inherits it. ``Session.run`` is ``BaseSession``'s (shared with
    ``InteractiveSession``); ``MonitoredSession.run`` is its private base's (shared with
    ``SingularMonitoredSession``). Verified with TF 2.21.0."""
    for owner in cls.__mro__:
        if name in vars(owner):
            return owner
    raise _missing_in_tf(f"{cls.__name__}.{name}")


def function_class(tf) -> type:
    """The class of ``tf.function`` objects, whose ``__call__`` every call of a traced
    function goes through (``polymorphic_function.Function`` in TF 2.21.0), found from a
    ``tf.function`` made here rather than by its module path."""
    function_type = type(tf.function(lambda: None))
    if "__call__" not in vars(function_type):
        raise _missing_in_tf("tf.function class with its own __call__")
    return function_type


def silence_marker(marker: Any) -> None:
    """Make a ``tf.profiler.experimental.Trace`` made without running its ``__init__``
    record nothing: its ``__exit__`` and ``set_metadata`` then do nothing (``_traceme =
    None``, what ``__init__`` sets while no profiler runs). `tracebridge run` replaces a
    script's step marker by its capture's own this way. Verified with TF 2.21.0."""
    marker._traceme = None
