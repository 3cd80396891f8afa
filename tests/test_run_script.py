"""``tracebridge run``: unmodified scripts of every style, run as Python would run them, with
their steps caught (tracebridge/capture/script.py, step_hooks.py).

Each script runs in a real ``python -m tracebridge run`` process with TensorFlow 2.21; the
scripts below are what a user would write, with no tracebridge in them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tracebridge
from tests.conftest import REPO, run_cli_process

SCRIPTS = {
    "keras_fit.py": """
        import numpy as np
        import keras

        class Done(keras.callbacks.Callback):
            def on_train_end(self, logs=None):
                print("own callback ran")

        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        x = np.random.default_rng(0).random((64, 8), dtype=np.float32)
        model.fit(x, x.sum(axis=1, keepdims=True), 8, 1, 0, [Done()])  # callbacks passed by position
        """,
    "tf1_loop.py": """
        import numpy as np
        import tensorflow as tf

        v1 = tf.compat.v1
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [None, 8], name="x")
            y = v1.placeholder(tf.float32, [None, 1], name="y")
            w = v1.get_variable("w", [8, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = v1.global_variables_initializer()
        data = np.random.default_rng(0).random((16, 8), dtype=np.float32)
        with v1.Session(graph=graph) as sess:
            sess.run(init)
            for step in range(8):
                sess.run(train_op, {x: data, y: data[:, :1]})
        """,
    # The TF2 port of tf1_loop.py, run as a module (-m ports.tf2_loop): a tf.function step in a loop.
    "ports/__init__.py": "",
    "ports/tf2_loop.py": """
        import sys
        import numpy as np
        import tensorflow as tf

        print("argv", sys.argv[1:], "path0", sys.path[0], __name__)
        fail_at = int(sys.argv[1]) if len(sys.argv) > 1 else -1
        w = tf.Variable(tf.random.normal([8, 1], seed=1), name="w")

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        data = tf.constant(np.random.default_rng(0).random((16, 8), dtype=np.float32))
        for step in range(9):
            if step == fail_at:
                raise RuntimeError(f"failed at step {step}")
            train_step(data, data[:, :1])
        """,
    "eager_marked.py": """
        import tensorflow as tf

        w = tf.Variable(tf.ones((8, 8)))
        for step in range(6):
            with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                x = tf.random.normal((4, 8))
                w.assign_sub(0.01 * tf.matmul(x, x, transpose_a=True))
        """,
    "monitored.py": """
        import numpy as np
        import tensorflow as tf

        v1 = tf.compat.v1
        with tf.Graph().as_default():
            x = v1.placeholder(tf.float32, [None, 8], name="x")
            w = v1.get_variable("w", [8, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
            global_step = v1.train.get_or_create_global_step()
            train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
            with v1.train.MonitoredTrainingSession(hooks=[v1.train.StopAtStepHook(last_step=7)]) as sess:
                while not sess.should_stop():
                    sess.run(train_op, {x: np.ones((4, 8), np.float32)})
        """,
    "train_on_batch.py": """
        import numpy as np
        import keras

        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        x, y = np.ones((8, 8), np.float32), np.ones((8, 1), np.float32)
        model.evaluate(x, y, verbose=0)  # runs Keras's own tf.function: no step
        for _ in range(6):
            model.train_on_batch(x, y)
        """,
    "interrupted.py": """
        import time
        import tensorflow as tf

        double = tf.function(lambda x: x * 2)
        for step in range(1000):
            double(tf.ones(3))
            print("step", step, flush=True)
            time.sleep(0.1)
        """,
    "exits_3.py": """
        import sys
        print("argv", sys.argv, "path0", sys.path[0], __name__)
        sys.exit(3)
        """,
    "no_steps.py": """
        print("nothing to train")
        """,
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scripts")
    for name, text in SCRIPTS.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


def run(folder: Path, *args) -> subprocess.CompletedProcess:
    return run_cli_process("run", *args, cwd=folder, env=_env())


def said(result: subprocess.CompletedProcess) -> list[str]:
    """What ``tracebridge run`` printed (its lines, not TensorFlow's or the script's)."""
    return [line for line in result.stderr.splitlines() if line.startswith("tracebridge run: ")]


def steps_with_matmul(path: Path, tf_build) -> dict[int, bool]:
    """Each step of the trace at ``path``, and whether it ran the model's MatMul (as an op of
    that type, or a kernel computing it)."""
    trace = tracebridge.load(path)
    return {step.number: any(tf_build.computes(op.kernel or op.op_type, "MatMul") or op.op_type == "MatMul"
                             for op in trace.filter(step=step.number).records())
            for step in trace.steps}


@pytest.fixture(scope="module")
def runs(scripts, tf) -> dict[str, subprocess.CompletedProcess]:
    """Every script of each style under ``tracebridge run --steps 2-4`` (made once)."""
    return {
        "keras_fit": run(scripts, "--steps", "2-4", "-o", "keras_fit.json", "keras_fit.py"),
        "tf1_loop": run(scripts, "--steps", "2-4", "-o", "tf1.json", "tf1_loop.py"),
        "tf2_loop": run(scripts, "--steps", "2-4", "-o", "tf2.json", "-m", "ports.tf2_loop"),
        "eager_marked": run(scripts, "--steps", "2-4", "-o", "eager.json", "--", "eager_marked.py"),
        "monitored": run(scripts, "--steps", "2-4", "-o", "monitored.json", "monitored.py"),
        "train_on_batch": run(scripts, "-o", "batches.pftrace", "train_on_batch.py"),
    }


@pytest.mark.parametrize("name,api,output", [
    ("keras_fit", "Keras fit", "keras_fit.json"),
    ("tf1_loop", "TF1 Session.run", "tf1.json"),
    ("tf2_loop", "tf.function train_step", "tf2.json"),
    ("monitored", "TF1 MonitoredSession.run", "monitored.json"),
    ("train_on_batch", "Keras train_on_batch", "batches.pftrace"),
])
def test_an_unmodified_script_gives_three_steps_with_their_ops(runs, scripts, tf_build, name, api, output):
    result = runs[name]
    assert result.returncode == 0, result.stderr
    assert said(result)[0].startswith(f"tracebridge run: caught {api}: 3 steps traced (steps 2-4) of ")
    assert said(result)[1].startswith(f"tracebridge run: wrote {output} (")
    assert steps_with_matmul(scripts / output, tf_build) == {2: True, 3: True, 4: True}


def test_the_script_runs_as_python_runs_it(runs, scripts):
    assert "own callback ran" in runs["keras_fit"].stdout  # fit's own callbacks kept, ours added
    # -m: sys.argv[1:] the module's arguments, sys.path[0] the working folder, run as __main__
    assert f"argv [] path0 {scripts} __main__" in runs["tf2_loop"].stdout


def test_eager_steps_marked_with_trace_are_the_steps(runs, scripts):
    result = runs["eager_marked"]
    assert result.returncode == 0, result.stderr
    assert said(result)[0] == ("tracebridge run: caught eager steps marked Trace('train', step_num=...): "
                               "3 steps traced (steps 2-4) of 6 seen")
    trace = tracebridge.load(scripts / "eager.json")
    assert [(s.number, s.name) for s in trace.steps] == [(2, "train 2"), (3, "train 3"), (4, "train 4")]
    for step in trace.steps:  # its eager ops, one marker a step (the capture's stands in for the script's)
        types = {op.op_type for op in trace.filter(step=step.number).records()}
        assert {"MatMul", "RandomStandardNormal"} <= types


def test_a_tf1_run_and_its_tf2_port_compare(runs, scripts):
    """The README's first comparison: `tracebridge run` of each, then `tracebridge compare`."""
    result = run_cli_process("compare", "tf1.json", "tf2.json", cwd=scripts, env=_env())
    assert result.returncode == 0, result.stderr
    comparison = tracebridge.compare(scripts / "tf1.json", scripts / "tf2.json")
    matched = [row for row in comparison.rows if row.names.control and row.names.test]
    assert any(row.op_type == "MatMul" or "MatMul" in row.key for row in matched)


def test_an_exception_saves_what_was_captured_and_exits_1_with_its_traceback(scripts, tf):
    result = run(scripts, "-o", "failed.json", "-m", "ports.tf2_loop", "6")
    assert result.returncode == 1
    traceback = result.stderr[result.stderr.index("Traceback (most recent call last):"):]
    # Python's own traceback: from the script's frame, without runpy's or tracebridge's
    assert traceback.splitlines()[1].strip().startswith('File "') and "tf2_loop.py" in traceback.splitlines()[1]
    assert "runpy" not in traceback and "tracebridge" not in traceback.split("RuntimeError")[0]
    assert "RuntimeError: failed at step 6" in traceback
    assert said(result)[0].startswith("tracebridge run: caught tf.function train_step: 3 steps traced (steps 2-4)")
    assert [s.number for s in tracebridge.load(scripts / "failed.json").steps] == [2, 3, 4]


def test_ctrl_c_saves_what_was_captured_and_exits_130(scripts, tf):
    # The user's Ctrl-C reaches a terminal's foreground job: where this suite runs with SIGINT
    # ignored (started in the background by a script), the child would inherit that and Python
    # would keep ignoring it, so the child gets the default disposition back, as in a terminal.
    process = subprocess.Popen([sys.executable, "-m", "tracebridge", "run", "--steps", "2-100", "-o", "stopped.json",
                                "interrupted.py"], cwd=scripts, env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in process.stdout:
        if line.startswith("step 6"):
            process.send_signal(signal.SIGINT)
            break
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "KeyboardInterrupt" in stderr
    numbers = [s.number for s in tracebridge.load(scripts / "stopped.json").steps]
    assert numbers[:5] == [2, 3, 4, 5, 6]  # every step before the interrupt


def test_a_script_exit_status_passes_through(scripts):
    result = run(scripts, "exits_3.py", "--flag", "-o", "x")
    assert result.returncode == 3
    # the script's own arguments (a -o among them), its folder as sys.path[0], run as __main__
    assert f"argv ['exits_3.py', '--flag', '-o', 'x'] path0 {scripts} __main__" in result.stdout
    assert said(result) == ["tracebridge run: no step reached: the script made no TF1 session.run, Keras fit or "
                            "train_on_batch, top-level tf.function call or tf.profiler.experimental.Trace(..., "
                            "step_num=N) step; nothing written"]


def test_a_script_without_steps_says_so_and_writes_nothing(scripts):
    result = run(scripts, "-o", "none.json", "no_steps.py")
    assert result.returncode == 0 and "nothing to train" in result.stdout
    assert said(result)[0].startswith("tracebridge run: no step reached")
    assert not (scripts / "none.json").exists()


def test_usage_errors_fail_before_the_script_runs(scripts):
    for args, message in [(["missing.py"], "missing.py: no such script"),
                          (["-m", "no_such_module"], "no module named 'no_such_module'"),
                          (["--steps", "4-2", "exits_3.py"], "--steps '4-2': need 0 <= FIRST <= LAST"),
                          (["-o", "out.unknown", "exits_3.py"], "cannot tell the output format"),
                          ([], "name the script to run")]:
        result = run(scripts, *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert "argv" not in result.stdout
