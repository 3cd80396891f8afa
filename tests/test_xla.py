"""XLA runs: every XLA kernel and thunk linked through its HLO instruction to the framework
ops it computes. On GPU profiles xprof's own framework_op_stats is the oracle; on CPU (where
xprof attributes nothing) the HLO and thunk events read independently in the test are."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tracebridge import protos
from tracebridge.errors import TraceFormatError
from tracebridge.model.hlo import HLO_MODULES, module_entry, modules_of
from tracebridge.model.schema import STEP_INPUTS, Category
from tracebridge.readers.hlo import hlo_op_map
from tests.test_accelerator import xprof_device_self_time

DATA = Path(__file__).parent / "data" / "xla"
GPU_DATA = Path(__file__).parent / "data" / "gpu"  # captured here on a lent GPU (tools/gen_gpu_encoder.py)
GPU_FILES = ["jax_h100_mlp_graphs", "jax_h100_mlp_nographs", "jax_h100_convnet_graphs",
             "jax_h100_convnet_nographs", "jax_encoder_graphs", "jax_encoder_nographs",
             "jax_encoder_cudnn_graphs", "jax_encoder_cudnn_nographs"]
TRANSFERS = {"MemcpyH2D", "MemcpyD2H"}  # a copy no module ran (a step's input): no instruction's


def gpu_xspace(corpus, name: str) -> Path:
    """A GPU XSpace by name: the corpus's, or one captured for the tests."""
    own = GPU_DATA / f"{name}.xplane.pb"
    return own if own.exists() else corpus / "xspace" / f"{name}.xplane.pb"


def _xprof(corpus, tmp_path, name: str) -> dict[str, float]:
    copy = tmp_path / name / f"{name}.xplane.pb"  # xprof caches beside its input: a folder each
    copy.parent.mkdir()
    shutil.copy(gpu_xspace(corpus, name), copy)
    return xprof_device_self_time(copy)


def _hlo_protos(path) -> dict[str, bytes]:
    """The ``Hlo Proto`` stats of ``/host:metadata``, read with the protobuf schema."""
    space = protos.XSpace.FromString(path.read_bytes())
    plane = next(p for p in space.planes if p.name == "/host:metadata")
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    return {metadata.name: stat.bytes_value for metadata in plane.event_metadata.values()
            for stat in metadata.stats if names[stat.metadata_id] == "Hlo Proto"}


@pytest.mark.parametrize("name", GPU_FILES + ["xprof_tpu_inference_2"])
def test_gpu_xla_time_is_xprofs_per_framework_op(corpus, tmp_path, name):
    """The H100 and H200 files (CUDA graphs on and off) and the TPU file."""
    theirs = _xprof(corpus, tmp_path, name)
    for ops_only in (False, True):
        summary = tracebridge.load(gpu_xspace(corpus, name), ops_only=ops_only).summary()
        assert summary.time == "device"
        ours = {row["key"]: row["device_ns"] for row in summary.by_op if row["device_ns"]}
        # Nothing stays on the module: every kernel found its instruction.
        assert ours.get("XlaModule", 0) <= 0.05 * summary.total_ns
        assert "XlaModule" not in ours
        # The ops holding 90% of xprof's device time, named as xprof names them, within 2%.
        # (xprof leaves kernels inside CUDA graphs out: with graphs on, it attributes only
        # those outside them, and nothing at all in the MLP; every op it names must match.)
        covered, total = 0.0, sum(theirs.values())
        for op in sorted(theirs, key=theirs.get, reverse=True):
            if covered >= 0.9 * total:
                break
            assert ours.get(op, 0) == pytest.approx(theirs[op], rel=0.02), op
            covered += theirs[op]
        if "nographs" in name:
            assert summary.total_ns == pytest.approx(total, rel=0.01)
            # every op xprof names, and besides only transfers no module ran (the input's
            # copy to the device: xprof's op stats leave it out)
            assert set(theirs) <= set(ours) and set(ours) - set(theirs) <= TRANSFERS


