"""Device events that name no HLO instruction, placed by the order their module runs.

Inside a CUDA graph (an XLA command buffer) a kernel's ``hlo_op`` is ``command_buffer_N``,
and its own name is no sure guide either: XLA compiles one kernel for fusions that compute
alike and names it after the first (a transformer's four layers' layer norms all run as
``input_reduce_fusion_23``), and a library's kernel names no instruction at all. So a
command buffer's kernels are walked against the schedule (:func:`align_command_buffers`):
each takes the next scheduled instruction it can be, and the instructions events name
outside any buffer set the walk's place. Measured on a JAX encoder captured on an H200 with
command buffers on and off (tests/data/gpu), this gives each op what the run without
buffers gives it; by kernel name, a reused kernel's time all went to the first layer.

Other device events that name no instruction (a library's kernel whose event has only
``hlo_module``) are placed by :func:`place_by_order`. A module runs its entry computation's
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

import re
from collections import defaultdict

import numpy as np

from ..model.hlo import HloModule, HloOp, kernel_safe

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


# What XLA names a reused kernel: the first fusion's kernel-safe name (``input_reduce_fusion_23``
# serves ``input_reduce_fusion.24``): alike but for the number.
_NUMBERED = re.compile(r"_\d+$")


def align_command_buffers(in_buffers: dict[int, HloModule], placed: dict[int, tuple[HloModule, HloOp]],
                          device: np.ndarray, start_ns: np.ndarray, kernel_of: dict[int, str]) -> dict[int, HloOp]:
    """Instruction of each event of ``in_buffers`` (event -> its module; each ran inside a
    command buffer), walking each device's events of a module in the order they ran against
    the module's schedule. ``placed``: the events that name their instruction (their place
    in the schedule sets the walk's); ``kernel_of``: each event's kernel name. An event the
    schedule cannot place is left out."""
    streams: dict[tuple[int, int], list[int]] = defaultdict(list)
    modules: dict[int, HloModule] = {}
    for event, module in in_buffers.items():
        modules[id(module)] = module
        streams[int(device[event]), id(module)].append(event)
    wanted = set(streams)
    for event, (module, _) in placed.items():
        if (int(device[event]), id(module)) in wanted:
            streams[int(device[event]), id(module)].append(event)
    found: dict[int, HloOp] = {}
    for (_, key), events in streams.items():
        walk = _ScheduleWalk(modules[key], found)
        events.sort(key=lambda e: (int(start_ns[e]), e))
        for event in events:
            if event in placed:
                walk.seen(placed[event][1])
            else:
                walk.ran(event, kernel_of[event])
        walk.library_run_ends(len(walk.schedule))
    return found


class _ScheduleWalk:
    """The place one device's kernels have reached in one module's schedule (the
    instructions that launch work, in order), each kernel placed as it comes. A kernel XLA
    named takes the next instruction it can be; a run of library kernels waits for the next
    one XLA named, and shares the instructions between."""

    def __init__(self, module: HloModule, found: dict[int, HloOp]):
        self.module, self.found = module, found
        self.schedule = [module.ops[name] for name in sorted(module.order, key=module.order.get)
                         if module.ops[name].opcode not in NO_KERNEL]
        self.place = {op.name: i for i, op in enumerate(self.schedule)}
        self.next, self.last = 0, None  # the next instruction to run, the last one placed
        self.library_run: list[int] = []

    def seen(self, op: HloOp) -> None:
        """An event that names ``op``: the walk goes on after it."""
        if op.name in self.place:
            self.library_run_ends(self.place[op.name])
            self.last = self.place[op.name]
            self.next = self.last + 1

    def ran(self, event: int, kernel: str) -> None:
        """A kernel ``event`` inside a command buffer: placed now, or (a library's) when the
        next one XLA named shows where its run ends."""
        named = self.module.by_kernel_name.get(kernel)
        if named is None:  # a library's kernel (cuBLAS, cuDNN, a memset)
            self.library_run.append(event)
            return
        if named.name not in self.place:  # an instruction of a loop's body or a called computation
            self.found[event] = named
            return
        index = self._index_of(kernel)
        if index is None:
            return
        self.library_run_ends(index)
        self.found[event] = self.schedule[index]
        self.last, self.next = index, index + 1

    def _index_of(self, kernel: str) -> int | None:
        """The instruction an XLA kernel ran: the next scheduled one it can be; else the last
        one placed again (a fusion emitted as two kernels); else the first it can be further
        on, or from the schedule's start (the module's next run)."""
        schedule = self.schedule
        if self.next < len(schedule) and self._fits(kernel, schedule[self.next]):
            return self.next
        if self.last is not None and kernel == kernel_safe(schedule[self.last].name):
            return self.last
        for index in (*range(self.next + 1, len(schedule)), *range(min(self.next, len(schedule)))):
            if self._fits(kernel, schedule[index]):
                return index
        return None

    @staticmethod
    def _fits(kernel: str, op: HloOp) -> bool:
        """Could ``op`` have launched XLA's ``kernel``: its own, or one XLA reused for it (a
        fusion's, named alike but for the number)."""
        own = kernel_safe(op.name)
        return kernel == own or op.opcode == "fusion" and _NUMBERED.sub("", kernel) == _NUMBERED.sub("", own)

    def library_run_ends(self, end: int) -> None:
        """The library kernels since the last placed one ran the instructions scheduled
        before ``end`` (from the schedule's start, past its end, where ``end`` comes first),
        in equal shares; with none between, the last placed one's (a library call's
        several kernels)."""
        run, self.library_run = self.library_run, []
        if not run:
            return
        between = list(range(self.next, end)) if self.next <= end else \
            [*range(self.next, len(self.schedule)), *range(end)]
        if not between:
            if self.last is not None:
                self.found.update((event, self.schedule[self.last]) for event in run)
            return
        names = [self.schedule[i].name for i in between]
        self.found.update(_share(run, names, self.module))
        self.last, self.next = between[min(len(run), len(between)) - 1], end


__all__ = ["NO_KERNEL", "align_command_buffers", "place_by_order"]
