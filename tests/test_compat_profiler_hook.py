"""tracebridge.compat.profiler_hook.ProfilerHook with real TensorFlow 2.21 and Keras 3: side
by side with TF's own ProfilerHook on one MonitoredTrainingSession (same steps, same files,
same ops, same event tags), save_secs, the constructor check, model.fit, and outputs that
cannot be written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import tracebridge
from tracebridge import OutputError
from tracebridge.compat.profiler_hook import ProfilerHook
from tests.conftest import build_mlp, mlp_feed


def _train(tf, hooks, steps: int, pause_before: dict | None = None) -> None:
    """``steps`` training steps of the conftest MLP under a MonitoredTrainingSession.
    ``hooks``: a list, or a function making it in the graph (TF's hook needs graph mode
    when it is made: its constructor opens a FileWriter)."""
    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    with graph.as_default():
        hooks = hooks() if callable(hooks) else hooks
        with v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            for step in range(steps):
                time.sleep((pause_before or {}).get(step, 0))
                session.run(train_op, feed_dict=mlp_feed(x, y, seed=step))
    # TF's hook never flushes its writer; closing the cached writers puts every event on disk.
    v1.summary.FileWriterCache.clear()


def _timelines(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.startswith("timeline-"))


def _op_names(path) -> set[str]:
    return {op.name for op in tracebridge.load(path).records()}


def _event_names(path) -> set[str]:
    """The op names timeline.py puts into a Chrome trace (args.name of complete events)."""
    events = json.loads(open(path).read())["traceEvents"]
    return {e["args"]["name"] for e in events if e.get("ph") == "X"}


def test_side_by_side_with_tfs_hook_save_steps(tf, tmp_path):
    v1 = tf.compat.v1
    theirs_dir, ours_dir = tmp_path / "tf", tmp_path / "ours"
    ours = ProfilerHook(save_steps=2, output_dir=str(ours_dir))  # made anywhere, eager mode too
    assert not isinstance(ours, v1.train.SessionRunHook)  # duck-typed: nothing subclassed
    _train(tf, lambda: [v1.train.ProfilerHook(save_steps=2, output_dir=str(theirs_dir)), ours], steps=5)
    names = _timelines(theirs_dir)
    assert names == ["timeline-2.json", "timeline-4.json"]   # the first run only starts the timer
    assert _timelines(ours_dir) == names
    for name in names:
        assert _op_names(ours_dir / name) == _op_names(theirs_dir / name)
        assert _event_names(ours_dir / name) == _event_names(theirs_dir / name)
        assert "dense/Relu" in _op_names(ours_dir / name)
    # Event files: a tagged_run_metadata "step_N" per traced step, read back as steps.
    for folder in (theirs_dir, ours_dir):
        events = tracebridge.load(folder)
        assert [(s.number, s.name) for s in events.steps] == [(2, "step_2"), (4, "step_4")]
        assert "dense/Relu" in {op.name for op in events.records()}
    assert [f for f in os.listdir(ours_dir) if f.startswith(".tracebridge-")] == []


def test_save_secs(tf, tmp_path):
    v1 = tf.compat.v1
    hooks = lambda: [v1.train.ProfilerHook(save_secs=0.6, output_dir=str(tmp_path / "tf")),  # noqa: E731
                     ProfilerHook(save_secs=0.6, output_dir=str(tmp_path / "ours"))]
    # Run 0 starts the timer; run 1 follows at once; a pause; run 2 is due; run 3 follows at
    # once; another pause; run 4 is due. The global step after runs 2 and 4 is 3 and 5.
    _train(tf, hooks, steps=5, pause_before={2: 0.9, 4: 0.9})
    assert _timelines(tmp_path / "tf") == ["timeline-3.json", "timeline-5.json"]
    assert _timelines(tmp_path / "ours") == _timelines(tmp_path / "tf")
    assert [s.number for s in tracebridge.load(tmp_path / "ours").steps] == [3, 5]


def test_exactly_one_of_save_steps_and_save_secs(tf, tmp_path):
    for arguments in ({}, {"save_steps": 2, "save_secs": 1.0}):
        with pytest.raises(ValueError, match="exactly one of save_steps and save_secs"):
            ProfilerHook(**arguments)
        with tf.Graph().as_default(), pytest.raises(ValueError):  # TF raises the same type
            tf.compat.v1.train.ProfilerHook(output_dir=str(tmp_path), **arguments)
    tf.compat.v1.summary.FileWriterCache.clear()
    assert ProfilerHook(save_secs=0) is not None


def test_needs_a_global_step(tf, tmp_path):
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        v1.placeholder(tf.float32, [1], name="x")
        with pytest.raises(RuntimeError, match="Global step"):
            with v1.train.MonitoredSession(hooks=[ProfilerHook(save_steps=1, output_dir=str(tmp_path))]):
                pass


def _keras_model(keras):
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(16, activation="relu", name="hidden"),
                              keras.layers.Dense(10, name="logits")])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_keras_fit_traces_the_selected_batches(tf, tmp_path):
    keras = pytest.importorskip("keras")
    model = _keras_model(keras)
    rng = np.random.default_rng(0)
    x, y = rng.random((5 * 32, 32), dtype=np.float32), rng.integers(0, 10, 5 * 32)
    hook = ProfilerHook(save_steps=2, output_dir=str(tmp_path))
    assert not isinstance(hook, keras.callbacks.Callback)
    history = model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[hook])
    assert len(history.history["loss"]) == 1
    assert _timelines(tmp_path) == ["timeline-2.json", "timeline-4.json"]
    for name in _timelines(tmp_path):
        trace = tracebridge.load(tmp_path / name)
        names = {op.name for op in trace.records()}
        # The model's forward, backward and optimizer ops, as the traced tf.function ran them
        # (Keras 3 may add "_1" to scope names).
        assert any(re.search(r"/hidden(_\d+)?/Relu$", n) for n in names), sorted(names)
        assert any(re.search(r"gradient_tape/.*/hidden(_\d+)?/MatMul/MatMul$", n) for n in names)
        assert any(re.search(r"/logits(_\d+)?/BiasAdd$", n) for n in names)
        # The SGD update; its scope is named after however many optimizers the process made.
        assert any(n.rsplit("/", 1)[-1].startswith("AssignSubVariableOp") for n in names), sorted(names)
    events = tracebridge.load(tmp_path)
    assert [(s.number, s.name) for s in events.steps] == [(2, "step_2"), (4, "step_4")]
    # evaluate and predict pass through; a second fit goes on counting from the optimizer's
    # iterations (5): its first batch restarts the timer, then steps 7 and 9 are traced.
    model.evaluate(x, y, batch_size=32, verbose=0, callbacks=[hook])
    model.predict(x, batch_size=32, verbose=0, callbacks=[hook])
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[hook])
    assert _timelines(tmp_path) == ["timeline-2.json", "timeline-4.json", "timeline-7.json", "timeline-9.json"]
    from tracebridge.capture.capture_lock import held as tracebridge_capture_active
    assert not tracebridge_capture_active()


def test_keras_steps_per_execution_counts_optimizer_steps(tf, tmp_path):
    keras = pytest.importorskip("keras")
    model = _keras_model(keras)
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=2)
    rng = np.random.default_rng(1)
    x, y = rng.random((6 * 16, 32), dtype=np.float32), rng.integers(0, 10, 6 * 16)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0,
              callbacks=[ProfilerHook(save_steps=2, output_dir=str(tmp_path))])
    assert int(np.asarray(model.optimizer.iterations)) == 6
    # Three executions of two steps. TF's rule asks about "the last step reached + 1":
    # 0->2 starts the timer at 0; 2->4 is due (3 >= 0 + 2) and its file is named by the
    # step reached; 4->6 is not (5 < 4 + 2).
    assert _timelines(tmp_path) == ["timeline-4.json"]


def test_unwritable_output_dir(tf, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputError, match="cannot create the output folder"):
        _train(tf, [ProfilerHook(save_steps=1, output_dir=str(blocker / "profiles"))], steps=1)
    keras = pytest.importorskip("keras")
    with pytest.raises(OutputError):
        _keras_model(keras).fit(np.zeros((32, 32), np.float32), np.zeros(32, np.int64), verbose=0,
                                callbacks=[ProfilerHook(save_steps=1, output_dir=str(blocker / "keras"))])
    # A timeline that cannot be written (its name is taken by a folder) fails the step and
    # leaves nothing behind.
    out = tmp_path / "out"
    (out / "timeline-2.json").mkdir(parents=True)
    with pytest.raises(OutputError, match="timeline-2.json"):
        _train(tf, [ProfilerHook(save_steps=1, output_dir=str(out))], steps=3)
    assert sorted(f for f in os.listdir(out) if not f.startswith("events.")) == ["timeline-2.json"]
    assert (out / "timeline-2.json").is_dir()


def test_importing_the_compat_modules_imports_no_tensorflow():
    code = ("import sys, tracebridge.compat, tracebridge.compat.profiler_hook, tracebridge.compat.tfvis, "
            "tracebridge.compat.session\n"
            "hook = tracebridge.compat.ProfilerHook(save_steps=3)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
