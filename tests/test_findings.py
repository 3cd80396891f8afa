"""Findings: a TF1 run and TF2 ports of it, each port with one porting mistake, captured
with real TensorFlow 2.21 (tests/helpers/porting_worker.py, one subprocess per run, all
made once for this module). For each kind: the port with that mistake gets the finding,
with its evidence, and the good port does not; every run compared with itself gets no
findings at all. ``device_idle`` needs an accelerator: it is tested on the corpus' GPU
and TPU profiles.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tracebridge
from tracebridge.analysis.compare import compare
from tracebridge.analysis.findings import HOST_GAP_MIN_SHARE, KINDS, advise
from tracebridge.analysis.pair_findings import per_step_medians, shared_times
from tracebridge.analysis.run_findings import StepView, function_calls, host_gaps
from tracebridge.analysis.kernels import fusion_parts, plain_kernel
from tracebridge.model.schema import Category
from tracebridge.writers.compare_html import compare_document, write_compare_html

from tests.conftest import run_cli
from tests.helpers.browser import browser_mark
from tests.helpers.preloaded import PreloadedPython
from tests.test_html import Opened

WORKER = Path(__file__).parent / "helpers" / "porting_worker.py"
# Captured in this order: the pairs whose findings rest on op times (float64 and the good
# port against tf1) right after one another, as the machine's load drifts over minutes.
VARIANTS = ("tf1", "tf2_float64", "tf2_good", "tf1_noremap", "tf2_eager", "tf2_retrace", "tf2_host",
            "tf2_input", "tf2_noremap", "tf2_hoard", "tf2_host+python")
NOT_ON_A_GOOD_PORT = ("eager_ops", "retracing", "host_gaps")
# What a build fuses in a tf.function but not in a TF1 session, measured with TF 2.21: oneDNN
# fuses a convolution's filter gradient with its bias gradient in TF2 only. A true gain, so a
# good port shows it as fusion_gained on that build.
TF2_ONLY_FUSIONS = {True: {"_MklNativeConv2DBackpropFilterWithBias"}, False: set()}

pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(tf, tmp_path_factory) -> dict[str, Path]:
    """Every variant captured once, one at a time (concurrent captures would load the two
    cores and blur the timings the findings rest on). Memory events need the BFC allocator
    set before TensorFlow starts."""
    folder = tmp_path_factory.mktemp("porting")
    paths = {}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_CPU_ALLOCATOR_USE_BFC": "true"}
    with PreloadedPython(env) as python:  # a process per variant, TensorFlow imported once
        for variant in VARIANTS:
            out = folder / f"{variant}.json"
            done = python.run(WORKER, Path(__file__).parents[1], timeout=600, args=(variant, out))
            assert done.returncode == 0, (variant, done.stderr[-3000:])
            assert json.loads(done.stdout.strip().splitlines()[-1])["steps"] == 5
            paths[variant] = out
    return paths


@pytest.fixture(scope="module")
def traces(runs) -> dict:
    return {variant: tracebridge.load(path) for variant, path in runs.items()}


def _findings(traces, test: str, control: str = "tf1") -> dict:
    result = compare(traces[control], traces[test])
    return {f.kind: f for f in result.findings}, result


def _good_port_free_of(traces, kind: str, control: str = "tf1") -> None:
    found, _ = _findings(traces, "tf2_good", control)
    assert kind not in found, found[kind].to_text()


def test_eager_ops_are_ops_and_compare_op_for_op(traces):
    eager = traces["tf2_eager"]
    ops = eager.ops
    names = [eager.strings[i] for i in ops["name"].tolist()]
    types = {eager.strings[t] for t, n, c in zip(ops["op_type"].tolist(), names, ops["category"].tolist())
             if n.startswith("eager/") and c == Category.OP}
    assert {"Conv2D", "MatMul", "Relu", "Conv2DBackpropFilter", "AssignSubVariableOp"} <= types
    found, result = _findings(traces, "tf2_eager")
    # The bar: a forgotten tf.function still compares op for op.
    assert result.coverage.control >= 0.5 and result.coverage.test >= 0.5, result.coverage
    assert "type+position" in result.rule_shares
    # Fused kernels of the graph run stand for their eager parts, one after another.
    fused = [r for r in result.rows if r.rule == "fusion"]
    assert fused and all(all(n.startswith("eager/") for n in r.test_names) for r in fused)
    finding = found["eager_ops"]
    assert finding.share > 0.5
    assert min(finding.evidence.ops_per_step) >= 20
    assert finding.evidence.steps == [s.number for s in eager.steps]
    assert all(op.startswith("eager/") for op in finding.evidence.ops)
    assert "tf.function" in finding.advice and finding.link.endswith("#eager_ops")
    _good_port_free_of(traces, "eager_ops")


def test_retracing(traces):
    found, result = _findings(traces, "tf2_retrace")
    assert result.coverage.test >= 0.9  # the ops match: the time is elsewhere
    finding = found["retracing"]
    assert finding.evidence.graph_buildings_per_step == [1] * 5
    # Each call ran a new function: __inference_train_on_<n>, five different n.
    versions = finding.evidence.functions["train_on"]
    assert len(versions) == 5 and all(v.startswith("__inference_train_on_") for v in versions)
    assert finding.evidence.events == ["tf.function-graph_building"]
    assert finding.share > 0.3
    assert "eager_ops" not in found and "host_gaps" not in found  # tracing time is retracing's
    _good_port_free_of(traces, "retracing")


def test_host_gaps(traces):
    found, _ = _findings(traces, "tf2_host")
    finding = found["host_gaps"]
    assert finding.share >= 0.15
    assert finding.evidence.control_share < 0.15
    gaps = finding.evidence.gap_ns_per_step
    steps = traces["tf2_host"].steps
    assert len(gaps) == len(steps) and all(g > 0.3 * s.duration_ns for g, s in zip(gaps, steps))
    assert all(longest > 0 for longest in finding.evidence.longest_gap_ns_per_step)
    _good_port_free_of(traces, "host_gaps")


def test_time_inside_a_function_call_is_call_overhead_not_a_gap(traces):
    """TF's own time in a tf.function call (binding arguments, starting the executor) is no
    Python work between ops: on a good port it was a quarter of this small CNN's step, as
    much as the 30% that makes a host_gaps finding alone (``advise``)."""
    good = traces["tf2_good"]
    calls = function_calls(good)
    view = StepView(good)
    assert [len(view.rows_in(calls, step)) for step in view.steps] == [1] * 5  # one call a step
    measure = host_gaps(view, [])
    overhead = measure.call_overhead_ns_per_step
    assert all(ns > 0 for ns in overhead)
    assert measure.share < HOST_GAP_MIN_SHARE / 2, measure
    assert "host_gaps" not in {f.kind for f in advise(good)}
    # The TF1 session has no tf.function calls: nothing is taken out of its gaps.
    assert not function_calls(traces["tf1"]).any()


def test_host_gaps_name_the_python_work_with_the_python_tracer(traces):
    trace = traces["tf2_host+python"]
    assert (trace.ops["category"] == Category.PYTHON).any()  # the tracer's frames are in the trace
    found, _ = _findings(traces, "tf2_host+python")
    frames = found["host_gaps"].evidence.python_in_gaps_ns
    # The worker's own numpy preparation is among the frames that ran while no op did.
    assert any("porting_worker.py" in frame for frame in frames), frames
    assert all(frame.startswith("$") and ns > 0 for frame, ns in frames.items())
    # advise's text names them too, largest first, not only --json
    text = found["host_gaps"].to_text()
    assert "Python in the gaps (all steps): " + next(iter(frames)).lstrip("$") in text


def test_input_wait(traces):
    found, _ = _findings(traces, "tf2_input")
    finding = found["input_wait"]
    assert finding.share >= 0.05
    assert "IteratorGetNextOp::DoCompute" in finding.evidence.events
    assert all(w > 0 for w in finding.evidence.wait_ns_per_step)
    assert finding.evidence.control_share < 0.05  # the TF1 run is fed from numpy
    _good_port_free_of(traces, "input_wait")


def _fused_kernels(trace, names) -> set[str]:
    ops = trace.ops
    wanted = {trace.strings.index(n) for n in names if n in trace.strings}
    return {trace.strings[k] for n, k in zip(ops["name"].tolist(), ops["kernel"].tolist())
            if n in wanted and fusion_parts(trace.strings[k])}


def _gained_beyond_the_build(found: dict, trace, onednn: bool) -> set[str]:
    if "fusion_gained" not in found:
        return set()
    names = [n for names in found["fusion_gained"].evidence.test_ops for n in names]
    return _fused_kernels(trace, names) - TF2_ONLY_FUSIONS[onednn]


def test_fusion_lost(traces, tf_build):
    found, _ = _findings(traces, "tf2_noremap")
    finding = found["fusion_lost"]
    fused = _fused_kernels(traces["tf1"], [n for names in finding.evidence.control_ops for n in names])
    # The control run's fused kernels are the build's own (_FusedMatMul, or oneDNN's).
    assert fused and all(("_Mkl" in k) == tf_build.onednn for k in fused), fused
    assert "_FusedMatMul" in {plain_kernel(k) for k in fused}
    parts = {traces["tf2_noremap"].op(i).op_type for i in range(len(traces["tf2_noremap"]))
             if traces["tf2_noremap"].op(i).name in {n for names in finding.evidence.test_ops for n in names}}
    assert {"MatMul", "BiasAdd"} <= {plain_kernel(p) for p in parts}
    assert not _gained_beyond_the_build(found, traces["tf2_noremap"], tf_build.onednn)
    _good_port_free_of(traces, "fusion_lost")


def test_fusion_gained(traces, tf_build):
    found, _ = _findings(traces, "tf2_good", control="tf1_noremap")
    finding = found["fusion_gained"]
    assert finding.evidence.ops and all("[" in key for key in finding.evidence.ops)
    gained = _fused_kernels(traces["tf2_good"], [n for names in finding.evidence.test_ops for n in names])
    assert "_FusedMatMul" in {plain_kernel(k) for k in gained}, gained
    assert "fusion_lost" not in found
    # The good port against the TF1 run with Grappler's defaults gains only what the build
    # fuses in TF2 alone.
    good, _ = _findings(traces, "tf2_good")
    assert not _gained_beyond_the_build(good, traces["tf2_good"], tf_build.onednn)


def _ops_explain_the_slowdown(result) -> bool:
    """The preconditions of op_regression, measured here from the rows: the test steps slower
    (fastest test step against the median control step), a group of slower rows whose shared
    time grew by 7.5% of the test step, and the matched ops' shared time grown by 40%
    of the steps' slowdown."""
    c, t = result.steps
    shared = [per_step_medians(x, shared_times(x), StepView(x).step_positions) for x in (result.control, result.test)]

    def grown(row) -> float:
        return sum(shared[1].get(n, 0.0) for n in row.test_names) - sum(shared[0].get(n, 0.0) for n in row.control_names)
    matched = [r for r in result.rows if r.control_names and r.test_names]
    slower_rows = [r for r in matched if r.rule not in ("fusion", "optimizer")
                   and r.test_min_ns - r.control_median_ns > 0.1 * r.control_median_ns]
    groups: dict = {}  # by op type and scope, as the finding groups them
    for r in slower_rows:
        key = (plain_kernel(r.op_type.split("/")[0]), r.test_names[0].split("/")[0] if "/" in r.test_names[0] else "")
        groups[key] = groups.get(key, 0.0) + grown(r)
    return (t.min_ns - c.median_ns > 0.1 * c.median_ns
            and any(g >= 0.075 * t.median_ns for g in groups.values())
            and sum(grown(r) for r in matched) >= 0.4 * (t.median_ns - c.median_ns))


