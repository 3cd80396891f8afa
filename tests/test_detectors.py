"""Each finding kind on exact data, as Perfetto's diff tests do: a small synthetic trace
written in the test (its comment draws the timeline, tests/helpers/synthetic.py builds
it), and the exact finding, or none, expected. For each kind: it fires just above its
threshold, stays silent just below, stays silent on pairs of runs that differ by noise
alone (many seeds), and names the op, function or device it is about. Thresholds are
read from :class:`~tracebridge.analysis.common.thresholds.Thresholds`, never written here.

Times in the comments are microseconds; a step is 1000 us unless it says otherwise. No
TensorFlow: this is the check tier, and the whole file runs in a few seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from tracebridge import compare
from tracebridge.analysis.findings import KINDS, advise
from tracebridge.analysis.common.thresholds import Thresholds

from tests.helpers.synthetic import (GPU, GPU1, KiB, MiB, call, cnn_ms, cnn_step, eager, gap, input_wait, kernel, mem,
                                     op, run, together, xla)

T = Thresholds()
STEPS = max(5, T.min_steps)   # exact runs: every step the same, enough of them to judge timing
NOISY_STEPS = 10              # noisy runs, as the CNN pairs
SIGMA = 0.25                  # per-op lognormal noise of the noisy runs
NOISE_SEEDS = range(30)       # noise-only pairs: each seed a control, seed + 1000 its test
CNN_SEEDS = range(40)         # the noise-only CNN pairs
HELD_OUT_SEEDS = range(10)    # the CNN regressions, each seed a pair
STEP_US = 1000.0
TIMING_KINDS = ("op_regression", "host_gaps", "input_wait", "device_idle", "framework_overhead")


def kinds(findings) -> dict:
    """Findings by kind (each kind at most once, except op_regression: one per op type)."""
    out: dict = {}
    for finding in findings:
        out.setdefault(finding.kind, []).append(finding)
    return out


def only(findings, kind: str):
    """The one finding of ``kind``, and nothing else found."""
    found = kinds(findings)
    assert set(found) == {kind}, [f.to_text() for f in findings]
    assert len(found[kind]) == 1, [f.to_text() for f in findings]
    return found[kind][0]


def none_of(findings, kind: str | None = None) -> None:
    """No finding at all (or none of ``kind``)."""
    wrong = [f for f in findings if kind is None or f.kind == kind]
    assert not wrong, "\n".join(f.to_text() for f in wrong)


def pair(control, test, **options):
    return compare(control, test, **options).findings


def has_interval(finding) -> None:
    """A timing finding says what it was decided on: its bounds over steps."""
    interval = finding.to_dict()["evidence"].get("interval")
    assert interval and interval.get("confidence") == T.confidence, finding.to_dict()["evidence"]


# ================================ structure kinds ================================
# --- eager_ops: a step's ops run one by one from Python -----------------------------------
EAGER_TYPES = ("MatMul", "BiasAdd", "Relu", "Conv2D", "AddV2")


def eager_step(ops: int, share: float, gap_us: float = 0.0) -> list:
    """``ops`` eager ops taking ``share`` of the step (with ``gap_us`` of dispatch between
    each two), then a graph op for the rest:
    |--eager/MatMul_0--|..gap..|--eager/BiasAdd_1--|..gap..|--eager/Relu_2--|--graph MatMul ...--|"""
    each = (share * STEP_US - gap_us * (ops - 1)) / ops
    items: list = []
    for k in range(ops):
        if k:
            items.append(gap(gap_us))
        items.append(eager(EAGER_TYPES[k % len(EAGER_TYPES)], each, k))
    return items + [op("sequential/dense/MatMul", "MatMul", (1 - share) * STEP_US)]


def test_eager_ops_fire_just_above_both_thresholds_and_name_the_ops():
    # each step: |--3 eager ops, (eager_min_share + 1%) of the step--|--graph MatMul--|
    n = T.eager_min_ops_per_step
    finding = only(advise(run([eager_step(n, T.eager_min_share + 0.01)] * STEPS)), "eager_ops")
    assert finding.share == pytest.approx(T.eager_min_share + 0.01, abs=1e-3)
    assert finding.evidence.ops_per_step == [n] * STEPS
    types = EAGER_TYPES[:n]
    assert finding.evidence.ops == sorted(f"eager/{t}_{k}" for k, t in enumerate(types))
    assert finding.evidence.op_types == {t: STEPS for t in types}


def test_eager_ops_silent_just_below_the_share():
    # each step: |--3 eager ops, (eager_min_share - 1%)--|--graph MatMul--|
    none_of(advise(run([eager_step(T.eager_min_ops_per_step, T.eager_min_share - 0.01)] * STEPS)))


def test_eager_ops_silent_with_one_op_too_few_a_step():
    # each step: |--2 eager ops, 4x the share needed--|--graph MatMul--|: a tf.constant or two
    none_of(advise(run([eager_step(T.eager_min_ops_per_step - 1, 4 * T.eager_min_share)] * STEPS)))


def test_python_between_eager_ops_is_eager_ops_time_not_host_gaps():
    # each step: |--e 40--|..120..|--e 40--|..120..|--e 40--|..120..|--e 40--|--graph MatMul 480--|
    # 36% of each step no op runs, but it is Python dispatching the eager ops: eager_ops' time
    trace = run([eager_step(4, 0.52, gap_us=120)] * STEPS)
    finding = only(advise(trace), "eager_ops")
    assert finding.share == pytest.approx(0.52, abs=1e-3)


def test_eager_ops_against_a_control():
    # control: |--graph MatMul 1000--|         test: |--3 eager ops 100--|--graph MatMul 900--|
    graph = run([[op("sequential/dense/MatMul", "MatMul", STEP_US)]] * STEPS)
    eager_run = run([eager_step(T.eager_min_ops_per_step, 0.10)] * STEPS)
    assert "eager_ops" in kinds(pair(graph, eager_run))
    none_of(pair(eager_run, eager_run), "eager_ops")  # the control runs eagerly too: not the port's doing
    none_of(pair(eager_run, graph), "eager_ops")


# --- retracing: a tf.function traced again inside the steps ---------------------------------
# |train_step .............................................................|   python lane
# |tf.function-graph_building 400|EagerLocalExecute: __inference_train_step_5|
#                                 |FunctionRun ..............................|
#                                 |--sequential/dense/MatMul 300--|           executor lane
BODY = [op("sequential/dense/MatMul", "MatMul", 300)]


def calls(plan: list[tuple[str, int, bool]]) -> list:
    """One call a step: (function, concrete function number, traced in this step)."""
    return [[call(fn, n, BODY, traced_us=400 if traced else 0)] for fn, n, traced in plan]


def test_a_first_call_tracing_is_no_finding():
    # step 1 traces train_step (its first call), steps 2-5 run what it traced
    none_of(advise(run(calls([("train_step", 5, True)] + [("train_step", 5, False)] * 4))))


def test_first_calls_of_two_functions_are_no_finding():
    # step 1 traces train_step, step 2 eval_step: each is traced once, on its first call
    plan = [("train_step", 5, True), ("eval_step", 8, True)] + [("train_step", 5, False)] * 3
    none_of(advise(run(calls(plan))))


def retraced(times: int) -> list:
    """train_step traced ``times`` times, each a new concrete function, in every other step."""
    plan = []
    for k in range(max(STEPS, 2 * times)):
        version = min(k // 2, max(times - 1, 0))
        plan.append(("train_step", 5 + 4 * version, k % 2 == 0 and k // 2 < times))
    return calls(plan)


def test_retracing_fires_just_above_and_names_the_function():
    # steps 1, 3, ...: train_step traced again (__inference_train_step_5, _9, ...)
    times = T.retrace_min_tracings + 1  # the first tracing, then retrace_min_tracings more
    finding = only(advise(run(retraced(times))), "retracing")
    assert list(finding.evidence.functions) == ["train_step"]
    assert finding.evidence.functions["train_step"] == [f"__inference_train_step_{5 + 4 * k}" for k in range(times)]
    assert finding.evidence.events == ["tf.function-graph_building"]


def test_a_tracing_after_the_function_ran_is_retracing():
    # steps 1-2 run __inference_train_step_5 (traced before the capture); step 3 traces train_step again
    plan = [("train_step", 5, False)] * 2 + [("train_step", 9, True)] + [("train_step", 9, False)] * (STEPS - 3)
    finding = only(advise(run(calls(plan))), "retracing")
    assert finding.evidence.functions == {"train_step": ["__inference_train_step_5", "__inference_train_step_9"]}


def test_retracing_silent_just_below():
    none_of(advise(run(retraced(T.retrace_min_tracings))), "retracing")


def test_tracing_time_is_not_host_gaps():
    # every step traces: |train_step: graph_building 700|run 300| -- 70% of the step without an op
    plan = [("train_step", 5 + k, True) for k in range(STEPS)]
    trace = run([[call(fn, n, BODY, traced_us=700)] for fn, n, _ in plan])
    found = kinds(advise(trace))
    assert set(found) == {"retracing"}, found


# --- xla_compile: XLA compiles again inside the steps ---------------------------------------
# |train_step ...............................................................|
# |EagerLocalExecute: __inference_train_step_5 ..............................|
# |CpuCompiler::RunBackend 400|FunctionRun |--sequential/dense/MatMul 300--| |
def compiled(times: int, fn: str = "train_step") -> list:
    """``fn`` compiled in ``times`` steps (every other one), as a jit_compile function given new shapes."""
    steps = []
    for k in range(max(STEPS, 2 * times)):
        steps.append([call(fn, 5, BODY, compiled_us=400 if k % 2 == 0 and k // 2 < times else 0)])
    return steps


def test_xla_compile_fires_just_above_and_names_the_function():
    times = 1 + T.xla_min_recompilations  # a first compilation, then the recompilations that count
    found = advise(run(compiled(times)))
    finding = only(found, "xla_compile")
    # the first call's compilation (step 1) is a one-time cost: its step is left out, and said
    assert finding.evidence.functions == ["train_step"] * (times - 1)
    assert finding.evidence.steps == [1 + 2 * k for k in range(1, times)]
    assert finding.evidence.compile_ns == [400_000] * (times - 1)
    assert finding.evidence.first_call == [False] * (times - 1)
    assert finding.evidence.events == ["CpuCompiler::RunBackend"]
    assert any("step 1 (" in note and "XLA compilation of train_step" in note for note in found.notes), found.notes
    # every step kept: the first call's compilation is listed, and not counted
    kept = only(advise(run(compiled(times)), warmup=0), "xla_compile")
    assert kept.evidence.steps == [1 + 2 * k for k in range(times)]
    assert kept.evidence.first_call == [True] + [False] * (times - 1)
    # its share is the recompilation's time alone: 400 us of 2 x 700 + 3 x 300 us
    assert kept.share == pytest.approx(400 / (2 * 700 + 3 * 300), abs=1e-3)
    assert finding.share == pytest.approx(400 / (700 + 3 * 300), abs=1e-3)


def test_xla_compile_silent_just_below():
    none_of(advise(run(compiled(T.xla_min_recompilations))))  # one recompilation too few


def test_first_compilations_of_two_functions_are_no_finding():
    # step 1 compiles train_step, step 2 eval_step (each its first call): nothing recompiles
    steps = [[call("train_step", 5, BODY, compiled_us=400)], [call("eval_step", 8, BODY, compiled_us=400)]]
    steps += [[call("train_step", 5, BODY)]] * (STEPS - 2)
    none_of(advise(run(steps)))


def test_xla_compile_against_a_control_that_compiles_as_often():
    recompiling = run(compiled(1 + T.xla_min_recompilations))
    none_of(pair(recompiling, recompiling))
    steady = run(compiled(0))
    assert "xla_compile" in kinds(pair(steady, recompiling))


# --- fusion_lost, fusion_gained: a fused kernel on one side, its parts on the other ---------
# fused:   |--conv2d/Conv2D 300--|--dense/Relu (_FusedMatMul) 100--|
# unfused: |--conv2d/Conv2D 300--|--dense/MatMul 60--|--dense/BiasAdd 30--|--dense/Relu 20--|
CONV = op("sequential/conv2d/Conv2D", "Conv2D", 300)
FUSED = [CONV, op("sequential/dense/Relu", "_FusedMatMul", 100)]
UNFUSED = [CONV, op("sequential/dense/MatMul", "MatMul", 60), op("sequential/dense/BiasAdd", "BiasAdd", 30),
           op("sequential/dense/Relu", "Relu", 20)]
FUSED_KEY = "sequential/dense/Relu [_FusedMatMul = MatMul+BiasAdd+Relu]"
PARTS = ["sequential/dense/BiasAdd", "sequential/dense/MatMul", "sequential/dense/Relu"]


def test_fusion_lost_names_the_fused_kernel_and_its_parts():
    finding = only(pair(run([FUSED] * STEPS), run([UNFUSED] * STEPS)), "fusion_lost")
    assert finding.evidence.ops == [FUSED_KEY]
    assert finding.evidence.control_ops == [["sequential/dense/Relu"]]
    assert sorted(finding.evidence.test_ops[0]) == PARTS
    assert finding.evidence.delta_ns == [pytest.approx(10_000)]  # 110 us unfused against 100 fused


def test_fusion_gained_names_the_fused_kernel_and_its_parts():
    finding = only(pair(run([UNFUSED] * STEPS), run([FUSED] * STEPS)), "fusion_gained")
    assert finding.evidence.ops == [FUSED_KEY]
    assert sorted(finding.evidence.control_ops[0]) == PARTS
    assert finding.evidence.test_ops == [["sequential/dense/Relu"]]


@pytest.mark.parametrize("both", [FUSED, UNFUSED], ids=["fused_both", "unfused_both"])
def test_no_fusion_finding_where_both_runs_fuse_alike(both):
    none_of(pair(run([both] * STEPS, seed=1, sigma=SIGMA), run([both] * STEPS, seed=2, sigma=SIGMA)))


def test_eager_parts_are_eager_ops_not_a_lost_fusion():
    # test: |--eager Conv2D--|--eager MatMul--|--eager BiasAdd--|--eager Relu--|: eager execution fuses nothing
    eager_parts = [eager("Conv2D", 300, 0), eager("MatMul", 60, 1), eager("BiasAdd", 30, 2), eager("Relu", 20, 3)]
    found = kinds(pair(run([FUSED] * STEPS), run([eager_parts] * STEPS)))
    assert "fusion_lost" not in found and "eager_ops" in found, found


# --- xla_fusion: XLA fused what the other run ran op by op -----------------------------------
# control: |--conv2d/Conv2D 300--|--dense/MatMul 60--|--dense/BiasAdd 30--|--dense/Relu 20--|
# test:    |--conv2d/Conv2D 300--|--fusion.1 (dense/MatMul, BiasAdd, Relu) 70--|
XLA_FUSED = [xla("sequential/conv2d/Conv2D", "Conv2D", 300, "convolution.0"),
             xla("sequential/dense/MatMul", "MatMul", 70, "fusion.1",
                 ["sequential/dense/MatMul", "sequential/dense/BiasAdd", "sequential/dense/Relu"])]
# test, one instruction per op: |--Conv2D 300--|--dot.1 60--|--add.2 30--|--maximum.3 20--|
XLA_UNFUSED = [xla("sequential/conv2d/Conv2D", "Conv2D", 300, "convolution.0"),
               xla("sequential/dense/MatMul", "MatMul", 60, "dot.1"),
               xla("sequential/dense/BiasAdd", "BiasAdd", 30, "add.2"),
               xla("sequential/dense/Relu", "Relu", 20, "maximum.3")]


@pytest.mark.parametrize("xla_side", ["test", "control"])
def test_xla_fusion_names_the_fusion_and_the_ops_it_computes(xla_side):
    plain, compiled_run = run([UNFUSED] * STEPS), run([XLA_FUSED] * STEPS)
    control, test = (plain, compiled_run) if xla_side == "test" else (compiled_run, plain)
    finding = only(pair(control, test), "xla_fusion")
    assert finding.evidence.xla_run == xla_side
    assert finding.evidence.instructions == [["fusion.1"]]
    assert finding.evidence.tf_ops == [["sequential/dense/MatMul", "sequential/dense/BiasAdd",
                                        "sequential/dense/Relu"]]
    assert sorted(finding.evidence.separate_ops[0]) == PARTS
    assert finding.evidence.xla_ns == [pytest.approx(70_000)]


@pytest.mark.parametrize("xla_side", ["test", "control"])
def test_xla_fusion_share_is_what_the_fusion_saves_or_costs_the_test_run(xla_side):
    # 110 us of separate ops against 70 us of fusion.1: the test run saves 40 us (XLA in the
    # test run, a 370 us step) or spends 40 us more (XLA in the control run, a 410 us step)
    plain, compiled_run = run([UNFUSED] * STEPS), run([XLA_FUSED] * STEPS)
    control, test = (plain, compiled_run) if xla_side == "test" else (compiled_run, plain)
    finding = kinds(pair(control, test))["xla_fusion"][0]
    assert finding.share == pytest.approx(40 / (370 if xla_side == "test" else 410), abs=1e-3)


def test_xla_fusion_silent_where_xla_fused_nothing():
    none_of(pair(run([UNFUSED] * STEPS), run([XLA_UNFUSED] * STEPS)))


def test_xla_fusion_silent_where_both_runs_ran_xla():
    none_of(pair(run([XLA_FUSED] * STEPS, seed=1, sigma=SIGMA), run([XLA_FUSED] * STEPS, seed=2, sigma=SIGMA)))


# --- memory_growth: memory left behind by each step, or a step's working set grown -----------
def leaking(rises: list[int]) -> list:
    """|--a 500--|+rise|--b 500--|: step k leaves rises[k] bytes more in use (64 MiB before)."""
    return [[op("sequential/dense/MatMul", "MatMul", 500), mem(rise), op("sequential/dense/Relu", "Relu", 500)]
            for rise in [0] + rises]


def test_memory_left_behind_fires_just_above_the_step_rise():
    # 8 rises of memory_min_step_rise + 1 KiB: 2 MiB in all
    rises = [T.memory_min_step_rise + KiB] * 8
    finding = only(advise(run(leaking(rises), memory_base=64 * MiB)), "memory_growth")
    ends = finding.evidence.in_use_at_step_end
    assert [b - a for a, b in zip(ends, ends[1:])] == rises
    assert "(cpu)" in finding.summary  # the allocator


def test_memory_left_behind_silent_just_below_the_step_rise():
    # 8 rises of memory_min_step_rise - 1 KiB: 2 MiB in all, but no step leaves enough to count
    none_of(advise(run(leaking([T.memory_min_step_rise - KiB] * 8), memory_base=64 * MiB)))


def test_memory_left_behind_needs_most_steps_to_rise():
    rise = T.memory_min_step_rise + 64 * KiB
    enough = int(-(-T.memory_rising_share * 8 // 1))  # ceil: the fewest of 8 rises that are "most"
    assert "memory_growth" in kinds(advise(run(leaking([rise] * enough + [0] * (8 - enough)),
                                               memory_base=64 * MiB)))
    none_of(advise(run(leaking([rise] * (enough - 1) + [0] * (9 - enough)), memory_base=64 * MiB)))


def test_memory_left_behind_needs_memory_min_bytes_in_all():
    rise = T.memory_min_step_rise + KiB
    over = T.memory_min_bytes // rise + 1   # rises whose sum just passes memory_min_bytes
    assert "memory_growth" in kinds(advise(run(leaking([rise] * over), memory_base=64 * MiB)))
    none_of(advise(run(leaking([rise] * (over - 1)), memory_base=64 * MiB)))


def working_set(bytes_: int) -> list:
    """|--a 100--|+bytes|--b 400--|-bytes|--c 500--|: a step that needs ``bytes_`` while it runs."""
    return [op("sequential/dense/MatMul", "MatMul", 100), mem(bytes_), op("sequential/dense/Relu", "Relu", 400),
            mem(-bytes_), op("sequential/dense_1/MatMul", "MatMul", 500)]


def grown_limit(control: int) -> int:
    return control + max(int(T.memory_min_growth * control), T.memory_min_bytes)


@pytest.mark.parametrize("control", [4 * MiB, 512 * KiB], ids=["share", "bytes"])
def test_working_set_growth_fires_just_above(control):
    test = grown_limit(control) + 64 * KiB
    finding = only(pair(run([working_set(control)] * STEPS, memory_base=64 * MiB),
                        run([working_set(test)] * STEPS, memory_base=64 * MiB)), "memory_growth")
    assert finding.evidence.control_working_set == control
    assert finding.evidence.test_least_working_set == test


@pytest.mark.parametrize("control", [4 * MiB, 512 * KiB], ids=["share", "bytes"])
def test_working_set_growth_silent_just_below(control):
    test = grown_limit(control) - 64 * KiB
    none_of(pair(run([working_set(control)] * STEPS, memory_base=64 * MiB),
                 run([working_set(test)] * STEPS, memory_base=64 * MiB)))


def test_working_set_growth_needs_every_test_step_to_grow():
    # one test step of the five needs what the control's steps need: the least test step decides
    control = 4 * MiB
    big = grown_limit(control) + MiB
    steps = [working_set(big)] * (STEPS - 1) + [working_set(control)]
    none_of(pair(run([working_set(control)] * STEPS, memory_base=64 * MiB), run(steps, memory_base=64 * MiB)))


def test_memory_silent_on_noise_only_pairs():
    # both runs: a working set of 4 MiB x lognormal(0.25) a step, and the bytes in use at step
    # ends wandering up to +-0.35 MiB (the allocator's own fluctuation), the same distribution
    def noisy(seed: int):
        rng = np.random.default_rng(seed)
        level, steps = 0, []
        for _ in range(NOISY_STEPS):
            need = int(4 * MiB * np.exp(rng.normal(0.0, SIGMA)))
            end = int(rng.uniform(-0.35, 0.35) * MiB)
            steps.append([op("sequential/dense/MatMul", "MatMul", 100), mem(need),
                          op("sequential/dense/Relu", "Relu", 400), mem(end - level - need),
                          op("sequential/dense_1/MatMul", "MatMul", 500)])
            level = end
        return run(steps, memory_base=64 * MiB)
    for seed in NOISE_SEEDS:
        control, test = noisy(seed), noisy(seed + 1000)
        none_of(advise(test), "memory_growth")
        none_of(pair(control, test), "memory_growth")


def test_memory_left_behind_by_both_runs_is_not_the_ports():
    leaky = run(leaking([T.memory_min_step_rise + 64 * KiB] * 8), memory_base=64 * MiB)
    none_of(pair(leaky, leaky))
    flat = run(leaking([0] * 8), memory_base=64 * MiB)
    assert "memory_growth" in kinds(pair(flat, leaky))


# ================================ timing kinds ================================
# One step: |--MatMul (1 - share)--|....gap share....|                            host_gaps
#           |--IteratorGetNext wait share--|--MatMul (1 - share)--|              input_wait
#           |--MatMul on the host share--|--its GPU kernel (1 - share)--|        device_idle
def gaps_step(share: float) -> list:
    return [op("sequential/dense/MatMul", "MatMul", (1 - share) * STEP_US), gap(share * STEP_US)]


def input_step(share: float) -> list:
    return [input_wait(share * STEP_US), op("sequential/dense/MatMul", "MatMul", (1 - share) * STEP_US)]


def idle_step(share: float) -> list:
    return [op("sequential/dense/MatMul", "MatMul", share * STEP_US),
            kernel("sequential/dense/MatMul", "MatMul", (1 - share) * STEP_US)]


def framework_step(share: float) -> list:
    """A tf.function call whose time between ops is ``share`` of the step; its op 60% of the
    rest, the Python after it 40% (below host_gaps' bar at the shares tested):
    |train_step: |--MatMul 0.6(1 - share)--|....framework share....||..idle 0.4(1 - share)..|"""
    rest = (1 - share) * STEP_US
    return [call("train_step", 5, [op("sequential/dense/MatMul", "MatMul", 0.6 * rest), gap(share * STEP_US)]),
            gap(0.4 * rest)]


SHARE_KINDS = {  # kind: (its least share alone, its least extra over a control, a step of that share)
    "host_gaps": (T.host_gap_min_share, T.host_gap_min_extra, gaps_step),
    "input_wait": (T.input_min_share, T.input_min_extra, input_step),
    "device_idle": (T.device_idle_min_share, T.device_idle_min_extra, idle_step),
    "framework_overhead": (T.framework_min_share, T.framework_min_extra, framework_step),
}


def share_run(kind: str, share: float, **options):
    return run([SHARE_KINDS[kind][2](share)] * options.pop("steps", STEPS), **options)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_fires_just_above_its_least_share(kind):
    least = SHARE_KINDS[kind][0]
    finding = only(advise(share_run(kind, least + 0.01)), kind)
    assert finding.share == pytest.approx(least + 0.01, abs=1e-3)
    has_interval(finding)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_silent_just_below_its_least_share(kind):
    none_of(advise(share_run(kind, SHARE_KINDS[kind][0] - 0.01)))


def control_share(kind: str) -> float:
    """A control share from which ``extra`` more passes ``least`` too, so that only the
    extra decides the pair tests."""
    least, extra, _ = SHARE_KINDS[kind]
    share = least - extra + 0.05
    assert 0 < share and share + extra - 0.01 >= least
    return share


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_against_a_control_fires_just_above_its_extra(kind):
    extra, base = SHARE_KINDS[kind][1], control_share(kind)
    finding = only(pair(share_run(kind, base), share_run(kind, base + extra + 0.01)), kind)
    has_interval(finding)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_against_a_control_shares_what_the_test_run_adds(kind):
    # control: share c; test: c + extra + 1%: the finding is the 1% + extra the port added, not all of it
    extra, base = SHARE_KINDS[kind][1], control_share(kind)
    finding = only(pair(share_run(kind, base), share_run(kind, base + extra + 0.01)), kind)
    assert finding.share == pytest.approx(extra + 0.01, abs=1e-3)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_against_a_control_silent_just_below_its_extra(kind):
    extra, base = SHARE_KINDS[kind][1], control_share(kind)
    test = share_run(kind, base + extra - 0.01)
    assert kind in kinds(advise(test))  # alone, the test run shows it: the control's share is what silences it
    none_of(pair(share_run(kind, base), test), kind)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_silent_on_a_noisy_run_below_its_least_share(kind):
    # the kind's median share 5 points below its least, every op and gap with lognormal noise
    least = SHARE_KINDS[kind][0]
    for seed in NOISE_SEEDS:
        none_of(advise(share_run(kind, least - 0.05, steps=NOISY_STEPS, sigma=SIGMA, seed=seed)), kind)


@pytest.mark.parametrize("kind", SHARE_KINDS)
def test_share_kind_silent_on_noise_only_pairs(kind):
    # both runs spend least + 5% of their steps on it, the same distribution: the test run is no worse
    least = SHARE_KINDS[kind][0]
    for seed in NOISE_SEEDS:
        control = share_run(kind, least + 0.05, steps=NOISY_STEPS, sigma=SIGMA, seed=seed)
        test = share_run(kind, least + 0.05, steps=NOISY_STEPS, sigma=SIGMA, seed=seed + 1000)
        none_of(pair(control, test), kind)


def test_device_idle_names_the_busiest_device():
    # host:  |--MatMul 300--|
    # GPU:0                 |--kernel 100--|                   (idle 90%)
    # GPU:1                 |--kernel 700----------------------|   (busiest: idle 30%, waits 30%)
    share = T.device_idle_min_share + 0.05
    step = [op("sequential/dense/MatMul", "MatMul", share * STEP_US),
            together(kernel("sequential/dense/MatMul", "MatMul", 100, device=GPU),
                     kernel("sequential/dense_1/MatMul", "MatMul", (1 - share) * STEP_US, device=GPU1))]
    finding = only(advise(run([step] * STEPS)), "device_idle")
    assert finding.evidence.device.endswith("GPU:1") and "GPU:1" in finding.summary
    assert finding.share == pytest.approx(share, abs=1e-3)


# --- framework_overhead: the framework's time between ops bounds the step ------------------
def test_framework_overhead_needs_more_framework_than_ops():
    # |train_step: |--MatMul 550--|....framework 450....|: 45% of the step, above the share, but the ops
    # take longer: the ops bound the step, not the framework
    step = [call("train_step", 5, [op("sequential/dense/MatMul", "MatMul", 550), gap(450)])]
    none_of(advise(run([step] * STEPS)))
    # |--MatMul 440--|....framework 560....|: the framework bounds it
    step = [call("train_step", 5, [op("sequential/dense/MatMul", "MatMul", 440), gap(560)])]
    finding = only(advise(run([step] * STEPS)), "framework_overhead")
    assert finding.share == pytest.approx(0.56, abs=1e-3)
    assert finding.evidence.framework_ns_per_step == [560_000] * STEPS
    assert finding.evidence.ops_ns_per_step == [440_000] * STEPS
    assert finding.evidence.calls_per_step == [1] * STEPS and finding.evidence.api == "tf_function"
    assert finding.parts == {"framework": finding.share}


@pytest.mark.parametrize("api,fn,words", [("keras_fit", "multi_step_on_iterator", "steps_per_execution"),
                                          ("tf_function", "train_step", "inside one tf.function")])
def test_framework_overhead_advice_fits_the_api(api, fn, words):
    step = [call(fn, 5, [op("sequential/dense/MatMul", "MatMul", 300), gap(700)])]
    finding = only(advise(run([step] * STEPS)), "framework_overhead")
    assert finding.evidence.api == api and words in finding.advice, finding.advice
    assert "steps_per_execution" in finding.advice or api != "keras_fit"


def test_framework_overhead_of_a_tf1_session_names_feed_dict():
    # a TF1 session's step stats: ops only; the executor's time between them is the framework's
    # |_SOURCE 5|....300....|--MatMul 200--|....300....|--Relu 195--|
    step = [op("_SOURCE", "NoOp", 5), gap(300), op("dense/MatMul", "MatMul", 200), gap(300),
            op("dense/Relu", "Relu", 195)]
    finding = only(advise(run([step] * STEPS)), "framework_overhead")
    assert finding.evidence.api == "session" and "feed_dict" in finding.advice and "tf.data" in finding.advice
    assert finding.share == pytest.approx(0.6, abs=1e-3)


def test_framework_overhead_and_host_gaps_claim_their_own_parts():
    # |train_step: |--MatMul 150--|....framework 450....||.....idle 400.....|: both kinds, each its part
    step = [call("train_step", 5, [op("sequential/dense/MatMul", "MatMul", 150), gap(450)]), gap(400)]
    found = kinds(advise(run([step] * STEPS)))
    assert set(found) == {"framework_overhead", "host_gaps"}, found
    assert found["framework_overhead"][0].share == pytest.approx(0.45, abs=1e-3)
    assert found["host_gaps"][0].share == pytest.approx(0.40, abs=1e-3)
    assert found["host_gaps"][0].evidence.call_overhead_ns_per_step == [450_000] * STEPS


def test_framework_overhead_against_a_control_is_what_the_part_added():
    # control: TF1 |_SOURCE 5|..95..|MatMul 400|: 95 us of executor; test: a Keras step, 400 us of ops,
    # 700 us of framework: the framework part added 605 us, the ops 5 us less; the step grew by 600
    control = run([[op("_SOURCE", "NoOp", 5), gap(95), op("dense/MatMul", "MatMul", 400)]] * STEPS)
    test = run([[call("multi_step_on_iterator", 5, [op("sequential/dense/MatMul", "MatMul", 400), gap(700)])]] * STEPS)
    result = compare(control, test)
    finding = only(result.findings, "framework_overhead")
    assert finding.share == pytest.approx(0.605 / 1.1, abs=1e-3)
    assert finding.evidence.control_share == pytest.approx(0.19, abs=1e-3)  # 95 us of 500, a share
    assert "steps_per_execution" in finding.advice
    head = result.headline()
    assert head.parts == {"ops": -5_000, "framework": 605_000, "input": 0, "compile": 0, "idle": 0}
    assert head.explained == pytest.approx(1.0)


def test_device_idle_claims_what_the_other_kinds_leave():
    # host: |--DoCompute 300--|--MatMul 100--|....600....|   GPU: (idle 400) |--kernel 600--|
    # input_wait claims the 300 us the device waits on the input; device_idle keeps the 100 us
    # of the host's op (the 600 us of idle host: the device is busy meanwhile)
    step = [input_wait(300), op("sequential/dense/MatMul", "MatMul", 100),
            together(kernel("sequential/dense/MatMul", "MatMul", 600), gap(600))]
    found = kinds(advise(run([step] * STEPS), thresholds=Thresholds(device_idle_min_share=0.2)))
    assert set(found) == {"input_wait", "device_idle"}, found
    assert found["input_wait"][0].share == pytest.approx(0.3, abs=1e-3)
    assert found["device_idle"][0].share == pytest.approx(0.1, abs=1e-3)
    assert found["device_idle"][0].parts == {"ops": pytest.approx(0.1, abs=1e-3)}


def test_host_gaps_exact_evidence():
    # each step: |--MatMul 600--|....gap 400....|
    finding = only(advise(run([gaps_step(0.4)] * STEPS)), "host_gaps")
    assert finding.evidence.gap_ns_per_step == [400_000] * STEPS
    assert finding.evidence.longest_gap_ns_per_step == [400_000] * STEPS


def test_a_tf1_dequeue_op_is_input_wait():
    # each step: |--QueueDequeueManyV2 300--|--MatMul 700--| (a TF1 queue runner's input)
    step = [op("batch/fifo_queue_DequeueMany", "QueueDequeueManyV2", 300), op("dense/MatMul", "MatMul", 700)]
    finding = only(advise(run([step] * STEPS)), "input_wait")
    assert finding.evidence.events == {"batch/fifo_queue_DequeueMany": STEPS}


def test_input_wait_names_the_event():
    finding = only(advise(run([input_step(SHARE_KINDS["input_wait"][0] + 0.05)] * STEPS)), "input_wait")
    assert finding.evidence.events == {"IteratorGetNextOp::DoCompute": STEPS}


# --- op_regression: aligned ops slower beyond the change and the noise ------------------------
def regression_pair(control_steps: list, test_steps: list, **options):
    return pair(run(control_steps, **options), run(test_steps, **options))


def matmul_step(factor: float = 1.0) -> list:
    """|--dense/MatMul 475--|--dense_1/MatMul 475--|--Relu 50--|, the MatMuls times ``factor``."""
    return [op("sequential/dense/MatMul", "MatMul", 475 * factor), op("sequential/dense_1/MatMul", "MatMul", 475 * factor),
            op("sequential/dense_1/Relu", "Relu", 50)]


def test_op_regression_fires_just_above_the_change_and_names_the_op_type():
    # control: |--MatMul 475--|--MatMul 475--|--Relu 50--|
    # test:    MatMul x (1 + change + 2%)
    finding = only(regression_pair([matmul_step()] * STEPS, [matmul_step(1 + T.change + 0.02)] * STEPS),
                   "op_regression")
    assert finding.evidence.op_type == "MatMul" and "MatMul" in finding.summary
    assert sorted(finding.evidence.ops) == ["sequential/dense/MatMul", "sequential/dense_1/MatMul"]
    has_interval(finding)


def test_op_regression_silent_just_below_the_change():
    factor = 1 + T.change - 0.01
    share = 950 * (factor - 1) / (1000 + 950 * (factor - 1))
    assert share >= T.regression_min_share  # only the change keeps it silent
    none_of(regression_pair([matmul_step()] * STEPS, [matmul_step(factor)] * STEPS))


def small_group_steps(share: float) -> tuple[list, list]:
    """MatMul 2x slower, sized to take ``share`` of the test step:
    control |--MatMul a--|--Relu 1000--|, test |--MatMul 2a--|--Relu 1000--|, a / (2a + 1000) = share."""
    a = share * STEP_US / (1 - 2 * share)

    def step(factor: float) -> list:
        return [op("sequential/dense/MatMul", "MatMul", a * factor), op("sequential/dense/Relu", "Relu", STEP_US)]
    return [step(1.0)] * STEPS, [step(2.0)] * STEPS


def test_op_regression_fires_just_above_its_share_of_the_step():
    finding = only(regression_pair(*small_group_steps(T.regression_min_share + 0.005)), "op_regression")
    assert finding.evidence.op_type == "MatMul"
    assert finding.share == pytest.approx(T.regression_min_share + 0.005, abs=1e-3)


def test_op_regression_silent_just_below_its_share_of_the_step():
    none_of(regression_pair(*small_group_steps(T.regression_min_share - 0.005)))


def explained_steps(explained: float) -> tuple[list, list]:
    """MatMul 200 us slower, and the test step slower still by a gap no op explains, so that
    the ops explain ``explained`` of the step's slowdown:
    control |--MatMul 400--|--Relu 600--|, test |--MatMul 600--|--Relu 600--|....gap G....|."""
    delta = 200.0
    extra_gap = delta * (1 - explained) / explained
    control = [op("sequential/dense/MatMul", "MatMul", 400), op("sequential/dense/Relu", "Relu", 600)]
    test = [op("sequential/dense/MatMul", "MatMul", 400 + delta), op("sequential/dense/Relu", "Relu", 600),
            gap(extra_gap)]
    return [control] * STEPS, [test] * STEPS


def test_op_regression_fires_when_the_ops_explain_just_enough_of_the_slowdown():
    found = kinds(regression_pair(*explained_steps(T.regression_min_explained + 0.02)))
    assert [f.evidence.op_type for f in found.get("op_regression", [])] == ["MatMul"], found


def test_op_regression_silent_when_the_ops_explain_too_little_of_the_slowdown():
    none_of(regression_pair(*explained_steps(T.regression_min_explained - 0.02)), "op_regression")


def test_op_regression_silent_below_noise_ns():
    # a 10 us step: |--MatMul 1--|--Relu 9--|; the MatMul grows by noise_ns -/+ 0.5 us (a tick of TF1's clock)
    def steps(grow_us: float) -> list:
        return [[op("sequential/dense/MatMul", "MatMul", 1 + grow_us), op("sequential/dense/Relu", "Relu", 9)]] * STEPS
    noise_us = T.noise_ns / 1000
    none_of(regression_pair(steps(0), steps(noise_us - 0.5)))
    assert "op_regression" in kinds(regression_pair(steps(0), steps(noise_us + 0.5)))


def test_ops_slower_side_by_side_in_a_step_no_slower_are_no_regression():
    # control: |--MatMul 300--|--MatMul_1 300--|--Relu 400--|
    # test:    |--MatMul 600-----------------|--Relu 400--|      the two MatMuls side by side,
    #          |--MatMul_1 600---------------|                   each 2x in wall time, the step the same
    names = ("sequential/dense/MatMul", "sequential/dense_1/MatMul")
    relu = op("sequential/dense/Relu", "Relu", 400)
    control = [op(names[0], "MatMul", 300), op(names[1], "MatMul", 300), relu]
    test = [together(op(names[0], "MatMul", 600), op(names[1], "MatMul", 600, lane="executor 2")), relu]
    none_of(regression_pair([control] * STEPS, [test] * STEPS))


def test_op_regression_names_only_the_slower_op_type():
    # control: the CNN; test: its Conv2D ops 2x, everything else the same (no noise)
    found = kinds(regression_pair([cnn_step()] * STEPS, [cnn_step(slower={"Conv2D": 2.0})] * STEPS))
    assert set(found) == {"op_regression"}, found
    assert [f.evidence.op_type for f in found["op_regression"]] == ["Conv2D"]
    assert sorted(found["op_regression"][0].evidence.ops) == ["sequential/conv2d/Conv2D",
                                                              "sequential/conv2d_1/Conv2D"]


def test_thresholds_given_are_the_thresholds_used():
    # |--MatMul 600--|....gap 400....|: a finding by default, none where 50% is asked for
    trace = run([gaps_step(0.4)] * STEPS)
    assert "host_gaps" in kinds(advise(trace))
    none_of(advise(trace, thresholds=Thresholds(host_gap_min_share=0.5)))
    # MatMul 1.3x: a regression by default, none where a change must be 50%
    control, test = [matmul_step()] * STEPS, [matmul_step(1.3)] * STEPS
    assert "op_regression" in kinds(regression_pair(control, test))
    none_of(compare(run(control), run(test), thresholds=Thresholds(change=0.5)).findings, "op_regression")


# --- the CNN pairs: 10 steps a side, every op with lognormal noise (sigma 0.25) -------
# each step (34 ops end to end, 2.45 ms without noise):
# |--conv2d/Conv2D 300--|--BiasAdd 30--|--Relu 25--|--MaxPool 60--|--conv2d_1/Conv2D 250--|--BiasAdd 20--| ...
#   ... |--dense/MatMul 90--| ... |--Conv2DBackpropInput 260--|--Conv2DBackpropFilter 280--| ...
#   ... |--ResourceApplyAdam 40--|
CNN_US = cnn_ms() * 1000
def cnn_pair(seed: int, slower: dict[str, float] | None = None, slow_steps: int = NOISY_STEPS, **step):
    """The CNN's control run and a test run whose ``slower`` op types are slower in
    ``slow_steps`` of its steps (those left at normal speed: in the middle of the run)."""
    control = run([cnn_step(**step)] * NOISY_STEPS, sigma=SIGMA, seed=seed)
    normal = range(NOISY_STEPS // 2, NOISY_STEPS // 2 + NOISY_STEPS - slow_steps)
    test = run([cnn_step(**step) if k in normal else cnn_step(slower=slower, **step) for k in range(NOISY_STEPS)],
               sigma=SIGMA, seed=seed + 1000)
    return control, test


def conv2d_regression(findings) -> None:
    found = kinds(findings)
    assert set(found) == {"op_regression"}, [f.to_text() for f in findings]
    assert [f.evidence.op_type for f in found["op_regression"]] == ["Conv2D"], [f.to_text() for f in findings]


@pytest.mark.parametrize("seed", HELD_OUT_SEEDS)
def test_cnn_with_every_conv2d_twice_as_slow(seed):
    conv2d_regression(pair(*cnn_pair(seed, {"Conv2D": 2.0})))


def test_cnn_with_conv2d_1_6x_slower_in_9_of_10_steps():
    # Power, not certainty: with sigma 0.25 on each op and two Conv2D ops, the op type's
    # per-step time scatters by about 18%, and the interval that keeps noise-only pairs
    # silent (0 findings in 600 seeds) finds this regression in 89 of 100 seeds (measured:
    # `make bench`'s findings power, bench/findings_power.py). On these fixed seeds, at least
    # 8 of 10; whenever it is found it is Conv2D alone, and no other finding is made.
    found = 0
    for seed in HELD_OUT_SEEDS:
        findings = pair(*cnn_pair(seed, {"Conv2D": 1.6}, slow_steps=NOISY_STEPS - 1))
        if findings:
            conv2d_regression(findings)
            found += 1
    assert found >= 8, found


def test_cnn_noise_only_pairs_have_no_finding_at_all():
    # the same distribution both sides, 40 seeds: not op_regression, not host_gaps, nothing
    for seed in CNN_SEEDS:
        none_of(pair(*cnn_pair(seed)))


def test_cnn_noise_only_pairs_with_gaps_and_input_waits_have_no_finding_at_all():
    # as a good port: 12% of the step outside any op, 2% waiting for input, on both sides
    gap_us, input_us = 0.12 * CNN_US, 0.02 * CNN_US
    for seed in CNN_SEEDS:
        none_of(pair(*cnn_pair(seed, gap_us=gap_us, input_us=input_us)))


def test_a_noisy_cnn_run_alone_has_no_finding():
    for seed in NOISE_SEEDS:
        none_of(advise(run([cnn_step(gap_us=0.12 * CNN_US, input_us=0.02 * CNN_US)] * NOISY_STEPS,
                           sigma=SIGMA, seed=seed)))


# --- too few steps: timing findings are withheld, and a note says how many to capture ---------
def few_steps_notes(notes) -> list[str]:
    return [n for n in notes if "too few steps" in n]


def test_a_one_step_test_run_gets_no_timing_finding_and_a_note():
    control = run([cnn_step()] * NOISY_STEPS, sigma=SIGMA, seed=3)
    test = run([cnn_step(slower={"Conv2D": 2.0}, gap_us=2000)], sigma=SIGMA, seed=4)
    comparison = compare(control, test)
    found = comparison.findings
    none_of([f for f in found if f.kind in TIMING_KINDS])
    notes = few_steps_notes(list(getattr(found, "notes", [])) + list(comparison.notes))
    assert notes, (getattr(found, "notes", None), comparison.notes)
    assert any(str(T.min_steps) in note for note in notes), notes


def test_a_run_of_too_few_steps_alone_gets_no_timing_finding_and_a_note():
    found = advise(share_run("host_gaps", 0.8, steps=T.min_steps - 1))
    none_of(found)
    notes = few_steps_notes(getattr(found, "notes", []))
    assert notes and any(str(T.min_steps) in note for note in notes), getattr(found, "notes", None)


def test_steps_left_after_the_warmup_are_what_counts():
    found = advise(share_run("host_gaps", 0.8, steps=T.min_steps + 1), warmup=2)
    none_of(found)
    assert few_steps_notes(getattr(found, "notes", [])), getattr(found, "notes", None)


def test_min_steps_steps_are_enough():
    assert "host_gaps" in kinds(advise(share_run("host_gaps", 0.8, steps=T.min_steps)))
    found = pair(share_run("host_gaps", 0.1, steps=T.min_steps), share_run("host_gaps", 0.8, steps=T.min_steps))
    assert "host_gaps" in kinds(found)


def test_structure_kinds_are_judged_on_one_step():
    # eager ops are there or not: one step shows them
    assert "eager_ops" in kinds(advise(run([eager_step(T.eager_min_ops_per_step, 0.5)])))


# --- a run compared with itself: nothing to find -------------------------------------------
SELF_RUNS = {
    "cnn": lambda: run([cnn_step(gap_us=300, input_us=50)] * NOISY_STEPS, sigma=SIGMA, seed=7),
    "eager": lambda: run([eager_step(5, 0.6, gap_us=50)] * STEPS),
    "retracing": lambda: run(retraced(3)),
    "xla_compile": lambda: run(compiled(3)),
    "host_gaps": lambda: share_run("host_gaps", 0.6, sigma=SIGMA, seed=1),
    "input_wait": lambda: share_run("input_wait", 0.4, sigma=SIGMA, seed=1),
    "device_idle": lambda: share_run("device_idle", 0.6, sigma=SIGMA, seed=1),
    "framework_overhead": lambda: share_run("framework_overhead", 0.6, sigma=SIGMA, seed=1),
    "fused": lambda: run([FUSED] * STEPS, sigma=SIGMA, seed=1),
    "xla_fused": lambda: run([XLA_FUSED] * STEPS, sigma=SIGMA, seed=1),
    "leaking": lambda: run(leaking([MiB] * 8), memory_base=64 * MiB),
    "one_step": lambda: run([cnn_step(gap_us=3000)]),
}


@pytest.mark.parametrize("name", SELF_RUNS)
def test_a_run_compared_with_itself_has_no_finding(name):
    trace = SELF_RUNS[name]()
    none_of(pair(trace, trace))


def test_every_kind_is_covered_here():
    """Each kind of findings.DETECTORS has its exact tests in this file."""
    covered = {"eager_ops", "retracing", "xla_compile", "host_gaps", "input_wait", "device_idle", "fusion_lost",
               "fusion_gained", "xla_fusion", "op_regression", "memory_growth", "framework_overhead"}
    assert set(KINDS) == covered
