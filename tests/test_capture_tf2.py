"""TF2 capture with real TensorFlow 2.21: tf.function, eager code, tf.data and Keras fit;
tracer levels that really apply; conflicts, errors and remote workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge import CaptureError
from tracebridge.analysis.common.kernels import kernel_family
from tracebridge.model.schema import Category
from tests.conftest import free_port

HELPERS = Path(__file__).parent / "helpers"


@pytest.fixture(scope="module")
def mlp_step(tf):
    w1 = tf.Variable(tf.random.normal([32, 64], seed=1), name="w1")
    w2 = tf.Variable(tf.random.normal([64, 10], seed=2), name="w2")

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, [w1, w2])
        for var, grad in zip([w1, w2], grads):
            var.assign_sub(0.1 * grad)
        return loss

    x = tf.random.normal([64, 32], seed=3)
    y = tf.random.uniform([64], maxval=10, dtype=tf.int32, seed=4)
    train_step(x, y)  # trace the function before profiling
    return train_step, x, y


def test_traced_function_each_call_a_step(mlp_step, tf, tf_build):
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step)
    losses = [float(traced(x, y)) for _ in range(3)]
    assert all(np.isfinite(losses))
    with pytest.raises(CaptureError, match="capture still running"):
        traced.trace  # reading stops nothing
    traced.stop()
    trace = traced.trace
    assert [(s.number, s.name) for s in trace.steps] == [(0, "train 0"), (1, "train 1"), (2, "train 2")]
    assert trace.metadata["source_format"] == "tf2" and trace.metadata["host_tracer_level"] == 2
    assert trace.metadata["onednn"] is tf_build.onednn
    matmuls = [o for o in trace.records() if tf_build.computes(o.op_type, "MatMul")]
    assert len(matmuls) >= 3 * 2  # both layers' forward matmuls, in every step
    assert kernel_family(o.op_type for o in trace.records()) == tf_build.family
    grads = {o.name for o in trace.records() if o.name.startswith("gradient_tape/")}
    assert grads, "TF2 gradient ops are named gradient_tape/..."
    for step in trace.steps:
        mine = trace.filter(step=step.number)
        assert len(mine.filter(op_type="MatMul")) >= 2
        # Ops belong to the step their start falls in. TF's executor may record an op's end
        # a fraction of a millisecond after the step marker closed (seen in about 1 run in
        # 10 on a loaded machine), so the end is not bounded by the marker.
        starts = mine.ops["start_ns"]
        assert (starts >= step.start_ns).all() and (starts <= step.end_ns).all()
    assert "no memory events" in trace.metadata["notes"]


def test_schedule_profiles_only_selected_calls(mlp_step):
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step, warmup=1, every=2, steps=2)
    for _ in range(6):
        traced(x, y)
    trace = traced.trace
    assert [s.number for s in trace.steps] == [1, 3]
    assert trace.metadata["steps_seen"] == 6
    step_times = [(s.start_ns, s.end_ns) for s in trace.steps]
    op_rows = trace.ops["category"] == Category.OP
    starts = trace.ops["start_ns"][op_rows]
    inside = np.zeros(len(starts), dtype=bool)
    for lo, hi in step_times:
        inside |= (starts >= lo) & (starts <= hi)
    assert inside.all()  # no op from an untraced call


def test_stopping_is_explicit_and_discard_keeps_nothing(mlp_step):
    from tracebridge.capture import capture_lock
    from tracebridge.capture.lifecycle import State
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step)
    traced(x, y)
    assert traced.state is State.RECORDING and capture_lock.held()
    with pytest.raises(CaptureError, match="running already"):
        with traced:  # refused, and the traced function's session goes on untouched
            pass
    traced(x, y)
    traced.stop()
    assert traced.state is State.IDLE and not capture_lock.held()
    assert [s.number for s in traced.trace.steps] == [0, 1]
    traced(x, y)  # a later call profiles again, into the same trace
    traced.stop()
    assert [s.number for s in traced.trace.steps] == [0, 1, 2]
    traced.discard()
    assert len(traced.trace) == 0

    with tracebridge.trace() as capture:
        with capture.step():
            train_step(x, y)
        with pytest.raises(CaptureError, match="capture still running; call stop"):
            capture.trace
        with pytest.raises(CaptureError, match="stops when the block ends"):
            capture.stop()
        capture.discard()  # ends the block's capture now: the profiler is free at once
        assert capture.state is State.IDLE and not capture_lock.held()
    assert len(capture.trace) == 0


def test_with_block_eager_and_steps(tf):
    x = tf.random.normal([32, 32])
    with tracebridge.trace() as capture:
        for _ in range(2):
            with capture.step():
                tf.nn.relu(tf.matmul(x, x))
    trace = capture.trace
    assert len(trace.steps) == 2
    # Eager ops run no executor: TF records EagerExecute annotations, not op events.
    eager = [v for k, v in zip(trace.column_strings("event_stats", "key"),
                               trace.column_strings("event_stats", "value")) if k == "eager_op"]
    assert "MatMul" in eager and "Relu" in eager


def test_tf_data_pipeline(tf):
    dataset = tf.data.Dataset.range(256).map(lambda v: tf.cast(v, tf.float32) * 2.0).batch(16).prefetch(2)

    @tf.function
    def consume(batch):
        return tf.reduce_sum(batch)

    with tracebridge.trace() as capture:
        for i, batch in enumerate(dataset):
            with capture.step(i):
                consume(batch)
    trace = capture.trace
    data = trace.filter(op_type=".")
    names = {o.name for o, category in zip(data.records(), data.ops["category"].tolist()) if category == Category.DATA}
    assert any(n.startswith("Iterator::") for n in names)
    assert trace.table("links").rows > 0
    assert len(trace.steps) == 16


def test_keras_fit_callback(tf):
    import keras

    from tracebridge.keras import TraceCallback
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu", name="dense"),
                              keras.layers.Dense(10, name="logits")])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).random((512, 32), dtype=np.float32)
    y = np.random.default_rng(1).integers(0, 10, 512)
    callback = TraceCallback(modes=("train", "predict"), warmup=2, steps=2)
    model.fit(x, y, batch_size=64, epochs=1, callbacks=[callback], verbose=0)
    model.predict(x, batch_size=64, callbacks=[callback], verbose=0)
    trace = callback.trace
    assert [s.name for s in trace.steps] == ["train 2", "train 3", "predict 2", "predict 3"]
    names = {o.name for o in trace.filter(op_type=".").records()}
    assert any(n.startswith("StatefulPartitionedCall/") and n.endswith("/dense_1/Relu") for n in names)
    assert any("gradient_tape" in n for n in names)


def test_tracer_levels_take_effect(mlp_step):
    train_step, x, y = mlp_step
    results = {}
    for level in (1, 3):
        with tracebridge.trace(host_tracer_level=level) as capture:
            for _ in range(2):
                with capture.step():
                    train_step(x, y)
        results[level] = capture.trace
    one, three = results[1], results[3]
    # The levels recorded by the profiler itself (Task Environment's profile_options).
    assert one.metadata["host_tracer_level"] == 1 and three.metadata["host_tracer_level"] == 3
    assert not (one.ops["category"] == Category.OP).any()       # level 1: no op events
    assert (three.ops["category"] == Category.OP).sum() >= 2 * 5
    keys = set(three.column_strings("event_stats", "key"))
    assert "shape" in keys                               # level 3: shapes on op events
    assert "shape" not in set(one.column_strings("event_stats", "key"))


def test_python_tracer(mlp_step):
    train_step, x, y = mlp_step
    with tracebridge.trace(python_tracer_level=1) as capture:
        with capture.step():
            train_step(x, y)
    trace = capture.trace
    assert trace.metadata["python_tracer_level"] == 1
    assert (trace.ops["category"] == Category.PYTHON).any()


def test_another_profiler_running_is_a_capture_error(tf, tmp_path, mlp_step):
    train_step, x, y = mlp_step
    tf.profiler.experimental.start(str(tmp_path))
    try:
        with pytest.raises(CaptureError, match="another profiler is already running"):
            with tracebridge.trace():
                pass
    finally:
        tf.profiler.experimental.stop()
    with tracebridge.trace() as capture:  # the next trace works
        with capture.step():
            train_step(x, y)
    assert len(capture.trace) > 0
    with tracebridge.trace():
        with pytest.raises(CaptureError, match="another tracebridge capture"):
            with tracebridge.trace():
                pass


def test_exception_inside_stops_profiler_and_propagates(mlp_step):
    train_step, x, y = mlp_step

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with tracebridge.trace(keep_on_error=True) as kept:
            with kept.step():
                train_step(x, y)
            raise Boom()
    assert len(kept.trace) > 0
    with pytest.raises(KeyboardInterrupt):
        with tracebridge.trace() as dropped:
            train_step(x, y)
            raise KeyboardInterrupt
    assert len(dropped.trace) == 0
    traced = tracebridge.trace(lambda: (_ for _ in ()).throw(Boom()), keep_on_error=False)
    with pytest.raises(Boom):
        traced()
    with tracebridge.trace() as after:  # the profiler was stopped each time
        with after.step():
            train_step(x, y)
    assert len(after.trace) > 0


def test_two_threads_tracing_at_once_get_a_clear_error(mlp_step):
    train_step, x, y = mlp_step
    errors = []
    inside = threading.Event()
    release = threading.Event()

    def first():
        with tracebridge.trace():
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(30)
    try:
        with tracebridge.trace():
            pass
    except CaptureError as error:
        errors.append(str(error))
    release.set()
    thread.join(30)
    assert errors and "another tracebridge capture" in errors[0]


def test_tf2_trace_to_run_metadata_for_timeline_py(mlp_step, tmp_path):
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.client import timeline
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step)
    traced(x, y)
    traced.stop()
    trace = traced.trace
    path = tmp_path / "tf2.pb"
    trace.save(path)
    md = config_pb2.RunMetadata.FromString(path.read_bytes())
    labels = [n.timeline_label for d in md.step_stats.dev_stats for n in d.node_stats]
    ops = [o for o in trace.records() if trace.ops["category"][o.index] == Category.OP]
    assert len(labels) == len(ops)
    assert all(" = " in label and label.endswith(")") for label in labels)
    chrome = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    names = {e["args"]["name"] for e in chrome["traceEvents"] if e["ph"] == "X"}
    assert names == {o.name for o in ops}


def test_tf2_chrome_output_draws_dataflow_from_the_recorded_graph(mlp_step, tmp_path):
    """A tf.function's capture records its graph (capture/graph_record.py): the Chrome
    output draws its data inputs as flow arrows, as for a TF1 step (issue 34)."""
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step)
    for _ in range(2):
        traced(x, y)
    traced.stop()
    from tracebridge.model.dataflow import dataflow_edges
    trace = traced.trace
    assert json.loads(trace.metadata["graph"])["nodes"] and trace.inputs.rows == 0
    for path in (tmp_path / "tf2.json", tmp_path / "again.json"):
        consumer, producer = dataflow_edges(trace)
        names = trace.strings
        edges = {(names[trace.ops["name"][p]], names[trace.ops["name"][c]]) for c, p in zip(consumer, producer)}
        assert {("MatMul", "Relu"), ("Relu", "MatMul_1")} <= edges, sorted(edges)
        assert (trace.ops["step"][consumer] == trace.ops["step"][producer]).all()
        # an arrow where the two ends ran on different threads, as for a TF1 step (which
        # threads the executor ran them on varies from run to run)
        lanes = trace.ops["lane"]
        crossing = int((lanes[consumer] != lanes[producer]).sum())
        trace.save(path)
        events = json.loads(path.read_text())["traceEvents"]
        assert len([e for e in events if e.get("ph") == "s"]) >= crossing  # (and where a lane's sub-rows differ)
        trace = tracebridge.load(path)  # the recorded graph travels in the file: its rereading draws them too


def test_the_capture_s_memory_note_survives_its_json(mlp_step, tmp_path):
    """No memory was recorded (no TF_CPU_ALLOCATOR_USE_BFC): the capture says so, and so do its
    saved .json and the doctor reading it, in the capture's words (issue 34)."""
    train_step, x, y = mlp_step
    traced = tracebridge.trace(train_step)
    traced(x, y)
    traced.stop()
    note = traced.trace.metadata["notes"]
    assert note.startswith("no_memory_records: no memory events on /host:CPU")
    path = tmp_path / "tf2.json"
    traced.trace.save(path)
    again = tracebridge.load(path)
    assert again.metadata["notes"] == note
    problem, = [p for p in tracebridge.doctor(path).problems if p.code == "no_memory_records"]
    assert "no memory events on /host:CPU" in problem.missing and "TF_CPU_ALLOCATOR_USE_BFC" in problem.fix
    assert "memory=True" not in problem.fix  # writing it again with memory=True would not help


