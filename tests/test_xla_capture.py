"""Captures of Keras 3 ``fit`` and XLA-compiled functions (real TF 2.21 runs on this CPU):
the graph ``TraceCallback`` records, and XLA compilations found inside traced steps.
Figures are printed for the issue's closing note (``pytest -s``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tracebridge
from tests.conftest import op_counts, unmatched_compute
from tests.models_structure import BATCH, RESNET_CONVS, resnet_data, resnet_fit, resnet_tf1, resnet_tf2
from tests.test_compare import _run_tf1, _run_tf2
from tests.test_compare_models import RESNET_LAYERS, assert_done, quality
from tracebridge import compare
from tracebridge.analysis.compare.names import plain_name
from tracebridge.analysis.common.xla import xla_instructions, xla_ops

FIT_BATCHES = 6  # 2 warm-up batches, 3 traced, 1 after
XLA_RULE_OPS = 0.5  # the share of an XLA run's op rows its XLA rows hold, at least (measured 73-75%)


def fit_trace(jit_compile: bool):
    """The Keras port trained by ``fit`` (one epoch of FIT_BATCHES batches) under
    TraceCallback, 3 batches traced after 2 of warm-up."""
    from tracebridge.keras import TraceCallback
    x, y = resnet_data()
    model = resnet_fit(jit_compile=jit_compile)
    callback = TraceCallback(warmup=2, steps=3)
    model.fit(np.concatenate([x] * FIT_BATCHES), np.concatenate([y] * FIT_BATCHES), batch_size=BATCH, epochs=1,
              callbacks=[callback], verbose=0, shuffle=False)
    return callback.trace


@pytest.fixture(scope="module")
def session_run(tf):
    return _run_tf1(tf, resnet_tf1(tf), resnet_data(), steps=3)


@pytest.fixture(scope="module")
def fit_run(tf):
    return fit_trace(jit_compile=False)


def test_fit_records_the_graph_that_ran(fit_run):
    graph = json.loads(fit_run.metadata["graph"])
    names = {node[0] for node in graph["nodes"]}
    # Keras runs multi_step_on_iterator, which calls one_step_on_data: the callee's nodes
    # are recorded under the call, as the trace names the ops it ran.
    convs = [name for name in fit_run.column_strings("ops", "name") if name.endswith("/convolution")]
    assert convs and all(name in names for name in convs)
    # the model's variables, by Keras's paths, reach the call through its arguments
    assert {"stem/kernel", "dense/bias"} <= {v[0] for v in graph["variables"].values()}


def test_fit_compares_with_the_session_model_by_structure(session_run, fit_run):
    result = compare(session_run, fit_run, warmup=1)
    figures = quality(result, RESNET_LAYERS)
    print(f"ResNet-style, Session vs Keras fit: {figures}")
    report = "\n" + result.to_text(top=40) + f"\n{figures}"
    assert "structure" in result.rule_shares, report
    assert_done(result, figures, report, RESNET_LAYERS)


# --- XLA compilations inside traced steps ---------------------------------------------------
SIZES = (4, 8, 12, 16, 20, 24)


def jit_step(tf):
    """A jit_compile function over a variable: two matmuls, microseconds of work."""
    w = tf.Variable(tf.random.normal([64, 64], seed=1))

    @tf.function(jit_compile=True, reduce_retracing=True)
    def step(x):
        return tf.reduce_sum(tf.matmul(tf.nn.relu(tf.matmul(x, w)), w))
    return step


@pytest.fixture(scope="module")
def recompiling_run(tf):
    """A new batch size at every traced call: one trace, one XLA compilation per call."""
    step = jit_step(tf)
    step(tf.ones([2, 64]))  # the first call, not traced
    traced = tracebridge.trace(step)
    for size in SIZES:
        traced(tf.ones([size, 64]))
    traced.stop()
    return traced.trace


@pytest.fixture(scope="module")
def compiled_once_run(tf):
    step = jit_step(tf)
    x = tf.ones([8, 64])
    step(x)  # compiled here, before the capture
    traced = tracebridge.trace(step)
    for _ in SIZES:
        traced(x)
    traced.stop()
    return traced.trace


def test_a_recompiling_function_gets_an_xla_compile_finding(recompiling_run):
    findings = tracebridge.advise(recompiling_run)
    found = [f for f in findings if f.kind == "xla_compile"]
    assert found, findings.to_text()
    evidence = found[0].evidence
    # one compilation per new shape, each in its own step, with the shapes that triggered it
    assert evidence.steps == [s.number for s in recompiling_run.steps]
    assert evidence.input_shapes == [f"float32[{size},64]" for size in SIZES]
    assert set(evidence.functions) == {"step"}
    # checked against the trace read independently: each compilation lies inside its step's
    # call of the function, and the backend compile event is in it
    ops, strings = recompiling_run.ops, recompiling_run.strings
    names = [strings[i] for i in ops["name"].tolist()]
    backend = [i for i, name in enumerate(names) if name.endswith("Compiler::RunBackend")]
    assert len(backend) == len(SIZES)
    steps = {s.number: s for s in recompiling_run.steps}
    for number, compile_ns in zip(evidence.steps, evidence.compile_ns):
        step = steps[number]
        inside = [i for i in backend if step.start_ns <= ops["start_ns"][i] < step.end_ns]
        assert len(inside) == 1
        assert ops["end_ns"][inside[0]] - ops["start_ns"][inside[0]] <= compile_ns < step.duration_ns
    # (compiling is most of the step time, the function itself runs for microseconds: a share of
    # live time, not asserted, nor which finding it puts first)
    print(f"xla_compile: {found[0].summary}; share {found[0].share:.1%}; "
          f"compile ms {[round(t / 1e6, 1) for t in evidence.compile_ns]}; "
          f"step ms {[round(s.duration_ns / 1e6, 1) for s in recompiling_run.steps]}")
    assert "float32[24,64]" in found[0].summary


def test_a_function_compiled_once_gets_none(compiled_once_run):
    findings = tracebridge.advise(compiled_once_run)
    assert "xla_compile" not in [f.kind for f in findings], findings.to_text()
    from tracebridge.analysis.findings.run_measures import StepView, xla_compile
    assert xla_compile(StepView(compiled_once_run)).steps == []


@pytest.mark.parametrize("suffix", [".json.gz", ".xplane.pb"])
def test_step_inputs_survive_tracebridges_files(recompiling_run, tmp_path, suffix):
    recompiling_run.save(tmp_path / f"run{suffix}")
    again = tracebridge.load(tmp_path / f"run{suffix}")
    evidence = [f for f in tracebridge.advise(again) if f.kind == "xla_compile"][0].evidence
    assert evidence.input_shapes == [f"float32[{size},64]" for size in SIZES]


# --- HLO recorded at capture time -----------------------------------------------------------
def test_a_jit_function_s_hlo_is_recorded_per_input_shape(tf, recompiling_run, tmp_path):
    import re

    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    ops = hlo_op_map(modules_of(recompiling_run.metadata))
    # at least one module per input shape the traced steps ran: the capture's, beside those the
    # profile's /host:metadata holds (TF 2.21 lists there every module the process compiled)
    assert len(ops) >= len(SIZES)
    # The thunk events TF's XLA CPU runtime recorded are named after HLO instructions: each
    # resolves in the recorded modules, to the TF op XLA's own text form of the HLO names.
    text = jit_step(tf).experimental_get_compiler_ir(tf.ones([4, 64]))(stage="optimized_hlo")
    op_names = {m.group(1): m.group(2) for m in re.finditer(r'%([\w.-]+) = .*?op_name="([^"]*)"', text)}
    # the reader names each thunk's row for its TF op and keeps its instruction, which the
    # Chrome output's args carry
    linked = linked_instructions(recompiling_run, tmp_path)
    ran = linked & set(op_names)
    assert ran, sorted(linked)[:40]
    for name in ran:
        found = ops.find(None, name)
        assert found is not None and found.op_name == op_names[name], (name, found)
    assert {"MatMul", "MatMul_1", "Relu"} <= {ops.find(None, n).op_name for n in ran}


def test_a_function_without_jit_compile_records_no_hlo(tf, fit_run):
    """Nothing of a run without XLA is linked to HLO: the capture recorded none for it (the
    profile's /host:metadata may still list modules other functions of the process compiled)."""
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    ops = hlo_op_map(modules_of(fit_run.metadata))
    assert not [n for n in set(fit_run.column_strings("ops", "name")) if ops.find(None, n) is not None]


@pytest.fixture(scope="module")
def fit_xla_run(tf):
    return fit_trace(jit_compile=True)


@pytest.fixture(scope="module")
def jit_function_run(tf):
    """The Keras port's training step in a tf.function(jit_compile=True), traced by trace(fn)."""
    return _run_tf2(tf, resnet_tf2(tf, jit_compile=True), resnet_data(), steps=3)


def compared_with_xla(control, test, label):
    """The comparison of ``control`` with ``test`` (one of them an XLA run), its figures
    (each XLA row standing for the TF op it is named or made for), and a report."""
    result = compare(control, test, warmup=1)
    computed = {**xla_ops(control), **xla_ops(test)}
    figures = quality(result, RESNET_LAYERS, computed)
    print(f"ResNet-style, {label}: {figures}")
    return result, figures, "\n" + result.to_text(top=40) + f"\n{figures}", computed


def assert_fusions_are_groups(result, xla_run, computed):
    """Every XLA row that computes several TF ops is in a group of the XLA rule whose key
    names the fusion and its TF ops (no fusion's time stands against its first op alone),
    or, where it updates variables only, in the optimizer's row of all updates."""
    fused = {name for name, ops in computed.items() if len(ops) > 1 and name in set(xla_run.column_strings("ops", "name"))}
    assert fused
    side = "test" if xla_run is result.test else "control"
    rows = [r for r in result.rows if fused & set(getattr(r.names, side))]
    assert rows
    for row in rows:
        if row.rule not in ("unmatched", "optimizer"):
            assert row.rule == "xla" and "[XLA fusion of " in row.key, row.key
    return rows


def test_fit_with_jit_compile_compares_with_the_session_model(session_run, fit_xla_run):
    result, figures, report, computed = compared_with_xla(session_run, fit_xla_run, "Session vs Keras fit (XLA)")
    # most of the XLA run's ops pair by the XLA rule (by op count: its share of op time is live timing)
    assert op_counts(result)["rules"]["xla"]["test"] > XLA_RULE_OPS, (op_counts(result), report)
    assert_done(result, figures, report, RESNET_LAYERS, computed=computed, updates=False)
    assert_fusions_are_groups(result, fit_xla_run, computed)


def test_a_jit_compiled_step_compares_with_the_session_model(session_run, jit_function_run):
    result, figures, report, computed = compared_with_xla(session_run, jit_function_run,
                                                          "Session vs tf.function(jit_compile=True)")
    assert op_counts(result)["rules"]["xla"]["test"] > XLA_RULE_OPS, (op_counts(result), report)  # (as above)
    assert_done(result, figures, report, RESNET_LAYERS, computed=computed, updates=False)
    assert_fusions_are_groups(result, jit_function_run, computed)
    # XLA rewrites each filter gradient into a convolution without metadata: each still
    # stands for its layer's Conv2DBackpropFilter (the op downstream it computes for)
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    hlo = hlo_op_map(modules_of(jit_function_run.metadata))
    ran = [hlo.find(None, name) for names in xla_instructions(jit_function_run).values() for name in names]
    made = [op for op in ran if op.opcode == "convolution" and not op.op_name]
    assert made and all(op.tf_ops[0][1] == "Conv2DBackpropFilter" for op in made), made
    assert len({op.tf_ops[0][0] for op in made}) == len(RESNET_CONVS)


def test_fit_without_xla_compares_with_fit_with_xla(fit_run, fit_xla_run):
    """TF2 without XLA against TF2 with XLA: the same op names on both sides, XLA's rows
    paired through the HLO with the ops they compute."""
    result, figures, report, computed = compared_with_xla(fit_run, fit_xla_run, "Keras fit vs Keras fit (XLA)")
    # by structure (the figures weigh ops by their live time: printed): the compute ops matched,
    # few ops by position
    assert not unmatched_compute(result), report
    assert max(op_counts(result)["position"].values()) <= 0.1, (op_counts(result), report)
    # The truth here is the op names, the same on both sides: an XLA row of one TF op pairs
    # with the op of that name where the other run has it.
    ran = {plain_name(name): name for name in result.control.column_strings("ops", "name")}
    rows = [r for r in result.rows if r.rule == "xla"]
    for row in rows:
        for name in row.names.test:
            if computed.get(name) == (name,) and plain_name(name) in ran:
                assert ran[plain_name(name)] in row.names.control, (row.key, report)
    assert_fusions_are_groups(result, fit_xla_run, computed)


def test_xla_fusion_finding_shows_what_xla_fused(session_run, fit_run, fit_xla_run):
    """On Session vs fit with XLA: what XLA fused that the session ran as separate ops, with
    the thunks as evidence, checked against the HLO and the session's ops; on Session vs fit
    without XLA: none."""
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    assert "xla_fusion" not in [f.kind for f in compare(session_run, fit_run, warmup=1).findings]
    result = compare(session_run, fit_xla_run, warmup=1)
    found = [f for f in result.findings if f.kind == "xla_fusion"]
    assert found, result.findings.to_text()
    evidence = found[0].evidence
    print(f"xla_fusion: {found[0].summary}")
    assert evidence.xla_run == "test" and evidence.ops
    hlo = hlo_op_map(modules_of(fit_xla_run.metadata))
    session_ops = set(session_run.column_strings("ops", "name"))
    rows = {r.key: r for r in result.rows}
    for key, instructions, tf_ops, separate, times in zip(evidence.ops, evidence.instructions, evidence.tf_ops,
                                                          evidence.separate_ops, evidence.separate_ns):
        row = rows[key]
        assert row.rule == "xla" and len(separate) >= 2 and set(separate) == set(row.names.control)
        assert set(separate) <= session_ops and len(times) == len(separate) and sum(times) > 0
        # each kernel the XLA run ran is an HLO instruction of the recorded module, and what
        # they compute together is the row's TF ops
        computed = [op for name in instructions for op, _ in hlo.find(None, name).tf_ops]
        assert len(set(tf_ops)) >= 2 and set(tf_ops) <= set(computed), key
    assert found[0].evidence.to_dict()["instructions"]


def linked_instructions(trace, folder) -> set[str]:
    """The HLO instructions the trace's XLA events ran, as its Chrome output's args name them
    (the reader names each thunk's row for its TF op and keeps its instruction)."""
    trace.save(folder / "linked.json")
    return {event["args"]["hlo_instruction"] for event in json.loads((folder / "linked.json").read_text())["traceEvents"]
            if event.get("ph") == "X" and "hlo_instruction" in event.get("args", {})}


def test_fit_with_jit_compile_records_the_compiled_step_s_hlo(fit_xla_run, tmp_path):
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    assert json.loads(fit_xla_run.metadata["graph"])["nodes"]
    ops = hlo_op_map(modules_of(fit_xla_run.metadata))
    assert len(ops) >= 1  # one batch shape ran (and the profile lists what else the process compiled)
    # the thunks TF's XLA CPU runtime recorded resolve to HLO instructions of the model's layers
    names = linked_instructions(fit_xla_run, tmp_path)
    assert names
    found = {n: ops.find(None, n) for n in names if ops.find(None, n) is not None}
    layers = {part for op in found.values() for name, _ in op.tf_ops for part in name.split("/")}
    assert {"stem_1", "b2_short_1", "dense_1"} & layers, sorted(layers)[:40]
    convs = [op for op in found.values() if op.opcode == "convolution" or "convolution" in op.name]
    assert convs, sorted(found)[:40]


@pytest.fixture(scope="module")
def fit_partial_run(tf):
    """Keras ``fit`` under ``jit_compile=True`` where every epoch ends in a partial batch
    (10 samples in batches of 4, 4, 2): the batches' shapes are not static, and XLA compiles
    one module per batch shape. Epoch 1 (both shapes compiled) is warm-up; epoch 2 is
    traced, its partial batch (step 5) included, at host_tracer_level 3 (the level that
    records the graph's function call ops). A tiny model: the shapes are the point."""
    import keras

    from tracebridge.keras import TraceCallback
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, activation="relu", name="hidden"),
                              keras.layers.Dense(2, name="logits")])
    model.compile("sgd", "mse", jit_compile=True)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 16)).astype("float32"), rng.normal(size=(10, 2)).astype("float32")
    callback = TraceCallback(warmup=3, steps=3, host_tracer_level=3)
    model.fit(x, y, batch_size=4, epochs=2, callbacks=[callback], verbose=0, shuffle=False)
    return callback.trace


