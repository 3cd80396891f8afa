"""Faults during capture, with real TensorFlow 2.21 (issue 7, part 2).

For the TF1 session path and the TF2 path (the default ``tf.profiler`` route and the
profiler-server route that tracer levels take), and for the places outputs are written
(``trace(logdir=...)``, ``trace.save``, ProfilerHook's ``output_dir``, tfvis pickles):

* the traced code raises, or is interrupted (KeyboardInterrupt raised, or a real SIGINT
  sent to the process while a step runs): the very same exception propagates, the
  profiler is stopped, no file or temporary folder is left, and the next trace works;
* a profiler is already running (tracebridge's own, or someone else's): a one-line
  CaptureError, and the other profiler goes on and saves as it would have;
* the output folder cannot be written, or disappears: OutputError on one line, or, for a
  folder deleted while the profiler runs, a normal result (the profiler holds its data in
  memory until it stops and TF creates the folder again; ProfilerHook creates its folder
  again too), and nothing partial left;
* the disk fills (RLIMIT_FSIZE in a process of its own): OutputError, no partial file,
  and the process profiles and writes again once space is back.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge import CaptureError, OutputError
from tracebridge.capture.capture_lock import held as tracebridge_capture_active
from tracebridge.capture.call_ties import StepGuard
from tests.conftest import build_mlp, mlp_feed

HELPERS = Path(__file__).parent / "helpers"
ROUTES = {"profiler": {}, "server": {"host_tracer_level": 2}}


class Boom(Exception):
    """The user's own exception."""


@pytest.fixture(params=["custom", "keyboard"])
def error(request):
    """A fresh exception object of the user's: their own type, or KeyboardInterrupt."""
    return Boom("the user's own failure") if request.param == "custom" else KeyboardInterrupt()


def user_code(error: BaseException):
    raise error


def assert_same(info, error: BaseException) -> None:
    """The exception that came out is the one raised: same object, not chained to
    anything, its traceback ending where the user raised it."""
    assert info.value is error
    assert error.__cause__ is None and error.__context__ is None
    assert info.traceback[-1].name == "user_code"


