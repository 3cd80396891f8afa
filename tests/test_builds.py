"""TF builds: the same model captured with oneDNN on and off compares op for op.

tensorflow-cpu 2.21 turns oneDNN on by default only on some CPUs; ``TF_ENABLE_ONEDNN_OPTS``
switches it on any x86 machine. The captures run in subprocesses (tests/helpers/
build_worker.py), each with the build asked for, and each reports what TF said it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tracebridge
from tracebridge.analysis.compare import PerSide
from tracebridge import compare
from tracebridge.analysis.common.kernels import fusion_parts, kernel_family, plain_kernel
from tests.conftest import unmatched_compute

WORKER = Path(__file__).parent / "helpers" / "build_worker.py"
ATTACHED = {"Const", "Shape", "Reshape", "Transpose", "ExpandDims", "Squeeze", "Identity", "Cast"}


@pytest.fixture(scope="session")
def build_captures(tf, tmp_path_factory) -> dict:
    """``{(world, onednn): (trace, reported)}`` for TF1 and TF2, oneDNN off and on."""
    folder = tmp_path_factory.mktemp("builds")
    captures = {}
    for world in ("tf1", "tf2"):
        for onednn in (False, True):
            out = folder / f"{world}-{int(onednn)}.json"
            env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": str(int(onednn)), "TF_CPP_MIN_LOG_LEVEL": "2"}
            done = subprocess.run([sys.executable, str(WORKER), world, str(out)], capture_output=True,
                                  text=True, env=env, timeout=600, cwd=str(Path(__file__).parents[1]))
            assert done.returncode == 0, done.stderr[-3000:]
            reported = json.loads(done.stdout.strip().splitlines()[-1])
            captures[world, onednn] = (tracebridge.load(out), reported)
    return captures


def test_each_capture_runs_the_build_asked_for(build_captures):
    for (world, onednn), (trace, reported) in build_captures.items():
        assert reported["onednn"] is onednn, (world, reported)  # TF_ENABLE_ONEDNN_OPTS took effect
        families = kernel_family(reported["kernels"])
        assert families == ("oneDNN" if onednn else "plain"), (world, reported["kernels"])
        assert len(trace.steps) == 3


@pytest.mark.parametrize("world", ["tf1", "tf2"])
def test_same_model_with_and_without_onednn_aligns_by_name(build_captures, world):
    plain, _ = build_captures[world, False]
    onednn, _ = build_captures[world, True]
    result = compare(plain, onednn)
    assert result.kernels == PerSide("plain", "oneDNN")
    assert "kernels are compared by their plain names" in result.to_text()
    # Only the build differs: every op matches under its own name, or as a fusion group, and
    # every conv, matmul and batch norm matches (the bar was 95% of op time: live timing).
    assert {r.rule for r in result.rows} <= {"exact", "fusion", "unmatched"}
    assert not unmatched_compute(result), result.to_text(top=40)
    _check_kernels_pair_up(result)
    fusions = [r for r in result.rows if r.rule == "fusion"]
    # oneDNN fuses FusedBatchNormV3 with the ReLU after it; the plain build runs both.
    assert any("= FusedBatchNormV3+Relu]" in r.key for r in fusions), [r.key for r in fusions]


@pytest.mark.parametrize("control, test", [(("tf1", True), ("tf2", False)), (("tf1", False), ("tf2", True))])
def test_tf1_and_tf2_runs_of_different_builds_align(build_captures, control, test):
    result = compare(build_captures[control][0], build_captures[test][0])
    # every conv, matmul and batch norm matched (the bar was 95% of op time: live timing)
    assert not unmatched_compute(result), result.to_text(top=40)
    _check_kernels_pair_up(result)
    assert any(r.rule == "fusion" for r in result.rows)


def _check_kernels_pair_up(result) -> None:
    """Matched rows pair the same plain kernel on both sides; where one side runs a fused
    kernel the other runs unfused, the row is a fusion group whose key names the kernel."""
    types = {"control": _kernels_by_name(result.control), "test": _kernels_by_name(result.test)}
    for row in result.rows:
        # a layer's rest (compare by layer, rule "layer") is what each side computes its own way
        if not (row.names.control and row.names.test) or row.rule in ("optimizer", "layer"):
            continue
        # constants and shape ops join the row of what they feed (TF1 runs its constants)
        control = {plain_kernel(types["control"][n]) for n in row.names.control} - ATTACHED
        test = {plain_kernel(types["test"][n]) for n in row.names.test} - ATTACHED
        if row.rule == "fusion":
            sides = (("control", [n for n in row.names.control if plain_kernel(types["control"][n]) not in ATTACHED],
                      test),
                     ("test", [n for n in row.names.test if plain_kernel(types["test"][n]) not in ATTACHED], control))
            kernel, parts_run = next((types[side][names[0]], other) for side, names, other in sides
                                     if len(names) == 1 and fusion_parts(types[side][names[0]]))
            assert f"[{kernel} = " in row.key, row
            assert parts_run <= set(fusion_parts(kernel)), row
        else:
            assert control == test, row


def _kernels_by_name(trace) -> dict[str, str]:
    return {o.name: o.kernel for o in trace.records()}


def test_plain_kernel_names():
    assert plain_kernel("_MklMatMul") == "MatMul"
    assert plain_kernel("_MklNativeConv2D") == "Conv2D"
    assert plain_kernel("_MklNativeFusedMatMul") == "_FusedMatMul"
    assert plain_kernel("_MklNativeFusedBatchNormV3") == "FusedBatchNormV3"
    assert plain_kernel("_MklNativeFusedBatchNormGradV3") == "FusedBatchNormGradV3"
    assert plain_kernel("_MklNativeFusedBatchNormEx") == "_FusedBatchNormEx"
    assert plain_kernel("_MklNativeMaxPool") == "MaxPool"
    assert plain_kernel("_FusedMatMul") == "_FusedMatMul" and plain_kernel("MatMul") == "MatMul"
    assert plain_kernel("_Mkl") == "_Mkl"
    assert fusion_parts("_MklNativeFusedBatchNormEx")[:2] == ("FusedBatchNormV3", "Relu")
    assert fusion_parts("_MklMatMul") == ()
    assert kernel_family([]) == "unknown" and kernel_family(["MatMul"]) == "plain"
    assert kernel_family(["MatMul", "_MklMatMul"]) == "oneDNN"
