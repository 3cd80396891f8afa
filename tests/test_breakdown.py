"""Where a step's time goes (analysis/run/breakdown.py) and which steps are the steady state
(analysis/run/steady.py), on exact synthetic traces (tests/helpers/synthetic.py): each test
draws its steps and states the parts, the steps left out and the notes it expects. Times in
the comments are microseconds. No TensorFlow: the check tier."""

from __future__ import annotations

import json

import pytest

import tracebridge
from tracebridge.analysis.run.breakdown import PARTS, api_of, step_breakdown
from tracebridge.analysis.run.steady import select_steps
from tracebridge.model.builder import TraceBuilder

from tests.conftest import run_cli
from tests.helpers.synthetic import (CPU, GRAPH_BUILDING, call, data, eager, gap, host, input_wait, kernel, op, run,
                                     together)

US = 1000  # ns


def parts_of(trace, step: int = 0) -> dict:
    """The parts of step ``step`` (its position), in microseconds."""
    return {part: ns / US for part, ns in step_breakdown(trace).steps[step].parts.items()}


def expect(**parts) -> dict:
    return {part: float(parts.get(part, 0)) for part in PARTS}


# --- the parts of one step ---------------------------------------------------------------------
def test_each_part_and_that_they_add_up_to_the_step():
    # |--DoCompute 100--|..50..|train_step ..............................................|..70..|
    #                          |EagerLocalExecute|FunctionRun |--MatMul 300--|....200....| |
    trace = run([[input_wait(100), gap(50), call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(200)]),
                  gap(70)]] * 3)
    assert parts_of(trace) == expect(ops=300, framework=200, input=100, idle=120)
    found = step_breakdown(trace)
    assert all(sum(s.parts.values()) == s.duration_ns for s in found.steps)
    assert found.median_ns == 720 * US and found.parts == {p: v * US for p, v in expect(
        ops=300, framework=200, input=100, idle=120).items()}
    assert found.api == "tf_function" and found.device is None and found.notes == []


def test_a_moment_of_several_parts_is_the_first_of_compile_input_ops_framework():
    # python:   |train_step: graph_building 400|EagerLocalExecute|FunctionRun ....... 500 ......|
    # executor:        |--MatMul 600 (while tracing, then while the function runs) -----|
    # tf_data:                                                 |--DoCompute 200--|
    step = together(call("train_step", 5, [gap(500)], traced_us=400),
                    [gap(100), op("dense/MatMul", "MatMul", 600)],
                    [gap(500), input_wait(200)])
    # compile: 0-400 (and the instantiation up to FunctionRun: none between); input 500-700 over
    # the op; ops: 400-500 and 700-700; framework: 700-900 inside the call with no op
    assert parts_of(run([[step]] * 3)) == expect(compile=400, input=200, ops=100, framework=200)


def test_a_tracing_runs_until_its_function_runs():
    # |train_step: graph_building 300|....instantiation 150 (EagerLocalExecute, no op)...|FunctionRun|--op 100--|
    trace = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 100)], traced_us=300,
                       before=())]] * 3)
    assert parts_of(trace)["compile"] == 300
    # the time between the tracing's end and the run is the new function's instantiation: compile
    spaced = run([[call("train_step", 5, [gap(150), op("dense/MatMul", "MatMul", 100)], traced_us=300)]] * 3)
    assert parts_of(spaced) == expect(compile=300, framework=150, ops=100)


def test_eager_ops_and_their_dispatch():
    # |TFE_Py_FastPathExecute_C ~ eager/MatMul 100|..Python 40..|eager/Relu 60|: ops, framework, idle
    trace = run([[together(host("TFE_Py_FastPathExecute_C", 130), [gap(10), eager("MatMul", 100, 0)]), gap(40),
                  eager("Relu", 60, 1)]] * 3)
    assert parts_of(trace) == expect(ops=160, framework=30, idle=40)
    assert api_of(trace) == "eager"


def test_the_framework_eager_ops_keras_runs_are_framework_and_iterator_next_is_input():
    # |multi_step_on_iterator call: MatMul 200|eager/OptionalHasValue 30|eager/IteratorGetNext 50|
    trace = run([[call("multi_step_on_iterator", 5, [op("dense/MatMul", "MatMul", 200)]),
                  eager("OptionalHasValue", 30, 0), eager("IteratorGetNext", 50, 1)]] * 3)
    assert parts_of(trace) == expect(ops=200, framework=30, input=50)
    assert api_of(trace) == "keras_fit"