@pytest.mark.parametrize("model", ["jax_h100_mlp", "jax_h100_convnet", "jax_encoder", "jax_encoder_cudnn"])
def test_kernels_in_cuda_graphs_get_the_ops_the_same_model_has_without_graphs(corpus, model):
    """Inside a CUDA graph ``hlo_op`` is ``command_buffer_N`` and a kernel's name may be
    another instruction's (XLA compiles one kernel for fusions alike) or a library's. The
    graphs run's kernels run the ops the same model runs without graphs, as many kernels of
    each op (a count: the two runs' timings differ), and each layer of the encoders (XLA's
    attention; cuDNN's, a library call of several kernels) takes the same share of device
    time within a point."""
    graphs_trace = tracebridge.load(gpu_xspace(corpus, f"{model}_graphs"))
    plain_trace = tracebridge.load(gpu_xspace(corpus, f"{model}_nographs"))
    graphs, plain = graphs_trace.summary(), plain_trace.summary()
    named = {row["key"] for row in graphs.by_op}
    assert named <= {row["key"] for row in plain.by_op}
    assert len(named) >= 0.9 * len(plain.by_op)
    assert _kernels_per_op(graphs_trace) == _kernels_per_op(plain_trace)
    instructions = {row["key"] for row in graphs.by_hlo}
    assert not any(i.startswith("command_buffer") for i in instructions)
    transfers = sum(row["device_ns"] for row in graphs.by_op if row["key"] in TRANSFERS)
    assert sum(row["total_ns"] for row in graphs.by_hlo) + transfers == graphs.total_ns
    if model.startswith("jax_encoder"):
        shares = [_layer_shares(summary) for summary in (graphs, plain)]
        assert shares[0].keys() == shares[1].keys() == {f"layer_{i}" for i in range(4)} | {"other"}
        for layer in shares[0]:
            assert shares[0][layer] == pytest.approx(shares[1][layer], abs=0.01), layer


def _kernels_per_op(trace) -> dict[str, int]:
    """How many kernels each op's row has: copies of the input left out, and memsets (in a
    CUDA graph cuDNN's attention clears its workspace once, where a plain run clears it in
    four memsets a call)."""
    ops = trace.ops
    rows = np.flatnonzero(ops["category"] == int(Category.DEVICE))
    return dict(Counter(trace.strings[int(name)] for name, kernel in zip(ops["name"][rows], ops["kernel"][rows])
                        if not trace.strings[int(kernel)].startswith("Memset")))


def _layer_shares(summary) -> dict[str, float]:
    """Each encoder layer's share of device time (its ops' names hold ``layer_N``)."""
    shares: dict[str, float] = {}
    for row in summary.by_op:
        layer = next((part for part in row["key"].split("/") if part.startswith("layer_")), "other")
        shares[layer] = shares.get(layer, 0.0) + row["device_ns"] / summary.total_ns
    return shares


def test_by_hlo_names_each_instruction_and_every_op_a_fusion_computes(corpus):
    path = corpus / "xspace" / "jax_h100_convnet_nographs.xplane.pb"
    summary = tracebridge.load(path).summary()
    modules = hlo_op_map(_hlo_protos(path).values())
    rows = {row["key"]: row for row in summary.by_hlo}
    assert sum(row["total_ns"] for row in summary.by_hlo) == summary.total_ns
    fused = [row for row in summary.by_hlo if len(row["tf_ops"]) > 1]
    assert fused, "a convnet's step has fusions of several ops"
    for row in summary.by_hlo:
        op = modules.find(row["module"], row["key"])
        assert op is not None, row["key"]
        assert row["op"] == (op.op_name or op.name)
        # a fusion's row lists every op inside it, not only the one it is counted under; an
        # instruction named for itself, the op it computes (for)
        assert row["tf_ops"] == ([name for name, _ in op.tf_ops] if op.beyond_row else [row["op"]])
    assert "Top HLO instructions" in summary.to_text()
    reduce = rows["input_reduce_select_fusion.1"] if "input_reduce_select_fusion.1" in rows else fused[0]
    assert ", ".join(reduce["tf_ops"]) in summary.to_text()