def test_fit_with_a_partial_last_batch_keeps_the_hlo_of_every_batch_shape(fit_partial_run):
    """Every traced step's XLA events, the partial batch's too, link to an HLO instruction
    and through it to the model's layers; the trace holds a module per batch shape (the
    profile's /host:metadata lists them, program ids apart, where capture cannot compile
    the step for shapes it does not know), and no note says the HLO is missing."""
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    trace = fit_partial_run
    assert [s.number for s in trace.steps] == [3, 4, 5]
    assert "HLO not recorded" not in (trace.metadata.get("notes") or "")
    modules = hlo_op_map(modules_of(trace.metadata)).modules
    train_modules = [m for m in modules if "one_step_on_data" in m.name]
    assert len({m.program_id for m in train_modules}) >= 2, [(m.name, m.program_id) for m in modules]
    stats = trace.table("event_stats")
    keys = [trace.strings[k] for k in stats["key"].tolist()]
    ops, values = stats["op"].tolist(), [trace.strings[v] for v in stats["value"].tolist()]
    linked = {op for op, key in zip(ops, keys) if key == "hlo_instruction"}
    programs = {op: int(value) for op, key, value in zip(ops, keys, values) if key == "program_id"}
    names = trace.column_strings("ops", "name")
    ran: dict[int, set[int]] = {}  # step number -> the programs its XLA events ran
    for index, step in enumerate(trace.steps):
        rows = [op for op in linked if trace.ops["step"][op] == index]
        layers = {part for op in rows for part in names[op].split("/")}
        assert {"hidden_1", "logits_1"} <= layers or {"hidden", "logits"} <= layers, (step, sorted(layers)[:20])
        ran[step.number] = {programs[op] for op in rows if op in programs}
        assert ran[step.number] <= {m.program_id for m in train_modules}, (step, ran, train_modules)
    assert ran[3] == ran[4] and ran[5] and ran[5] != ran[3]  # the partial batch ran a module of its own