def test_a_step_marker_is_no_framework_time():
    # a host "train" event around the whole step (TF's step marker), then |--op 300--|....700....|
    b = TraceBuilder({"source_format": "xspace"})
    cpu = b.device(CPU)
    python, executor = b.lane(cpu, "python"), b.lane(cpu, "executor")
    for k in range(3):
        t0 = k * 2_000_000
        b.add_op(name="train", op_type="train", start_ns=t0, end_ns=t0 + 1_000_000, device=cpu, lane=python,
                 category=3, step=k)
        b.add_op(name="dense/MatMul", op_type="MatMul", start_ns=t0, end_ns=t0 + 300_000, device=cpu, lane=executor,
                 step=k)
        b.step(k, f"train {k}", t0, t0 + 1_000_000)
    assert parts_of(b.build()) == expect(ops=300, idle=700)


def test_ops_of_the_input_pipeline_are_not_the_steps():
    # executor: |--MatMul 300--|; a tf_data thread runs the map function's op meanwhile and after
    step = together(op("dense/MatMul", "MatMul", 300), op("ParallelMap/Cast", "Cast", 500, lane="tf_data_private"))
    assert parts_of(run([[step]] * 3)) == expect(ops=300, idle=200)


def test_a_session_record_holds_only_ops_and_says_so():
    # TF1 step stats: |_SOURCE 5|..20..|MatMul 300|..75..|Relu 100|: the executor between ops
    steps = [[op("_SOURCE", "NoOp", 5), gap(20), op("dense/MatMul", "MatMul", 300), gap(75),
              op("dense/Relu", "Relu", 100)]] * 3
    trace = run(steps)
    assert parts_of(trace) == expect(ops=405, framework=95)
    found = step_breakdown(trace)
    assert found.api == "session"
    assert any("no host events" in note and "framework" in note for note in found.notes)
    # without a TF1 record's hallmarks, a trace of ops and gaps is a TF2 run without host events: idle
    plain = run([[op("dense/MatMul", "MatMul", 300), gap(75), op("dense/Relu", "Relu", 100)]] * 3)
    assert parts_of(plain) == expect(ops=400, idle=75) and step_breakdown(plain).notes == []


def test_a_device_run_splits_busy_and_idle_and_names_what_bounds_it():
    # host: |--MatMul 300--|....400....|        GPU:              |--kernel 500--|..200..|
    # host busy 300 < device busy 500: device-bound; the device idles 500: 300 while the host op
    # runs (ops), 200 while nothing does (idle)
    step = [op("dense/MatMul", "MatMul", 300), together(kernel("dense/MatMul", "MatMul", 500), gap(700))]
    found = step_breakdown(run([step] * 3))
    first = found.steps[0]
    assert first.parts == {p: v * US for p, v in expect(ops=800, idle=200).items()}
    assert first.device_busy_ns == 500 * US and first.bound == "device"
    assert first.device_idle_by_part == {p: v * US for p, v in expect(ops=300, idle=200).items()}
    assert found.device == {"busy_ns": 500 * US, "idle_ns": 500 * US, "bound": "device",
                            "idle_by_part": {p: v * US for p, v in expect(ops=300, idle=200).items()}}
    # host-bound: the host works 800, the device 100
    busy_host = [together(call("train_step", 5, [op("dense/MatMul", "MatMul", 100), gap(700)]),
                          [gap(100), kernel("dense/MatMul", "MatMul", 100)])]
    assert step_breakdown(run([busy_host] * 3)).device["bound"] == "host"


