"""The model: devices, lanes, steps, filters, immutability, records and DataFrames."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tracebridge import Trace, TracebridgeError
from tracebridge.model.builder import TraceBuilder, _counters_from_allocations
from tracebridge.model.devices import parse_device
from tracebridge.model.lanes import first_fit, nested_fit


def small_trace() -> Trace:
    """Two devices, two steps, overlapping ops on device 0, one transfer, memory records."""
    b = TraceBuilder({"source_format": "test"})
    cpu = b.device("/job:worker/replica:0/task:0/device:CPU:0")
    gpu = b.device("/job:worker/replica:0/task:1/device:GPU:0")
    for number in (5, 6):
        step = b.step(number)
        t = number * 1_000_000
        a = b.add_op(name="a", op_type="MatMul", kernel="_MklMatMul", start_ns=t, end_ns=t + 400,
                     device=cpu, step=step)
        b.add_op(name="b", op_type="Relu", start_ns=t + 100, end_ns=t + 300, device=cpu,
                 inputs=("a",), step=step)
        b.add_op(name="c", op_type="AddV2", start_ns=t + 500, end_ns=t + 900, device=gpu,
                 inputs=("b:0", "^a"), step=step)
        recv = b.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=t + 400, end_ns=t + 450,
                        device=gpu, step=step)
        b.add_row("transfers", op=recv, bytes=4096, rate_bps=8e6, src="/job:worker/task:0",
                  dst="/job:worker/task:1", tensor="b")
        mem = b.add_row("memory", op=a, allocator="cpu", total_bytes=64, peak_bytes=64, live_bytes=0)
        b.add_row("allocations", memory=mem, time_ns=t, bytes=64)
        b.add_row("allocations", memory=mem, time_ns=t + 400, bytes=-64)
    return b.build()


def test_parse_device_styles():
    d = parse_device("/job:worker/replica:0/task:1/device:GPU:3")
    assert (d.job, d.replica, d.task, d.type, d.index, d.stream) == ("worker", 0, 1, "GPU", 3, None)
    old = parse_device("/job:localhost/replica:0/task:0/cpu:0")
    assert (old.type, old.index, old.kind) == ("CPU", 0, "compute")
    stream = parse_device("/gpu:0/stream:12")
    assert (stream.type, stream.index, stream.stream, stream.kind) == ("GPU", 0, "12", "stream")
    assert parse_device("/device:GPU:0/memcpy").kind == "memcpy"
    assert parse_device("/host:CPU").kind == "host"
    assert parse_device("/device:GPU:0/stream:all").short_name == "GPU:0/stream:all"
    assert parse_device("not a device").name == "not a device"


def test_lanes_from_timing():
    trace = small_trace()
    ops = trace.ops
    names = trace.column_strings("ops", "name")
    a, b_ = names.index("a"), names.index("b")
    # a and b overlap on the CPU: different lanes; ops of the next step reuse lane 0.
    assert ops["lane"][a] != ops["lane"][b_]
    assert {trace.lanes[i].device for i in ops["lane"].tolist()} == {0, 1}
    assert [lane.name for lane in trace.lanes if lane.device == 0] == ["lane 0", "lane 1"]


def test_sub_rows_split_a_partial_overlap_inside_an_enclosing_op():
    # b and c partly overlap inside a, which encloses both: c starts in b and ends after it
    # but not after a. The check that used to skip the placement only looked for an op
    # ending after everything before it, and left all three on row 0.
    assert nested_fit(np.array([0, 10, 15]), np.array([100, 20, 30])).tolist() == [0, 0, 1]
    # ops that nest, touch or last no time share row 0
    assert nested_fit(np.array([0, 0, 5, 10, 10]), np.array([10, 5, 10, 20, 10])).tolist() == [0] * 5


def test_sub_rows_keep_ops_apart_in_other_readings_of_their_times():
    # Apart at the nanosecond, but in the second reading (as a viewer rounds the starts) the
    # first ends after the second starts: two rows. Nesting a reading turns round: two rows.
    start, end = np.array([0, 10]), np.array([8, 20])
    assert nested_fit(start, end).tolist() == [0, 0]
    assert nested_fit(start, end, [(np.array([0, 6]), np.array([8, 16]))]).tolist() == [0, 1]
    assert first_fit(start, end).tolist() == [0, 0]
    assert first_fit(start, end, [(np.array([0, 6]), np.array([8, 16]))]).tolist() == [0, 1]
    # a step around two ops, the second of which ends after the step as the reading has it
    start, end = np.array([0, 1, 5]), np.array([10, 4, 10])
    assert nested_fit(start, end, [(np.array([0, 1, 6]), np.array([10, 4, 11]))]).tolist() == [0, 0, 1]


@pytest.mark.parametrize("name", ["xspace/tfprofiler_gpu_multi_worker.xplane.pb", "xspace/xprof_tpu_inference_2.xplane.pb",
                                  "xspace/jax_h100_convnet_nographs.xplane.pb", "chrome/ikhlestov_gpu_timeline_01.json"])
def test_sub_rows_of_the_c_loop_are_the_numpy_passes(corpus, name):
    """nested_fit's C loop (model/_lanesc.c, one interval at a time) and its numpy passes
    place every lane of real traces alike, at nanoseconds and as JSON viewers read them."""
    import tracebridge
    from tracebridge.model import lanes
    from tracebridge.writers.chrome_threads import json_readings
    if lanes._lanesc is None:
        pytest.skip("the C loops are not built here")
    ops = tracebridge.load(corpus / name).ops
    for lane in np.unique(ops["lane"]).tolist():
        rows = np.flatnonzero(ops["lane"] == lane)
        order = np.lexsort((-ops["end_ns"][rows], ops["start_ns"][rows]))
        start, end = ops["start_ns"][rows][order], ops["end_ns"][rows][order]
        for also in ((), json_readings(start, end)):
            assert np.array_equal(nested_fit(start, end, also), lanes.nested_fit_numpy(start, end, also)), lane


def test_steps_and_extents():
    trace = small_trace()
    assert [s.number for s in trace.steps] == [5, 6]
    assert trace.steps[0].start_ns == 5_000_000 and trace.steps[0].end_ns == 5_000_900
    assert trace.start_ns == 5_000_000 and trace.end_ns == 6_000_900


def test_string_id_finds_names_by_id():
    trace = small_trace()
    assert [trace.string_id(text) for text in trace.strings] == list(range(len(trace.strings)))
    first = trace.strings[int(trace.ops["name"][0])]
    assert (trace.ops["name"] == trace.string_id(first)).sum() == trace.column_strings("ops", "name").count(first)
    assert trace.string_id("no such op") == -1 and not (trace.ops["name"] == -1).any()


def test_filters_return_new_traces_and_keep_children():
    trace = small_trace()
    before = trace.ops["start_ns"].copy()
    gpu = trace.filter(device="GPU")
    assert set(gpu.column_strings("ops", "name")) == {"c", "RecvTensor"}
    assert gpu.transfers.rows == 2 and gpu.memory.rows == 0 and gpu.allocations.rows == 0
    assert len(trace) == 8 and np.array_equal(trace.ops["start_ns"], before)
    step6 = trace.filter(step=6)
    assert [s.number for s in step6.steps] == [6] and len(step6) == 4
    assert set(step6.ops["step"].tolist()) == {0}
    assert [op.inputs for op in step6.filter(name="^c$").records()] == [("b:0", "^a")]
    window = trace.filter(start_ns=6_000_000, end_ns=6_000_200)
    assert set(window.column_strings("ops", "name")) == {"a", "b"}
    assert window.counters["time_ns"].min() >= 6_000_000
    by_type = trace.filter(op_type="_Mkl")  # kernel types match too
    assert set(by_type.column_strings("ops", "name")) == {"a"}
    assert trace.filter(name="nothing").ops.rows == 0


def test_columns_are_read_only():
    trace = small_trace()
    with pytest.raises(ValueError):
        trace.ops["start_ns"][0] = 1
    with pytest.raises(TypeError):
        trace.metadata["source_format"] = "x"


def test_records_on_demand():
    trace = small_trace()
    op = trace.op(2)
    assert (op.name, op.op_type, op.step, op.inputs) == ("c", "AddV2", 5, ("b:0", "^a"))
    assert op.duration_ns == 400 and op.device.endswith("GPU:0")
    assert len(list(trace.records())) == len(trace)


def test_counters_from_allocation_records():
    trace = small_trace()
    counters = trace.counters
    assert counters["bytes_in_use"].tolist() == [64, 0, 64, 0]
    memory = {"allocator": np.array([3, 4])}
    allocations = {"memory": np.array([0, 1, 0, 1]), "time_ns": np.array([1, 2, 3, 4]),
                   "bytes": np.array([10, 5, -10, -5])}
    result = _counters_from_allocations(memory, allocations)
    assert result["allocator"].tolist() == [3, 3, 4, 4]
    assert result["bytes_in_use"].tolist() == [10, 0, 5, 0]


def test_equality_and_summary():
    trace = small_trace()
    assert trace == small_trace()
    assert trace != trace.filter(step=5)
    summary = trace.summary()
    assert summary.op_count == 8
    assert summary.by_type[0]["key"] == "MatMul" and summary.by_type[0]["count"] == 2
    assert abs(sum(r["share"] for r in summary.by_op) - 1.0) < 1e-9
    assert "MatMul" in summary.to_text() and summary.to_csv().startswith("group,key")


def test_to_dataframe():
    pd = pytest.importorskip("pandas")
    frame = small_trace().to_dataframe()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 8
    assert frame["duration_ns"].sum() == sum(o.duration_ns for o in small_trace().records())
    assert sorted(set(frame["step"])) == [5, 6]


def test_to_dataframe_without_pandas_names_the_extra():
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "from tests.test_model import small_trace\n"
        "from tracebridge import MissingDependencyError\n"
        "try:\n    small_trace().to_dataframe()\n"
        "except MissingDependencyError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert "pip install 'tracebridge[pandas]'" in out.stdout, out.stderr


def test_errors_share_one_base():
    import tracebridge
    for name in ("TraceFormatError", "UnsafePickleError", "MissingDependencyError", "CaptureError",
                 "OutputError", "MigrationError"):
        assert issubclass(getattr(tracebridge, name), TracebridgeError)