@pytest.mark.tf  # TensorFlow in subprocesses
def test_cpu_memory_events_need_the_allocator_variable(tmp_path):
    code = """
import json, tracebridge
from tracebridge.capture import enable_cpu_memory_events
enable_cpu_memory_events()
import tensorflow as tf
@tf.function
def f(x):
    return tf.nn.relu(tf.matmul(x, x))
x = tf.random.normal([128, 128]); f(x)
with tracebridge.trace() as c:
    with c.step():
        f(x)
t = c.trace
print(json.dumps({"counters": t.counters.rows, "memory": t.memory.rows,
                  "allocators": sorted(set(t.column_strings("counters", "allocator")))}))
"""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["counters"] > 0 and found["memory"] > 0 and found["allocators"]


def test_enable_memory_events_after_tf_import_is_refused(tf):
    from tracebridge.capture import enable_cpu_memory_events
    if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC") == "true":
        pytest.skip("already enabled in this environment")
    with pytest.raises(CaptureError, match="already imported"):
        enable_cpu_memory_events()


def _start_workers(count: int, seconds: float):
    ports = [free_port() for _ in range(count)]
    workers = [subprocess.Popen([sys.executable, str(HELPERS / "profiler_worker.py"), str(p), str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for p in ports]
    for worker in workers:
        assert worker.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # the gRPC server accepts a little after start() returns
    return ports, workers


@pytest.mark.tf  # TensorFlow in subprocesses
def test_remote_capture_of_two_workers_merges_hosts(tmp_path):
    ports, workers = _start_workers(2, 60)
    try:
        trace = tracebridge.capture_remote([f"localhost:{p}" for p in ports], duration_ms=800,
                                           host_tracer_level=3)
        hosts = {d.host for d in trace.devices}
        assert hosts == {f"localhost:{p}" for p in ports}
        assert trace.metadata["host_tracer_level"] == 3
        assert len(trace.steps) >= 4
        for host in hosts:
            assert (trace.ops["category"][[trace.devices[d].host == host
                                           for d in trace.ops["device"].tolist()]] == Category.OP).any()
        from tests.conftest import run_cli_process as run_cli
        out = tmp_path / "remote.json"
        result = run_cli("capture", ",".join(f"localhost:{p}" for p in ports), out, "--duration-ms", "500")
        assert result.returncode == 0 and "from 2 hosts" in result.stdout, result.stderr
        assert "Starting to trace" not in result.stdout + result.stderr
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


@pytest.mark.tf  # TensorFlow in subprocesses
def test_remote_capture_dead_port_is_one_clear_error():
    from tests.conftest import run_cli_process as run_cli  # a capture: the real command
    port = free_port()
    result = run_cli("capture", f"localhost:{port}", "out.json", "--duration-ms", "200")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"localhost:{port}" in lines[0]


def test_trace_refuses_a_keras_model_and_names_the_callback(tf):
    """``trace(model)`` used to give a ProfileTrace whose ``.fit`` then failed with an
    AttributeError: a Keras model is refused at once, with the way to trace its fit."""
    import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(TypeError, match=r"tracebridge\.keras\.TraceCallback") as refused:
        tracebridge.trace(model, warmup=2, steps=3)
    assert "callbacks=[TraceCallback(" in str(refused.value) and "tracebridge run" in str(refused.value)
    traced = tracebridge.trace(lambda: model(tf.ones((1, 4))), steps=1)  # a function calling it is a step
    traced()
    assert len(traced.trace.steps) == 1