def test_op_regression(traces, tf_build):
    found, result = _findings(traces, "tf2_float64")
    regressions = [f for f in result.findings if f.kind == "op_regression"]
    if not _ops_explain_the_slowdown(result):
        # float64 costs the kernels 1.2-3x in captures on this shared 2-core machine (with
        # oneDNN too, whose float64 ops fall back to Eigen): when the ops did not grow, none
        # is named. A CI run with oneDNN once measured no such growth.
        assert not regressions, [f.to_text() for f in regressions]
        return
    assert regressions and regressions[0].share >= 0.05
    slower = {f.evidence.op_type for f in regressions}
    # the model's float compute, whose kernels float64 slows: which of them grow past the
    # finding's bar varies with the machine's load (MaxPoolGrad alone in one CI run)
    assert slower & {"Conv2DBackpropFilter", "Conv2DBackpropInput", "_FusedConv2D", "Conv2D", "MatMul",
                     "_FusedMatMul", "MaxPool", "MaxPoolGrad", "BiasAddGrad", "ReluGrad", "Relu", "BiasAdd"}, slower
    for finding in regressions:
        assert finding.evidence.test_median_ns > finding.evidence.control_median_ns
    if tf_build.onednn:  # oneDNN has no float64 kernels: the trace shows other kernels ran
        assert any("different kernel" in (f.evidence.cause or "") for f in regressions)
    _good_port_free_of(traces, "op_regression")
    # compare(noise_ns=...) is the noise floor of both the rows' changes and the regressions:
    # a floor above every change measured (a median moves at least as far as a minimum) makes
    # them all noise.
    matched = [r for r in result.rows if r.control_names and r.test_names]
    floor = int(max(abs(r.delta_ns) for r in matched)) + 1
    quiet = compare(traces["tf1"], traces["tf2_float64"], noise_ns=floor)
    assert quiet.noise_ns == floor and "op_regression" not in {f.kind for f in quiet.findings}
    assert all(r.change == "=" for r in quiet.rows if r.control_names and r.test_names)
    assert any(r.change == "+" for r in matched)


