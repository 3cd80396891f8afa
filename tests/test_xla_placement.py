"""XLA events and instructions that name nothing, placed all the same: device time never stays
on ``XlaModule`` in a corpus profile; a library's kernel inside a CUDA graph (``hlo_op`` is
``command_buffer_N`` and its name is cuBLAS's or cuDNN's, not the instruction's) takes its
instruction by the module's schedule (readers/xla_order.py); an instruction XLA made without
metadata takes its op from the dataflow around it (readers/hlo_made.py). Corpus files only:
no TensorFlow (the TF captures are in tests/test_xla_resnet50.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tracebridge
from tracebridge import protos
from tracebridge.model.accelerator import device_rows, self_times
from tracebridge.model.hlo import modules_of
from tracebridge.readers.hlo import hlo_op_map
from tests.test_xla import gpu_xspace

XSPACES = ["jax_h100_mlp_graphs", "jax_h100_mlp_nographs", "jax_h100_convnet_graphs", "jax_h100_convnet_nographs",
           "tfprofiler_gpu_multi_worker", "xprof_tpu_inference_2", "jax_encoder_graphs", "jax_encoder_nographs",
           "jax_encoder_cudnn_graphs", "jax_encoder_cudnn_nographs"]
MODULE_ROW = "XlaModule"  # the row of an XLA event linked to no instruction (its tf_op is "XlaModule:")


def device_time(trace) -> tuple[np.ndarray, np.ndarray]:
    """The device rows (kernels and copies, each once) and their self time."""
    ops = trace.ops
    rows = np.flatnonzero(device_rows(ops["category"], ops["flags"]))
    return rows, self_times(ops["start_ns"], ops["end_ns"], ops["lane"], rows)


def module_share(trace) -> float:
    rows, time = device_time(trace)
    on_module = np.array([trace.strings[int(n)] == MODULE_ROW for n in trace.ops["name"][rows]], dtype=bool)
    return float(time[on_module].sum() / max(int(time.sum()), 1))


def instructions(trace) -> list[str | None]:
    """Each device row's HLO instruction (None: linked to none), in row order."""
    rows, _ = device_time(trace)
    found = dict(zip(*(column.tolist() for column in trace.event_stat("hlo_instruction"))))
    return [trace.strings[found[row]] if row in found else None for row in rows.tolist()]


@pytest.mark.parametrize("name", XSPACES)
def test_no_corpus_xspace_keeps_device_time_on_the_module(corpus, name):
    """<= 5% of device time on XlaModule rows, in every corpus XSpace and the encoder captured
    for the tests (a property of what the reader makes of each file, not a timing)."""
    trace = tracebridge.load(gpu_xspace(corpus, name))
    share = module_share(trace)
    print(f"{name}: {share:.1%} of device time on {MODULE_ROW}")
    assert share <= 0.05


# Kernels of the convnet's step, as a library's kernels would be named inside a CUDA graph.
LIBRARY_NAMES = {"gemm_fusion_dot_general_3": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_cublas",
                 "loop_exponential_multiply_fusion": "void cub::DeviceReduceKernel<float>"}
INTO_GRAPH = "cudnn-conv-bw-filter.2"  # its seven cuDNN kernels, moved into a command buffer


def disguised(source, out) -> int:
    """``source`` (the H100 convnet with CUDA graphs) written to ``out`` with two XLA kernels
    inside command buffers renamed as library kernels (one after the other in each step:
    one run of two unnamed events), and the cuDNN filter gradient's kernels, outside any
    graph in the file, given ``hlo_op=command_buffer_99``. Returns how many events changed."""
    space = protos.XSpace.FromString(source.read_bytes())
    changed = 0
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        hlo_op = next(k for k, v in plane.stat_metadata.items() if v.name == "hlo_op")
        renamed = {k for k, md in plane.event_metadata.items() if md.name in LIBRARY_NAMES}
        for key in renamed:
            metadata = plane.event_metadata[key]
            metadata.name = metadata.display_name = LIBRARY_NAMES[metadata.name]
        buffer = max(plane.stat_metadata) + 1  # a string stat value is a reference to stat metadata
        plane.stat_metadata[buffer].id = buffer
        plane.stat_metadata[buffer].name = "command_buffer_99"
        for line in plane.lines:
            for event in line.events:
                changed += event.metadata_id in renamed
                for stat in event.stats:
                    if stat.metadata_id != hlo_op:
                        continue
                    value = stat.str_value if stat.HasField("str_value") else \
                        plane.stat_metadata[stat.ref_value].name if stat.HasField("ref_value") else None
                    if value == INTO_GRAPH:
                        stat.ref_value = buffer
                        changed += 1
    out.write_bytes(space.SerializeToString())
    return changed


def test_library_kernels_in_cuda_graphs_take_their_instruction_by_the_schedule(corpus, tmp_path):
    """Kernels that name no instruction (neither ``hlo_op`` nor their own name) lie between
    kernels that do, in the order the module's schedule runs its instructions: each takes the
    instruction scheduled there that no kernel named (one instruction: all its kernels; two
    in one run: one each, in order). The truth is the unchanged file, which names them all."""
    source = corpus / "xspace" / "jax_h100_convnet_graphs.xplane.pb"
    out = tmp_path / "disguised.xplane.pb"
    changed = disguised(source, out)
    assert changed == 3 * (2 + 7)  # three steps
    truth, placed = tracebridge.load(source), tracebridge.load(out)
    expected, found = instructions(truth), instructions(placed)
    assert None not in expected and found == expected
    assert module_share(placed) == 0.0
    # the events that changed hold time enough to matter (xprof would leave it on the module)
    rows, time = device_time(placed)
    moved = [k for k, name in enumerate(expected) if name in (INTO_GRAPH, "gemm_fusion_dot_general.3",
                                                               "loop_exponential_multiply_fusion")]
    assert len(moved) == changed and time[moved].sum() > 0.05 * time.sum()


def test_the_schedule_is_the_order_kernels_run_in(corpus):
    """``HloModule.order`` is the entry computation's schedule: without CUDA graphs, each
    step's kernels run their instructions in that order."""
    trace = tracebridge.load(corpus / "xspace" / "jax_h100_convnet_nographs.xplane.pb")
    module = max(hlo_op_map(modules_of(trace.metadata)).modules, key=lambda m: len(m.ops))
    assert module.name == "jit_train_step" and len(module.order) > 50
    rows, _ = device_time(trace)
    names = instructions(trace)
    for step in np.unique(trace.ops["step"][rows]).tolist():
        mine = [k for k in range(len(rows)) if trace.ops["step"][rows[k]] == step]
        mine.sort(key=lambda k: int(trace.ops["start_ns"][rows[k]]))
        places = [module.order[names[k]] for k in mine]
        assert places == sorted(places), step


def test_an_instruction_with_no_op_downstream_takes_the_one_upstream(corpus):
    """The TPU module's copies out of the module (``copy-start.5``/``copy-done.5``) feed only
    the module's result tuple: they finish the ``add`` whose value they copy."""
    trace = tracebridge.load(corpus / "xspace" / "xprof_tpu_inference_2.xplane.pb")
    module = next(m for m in hlo_op_map(modules_of(trace.metadata)).modules if m.name == "jit_f")
    for name in ("copy-start.5", "copy-done.5", "copy-start.1", "copy-done.3"):
        op = module.ops[name]
        assert not op.op_name and op.tf_ops == (("jit(f)/jit(main)/add", ""),), (name, op.tf_ops)
    assert module.ops["broadcast_add_fusion"].op_name == "jit(f)/jit(main)/add"
