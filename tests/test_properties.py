"""Property tests: for random traces, every writer's output reads back to the same ops."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracebridge
from tracebridge.model.builder import TraceBuilder

names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=24).filter(lambda s: s.strip() == s and ", " not in s
                                                  and " = " not in s and "(" not in s and ")" not in s
                                                  and not s.startswith("^") and "\n" not in s)
hostile = st.sampled_from(["</script>", "<img src=x onerror=alert(1)>", 'quote"d', "naïve/ünïcode", "tab\there"])
op_names = st.one_of(names, hostile)
devices = st.sampled_from(["/job:localhost/replica:0/task:0/device:CPU:0",
                           "/job:worker/replica:0/task:1/device:GPU:0", "/host:CPU"])


@st.composite
def traces(draw):
    builder = TraceBuilder({"source_format": "generated"})
    step_count = draw(st.integers(1, 3))
    base = 1_700_000_000_000_000_000
    made = []
    for step_number in range(step_count):
        step = builder.step(step_number)
        for _ in range(draw(st.integers(1, 12))):
            name = draw(op_names)
            kernel = draw(st.sampled_from(["MatMul", "_MklMatMul", "AddV2", "NoOp", "Conv2D"]))
            start = base + draw(st.integers(0, 10**9))
            duration = draw(st.integers(0, 10**7))
            inputs = tuple(draw(st.lists(st.sampled_from(made), max_size=3))) if made else ()
            device = builder.device(draw(devices))
            builder.add_op(name=name, op_type=kernel, start_ns=start, end_ns=start + duration,
                           device=device, inputs=inputs, step=step, flags=1 | 8)
            made.append(name)
    return builder.build()


def op_keys(trace):
    return sorted((o.name, o.kernel, o.start_ns, o.end_ns, o.inputs, o.device) for o in trace.records())


common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(traces())
def test_chrome_round_trip(trace):
    with tempfile.TemporaryDirectory() as folder:
        for name in ("t.json", "t.json.gz"):
            path = Path(folder) / name
            trace.save(path, memory=True)
            again = tracebridge.load(path)
            assert op_keys(again) == op_keys(trace)
            assert [s.number for s in again.steps] == [s.number for s in trace.steps]


@common
@given(traces())
def test_run_metadata_round_trip(trace):
    with tempfile.TemporaryDirectory() as folder:
        for name in ("t.pb", "t.pbtxt"):
            path = Path(folder) / name
            trace.save(path)
            again = tracebridge.load(path)
            assert op_keys(again) == op_keys(trace)


@common
@given(traces())
def test_filters_partition_ops(trace):
    total = sum(len(trace.filter(step=s.number)) for s in trace.steps)
    assert total == len(trace)
    devices = {d.name for d in trace.devices}
    assert sum(len(trace.filter(device=f"^{d}$")) for d in devices) == len(trace)


@common
@given(traces())
def test_summary_accounts_for_all_time(trace):
    summary = trace.summary()
    assert sum(r["total_ns"] for r in summary.by_op) == summary.total_ns
    assert sum(r["count"] for r in summary.by_device) == summary.op_count == len(trace)