def test_hlo_of_the_metadata_plane_is_kept_in_the_trace(corpus, tmp_path):
    path = corpus / "xspace" / "jax_h100_mlp_nographs.xplane.pb"
    found = _hlo_protos(path)
    trace = tracebridge.load(path)
    entries = trace.metadata[HLO_MODULES]
    assert {f"{e['name']}({e['program_id']})" for e in entries} == set(found)
    assert sorted(modules_of(trace.metadata)) == sorted(found.values())
    out = tmp_path / "t.json"
    trace.save(out)
    assert tracebridge.load(out).metadata[HLO_MODULES] == entries


def test_hlo_decoder_reads_hlo_proto_and_module_proto(corpus):
    path = corpus / "xspace" / "jax_h100_convnet_nographs.xplane.pb"
    data = max(_hlo_protos(path).values(), key=len)
    whole = hlo_op_map([data]).modules[0]
    # HloProto field 1 is the HloModuleProto: its payload alone decodes to the same module.
    module_bytes = _field_payload(data, 1)
    alone = hlo_op_map([module_bytes]).modules[0]
    assert whole.name == alone.name == "jit_train_step"
    assert whole.ops == alone.ops
    assert whole.program_id is not None and len(whole.ops) > 100
    with pytest.raises(TraceFormatError):
        hlo_op_map([b"\x0a\xff\xff\xff\xff\x0f"])
    assert module_entry("m", 1, b"\x01")["proto"] == "AQ=="


def _field_payload(data: bytes, number: int) -> bytes:
    """The payload of a top-level length-delimited field, read byte by byte."""
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        length, pos = _varint(data, pos)
        if tag == (number << 3 | 2):
            return data[pos:pos + length]
        pos += length
    raise AssertionError(f"no field {number}")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def test_chrome_output_names_each_kernels_instruction_and_ops(corpus, tmp_path):
    path = corpus / "xspace" / "jax_h100_convnet_graphs.xplane.pb"
    trace = tracebridge.load(path)
    modules = hlo_op_map(modules_of(trace.metadata))
    out = tmp_path / "t.json"
    trace.save(out)
    document = json.loads(out.read_text())
    kernels = [e for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "Device"]
    linked = [e for e in kernels if "hlo_instruction" in e["args"]]
    assert len(linked) == len(kernels) > 0
    for event in linked:
        op = modules.find(event["args"]["hlo_module"], event["args"]["hlo_instruction"])
        assert event["args"]["name"] == op.row_name  # the framework op it ran for
        if op.beyond_row:
            assert event["args"]["tf_ops"] == op.describe_ops()
    assert any("tf_ops" in e["args"] for e in linked)


@pytest.mark.parametrize("path", [DATA / "jax_cpu_convnet.xplane.pb", "corpus:jax_h100_convnet_graphs",
                                  "corpus:jax_h100_mlp_nographs"])