@pytest.fixture
def clean_tmp(tmp_path, monkeypatch):
    """tracebridge's temporary folders go to a folder of this test's own, which must be
    empty again at the end (autograph's generated files aside)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if not p.name.startswith("__autograph_generated_file"))


@pytest.fixture(scope="module")
def tiny(tf):
    @tf.function
    def step(a):
        return tf.nn.relu(tf.matmul(a, a))

    a = tf.random.normal([64, 64], seed=1)
    step(a)
    return lambda: step(a)


@pytest.fixture
def mlp(tf):
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = tf.compat.v1.Session(graph=graph)
    session.run(init)
    feed = mlp_feed(x, y)
    yield session, train_op, feed, (x, y)
    session.close()


def wait_until_stopped(limit: float = 5.0) -> None:
    """A Keras callback's capture left by a fit that raised outside its step is stopped by
    its watch thread, a few tenths of a second later (WATCH_INTERVAL_S)."""
    deadline = time.monotonic() + limit
    while tracebridge_capture_active() and time.monotonic() < deadline:
        time.sleep(0.05)


def assert_recovered(tf, tiny, clean_tmp: Path, tmp_path: Path) -> None:
    """The profiler is stopped, a user's own tf.profiler session works, tracebridge's
    next trace works, and no temporary file is left."""
    from tensorflow.python.profiler import profiler_v2
    assert not tracebridge_capture_active()
    assert profiler_v2._profiler is None
    theirs = tmp_path / f"users-profile-{time.monotonic_ns()}"
    tf.profiler.experimental.start(str(theirs))
    tiny()
    tf.profiler.experimental.stop()
    assert list(theirs.glob("plugins/profile/*/*.xplane.pb"))
    with tracebridge.trace() as after:
        tiny()
    assert len(after.trace) > 0
    assert leftovers(clean_tmp) == []


def one_line(error: BaseException) -> str:
    text = str(error)
    assert text and "\n" not in text
    return text


# --- (a, b) the traced code raises, or KeyboardInterrupt is raised in it ------------------

@pytest.mark.parametrize("route", ROUTES)
def test_tf2_block_raises(tf, tiny, error, route, clean_tmp, tmp_path):
    with pytest.raises(type(error)) as info:
        with tracebridge.trace(**ROUTES[route]) as capture:
            with capture.step():
                tiny()
            user_code(error)
    assert_same(info, error)
    assert len(capture.trace) == 0 and "nothing was profiled" in capture.trace.metadata["notes"]
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_tf2_block_raises_keep_on_error(tf, tiny, error, clean_tmp, tmp_path):
    with pytest.raises(type(error)) as info:
        with tracebridge.trace(keep_on_error=True) as capture:
            with capture.step():
                tiny()
            with capture.step():
                user_code(error)
    assert_same(info, error)
    assert [s.number for s in capture.trace.steps] == [0, 1]  # the data up to the failure is kept
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("route", ROUTES)
def test_tf2_traced_function_raises(tf, tiny, error, route, clean_tmp, tmp_path):
    calls = []

    def train_step():
        calls.append(1)
        tiny()
        if len(calls) == 3:
            user_code(error)

    traced = tracebridge.trace(train_step, **ROUTES[route])
    traced()
    traced()
    with pytest.raises(type(error)) as info:
        traced()
    assert_same(info, error)
    assert_recovered(tf, tiny, clean_tmp, tmp_path)
    traced()  # the traced function itself goes on: a new session for its next call
    traced.stop()
    assert len(traced.trace.steps) == 1
    assert leftovers(clean_tmp) == []


def test_tf2_logdir_failed_session_leaves_nothing_and_keeps_earlier_ones(tf, tiny, error, clean_tmp, tmp_path):
    logdir = tmp_path / "logs"
    with tracebridge.trace(logdir=logdir) as first:
        tiny()
    kept = {p: p.read_bytes() for p in logdir.rglob("*.xplane.pb")}
    assert [p.parts[-5] for p in kept] == ["session-1"]
    with pytest.raises(type(error)) as info:
        with tracebridge.trace(logdir=logdir):
            tiny()
            user_code(error)
    assert_same(info, error)
    assert sorted(p.name for p in logdir.iterdir()) == ["session-1"]  # the failed session-2 is gone
    assert {p: p.read_bytes() for p in logdir.rglob("*.xplane.pb")} == kept
    with tracebridge.trace(logdir=logdir) as third:  # a folder of its own: session-1 stays as it was
        tiny()
    assert sorted(p.name for p in logdir.iterdir()) == ["session-1", "session-2"]
    assert {p: p.read_bytes() for p in logdir.glob("session-1/**/*.xplane.pb")} == kept
    assert len(first.trace) > 0 and len(third.trace) > 0
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("level", ["auto", "full"])
def test_tf1_block_raises(tf, tiny, mlp, error, level, clean_tmp, tmp_path):
    session, train_op, feed, _ = mlp
    with pytest.raises(type(error)) as info:
        with tracebridge.trace(session, trace_level=level) as capture:
            session.run(train_op, feed)
            user_code(error)
    assert_same(info, error)
    assert "run" not in vars(session)  # the session's own run is back
    assert [s.number for s in capture.trace.steps] == [0]  # TF1 keeps each finished run
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("level", ["auto", "full"])
def test_tf1_run_fails_inside_tensorflow(tf, tiny, mlp, level, clean_tmp, tmp_path):
    session, train_op, feed, (x, y) = mlp
    bad = {**feed, y: np.full(64, 99)}  # a label outside the 10 classes: TF fails inside the run
    with tracebridge.trace(session, trace_level=level) as capture:
        with pytest.raises(tf.errors.InvalidArgumentError, match="label"):
            session.run(train_op, bad)
        session.run(train_op, feed)  # the capture goes on
    assert [s.number for s in capture.trace.steps] == [1]
    from tracebridge.compat.session import run_traced
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run_traced(session, train_op, feed_dict=bad, options=options, run_metadata=tf.compat.v1.RunMetadata())
    assert "run" not in vars(session)
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def _keras_model(keras, fail_at: int | None, error: BaseException | None):
    """A small model run eagerly, whose training step raises ``error`` on its
    ``fail_at``-th call. (Raised from train_step, not from a layer: Keras replaces an
    exception raised in Layer.call by a new one with more text, whatever tracebridge does.)"""
    calls = []

    class Tripwire(keras.Sequential):
        def train_step(self, data):
            calls.append(1)
            if fail_at is not None and len(calls) == fail_at:
                user_code(error)
            return super().train_step(data)

    model = Tripwire([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    return model


def _xy(n=64):
    rng = np.random.default_rng(0)
    return rng.random((n, 8), dtype=np.float32), rng.random((n, 4), dtype=np.float32)


def test_trace_callback_step_raises(tf, tiny, error, clean_tmp, tmp_path):
    """Keras calls no callback when fit raises; the guard around the step stops the capture
    at once (the profiler is free right after fit, before any other trace)."""
    keras = pytest.importorskip("keras")
    from tensorflow.python.profiler import profiler_v2

    from tracebridge.keras import TraceCallback
    model = _keras_model(keras, fail_at=4, error=error)
    callback = TraceCallback()
    with pytest.raises(type(error)) as info:
        model.fit(*_xy(), batch_size=8, callbacks=[callback], verbose=0)
    assert_same(info, error)
    assert profiler_v2._profiler is None and not tracebridge_capture_active()
    assert not isinstance(model.__dict__.get("train_function"), StepGuard)  # the model is given back
    assert len(callback.trace) == 0  # a failed step's session is dropped (keep_on_error keeps it)
    model.fit(*_xy(16), batch_size=8, callbacks=[callback], verbose=0)  # the callback is usable again
    assert len(callback.trace.steps) == 2
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("stopped_by", ["watch thread", "next capture"])
def test_trace_callback_other_callback_raises(tf, tiny, clean_tmp, tmp_path, stopped_by, monkeypatch):
    """An exception outside the step (here another callback's) reaches no guard: the
    capture's watch thread sees the fit that drove it gone and stops it; a capture started
    before that (the watch made slow here) stops it too instead of being refused."""
    keras = pytest.importorskip("keras")
    from tracebridge.capture import profiler
    if stopped_by == "next capture":
        monkeypatch.setattr(profiler, "WATCH_INTERVAL_S", 30.0)

    from tracebridge.keras import TraceCallback
    boom = Boom("from another callback")

    class Bomb(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                user_code(boom)

    model = _keras_model(keras, None, None)
    callback = TraceCallback()
    with pytest.raises(Boom) as info:
        model.fit(*_xy(), batch_size=8, callbacks=[callback, Bomb()], verbose=0)
    assert_same(info, boom)
    if stopped_by == "watch thread":
        wait_until_stopped()
    else:
        assert tracebridge_capture_active()  # the profiler still runs...
        with tracebridge.trace() as after:   # ...until the next capture, which stops it and works
            tiny()
        assert len(after.trace) > 0
    model.fit(*_xy(16), batch_size=8, callbacks=[callback], verbose=0)  # and the callback again
    assert len(callback.trace.steps) == 2
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_profiler_hook_keras_step_raises(tf, tiny, error, clean_tmp, tmp_path):
    keras = pytest.importorskip("keras")
    from tracebridge.compat.profiler_hook import ProfilerHook
    out = tmp_path / "hook"
    model = _keras_model(keras, fail_at=6, error=error)
    with pytest.raises(type(error)) as info:
        model.fit(*_xy(), batch_size=8, verbose=0, callbacks=[ProfilerHook(save_steps=1, output_dir=str(out))])
    assert_same(info, error)
    names = sorted(p.name for p in out.iterdir())
    assert names and not any(n.startswith(".tracebridge-") for n in names)
    for timeline in out.glob("timeline-*.json"):  # every output there is complete
        json.loads(timeline.read_text())
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_profiler_hook_session_raises(tf, tiny, error, clean_tmp, tmp_path):
    from tracebridge.compat.profiler_hook import ProfilerHook
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    out = tmp_path / "hook"
    with pytest.raises(type(error)) as info:
        with graph.as_default():
            with v1.train.MonitoredTrainingSession(hooks=[ProfilerHook(save_steps=1, output_dir=str(out))]) as s:
                for step in range(4):
                    s.run(train_op, feed_dict=mlp_feed(x, y, seed=step))
                    if step == 2:
                        user_code(error)
    v1.summary.FileWriterCache.clear()
    assert_same(info, error)
    assert sorted(p.name for p in out.glob("timeline-*")) == ["timeline-2.json", "timeline-3.json"]
    assert not list(out.glob(".tracebridge-*"))
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_tfvis_block_raises(tf, tiny, error, clean_tmp, tmp_path):
    from tracebridge.compat.tfvis import Timeline
    with pytest.raises(type(error)) as info:
        with Timeline() as timeline:
            tiny()
            user_code(error)
    assert_same(info, error)
    assert not timeline.run_metadata.step_stats.dev_stats
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


# --- (b) a real SIGINT while a step runs --------------------------------------------------

@contextlib.contextmanager
def sigint_after(seconds: float):
    """Send this process a real SIGINT from another thread after ``seconds``; the block
    must run until it arrives (see :func:`until_interrupted`).

    Python cannot raise an exception from a weakref callback or ``__del__`` that happens to
    be running (TF's own, or the garbage collector's): it reports the interrupt as
    unraisable and drops it. A person presses Ctrl-C again; so does this, unless the
    callback was tracebridge's, which must never run where an interrupt is lost."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_hook = sys.unraisablehook
    timers = [threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))]
    ours = []

    def unraisable(info):
        if isinstance(info.exc_value, KeyboardInterrupt):
            where = getattr(info.object, "__module__", "") or repr(info.object)
            if "tracebridge" in where:
                ours.append(where)
            timers.append(threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)))
            timers[-1].start()
        else:
            previous_hook(info)

    sys.unraisablehook = unraisable
    timers[0].start()
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()
            timer.join()
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous)
        assert not ours, f"an interrupt was lost in tracebridge's {ours}"  # replaces the interrupt