def test_the_call_op_of_a_compiled_step_is_not_counted_on_top_of_its_thunks(fit_partial_run):
    """Keras's graph calls its jit_compile step through a StatefulPartitionedCall op, whose
    span holds the step's thunks: the op stays in the trace, as an annotation, not an op row."""
    trace = fit_partial_run
    assert trace.column_strings("ops", "name").count("StatefulPartitionedCall") >= len(trace.steps)
    summary = trace.summary()
    assert "StatefulPartitionedCall" not in {row["key"] for row in summary.by_op}
    assert "StatefulPartitionedCall" not in {row["key"] for row in summary.by_type}


def test_a_capture_with_hlo_saves_in_every_format_that_carries_graphs(recompiling_run, tmp_path):
    for name in ("run.json", "run.json.gz", "run.xplane.pb"):
        recompiling_run.save(tmp_path / name)
        again = tracebridge.load(tmp_path / name)
        found = [f for f in tracebridge.advise(again) if f.kind == "xla_compile"]
        assert found and len(found[0].evidence.steps) == len(SIZES), name


@pytest.fixture(scope="module")
def fit_metrics_run(tf):
    """Keras ``fit`` under ``jit_compile=True`` with an accuracy metric: the metrics' mean is
    a ``DivNoNan`` of their total and count, compiled into the step beside the layers."""
    import keras

    from tracebridge.keras import TraceCallback
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu", name="hidden"),
                              keras.layers.Dense(4, name="logits")])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=True)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 16)).astype("float32"), rng.integers(0, 4, size=(64,))
    callback = TraceCallback(warmup=2, steps=3)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0, shuffle=False)
    return callback.trace


def test_a_metrics_div_no_nan_is_not_grouped_with_the_layers(fit_metrics_run):
    """XLA shares one constant among all who need it (CSE), with the metadata of one of them:
    the metrics' ``div_no_nan`` fusion reads a zero named for the hidden layer's ``Relu``. A
    fusion computes the ops of what it computes, not of the constants it reads, so the
    metrics' fusion is not grouped with the layer's ops (issue 34)."""
    from tracebridge.model.hlo import modules_of
    from tracebridge.readers.hlo import hlo_op_map
    hlo = hlo_op_map(modules_of(fit_metrics_run.metadata))
    metrics = [op for module in hlo.modules for op in module.ops.values()
               if any(op_type == "DivNoNan" for _, op_type in op.tf_ops)]
    assert metrics
    for op in metrics:
        layers = [name for name, _ in op.tf_ops if "hidden" in name or "logits" in name]
        assert not layers, (op.name, op.tf_ops)
    # and so in the trace the comparison reads: no linked row computes both
    for name, ops in xla_ops(fit_metrics_run).items():
        if any("div_no_nan" in o for o in ops):
            assert not [o for o in ops if "hidden" in o or "logits" in o], (name, ops)