def test_chrome_output_puts_xla_events_under_their_tf_op(corpus, tmp_path, path):
    """Above each lane of XLA thunks or kernels, a "TF ops · <lane>" thread ("JAX ops · <lane>"
    in these JAX runs) spans each run of its events that compute one TF op (as xprof's
    TensorFlow Ops line sits above XLA Ops); a reread of the file skips those spans, derived as
    they are from the events."""
    if isinstance(path, str):
        path = corpus / "xspace" / f"{path.removeprefix('corpus:')}.xplane.pb"
    trace = tracebridge.load(path)
    out = tmp_path / "t.json"
    trace.save(out)
    events = json.loads(out.read_text(), parse_float=Decimal)["traceEvents"]  # exact ns
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    order = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in events if e.get("name") == "thread_sort_index"}
    spans: dict = {}
    for e in events:
        if e.get("cat") == "XlaTfOp":
            spans.setdefault((e["pid"], threads[e["pid"], e["tid"]].split(" · ", 1)[1].split(" / ")[0]), []).append(e)
    linked = [e for e in events if e.get("ph") == "X" and "hlo_instruction" in e.get("args", {})]
    assert linked and spans
    lanes_of_linked = set()
    for e in linked:
        lane = threads[e["pid"], e["tid"]]
        lanes_of_linked.add((e["pid"], lane))
        owners = [s for s in spans[e["pid"], lane] if s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]]
        assert any(s["name"] == e["args"]["name"] for s in owners), (lane, e["name"], e["args"]["name"])
    assert set(spans) == lanes_of_linked
    # each span counts its events, and the span threads sort just above their lane
    assert sum(s["args"]["xla_events"] for group in spans.values() for s in group) == len(linked)
    for (pid, tid), name in threads.items():
        if name.startswith("JAX ops · "):
            lane_tid = next(t for (p, t), n in threads.items() if p == pid and n == name.split(" · ", 1)[1].split(" / ")[0])
            assert order[pid, tid] < order[pid, lane_tid]
            assert not [o for (p, t), o in order.items() if p == pid and order[pid, tid] < o < order[pid, lane_tid]
                        and not threads[p, t].startswith("JAX ops · ")]
    assert len(tracebridge.load(out)) == len(trace)


# --- XLA on a CPU (JAX's profiler: tests/data/xla, made by tools/gen_xla_test_data.py) -----------
CPU_FILES = ["jax_cpu_mlp", "jax_cpu_convnet"]


def _message(data: bytes) -> dict[int, list]:
    """A protobuf message as ``{field number: [values]}`` (varints as ints, length-delimited
    fields as bytes): the HLO read here without tracebridge's decoder."""
    fields: dict[int, list] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        kind = tag & 7
        if kind == 0:
            value, pos = _varint(data, pos)
        elif kind == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif kind in (1, 5):
            size = 8 if kind == 1 else 4
            value, pos = data[pos:pos + size], pos + size
        else:
            raise AssertionError(f"wire type {kind}")
        fields.setdefault(tag >> 3, []).append(value)
    return fields


def _instructions(hlo_proto: bytes) -> dict[str, tuple[str, list[str]]]:
    """Instruction name -> (its op_name, op_names inside the computations it calls).
    Field numbers: HloProto.hlo_module 1; HloModuleProto.computations 3;
    HloComputationProto name 1, instructions 2, id 5; HloInstructionProto name 1,
    metadata 7, called_computation_ids 38 (packed); OpMetadata.op_name 2."""
    module = _message(_message(hlo_proto)[1][0])
    computations = [_message(c) for c in module[3]]
    inside: dict[int, list[str]] = {}
    rows = []
    for computation in computations:
        names = []
        for raw in computation[2]:
            instruction = _message(raw)
            metadata = _message(instruction[7][0]) if 7 in instruction else {}
            op_name = metadata.get(2, [b""])[0].decode()
            called, packed = [], b"".join(instruction.get(38, []))
            at = 0
            while at < len(packed):
                value, at = _varint(packed, at)
                called.append(value)
            rows.append((instruction[1][0].decode(), op_name, called))
            if op_name and op_name not in names:
                names.append(op_name)
        inside[computation[5][0]] = names
    out = {}
    for name, op_name, called in rows:
        ops = [op_name] if op_name else []
        for callee in called:
            ops += [o for o in inside.get(callee, []) if o not in ops]
        out[name] = (op_name, ops)
    return out