def test_the_median_step_is_each_parts_median_scaled_to_add_up():
    # three steps: (ops, idle) = (600, 400), (700, 100), (300, 900): median step 1000; the parts'
    # medians 600 and 400 add up to it already
    steps = [[op("a", "MatMul", ops), gap(idle)] for ops, idle in ((600, 400), (700, 100), (300, 900))]
    found = step_breakdown(run(steps))
    assert found.median_ns == 1000 * US and found.parts == {p: v * US for p, v in expect(ops=600, idle=400).items()}
    # (ops, idle) = (100, 900), (800, 400), (900, 100): medians 800 and 400 (1200) scaled to the median step 1000
    steps = [[op("a", "MatMul", ops), gap(idle)] for ops, idle in ((100, 900), (800, 400), (900, 100))]
    found = step_breakdown(run(steps))
    assert found.median_ns == 1000 * US
    assert found.parts["ops"] == pytest.approx(800 * US * 1000 / 1200) and sum(found.parts.values()) == \
        pytest.approx(found.median_ns)
    # counted: the median over the steps asked for, the steps' own parts still all there
    only_last = step_breakdown(run(steps), counted=[2])
    assert only_last.median_ns == 1000 * US and only_last.parts["ops"] == 900 * US and len(only_last.steps) == 3


# --- the steady state --------------------------------------------------------------------------
def test_a_first_calls_step_is_left_out_and_named():
    # step 1: train_step traced (its first call) 5000 us; steps 2-5 run it
    trace = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 300)], traced_us=5000)]]
                + [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300)])]] * 4)
    chosen = select_steps(trace)
    assert chosen.positions == (1, 2, 3, 4) and chosen.left_out == 1
    (left,) = chosen.one_time
    assert left.number == 1 and left.causes == {"tracing": "of train_step (5.0 ms)"}
    note = chosen.note()
    assert "step 1 (5.3 ms: first-call tracing of train_step (5.0 ms))" in note and "--warmup 0" in note
    # --warmup overrides: 0 keeps every step, 2 leaves out the first two and nothing else
    assert select_steps(trace, 0).positions == (0, 1, 2, 3, 4) and select_steps(trace, 0).note() is None
    assert select_steps(trace, 2).positions == (2, 3, 4)


def test_a_retracing_is_no_one_time_work():
    # step 1 traces train_step (first call), step 3 traces it again (a new concrete function)
    steps = [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300)], traced_us=400)],
             [call("train_step", 5, [op("dense/MatMul", "MatMul", 300)])],
             [call("train_step", 9, [op("dense/MatMul", "MatMul", 300)], traced_us=400)],
             [call("train_step", 9, [op("dense/MatMul", "MatMul", 300)])]]
    assert select_steps(run(steps)).positions == (1, 2, 3)


def test_a_first_call_that_traces_twice_is_one_first_call():
    # A function that makes variables on its first call is traced, its initializers run as a
    # function of their own, and it is traced again; tracing_count says 2 after that call:
    # |train_step (tracing_count 2): graph_building 300|init: graph_building 100|run init|graph_building 300|run|
    init = [host(GRAPH_BUILDING, 100), call("initialize_variables", 3, [op("Assign", "AssignVariableOp", 20)])]
    first = call("train_step", 7, [op("dense/MatMul", "MatMul", 300)], traced_us=300, tracing_count=2,
                 before=[host(GRAPH_BUILDING, 300)] + init)
    steps = [[first]] + [[call("train_step", 7, [op("dense/MatMul", "MatMul", 300)], tracing_count=2)]] * 3
    found = tracebridge.advise(run(steps), warmup=0)
    assert "retracing" not in {f.kind for f in found}, found.to_text()
    assert select_steps(run(steps)).positions == (1, 2, 3)
    # a later call that traces once more (tracing_count 3) is a retracing
    again = steps + [[call("train_step", 11, [op("dense/MatMul", "MatMul", 300)], traced_us=300,
                           tracing_count=3)]]
    retraced = {f.kind: f for f in tracebridge.advise(run(again))}["retracing"]
    assert retraced.evidence.retracings_per_step == [0, 0, 0, 1] and list(retraced.evidence.functions) == ["train_step"]


def test_variables_and_an_iterator_made_are_one_time_work():
    # step 1: eager VarHandleOp (a variable made); step 2: an iterator made; steps 3-5 plain
    plain = [op("dense/MatMul", "MatMul", 300)]
    steps = [[eager("VarHandleOp", 50, 0)] + plain, [data("MakeIterator::RootDataset", 40)] + plain] + [plain] * 3
    chosen = select_steps(run(steps))
    assert chosen.positions == (2, 3, 4)
    assert [s.causes for s in chosen.one_time] == [{"variables": ""}, {"input": ""}]
    assert "variable initialization" in chosen.note() and "tf.data start-up" in chosen.note()


