"""XLA's HLO, as far as a profile needs it: which framework (TF or JAX) ops each HLO
instruction computes, so that time on XLA thunks and kernels goes to those ops.

A trace carries the HLO modules it ran in ``metadata["hlo_modules"]``: JSON-able entries
``{"name", "program_id", "proto"}`` (``proto`` = base64 of a serialized HloProto or
HloModuleProto), made by :func:`module_entry`. ``tracebridge.readers.hlo.hlo_op_map``
decodes them into an :class:`HloOpMap` (the decoding is a reader's; the map is the model's).
Capture appends entries (HLO from ``experimental_get_compiler_ir``), the XSpace reader adds
those of ``/host:metadata``, and the writers keep them in ``.json`` and ``.xplane.pb``.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field

HLO_MODULES = "hlo_modules"  # the trace metadata key
XLA_ARGS = "XLA_Args"        # TF's op_name on instructions that only pass arguments in
# The event stats the XSpace reader gives each XLA event it linked (readers/xspace_xla.py):
# its instruction, that instruction's module and, for a fusion of several, every TF op it
# computes. Writers keep them (Chrome args, XSpace stats); analysis reads them.
HLO_INSTRUCTION, HLO_MODULE, TF_OPS = "hlo_instruction", "hlo_module", "tf_ops"
LINK_STATS = (HLO_INSTRUCTION, HLO_MODULE, TF_OPS)
# The "cat" of the TF op spans a Chrome trace shows above XLA events (writers/chrome.py):
# derived from those events, so a reader of tracebridge's own file skips them.
TF_OP_SPAN_CAT = "XlaTfOp"


# JAX names each module for the function jitted (``jit_train_step``, ``jit__psum``, ``pmap_f``);
# TF for the function or cluster it compiled (``a_inference_step_22__...``, ``cluster_0``).
_JAX_MODULE = re.compile(r"(jit|pmap|xmap|pjit)_")


def xla_framework(trace) -> str | None:
    """Which framework's ops a trace's XLA events compute: ``"jax"`` when every XLA module
    it names (``metadata["hlo_modules"]``, else its events' ``hlo_module`` stats) is JAX's,
    ``"tf"`` when any is not, None without XLA modules. What a view calls the framework ops
    (JAX ops, not TF ops) and what advice fits the run (jax.profiler, not tf.profiler)."""
    names = {str(m.get("name")) for m in trace.metadata.get(HLO_MODULES) or () if isinstance(m, dict)}
    if not names:
        _, values = trace.event_stat(HLO_MODULE)
        names = {trace.strings[v] for v in set(values.tolist())}
    if not names:
        return None
    return "jax" if all(_JAX_MODULE.match(name) for name in names) else "tf"


def framework_ops(trace) -> str:
    """What the framework's ops of ``trace`` are called: "JAX ops" or "TF ops"."""
    return "JAX ops" if xla_framework(trace) == "jax" else "TF ops"


# An op type as TF and JAX write them: ``MatMul``, ``conv_general_dilated``, ``scatter-add``.
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
ASYNC_COPY = "async copy"  # the op type of XLA's copy-start/copy-done pairs
_ASYNC_COPIES = frozenset({"copy-start", "copy-done"})


@dataclass(frozen=True)
class HloOp:
    """One HLO instruction. ``op_name``/``op_type``: its own metadata (the framework op XLA
    says it came from; "" if none). ``tf_ops``: every distinct ``(op_name, op_type)`` it
    computes: for a fusion (or any instruction that calls computations) the ops of the
    instructions inside, in order; else its own; for an instruction XLA made without any
    (no metadata, nothing inside), the op the dataflow around it computes for
    (readers/hlo_made.py)."""

    module: str
    name: str
    opcode: str
    op_name: str = ""
    op_type: str = ""
    fusion_kind: str = ""
    called: tuple[str, ...] = ()
    tf_ops: tuple[tuple[str, str], ...] = ()

    @property
    def row_name(self) -> str:
        """The op row that owns its time, as xprof's framework_op_stats names it: the
        instruction's own op_name, else the instruction itself."""
        return self.op_name or self.name

    @property
    def row_type(self) -> str:
        """The row's op type: the metadata's, else the op_name's last part where it names
        an op (JAX writes no op_type: ``.../conv1/conv_general_dilated``; not a JAX
        argument's path, ``p['block6']['conv2']['kernel']``, nor ``jit(train_step)``), else
        for XLA's asynchronous copies (``copy-start``/``copy-done``, a TPU's transfers
        between memories) :data:`ASYNC_COPY`, else ``Unknown`` as xprof says."""
        if self.op_type:
            return self.op_type
        last = self.op_name.rsplit("/", 1)[-1]
        if _OP_TYPE.fullmatch(last):
            return last
        return ASYNC_COPY if self.opcode in _ASYNC_COPIES else "Unknown"

    @property
    def fused(self) -> bool:
        """It computes several framework ops: its row is a group, not one op."""
        return len(self.tf_ops) > 1

    @property
    def beyond_row(self) -> bool:
        """Its row's name does not say all it computes: a fusion of several ops, or an
        instruction named for itself that computes for an op (a ``tf_ops`` stat says which)."""
        return self.fused or bool(self.tf_ops) and self.tf_ops[0][0] != self.row_name

    def describe_ops(self) -> str:
        """Its framework ops, comma-separated (what a view shows beside the instruction)."""
        return ", ".join(name for name, _ in self.tf_ops)


@dataclass
class HloModule:
    name: str
    program_id: int | None
    ops: dict[str, HloOp] = field(default_factory=dict)
    by_kernel_name: dict[str, HloOp] = field(default_factory=dict)  # kernel-safe names (see HloOpMap.find)
    # The entry computation's instructions in the order the module runs them (its schedule),
    # each -> its place: a kernel that names no instruction is placed by it (readers/xla_order.py).
    order: dict[str, int] = field(default_factory=dict)


_TF_COMPILE_OPTIONS = re.compile(r"__XlaMustCompile_[^.]*_(\.\d+)$")
_WRAPPER = re.compile(r"^(?:StatefulPartitionedCall(?:_\d+)?|PartitionedCall(?:_\d+)?|__inference_[^/]*|"
                      r"__forward_[^/]*|__backward_[^/]*)/")


def without_wrappers(name: str) -> str:
    """A TF op's name without the function calls it runs under (``StatefulPartitionedCall/``,
    ...): the name the HLO's metadata gives it, and the one comparison matches by."""
    previous = None
    while previous != name:
        previous, name = name, _WRAPPER.sub("", name)
    return name


def tf_module_name(name: str) -> str:
    """TF's profile names a ``jit_compile`` function's module with its compile options
    (``a_inference_step_22__XlaMustCompile_true_config_proto_<n>_executor_type_<m>_.4``);
    ``experimental_get_compiler_ir`` gives the same module as ``a_inference_step_22__.4``."""
    return _TF_COMPILE_OPTIONS.sub(r"__\1", name)


def kernel_safe(name: str) -> str:
    """An instruction's name as XLA's GPU backend names its kernel: '.' and '-' become '_'
    (``loop_add_fusion.1`` runs as kernel ``loop_add_fusion_1``)."""
    return name.replace(".", "_").replace("-", "_")


class HloOpMap:
    """HLO modules by name and program id, each instruction by name."""

    def __init__(self, modules: list[HloModule]):
        self.modules = modules
        self._by_key = {(m.name, m.program_id): m for m in modules}
        self._by_name: dict[str, list[HloModule]] = {}
        self._by_program: dict[int, list[HloModule]] = {}
        for module in modules:
            self._by_name.setdefault(module.name, []).append(module)
            if module.program_id is not None:
                self._by_program.setdefault(module.program_id, []).append(module)

    def __len__(self) -> int:
        return len(self.modules)

    def alias(self, name: str, program_id: int | None, module: HloModule) -> None:
        """Know ``module`` also by the name a profile gives it (``/host:metadata``'s event
        name, a capture's entry), where that differs from the name inside its proto."""
        self._by_key.setdefault((name, program_id), module)
        if module not in self._by_name.setdefault(name, []):
            self._by_name[name].append(module)
        if program_id is not None and module not in self._by_program.setdefault(program_id, []):
            self._by_program[program_id].append(module)

    def module(self, name: str | None, program_id: int | None = None) -> list[HloModule]:
        """The modules an event names: by name and program id where both match, else by
        name (a module recompiled keeps its name), else by TF's name without its compile
        options, else the only module there is; name None: by program id, else every module."""
        if name is None:  # a TPU op names its module by program id only
            return self._by_program.get(program_id, []) if program_id is not None else self.modules
        for candidate in dict.fromkeys((name, tf_module_name(name))):
            exact = self._by_key.get((candidate, program_id)) if program_id is not None else None
            if exact is not None:
                return [exact]
            if candidate in self._by_name:
                return self._by_name[candidate]
        return self.modules if len(self.modules) == 1 else []

    def find(self, module: str | None, instruction: str, program_id: int | None = None) -> HloOp | None:
        """The instruction an XLA event ran: by name, or by its kernel-safe name (a GPU
        kernel inside a command buffer is known only by its kernel name)."""
        found = self.find_with_module(module, instruction, program_id)
        return found[1] if found else None

    def find_with_module(self, module: str | None, instruction: str,
                         program_id: int | None = None) -> tuple[HloModule, HloOp] | None:
        """:meth:`find`, with the module the instruction is in."""
        candidates = self.module(module, program_id)
        for found in candidates:
            if instruction in found.ops:
                return found, found.ops[instruction]
        for found in candidates:
            if instruction in found.by_kernel_name:
                return found, found.by_kernel_name[instruction]
        return None


def module_entry(name: str, program_id: int | None, data: bytes) -> dict:
    """One ``metadata["hlo_modules"]`` entry (JSON-able)."""
    return {"name": name, "program_id": program_id, "proto": base64.b64encode(data).decode("ascii")}


def hlo_modules_of_text(text) -> list[dict]:
    """The entries a writer kept as JSON text (a Chrome trace's ``otherData`` holds
    scalars only); [] for anything else, so a damaged value drops the HLO, not the trace."""
    if not isinstance(text, str):
        return []
    try:
        entries = json.loads(text)
    except ValueError:
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("proto"), str)] \
        if isinstance(entries, list) else []


def modules_of(metadata: dict) -> list[bytes]:
    """The serialized HLO protos a trace's metadata carries."""
    return [base64.b64decode(entry["proto"]) for entry in metadata.get(HLO_MODULES) or ()
            if isinstance(entry, dict) and isinstance(entry.get("proto"), str)]