def _without_hlo(path, out):
    """A copy of an XSpace without its ``/host:metadata`` plane (the HLO protos)."""
    space = protos.XSpace.FromString(path.read_bytes())
    kept = [plane for plane in space.planes if plane.name != "/host:metadata"]
    del space.planes[:]
    space.planes.extend(kept)
    out.write_bytes(space.SerializeToString())
    return out


def _thunks(path) -> list[tuple[str, str, float]]:
    """``(hlo_module, hlo_op, duration in ns)`` of every event that names its HLO op."""
    space = protos.XSpace.FromString(path.read_bytes())
    found = []
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                stats = {}
                for stat in list(plane.event_metadata[event.metadata_id].stats) + list(event.stats):
                    kind = stat.WhichOneof("value")
                    value = getattr(stat, kind)
                    stats[names[stat.metadata_id]] = names[value] if kind == "ref_value" else value
                if "hlo_op" in stats:
                    found.append((stats["hlo_module"], stats["hlo_op"], event.duration_ps / 1000))
    return found


@pytest.mark.parametrize("name", CPU_FILES)
def test_cpu_thunk_time_goes_to_the_ops_its_hlo_names(name):
    """xprof attributes no XLA CPU thunk to a framework op; tracebridge does, checked
    against the HLO and the thunk events read here independently."""
    path = DATA / f"{name}.xplane.pb"
    (module_name, proto), = _hlo_protos(path).items()
    instructions = _instructions(proto)
    thunks = _thunks(path)
    assert thunks and all(module == module_name.split("(")[0] for module, _, _ in thunks)
    expected: dict[str, float] = {}
    for _, instruction, duration in thunks:
        op_name = instructions[instruction][0]
        expected[op_name or instruction] = expected.get(op_name or instruction, 0) + duration
    for ops_only in (False, True):
        summary = tracebridge.load(path, ops_only=ops_only).summary()
        ours = {row["key"]: row["total_ns"] for row in summary.by_op}
        assert set(ours) == set(expected)
        for op, ns in expected.items():
            assert ours[op] == pytest.approx(ns, abs=2 * len(thunks)), op
        # the thunks only: ThunkExecutor::Execute around them is not counted again
        assert summary.total_ns == pytest.approx(sum(d for _, _, d in thunks), abs=2 * len(thunks))
        hlo_rows = {row["key"]: row for row in summary.by_hlo}
        assert set(hlo_rows) == {i for _, i, _ in thunks}
        all_ops = {op for op_name, inside in instructions.values() for op in (op_name, *inside) if op}
        for instruction, row in hlo_rows.items():
            op_name, inside = instructions[instruction]
            assert row["op"] == (op_name or instruction)
            if len(inside) > 1 or inside and inside[0] != row["op"]:  # a fusion, or one named for itself
                assert row["tf_ops"] == inside
            elif not inside:  # XLA made it, without metadata: the op downstream it computes for
                assert len(row["tf_ops"]) == 1 and row["tf_ops"][0] in all_ops
            else:
                assert row["tf_ops"] == [row["op"]]
    assert any(len(row["tf_ops"]) > 1 for row in summary.by_hlo), "a step has fusions of several ops"


def test_cpu_xla_files_stay_small():
    assert sum(p.stat().st_size for p in DATA.glob("*.xplane.pb")) < 300_000