@pytest.mark.parametrize("ratio,left_out", [(3.5, True), (2.5, False)])
def test_a_sessions_slow_first_run_is_one_time_work(ratio, left_out):
    # a TF1 session's first run: no event says it, only its time (3x the others' median and more)
    steps = [[op("_SOURCE", "NoOp", 5), op("dense/MatMul", "MatMul", 1000 * ratio)]] + \
        [[op("_SOURCE", "NoOp", 5), op("dense/MatMul", "MatMul", 1000)]] * 4
    chosen = select_steps(run(steps))
    assert (chosen.positions == (1, 2, 3, 4)) == left_out
    if left_out:
        assert chosen.one_time[0].causes == {"first_run": "(3x the median step: the session's first run)"}
        assert "step 1 (3.5 ms: a slow first run (3x the median step" in chosen.note()
    # a TF2 run's first step is left out only for what its events show, however slow
    plain = [[op("dense/MatMul", "MatMul", 1000 * ratio)]] + [[op("dense/MatMul", "MatMul", 1000)]] * 4
    assert select_steps(run(plain)).positions == (0, 1, 2, 3, 4)


def test_every_step_one_time_keeps_them_all_and_says_so():
    steps = [[data("MakeIterator::RootDataset", 40), op("dense/MatMul", "MatMul", 300)]] * 4
    chosen = select_steps(run(steps))
    assert chosen.positions == (0, 1, 2, 3) and not chosen.one_time
    assert "every step holds one-time work" in chosen.note()


# --- where it shows: summary, compare ------------------------------------------------------------
def test_summary_json_has_every_steps_parts_and_the_median(tmp_path):
    steps = [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(200)], traced_us=4000)]] + \
        [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(200)]), gap(100)]] * 4
    path = tmp_path / "run.json"
    run(steps).save(path)
    done = run_cli("summary", path, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [sum(s["parts"].values()) for s in summary["steps"]] == [s["duration_ns"] for s in summary["steps"]]
    assert summary["steps"][0]["one_time"] == {"tracing": "of train_step (4.0 ms)"}
    breakdown = summary["breakdown"]
    assert breakdown["steps"] == [2, 3, 4, 5] and breakdown["median_ns"] == 600 * US
    assert breakdown["parts"] == {p: v * US for p, v in expect(ops=300, framework=200, idle=100).items()}
    text = run_cli("summary", path).stdout
    assert "median step (4 steps) 0.600 ms = ops 0.300 + framework 0.200 + input 0.000 + compile 0.000 + " \
           "idle 0.100 ms" in text and "note: steady state: 1 of 5 steps left out" in text
    kept = json.loads(run_cli("summary", path, "--json", "--warmup", "0").stdout)["breakdown"]
    assert kept["steps"] == [1, 2, 3, 4, 5] and kept["one_time"] == []


def test_compare_headline_parts_add_up_to_the_difference():
    # control: |call: MatMul 300, 100 between|; test: |call: MatMul 300, 700 between|..200..|
    control = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(100)])]] * 5)
    test = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(700)]), gap(200)]] * 5)
    result = tracebridge.compare(control, test)
    head = result.headline()
    assert head.delta_ns == 800 * US
    assert head.parts == {p: v * US for p, v in expect(framework=600, idle=200).items()}
    assert sum(head.parts.values()) == head.delta_ns
    data_ = result.to_dict()
    assert data_["steps"]["test"]["parts"] == {p: v * US for p, v in expect(ops=300, framework=700, idle=200).items()}
    assert data_["headline"]["parts"] == head.parts
    lines = result.to_text().splitlines()
    assert lines[2] == ("  parts (ms, control -> test): ops 0.300 -> 0.300, framework 0.100 -> 0.700, "
                        "input 0.000 -> 0.000, compile 0.000 -> 0.000, idle 0.000 -> 0.200")
    assert lines[3] == ("  difference by part (ms): framework +0.600, idle +0.200, ops +0.000, input +0.000, "
                        "compile +0.000 = +0.800")
    # framework_overhead (75% of the test step the framework's) claims the framework part, host_gaps
    # nothing (20% idle is below its bar): the headline explains the framework's 600 of 800
    assert [f.kind for f in result.findings] == ["framework_overhead"]
    assert result.findings[0].share == pytest.approx(600 / 1200) and head.explained == pytest.approx(0.75)