def test_memory_growth(traces):
    found, result = _findings(traces, "tf2_hoard")
    finding = found["memory_growth"]
    ends = finding.evidence.in_use_at_step_end
    assert sum(b > a for a, b in zip(ends, ends[1:])) >= 3 and ends[-1] - ends[0] > 1 << 20
    assert "memory_growth" in {f.kind for f in advise(traces["tf2_hoard"])}
    _good_port_free_of(traces, "memory_growth")


def test_a_good_port_and_every_self_comparison(traces):
    found, _ = _findings(traces, "tf2_good")
    assert not set(found) & set(NOT_ON_A_GOOD_PORT), [f.to_text() for f in found.values()]
    assert not advise(traces["tf2_good"])
    assert set(found) <= {"fusion_gained"}, [f.to_text() for f in found.values()]  # see TF2_ONLY_FUSIONS
    for variant, trace in traces.items():
        findings = compare(trace, trace).findings
        assert not findings, (variant, findings.to_text())


@pytest.mark.parametrize("variant,kind", [("tf2_eager", "eager_ops"), ("tf2_retrace", "retracing"),
                                          ("tf2_host", "host_gaps"), ("tf2_input", "input_wait")])
def test_advise_one_run(traces, variant, kind):
    findings = advise(traces[variant])
    assert findings[0].kind == kind, findings.to_text()
    assert findings == sorted(findings, key=lambda f: -f.share)