def until_interrupted(step, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        step()
    raise AssertionError("no SIGINT arrived")


@pytest.mark.parametrize("route", ROUTES)
def test_sigint_during_tf2_block(tf, tiny, route, clean_tmp, tmp_path):
    capture = tracebridge.trace(**ROUTES[route])  # the interrupt may land as the profiler starts
    with pytest.raises(KeyboardInterrupt):
        with sigint_after(0.3 if route == "profiler" else 0.6):
            with capture:
                until_interrupted(tiny)
    assert len(capture.trace) == 0
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_sigint_during_traced_function(tf, tiny, clean_tmp, tmp_path):
    traced = tracebridge.trace(lambda: tiny(), keep_on_error=True)
    traced()  # a step before the interrupt can land, however long the first call takes under load
    with pytest.raises(KeyboardInterrupt):
        with sigint_after(0.3):
            until_interrupted(traced)
    traced.stop()  # the interrupt may have landed between two calls
    assert len(traced.trace.steps) > 0  # keep_on_error: the steps before the interrupt
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("level", ["auto", "full"])
def test_sigint_during_tf1_runs(tf, tiny, mlp, level, clean_tmp, tmp_path):
    session, train_op, feed, _ = mlp
    capture = tracebridge.trace(session, trace_level=level)
    with pytest.raises(KeyboardInterrupt):
        with capture:
            session.run(train_op, feed)  # a step recorded before the interrupt can land, whatever the load
            with sigint_after(0.3):
                until_interrupted(lambda: session.run(train_op, feed))
    assert "run" not in vars(session)
    assert len(capture.trace.steps) > 0
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_sigint_during_keras_fit(tf, tiny, clean_tmp, tmp_path):
    keras = pytest.importorskip("keras")
    from tracebridge.keras import TraceCallback
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.random((4096, 32), dtype=np.float32), rng.integers(0, 10, 4096)
    callback = TraceCallback(steps=3000)  # bounded, whatever happens
    with pytest.raises(KeyboardInterrupt):
        with sigint_after(1.0):
            model.fit(x, y, batch_size=32, epochs=50, callbacks=[callback, _Deadline(keras)], verbose=0)
    wait_until_stopped()  # at once when it landed in the step, else by the watch thread
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def _Deadline(keras, seconds: float = 30.0):
    """Stops a fit whose interrupt never came (Python drops a KeyboardInterrupt raised
    inside a __del__), rather than letting it run and profile for minutes."""
    class Deadline(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.started = time.monotonic()

        def on_train_batch_end(self, batch, logs=None):
            if time.monotonic() - self.started > seconds:
                self.model.stop_training = True

    return Deadline()


def test_sigint_during_profiler_hook_writes(tf, tiny, clean_tmp, tmp_path):
    """ProfilerHook writes a timeline per step: wherever the interrupt lands, what is in
    the output folder is complete."""
    from tracebridge.compat.profiler_hook import ProfilerHook
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    out = tmp_path / "hook"
    feed = mlp_feed(x, y)
    with pytest.raises(KeyboardInterrupt):
        with graph.as_default():
            with v1.train.MonitoredTrainingSession(hooks=[ProfilerHook(save_steps=1, output_dir=str(out))]) as s:
                # a first step's timeline before the interrupt can land: under load, the
                # session's start alone took longer than the 0.5 s (a CI run found none)
                s.run(train_op, feed_dict=feed)
                with sigint_after(0.5):
                    until_interrupted(lambda: s.run(train_op, feed_dict=feed))
    v1.summary.FileWriterCache.clear()
    timelines = list(out.glob("timeline-*.json"))
    assert timelines and not list(out.glob(".tracebridge-*"))
    for timeline in timelines:
        json.loads(timeline.read_text())
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test, whatever this process inherited: started
    as a background job of a script (``make test &``), it starts with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("kind", ["tf2", "tf1"])
def test_interrupt_as_exit_begins_is_held_back(tf, tiny, mlp, kind, python_sigint, clean_tmp, tmp_path):
    """Python can raise KeyboardInterrupt on the first instruction of ``__exit__``, before
    any of its code runs. The SIGINT handler tracebridge puts in place for the block holds
    it back there and ``__exit__`` raises it once everything is stopped. (Called here
    with the frame it gets at that moment, as the timing cannot be forced.)"""
    from tracebridge.capture import interrupts
    from tracebridge.capture.profiler import ProfileTrace
    from tracebridge.capture.session import SessionTrace
    session, train_op, feed, _ = mlp
    capture = tracebridge.trace() if kind == "tf2" else tracebridge.trace(session)
    exit_code = (ProfileTrace if kind == "tf2" else SessionTrace).__exit__.__code__
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        with capture:
            tiny() if kind == "tf2" else session.run(train_op, feed)
            handler = signal.getsignal(signal.SIGINT)
            assert handler is interrupts._handler
            with pytest.raises(KeyboardInterrupt):  # anywhere else: Python's behaviour
                handler(signal.SIGINT, sys._getframe())
            handler(signal.SIGINT, types.SimpleNamespace(f_code=exit_code))  # held back
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert len(capture.trace) > 0  # the block itself succeeded: its data is kept
    assert "run" not in vars(session)
    assert_recovered(tf, tiny, clean_tmp, tmp_path)



IGNORED_SIGINT_CAPTURES = """
import signal, sys
import tensorflow as tf
import tracebridge
from tests.conftest import build_mlp, mlp_feed
seen = [signal.getsignal(signal.SIGINT)]
a = tf.random.normal([64, 64], seed=1)
with tracebridge.trace() as tf2:
    tf.matmul(a, a)
    seen.append(signal.getsignal(signal.SIGINT))
seen.append(signal.getsignal(signal.SIGINT))
graph, x, y, train_op, loss, init = build_mlp(tf)
session = tf.compat.v1.Session(graph=graph)
session.run(init)
with tracebridge.trace(session) as tf1:
    session.run(train_op, mlp_feed(x, y))
    seen.append(signal.getsignal(signal.SIGINT))
seen.append(signal.getsignal(signal.SIGINT))
assert len(tf2.trace) > 0 and len(tf1.trace) > 0
print(["ignored" if h is signal.SIG_IGN else repr(h) for h in seen])
"""


def test_an_ignored_sigint_stays_ignored(tf):
    """A process that inherits SIGINT ignored (a background job of a script) keeps it
    ignored through TF2 and TF1 captures: tracebridge neither replaces nor restores it."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", IGNORED_SIGINT_CAPTURES], capture_output=True, text=True,
                            env=env, timeout=300, cwd=str(Path(__file__).parents[1]),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(["ignored"] * 5)

@pytest.mark.slow
def test_sigint_at_random_moments(tf, tiny, mlp, clean_tmp, tmp_path):
    """SIGINT at random moments of short TF2 and TF1 captures and a save: it lands while
    the profiler starts, runs, stops, while the trace is built or written. Every time the
    interrupt propagates and leaves no running profiler, no temporary or partial file."""
    from tensorflow.python.profiler import profiler_v2
    session, train_op, feed, _ = mlp
    out = tmp_path / "out"
    out.mkdir()
    rng = random.Random(7)
    for attempt in range(60):
        with pytest.raises(KeyboardInterrupt) as info:
            with sigint_after(rng.uniform(0.0, 0.006)):
                with tracebridge.trace() as capture:
                    tiny()
                with tracebridge.trace(session, trace_level="full") as tf1:
                    session.run(train_op, feed)
                capture.trace.save(out / "tf2.json")
                tf1.trace.save(out / "tf1.json")
                until_interrupted(lambda: time.sleep(0.001), limit=10)
        landed = (attempt, [f"{os.path.basename(str(e.path))}:{e.lineno + 1} {e.name}" for e in info.traceback[-3:]])
        assert not tracebridge_capture_active(), landed
        assert profiler_v2._profiler is None, landed
        assert "run" not in vars(session), landed
        assert leftovers(clean_tmp) == [], landed
        assert sorted(p.name for p in out.iterdir()) in ([], ["tf2.json"], ["tf1.json", "tf2.json"]), landed
        for path in out.iterdir():
            assert len(tracebridge.load(path)) > 0
            path.unlink()
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


# --- (c) a profiler already running -------------------------------------------------------

def test_traced_function_dropped_with_its_session_open(tf, tiny, clean_tmp, tmp_path):
    """A traced function profiles until it is stopped; dropped before that, it gives the
    profiler back (a finalizer: no __del__, which would swallow a KeyboardInterrupt)."""
    traced = tracebridge.trace(lambda: tiny())
    traced()
    traced()
    assert tracebridge_capture_active()
    del traced
    gc.collect()
    assert_recovered(tf, tiny, clean_tmp, tmp_path)



@pytest.mark.parametrize("route", ROUTES)
def test_nested_tracebridge_capture(tf, tiny, route, clean_tmp, tmp_path):
    inner_route = "server" if route == "profiler" else "profiler"
    with tracebridge.trace(**ROUTES[route]) as outer:
        with outer.step():
            tiny()
        with pytest.raises(CaptureError) as info:
            with tracebridge.trace(**ROUTES[inner_route]):
                tiny()
        assert "another tracebridge capture is running" in one_line(info.value)
        with pytest.raises(CaptureError):
            tracebridge.trace(lambda: tiny())()
        with outer.step():  # the outer capture is untouched
            tiny()
    assert [s.number for s in outer.trace.steps] == [0, 1]
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_keras_fit_inside_a_capture_is_refused(tf, tiny, clean_tmp, tmp_path):
    keras = pytest.importorskip("keras")
    from tracebridge.keras import TraceCallback
    model = _keras_model(keras, None, None)
    with tracebridge.trace() as outer:
        tiny()
        with pytest.raises(CaptureError) as info:
            model.fit(*_xy(16), batch_size=8, callbacks=[TraceCallback()], verbose=0)
        one_line(info.value)
        tiny()
    assert len(outer.trace) > 0
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.parametrize("route", ROUTES)
def test_users_tf2_profiler_running(tf, tiny, mlp, route, clean_tmp, tmp_path):
    session, train_op, feed, _ = mlp
    theirs = tmp_path / "theirs"
    tf.profiler.experimental.start(str(theirs))
    try:
        tiny()
        with pytest.raises(CaptureError) as info:
            with tracebridge.trace(**ROUTES[route]):
                tiny()
        assert "another profiler is already running" in one_line(info.value)
        # A TF1 FULL_TRACE inside their profile would fail after running the step:
        # tracebridge uses SOFTWARE_TRACE instead, and says so.
        with tracebridge.trace(session, trace_level="full") as tf1:
            session.run(train_op, feed)
        tiny()
    finally:
        tf.profiler.experimental.stop()  # their profiler stops and saves as usual
    profile = list(theirs.glob("plugins/profile/*/*.xplane.pb"))
    assert len(profile) == 1
    names = {o.name for o in tracebridge.load(profile[0]).records()}
    assert any("MatMul" in n for n in names)
    assert len(tf1.trace.steps) == 1 and "SOFTWARE_TRACE was used" in tf1.trace.metadata["notes"]
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


@pytest.mark.slow  # fixed waits: a second for the server's Terminate, their 4 s capture
def test_someone_elses_remote_capture_of_this_process(tf, tiny, mlp, clean_tmp, tmp_path):
    """A capture through this process's profiler server cannot be seen beforehand: a TF2
    capture gets CaptureError, and a TF1 FULL_TRACE run a CaptureError after its step ran
    (later runs use SOFTWARE_TRACE); the remote capture saves its profile as usual."""
    from tracebridge.capture import profiler_sessions
    session, train_op, feed, _ = mlp
    with tracebridge.trace(host_tracer_level=2):  # makes sure this process runs a profiler server
        tiny()
    # tracebridge ended that capture with Terminate calls for its start second(s), which the
    # server would also apply to another capture starting in the same second.
    time.sleep(1.1)
    address = f"localhost:{profiler_sessions._SERVER_PORT}"
    theirs = tmp_path / "remote"
    remote = threading.Thread(target=tf.profiler.experimental.client.trace, args=(address, str(theirs), 4000))
    remote.start()
    try:
        time.sleep(1.5)  # their capture has started
        with pytest.raises(CaptureError) as info:
            with tracebridge.trace():
                tiny()
        assert "another profiler is already running" in one_line(info.value)
        with tracebridge.trace(session, trace_level="full") as tf1:
            with pytest.raises(CaptureError) as info:
                session.run(train_op, feed)
            assert "failed after the step ran" in one_line(info.value)
            session.run(train_op, feed)  # traced with SOFTWARE_TRACE
        assert tf1.trace.metadata["trace_level"] == "SOFTWARE_TRACE" and len(tf1.trace.steps) == 1
        while remote.is_alive():
            tiny()
    finally:
        remote.join(30)
    assert list(theirs.glob("plugins/profile/*/*.xplane.pb"))
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


# --- (d) output folders that cannot be written, or disappear ------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_logdir_deleted_while_profiling_is_written_again(tf, tiny, route, clean_tmp, tmp_path):
    """The profiler keeps its data in memory until it stops, and TF creates the folder
    again: the capture succeeds, which is what the user asked for."""
    logdir = tmp_path / "logs"
    with tracebridge.trace(logdir=logdir, **ROUTES[route]) as capture:
        tiny()
        shutil.rmtree(logdir)
        tiny()
    assert len(capture.trace) > 0
    assert len(list(logdir.glob("session-*/plugins/profile/*/*.xplane.pb"))) == 1
    with tracebridge.trace() as temporary:  # the same for tracebridge's temporary folder
        tiny()
        for folder in clean_tmp.glob("tracebridge-*"):
            shutil.rmtree(folder)
    assert len(temporary.trace) > 0
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_logdir_replaced_by_a_file_while_profiling(tf, tiny, clean_tmp, tmp_path):
    """Deleted and replaced by a file: TF cannot write the profile; OutputError on one
    line, the user's file untouched, the profiler stopped."""
    logdir = tmp_path / "logs"
    with pytest.raises(OutputError) as info:
        with tracebridge.trace(logdir=logdir):
            tiny()
            shutil.rmtree(logdir)
            logdir.write_text("someone's file")
    assert "could not be written" in one_line(info.value)
    assert logdir.read_text() == "someone's file"
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_logdir_under_a_file_is_refused_before_profiling(tf, tiny, clean_tmp, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    ran = []
    with pytest.raises(OutputError) as info:
        with tracebridge.trace(logdir=blocker / "logs"):
            ran.append(1)
    assert "cannot create a profile folder" in one_line(info.value) and ran == []
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def test_save_into_a_folder_deleted_meanwhile(tf, tiny, clean_tmp, tmp_path):
    with tracebridge.trace() as capture:
        tiny()
    out = tmp_path / "out"
    out.mkdir()
    shutil.rmtree(out)
    for name in ("trace.json", "trace.json.gz", "trace.pb", "trace.xplane.pb", "trace.html"):
        with pytest.raises(OutputError) as info:
            capture.trace.save(out / name)
        assert "cannot write there" in one_line(info.value)
    assert not out.exists()


def test_profiler_hook_output_dir_deleted_during_training(tf, tiny, clean_tmp, tmp_path):
    """ProfilerHook creates its folder again: the next traced steps land in it."""
    from tracebridge.compat.profiler_hook import ProfilerHook
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    out = tmp_path / "hook"
    with graph.as_default():
        with v1.train.MonitoredTrainingSession(hooks=[ProfilerHook(save_steps=1, output_dir=str(out))]) as s:
            for step in range(5):
                s.run(train_op, feed_dict=mlp_feed(x, y, seed=step))
                if step == 2:
                    shutil.rmtree(out)
    v1.summary.FileWriterCache.clear()
    assert sorted(p.name for p in out.glob("timeline-*")) == ["timeline-4.json", "timeline-5.json"]
    for timeline in out.glob("timeline-*"):
        json.loads(timeline.read_text())
    assert_recovered(tf, tiny, clean_tmp, tmp_path)


def _worker(mode: str, folder: Path) -> dict:
    env = {**os.environ, "TMPDIR": str(folder / "tmp"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(HELPERS / "fault_worker.py"), mode, str(folder)],
                            capture_output=True, text=True, env=env, timeout=600,
                            cwd=str(Path(__file__).parents[1]))
    lines = result.stdout.strip().splitlines()
    if not lines or lines[0] != "ready":
        return {"failed_to_start": result.stderr[-3000:]}
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(lines[-1])


def test_unwritable_output_folders(tf):
    """chmod 0o500 folders. Root writes into them anyway, so as root the worker becomes
    user nobody (after a first round as root), and its folders must be reachable by that
    user: made in the system's temporary folder, not under pytest's private one."""
    base = Path(tempfile.mkdtemp(prefix="tracebridge-faults-"))
    try:
        (base / "tmp").mkdir()
        if os.geteuid() == 0:
            for path in (base, base / "tmp"):
                os.chown(path, 65534, 65534)
        found = _worker("unwritable", base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "failed_to_start" not in found, found
    if "cannot_run_as_nobody" in found:
        pytest.skip(f"{found['cannot_run_as_nobody']} (a checkout in a private folder)")
    if not found["permissions_apply"]:
        pytest.skip("this user bypasses file permissions")
    for case in ("capture_logdir", "save", "logdir_read_only_meanwhile", "tmpdir_read_only", "profiler_hook_keras"):
        result = found[case]
        assert result["error"] == "OutputError", (case, result)
        assert "\n" not in result["message"]
        assert result.get("left", []) == [], case
        assert result.get("profiler_free", True), case
    assert "cannot create a profile folder" in found["capture_logdir"]["message"]
    assert found["logdir_read_only_meanwhile"]["folders"] == []  # its failed session folder is gone
    assert found["capture_after"]["error"] is None and found["capture_after"]["value"] > 0
    assert found["capture_logdir_after"]["error"] is None
    assert found["profiler_free_at_end"]


# --- (e) the disk fills -------------------------------------------------------------------

def test_disk_full(tf, tmp_path):
    (tmp_path / "tmp").mkdir()
    found = _worker("disk-full", tmp_path)
    assert "failed_to_start" not in found, found
    for case, error in (("capture_default", "OutputError"), ("capture_logdir", "OutputError"),
                        ("capture_server", "CaptureError")):
        result = found[case]
        assert result["error"] == error, (case, result)
        assert "\n" not in result["message"] and result["left"] == [] and result["profiler_free"], (case, result)
    assert "File too large" in found["capture_default"]["message"]
    saves = [k for k in found if k.startswith("save_tf")]
    assert len(saves) == 7
    for case in saves + ["profiler_hook", "tfvis_pickle"]:
        result = found[case]
        assert result["error"] == "OutputError" and "File too large" in result["message"], (case, result)
        assert not [f for f in result["left"] if not f.startswith("hook/events.")], (case, result)  # nothing partial
    # Space back: the same process captures and writes again.
    assert found["capture_after"]["error"] is None and found["capture_after"]["value"] > 0
    assert found["save_after"]["error"] is None and "after.json" in found["save_after"]["value"]
    assert found["capture_after_all"]["error"] is None and found["profiler_free_at_end"]
