"""Kernel names that depend on how TensorFlow was built and on the CPU it ran on.

tensorflow-cpu turns oneDNN on by default only on some CPUs (AVX-512 ones);
``TF_ENABLE_ONEDNN_OPTS=0``/``=1`` switches it on any x86 machine. With oneDNN the same
graph runs other kernels: ``MatMul`` becomes ``_MklMatMul``, ``Conv2D`` becomes
``_MklNativeConv2D``, Grappler's ``_FusedMatMul`` becomes ``_MklNativeFusedMatMul``, the CPU
allocator is ``mklcpu`` instead of ``cpu``, and some patterns are fused only there
(``FusedBatchNormV3`` + ``Relu`` into ``_MklNativeFusedBatchNormEx``). Traces keep the
kernel names; analysis compares them by their plain names, and a fused kernel on one side
stands for the group of its parts on the other.
"""

from __future__ import annotations

import numpy as np

_ONEDNN_PREFIXES = ("_MklNative", "_Mkl")

# The public op types a fused kernel computes, by plain kernel name (facts from Grappler's
# remapper and the oneDNN rewrite pass). Order is the order of the computation.
_ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid", "Selu", "Softplus")
_RESIDUAL = ("Add", "AddV2")
FUSION_PARTS: dict[str, tuple[str, ...]] = {
    "_FusedMatMul": ("MatMul", "BiasAdd", *_ACTIVATIONS, *_RESIDUAL),
    "_FusedConv2D": ("Conv2D", "BiasAdd", "FusedBatchNorm", "FusedBatchNormV3", *_ACTIVATIONS,
                     *_RESIDUAL, "Pad"),
    "_FusedConv3D": ("Conv3D", "BiasAdd", *_ACTIVATIONS, *_RESIDUAL),
    "_FusedDepthwiseConv2dNative": ("DepthwiseConv2dNative", "BiasAdd", *_ACTIVATIONS),
    "_FusedBatchNormEx": ("FusedBatchNormV3", *_ACTIVATIONS, *_RESIDUAL),
    "_FusedBatchMatMulV2": ("BatchMatMulV2", "Mul", *_RESIDUAL),
    "Conv2DBackpropFilterWithBias": ("Conv2DBackpropFilter", "BiasAddGrad"),
    "Swish": ("Sigmoid", "Mul"),
    "LayerNorm": ("Mean", "SquaredDifference", "Sub", "Rsqrt", "Mul", "AddV2", "Add"),
}


def plain_kernel(kernel: str) -> str:
    """The kernel's name in a build without oneDNN: ``_MklMatMul`` -> ``MatMul``,
    ``_MklNativeFusedConv2D`` -> ``_FusedConv2D``, ``_MklNativeFusedBatchNormV3`` ->
    ``FusedBatchNormV3``; other names are returned as they are."""
    for prefix in _ONEDNN_PREFIXES:
        if kernel.startswith(prefix) and len(kernel) > len(prefix):
            rest = kernel[len(prefix):]
            # FusedBatchNorm* are public ops; other Fused* kernels are Grappler's private ones.
            if rest.startswith("Fused") and not (rest.startswith("FusedBatchNorm") and not rest.endswith("Ex")):
                return "_" + rest
            return rest
    return kernel


def is_onednn(kernel: str) -> bool:
    return kernel.startswith("_Mkl")


def fusion_parts(kernel: str) -> tuple[str, ...]:
    """The op types a fused kernel computes (empty for a kernel that fuses nothing)."""
    return FUSION_PARTS.get(plain_kernel(kernel), ())


def kernel_family(kernels) -> str:
    """``"oneDNN"`` when any kernel is a oneDNN one, ``"plain"`` when there are kernels and
    none is, ``"unknown"`` for none."""
    kernels = list(kernels)
    if not kernels:
        return "unknown"
    return "oneDNN" if any(is_onednn(k) for k in kernels) else "plain"


def trace_kernel_family(trace) -> str:
    """:func:`kernel_family` of the kernels a trace's ops ran."""
    used = np.unique(trace.ops["kernel"]).tolist()
    return kernel_family(trace.strings[i] for i in used if trace.strings[i])


__all__ = ["FUSION_PARTS", "fusion_parts", "is_onednn", "kernel_family", "plain_kernel",
           "trace_kernel_family"]
