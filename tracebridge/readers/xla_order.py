"""Device events that name no HLO instruction, placed by the order their module runs.

Inside a CUDA graph (an XLA command buffer) every kernel has ``hlo_op=command_buffer_N``. A
kernel XLA emitted is still known by its own name, the instruction's, but a library's is not
(cuBLAS ``nvjet_*`` or ``sm90_xmma_gemm_*``, cuDNN ``cudnn_generated_*``, a memset): xprof's
framework_op_stats leaves such kernels out, and the reader left them on ``XlaModule``. A module runs its entry computation's
instructions in the order of its schedule (``HloModule.order``), and a device runs one
program's kernels in that order. A run of events that name nothing lies between two that
do (the anchors), and belongs to the instructions scheduled between the anchors' that no
event of the trace named: one such instruction takes the whole run (a cuDNN call's several
kernels); several share it in order, each the same share of its events.

A run between two kernels of one instruction is that instruction's. A run next to an event
of an instruction outside the entry computation (a loop's body) or with no instruction
between its anchors stays unplaced: the schedule does not say.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..model.hlo import HloModule, HloOp

# Opcodes that launch nothing on a device: no event is theirs.
NO_KERNEL = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
                       "add-dependency", "opt-barrier", "partition-id", "replica-id"})


def place_by_order(unplaced: dict[int, HloModule], placed: dict[int, tuple[HloModule, HloOp]],
                   device: np.ndarray, start_ns: np.ndarray) -> dict[int, HloOp]:
    """Instruction of each placeable event of ``unplaced`` (event -> the module its stats
    name), given the events placed by name (event -> module, instruction) and each event's
    device and start."""
    if not unplaced:
        return {}
    events: dict[tuple[int, int], list[int]] = defaultdict(list)   # (device, module) -> events
    modules: dict[int, HloModule] = {}
    named: dict[int, set[str]] = defaultdict(set)                   # module -> instructions events named
    for event, (module, op) in placed.items():
        modules[id(module)] = module
        named[id(module)].add(op.name)
        events[int(device[event]), id(module)].append(event)
    for event, module in unplaced.items():
        modules[id(module)] = module
        events[int(device[event]), id(module)].append(event)
    found: dict[int, HloOp] = {}
    for (_, key), mine in events.items():
        module = modules[key]
        if not module.order or not any(e in unplaced for e in mine):
            continue
        order = sorted(module.order, key=module.order.get)
        free = [name for name in order if name not in named[key] and module.ops[name].opcode not in NO_KERNEL]
        mine.sort(key=lambda e: (int(start_ns[e]), e))
        run: list[int] = []
        before: int | None = -1  # the place of the anchor before the run (-1: the start)
        for event in mine + [None]:
            if event is not None and event in unplaced:
                run.append(event)
                continue
            after = len(order) if event is None else module.order.get(placed[event][1].name)  # None: not scheduled
            if run and before is not None and after is not None:
                if before == after:  # between two kernels of one instruction: a third of it
                    found.update((e, placed[event][1]) for e in run)
                else:
                    found.update(_share(run, _between(free, module.order, before, after), module))
            run, before = [], after
    return found


def _between(free: list[str], order: dict[str, int], before: int, after: int) -> list[str]:
    """The free instructions scheduled after place ``before`` and before ``after``; where
    ``after`` comes first, the run spans the end of one execution and the start of the next."""
    if before < after:
        return [name for name in free if before < order[name] < after]
    return [name for name in free if order[name] > before] + [name for name in free if order[name] < after]


def _share(run: list[int], candidates: list[str], module: HloModule) -> dict[int, HloOp]:
    """The run's events in order over the candidates in order, in equal shares."""
    if not candidates:
        return {}
    count = len(candidates)
    if len(run) <= count:
        return {event: module.ops[name] for event, name in zip(run, candidates)}
    return {event: module.ops[candidates[index * count // len(run)]] for index, event in enumerate(run)}


__all__ = ["NO_KERNEL", "place_by_order"]