# --- TF 2.21's own XLA CPU profile of a jit_compile function -----------------------------------
@pytest.fixture(scope="module")
def tf_xla_capture(tmp_path_factory):
    """A ``tf.function(jit_compile=True)`` profiled by TF (3 steps, host tracer level 3: the
    thunks), with the optimized HLO that ``experimental_get_compiler_ir`` gives for it."""
    tf = pytest.importorskip("tensorflow")
    logdir = tmp_path_factory.mktemp("tf_xla")

    @tf.function(jit_compile=True)
    def step(x, w1, w2):
        hidden = tf.nn.relu(tf.matmul(x, w1, name="dense1"), name="relu1")
        logits = tf.matmul(hidden, w2, name="dense2")
        return tf.reduce_sum(tf.nn.softmax(logits, name="softmax"), name="total")

    args = [tf.random.normal(shape, seed=1) for shape in ((64, 256), (256, 512), (512, 10))]
    step(*args).numpy()  # compile outside the profile
    tf.profiler.experimental.start(str(logdir), options=tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=3, python_tracer_level=0))
    for i in range(3):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            step(*args).numpy()
    tf.profiler.experimental.stop()
    path, = logdir.glob("plugins/profile/*/*.xplane.pb")
    return path, step.experimental_get_compiler_ir(*args)(stage="optimized_hlo_proto_serialized")


@pytest.mark.tf
def test_tf_xla_thunks_go_to_their_tf_ops_and_the_function_op_is_not_counted_again(tf_xla_capture):
    path, _ = tf_xla_capture
    thunks = _thunks(path)
    assert thunks
    # TF 2.21's profile lists every module the process compiled (other tests' too): the one
    # the thunks ran
    ran = {module for module, _, _ in thunks}
    (_, proto), = [(name, data) for name, data in _hlo_protos(path).items() if name.split("(")[0] in ran]
    instructions = _instructions(proto)
    expected: dict[str, float] = {}
    for _, instruction, duration in thunks:
        op_name = instructions[instruction][0]
        expected[op_name or instruction] = expected.get(op_name or instruction, 0) + duration
    assert {"dense1", "dense2"} <= set(expected)
    summary = tracebridge.load(path).summary()
    ours = {row["key"]: row["total_ns"] for row in summary.by_op}
    assert set(ours) == set(expected)  # no __inference_step row: it ran the thunks
    for op, ns in expected.items():
        assert ours[op] == pytest.approx(ns, abs=2 * len(thunks)), op
    assert summary.total_ns == pytest.approx(sum(d for _, _, d in thunks), abs=2 * len(thunks))


@pytest.mark.tf
def test_tf_xla_thunks_linked_through_the_hlo_a_capture_recorded(tf_xla_capture, tmp_path):
    """Without ``/host:metadata``'s HLO, the module recorded at capture time (its name
    there lacks the compile options TF's profile puts in it) links the thunks the same."""
    path, recorded = tf_xla_capture
    stripped = _without_hlo(path, tmp_path / "stripped.xplane.pb")
    module = hlo_op_map([recorded]).modules[0]
    assert "XlaMustCompile" not in module.name
    from tracebridge.readers.xspace import read_xspace_files
    trace = read_xspace_files([(str(stripped), stripped.read_bytes(), None)],
                              {HLO_MODULES: [module_entry(module.name, module.program_id, recorded)]})
    linked = tracebridge.load(path).summary()
    assert trace.summary().by_op == linked.by_op


@pytest.mark.parametrize("name", ["jax_h100_convnet_nographs", "jax_cpu_convnet"])
@pytest.mark.parametrize("suffix", [".xplane.pb", ".json", ".json.gz"])
def test_xla_links_survive_tracebridges_own_files(corpus, tmp_path, name, suffix):
    """The HLO, and the input shapes of each step that trace(fn) records (what xla_compile
    names per compilation), are kept in every file tracebridge writes and reads back."""
    path = DATA / f"{name}.xplane.pb" if "cpu" in name else corpus / "xspace" / f"{name}.xplane.pb"
    trace = tracebridge.load(path)
    shapes = json.dumps({str(s.number): f"float32[{8 << s.number},64]" for s in trace.steps})
    trace = trace.with_metadata(**{STEP_INPUTS: shapes})
    out = tmp_path / f"copy{suffix}"
    trace.save(out)
    again = tracebridge.load(out)
    assert again.metadata[STEP_INPUTS] == shapes and trace.steps
    def key(entry):
        return entry["name"], entry["program_id"]

    assert sorted(again.metadata[HLO_MODULES], key=key) == sorted(trace.metadata[HLO_MODULES], key=key)
    before, after = trace.summary(), again.summary()
    assert [(r["key"], r["total_ns"]) for r in after.by_op] == [(r["key"], r["total_ns"]) for r in before.by_op]
    # .xplane.pb: the reader links the written events again, from the HLO written; .json: the
    # reader reads each event's link back from its args
    assert after.by_hlo == before.by_hlo and before.by_hlo
    if suffix == ".xplane.pb":
        return
    # each XLA row keeps its TF op's type beside its instruction (the kernel): compare reads it
    def typed(t):
        return set(zip(t.column_strings("ops", "name"), t.column_strings("ops", "op_type"),
                       t.column_strings("ops", "kernel")))
    linked = {row["op"] for row in before.by_hlo}
    assert {r for r in typed(again) if r[0] in linked} == {r for r in typed(trace) if r[0] in linked}