def test_findings_in_every_output(runs, tmp_path):
    done = run_cli("compare", runs["tf1"], runs["tf2_retrace"], "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["findings"][0]["kind"] == "retracing"
    assert set(report["findings"][0]) == {"kind", "share", "summary", "evidence", "advice", "link", "of",
                                          "saves_at_most_ns", "guide"}
    text = run_cli("compare", runs["tf1"], runs["tf2_retrace"]).stdout
    assert "findings (what share of a step each one takes, and the most fixing it could save):" in text
    assert "retracing" in text and "of the test run's median step" in text
    done = run_cli("advise", runs["tf2_eager"], "--json")
    assert done.returncode == 0 and json.loads(done.stdout)[0]["kind"] == "eager_ops"
    assert run_cli("advise", runs["tf2_good"]).stdout.strip() == "findings: none"
    page = compare_document(compare(tracebridge.load(runs["tf1"]), tracebridge.load(runs["tf2_host"])))
    block = page.split('class="tracebridge-compare">', 1)[1].split("</script>", 1)[0]
    assert json.loads(block)["findings"][0]["kind"] == "host_gaps"
    assert tracebridge.advise(runs["tf2_input"])[0].kind == "input_wait"


def test_every_kind_has_a_guide_section():
    guide = (Path(__file__).parents[1] / "migration_guide" / "README.md").read_text()
    for kind in KINDS:
        assert f"\n### {kind}\n" in guide, kind  # the anchor the findings link to: #<kind>
        example = Path(__file__).parents[1] / "migration_guide" / "examples" / "performance" / kind
        assert (example / "before.py").is_file() and (example / "after.py").is_file(), kind


# --- device_idle: the corpus' accelerator profiles -----------------------------------------
def test_device_idle_on_gpu_profiles(corpus):
    for name in ("chrome/ikhlestov_gpu_timeline_01.json", "chrome/blackbox_attacks_timeline_01.json"):
        trace = tracebridge.load(corpus / name)
        found = {f.kind: f for f in advise(trace)}
        finding = found["device_idle"]
        assert finding.evidence.device == "/gpu:0/stream:all"
        busy = trace.summary().by_device
        stream = next(d for d in busy if d["key"] == "/gpu:0/stream:all")
        # The idle share is the stream's own busy time against the step (the summary's too).
        step = trace.steps[0].duration_ns
        assert finding.evidence.idle_share == pytest.approx(1 - stream["busy_ns"] / step, abs=1e-6)
        assert finding.share <= finding.evidence.idle_share
        assert not compare(trace, trace).findings


def test_device_idle_needs_the_host_working(corpus):
    """A TPU busy 78% of the time waits on its host 12%: no finding. The multi-worker GPU job's
    step (GPU:6's own Steps line, 21.3 ms as xprof's overview page reports) has 14.9 ms of device
    compute in xprof's figures, so the device idles 30% of it; the host works during 28%: that is
    a finding, and its idle share agrees with xprof's."""
    tpu = tracebridge.load(corpus / "xspace/xprof_tpu_inference_2.xplane.pb")
    assert "device_idle" not in {f.kind for f in advise(tpu)}
    gpu = tracebridge.load(corpus / "xspace/tfprofiler_gpu_multi_worker.xplane.pb")
    finding = {f.kind: f for f in advise(gpu)}["device_idle"]
    assert finding.evidence.device == "/device:GPU:6"
    assert finding.evidence.idle_share == pytest.approx(1 - 14.9 / 21.3, abs=0.01)
    assert finding.share <= finding.evidence.idle_share
    for trace in (tpu, gpu):
        assert not compare(trace, trace).findings
    assert not [f for f in advise(tracebridge.load(corpus / "chrome/ikhlestov_cpu_timeline_01.json"))
                if f.kind == "device_idle"]


def test_advise_bad_input(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    done = run_cli("advise", bad)
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr


@browser_mark
def test_diff_view_findings_panel(traces, browser, tmp_path):
    comparison = compare(traces["tf1"], traces["tf2_host"])
    path = tmp_path / "diff.html"
    write_compare_html(comparison, path)
    with Opened(browser, path) as opened:
        heads = opened.js("() => tracebridge.compare.findings()")
        assert heads == [f"{f.share * 100:.1f}% \u00b7 {f.kind}" for f in comparison.findings], heads
        advice = opened.js("() => Array.from(document.querySelectorAll('.tb-finding-advice'), e => e.textContent)")
        assert all("migration_guide/README.md#" in text for text in advice)