def test_xprof_reads_the_hlo_tracebridge_writes(corpus, tmp_path):
    """The XSpace tracebridge writes of an XLA GPU run gives xprof the same framework ops."""
    name = "jax_h100_convnet_nographs"
    theirs = _xprof(corpus, tmp_path, name)
    written = tmp_path / "written" / f"{name}.xplane.pb"
    written.parent.mkdir()
    tracebridge.load(corpus / "xspace" / f"{name}.xplane.pb").save(written)
    again = xprof_device_self_time(written)
    assert set(again) == set(theirs)
    for op, ns in theirs.items():
        assert again[op] == pytest.approx(ns, rel=0.02), op


def test_doctor_names_xla_ops_only_when_their_hlo_is_missing(tmp_path):
    path = DATA / "jax_cpu_mlp.xplane.pb"

    def xla_problems(target):
        return [p for p in tracebridge.doctor(target).problems if "XLA ops" in p.missing]

    assert xla_problems(path) == []  # its HLO is in /host:metadata: every thunk is linked
    stripped = _without_hlo(path, tmp_path / "stripped.xplane.pb")
    thunks = len(_thunks(path))
    problem, = xla_problems(stripped)
    assert problem.missing.startswith(f"{thunks} XLA ops")
    assert f"{thunks} of {thunks} events" in problem.evidence


def test_tpu_ops_are_linked_by_program_id(corpus):
    """A TPU op's metadata names its module by program id only (``program_id``; its display
    name is the instruction), and ``/host:metadata`` names each module ``<name>(<id>)``."""
    path = corpus / "xspace" / "xprof_tpu_inference_2.xplane.pb"
    summary = tracebridge.load(path).summary()
    modules = hlo_op_map(_hlo_protos(path).values())
    assert summary.by_hlo
    assert sum(row["total_ns"] for row in summary.by_hlo) == pytest.approx(summary.total_ns, rel=0.01)
    for row in summary.by_hlo:
        op = modules.find(row["module"], row["key"])
        assert op is not None and row["op"] == op.row_name, row["key"]


def test_a_damaged_hlo_module_loses_its_links_not_the_trace(tmp_path):
    path = DATA / "jax_cpu_mlp.xplane.pb"
    space = protos.XSpace.FromString(path.read_bytes())
    plane = next(p for p in space.planes if p.name == "/host:metadata")
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    for metadata in plane.event_metadata.values():
        for stat in metadata.stats:
            if names[stat.metadata_id] == "Hlo Proto":
                stat.bytes_value = b"\x0a\xff\xff\xff\xff\x0f" + stat.bytes_value[6:]
    damaged = tmp_path / "damaged.xplane.pb"
    damaged.write_bytes(space.SerializeToString())
    trace = tracebridge.load(damaged)
    assert "unreadable HLO of 1 modules" in trace.metadata["hlo_errors"]
    assert trace.summary().by_hlo == []
    assert len(trace) == len(tracebridge.load(path))
