"""Synthetic traces for the findings' exact tests (tests/test_detectors.py), built with
:class:`~tracebridge.model.builder.TraceBuilder` the way the XSpace reader lays out a TF2
run: TF ops on an ``executor`` lane, host events (a ``tf.function`` call, tracing, XLA's
compile) on a ``python`` lane, GPU kernels on a stream of a GPU device, allocator counters.

A run is a list of steps; a step is a list of *items* laid end to end from the step's
start, so that a test reads like the timeline its comment draws::

    # each step: |--MatMul 600--|....gap 400....|
    trace = run([[op("dense/MatMul", "MatMul", 600), gap(400)]] * 5)

Items (durations in microseconds):

- ``op(name, op_type, us)`` (or the tuple ``(name, op_type, us)``): a TF op on the CPU;
- ``gap(us)``: nothing runs (Python work the profiler does not see);
- ``eager(op_type, us, n)``: an op run eagerly (``eager/<Type>_<n>``, the readers' name);
- ``input_wait(us)``: the step blocked on tf.data (``IteratorGetNextOp::DoCompute``);
- ``kernel(name, op_type, us, device=GPU)``: a kernel on an accelerator;
- ``xla(name, op_type, us, instruction, tf_ops)``: an XLA thunk linked to its HLO
  instruction and the TF ops it computes (the XSpace reader's event stats);
- ``mem(delta_bytes)``: the allocator's bytes in use change here (an instant);
- ``together(a, b, ...)``: sequences (an item or a list of items) that start at the same
  moment; the step goes on when the longest ends;
- ``call(fn, n, items, traced_us=, compiled_us=, tracing_count=)``: a ``tf.function`` call as
  TF 2.21 records it: ``fn`` around ``EagerLocalExecute: __inference_<fn>_<n>`` around
  ``FunctionRun``, with the ops inside (a ``gap`` inside is the framework's time between
  ops); ``traced_us`` puts a ``tf.function-graph_building`` before it (a tracing),
  ``compiled_us`` an XLA ``CpuCompiler::RunBackend`` inside it, ``tracing_count`` the call's
  stat (the function's tracings so far, as a profile keeps it; None: none, as Chrome JSON);
- ``host(name, us)``: a host annotation (TraceMe), such as the framework's ``EagerExecute``;
- ``data(name, us)``: a tf.data event (``MakeIterator::RootDataset``: an iterator made).

``run(steps, sigma=, seed=)`` multiplies every op's, gap's and wait's duration by its own
lognormal factor (``exp(N(0, sigma))``, one draw per item per step, from a seeded numpy
Generator): timing noise as a loaded machine makes it. ``sigma=0``: exact data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracebridge.model.builder import TraceBuilder
from tracebridge.model.hlo import HLO_INSTRUCTION, TF_OPS
from tracebridge.model.schema import Category
from tracebridge.model.trace import Trace

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
KiB, MiB = 1 << 10, 1 << 20
GRAPH_BUILDING = "tf.function-graph_building"
ORIGIN_NS = 1_000_000_000  # a run's first step starts here
BETWEEN_STEPS_US = 10.0    # outside every step, between one step and the next


@dataclass(frozen=True)
class Span:
    """Something that takes time on a lane; ``name`` None: a gap (nothing runs)."""

    name: str | None
    op_type: str = ""
    us: float = 0.0
    category: int = int(Category.OP)
    device: str = CPU
    lane: str = "executor"
    kernel: str | None = None
    stats: tuple[tuple[str, str], ...] = ()
    noisy: bool = True


@dataclass(frozen=True)
class Mem:
    """The allocator's bytes in use change by ``delta`` at this moment."""

    delta: int
    allocator: str = "cpu"


@dataclass(frozen=True)
class Together:
    """Sequences that start at the same moment."""

    sequences: tuple[tuple, ...]


@dataclass(frozen=True)
class Wrapped:
    """``items`` laid end to end inside ``wrappers`` (spans whose time is that of what they
    hold, outermost first)."""

    wrappers: tuple[Span, ...]
    items: tuple = ()


def op(name: str, op_type: str, us: float, *, kernel: str | None = None, device: str = CPU,
       lane: str = "executor", noisy: bool = True) -> Span:
    return Span(name, op_type, us, device=device, lane=lane, kernel=kernel, noisy=noisy)


def gap(us: float, *, noisy: bool = True) -> Span:
    return Span(None, us=us, noisy=noisy)


def eager(op_type: str, us: float, n: int = 0) -> Span:
    """An op run eagerly: readers name it ``eager/<Type>_<n>``; it runs on the caller's thread."""
    return Span(f"eager/{op_type}_{n}", op_type, us, lane="python")


def input_wait(us: float) -> Span:
    """The step blocked on tf.data (TF2's iterator event, a DATA row as the XSpace reader makes it)."""
    return Span("IteratorGetNextOp::DoCompute", "DoCompute", us, category=int(Category.DATA), lane="python")


def host(name: str, us: float, *, lane: str = "python", noisy: bool = True) -> Span:
    """A host annotation (TraceMe): not a TF op, so it does not count as work for host gaps."""
    return Span(name, name, us, category=int(Category.HOST), lane=lane, noisy=noisy)


def data(name: str, us: float, *, lane: str = "python") -> Span:
    """A tf.data event (a DATA row, as the XSpace reader makes it)."""
    return Span(name, name, us, category=int(Category.DATA), lane=lane, noisy=False)


def kernel(name: str, op_type: str, us: float, *, device: str = GPU, stream: str = "Stream #7",
           noisy: bool = True) -> Span:
    """A kernel an accelerator ran for TF op ``name``."""
    return Span(name, op_type, us, category=int(Category.DEVICE), device=device, lane=stream,
                kernel=f"{op_type}_kernel", noisy=noisy)


def xla(name: str, op_type: str, us: float, instruction: str, tf_ops: tuple[str, ...] | list[str] = ()) -> Span:
    """An XLA thunk (CPU) linked to its HLO ``instruction``; ``tf_ops``: every TF op it
    computes, its own first (a fusion of several), as readers/xspace_xla.py records them."""
    stats = ((HLO_INSTRUCTION, instruction),) + (((TF_OPS, ", ".join(tf_ops)),) if tf_ops else ())
    return Span(name, op_type, us, stats=stats)


def mem(delta: int, allocator: str = "cpu") -> Mem:
    return Mem(delta, allocator)


def together(*sequences) -> Together:
    return Together(tuple(tuple(s) if isinstance(s, list) else (s,) for s in sequences))


def call(fn: str, n: int, items, *, traced_us: float = 0.0, compiled_us: float = 0.0,
         tracing_count: int | None = None, before=()) -> Wrapped:
    """A ``tf.function`` call of the Python function ``fn`` running its concrete function
    ``__inference_<fn>_<n>`` (module docstring); ``before``: items inside the call before
    its tracing (another function's tracing and run during a first call)."""
    run_items = (Wrapped((host("FunctionRun", 0),), tuple(items)),)
    if compiled_us:
        run_items = (host("CpuCompiler::RunBackend", compiled_us, noisy=False),) + run_items
    inside = (Wrapped((host(f"EagerLocalExecute: __inference_{fn}_{n}", 0),), run_items),)
    if traced_us:
        inside = (host(GRAPH_BUILDING, traced_us, noisy=False),) + inside
    stats = (("tracing_count", str(tracing_count)),) if tracing_count is not None else ()
    return Wrapped((Span(fn, fn, 0, category=int(Category.HOST), lane="python", stats=stats),), tuple(before) + inside)


@dataclass
class _Layout:
    builder: TraceBuilder
    rng: np.random.Generator | None
    sigma: float
    step: int = -1
    in_use: dict[str, int] = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)

    def place(self, item, t: float) -> float:
        """Lay ``item`` from ``t`` (us); the time it ends."""
        if isinstance(item, tuple):
            item = op(*item)
        if isinstance(item, Mem):
            self.memory(item, t)
            return t
        if isinstance(item, Together):
            return max((self.sequence(s, t) for s in item.sequences), default=t)
        if isinstance(item, Wrapped):
            end = self.sequence(item.items, t)
            for wrapper in item.wrappers:
                self.add(wrapper, t, end)
            return end
        us = item.us
        if item.noisy and self.sigma and self.rng is not None:
            us *= float(np.exp(self.rng.normal(0.0, self.sigma)))
        if item.name is not None:
            self.add(item, t, t + us)
        return t + us

    def sequence(self, items, t: float) -> float:
        for item in items:
            t = self.place(item, t)
        return t

    def device(self, name: str) -> int:
        if name not in self.devices:
            self.devices[name] = self.builder.device(name)
        return self.devices[name]

    def add(self, span: Span, start_us: float, end_us: float) -> None:
        b = self.builder
        device = self.device(span.device)
        row = b.add_op(name=span.name, op_type=span.op_type, kernel=span.kernel, start_ns=_ns(start_us),
                       end_ns=_ns(end_us), device=device, lane=b.lane(device, span.lane), step=self.step,
                       category=span.category)
        for key, value in span.stats:
            b.add_row("event_stats", op=row, key=key, value=value)

    def memory(self, change: Mem, t: float) -> None:
        value = self.in_use.get(change.allocator, 0) + change.delta
        self.in_use[change.allocator] = value
        self.builder.add_row("counters", allocator=change.allocator, time_ns=_ns(t), bytes_in_use=value)


def _ns(us: float) -> int:
    return int(round(us * 1000)) + ORIGIN_NS


def run(steps, *, sigma: float = 0.0, seed: int | None = 0, rng: np.random.Generator | None = None,
        first_step: int = 1, memory_base: int | dict[str, int] | None = None,
        between_us: float = BETWEEN_STEPS_US, metadata: dict | None = None) -> Trace:
    """A trace of ``steps`` (each a list of items, laid end to end from the step's start; the
    step ends where its last item does). ``sigma``: lognormal noise on every noisy item's
    duration, drawn from ``rng`` (else ``numpy.random.default_rng(seed)``). ``memory_base``:
    the allocator's bytes in use before the first step (an allocator name -> bytes, or
    bytes of ``"cpu"``)."""
    builder = TraceBuilder({"source_format": "synthetic", **(metadata or {})})
    layout = _Layout(builder, rng if rng is not None else np.random.default_rng(seed), sigma)
    layout.device(CPU)
    t = 0.0
    if memory_base is not None:
        for allocator, value in (memory_base if isinstance(memory_base, dict) else {"cpu": memory_base}).items():
            layout.memory(Mem(value, allocator), t - between_us)
    for index, items in enumerate(steps):
        start = t
        layout.step = index  # the index builder.step gives it below
        end = layout.sequence(list(items), start)
        builder.step(first_step + index, start_ns=_ns(start), end_ns=_ns(end))
        t = end + between_us
    return builder.build()


# --- a small CNN, as Keras names a TF2 port's ops (Conv2D, BiasAdd, Relu, MaxPool, MatMul
# and their gradients): 34 ops, about 2.5 ms a step
CNN_FORWARD = (
    ("sequential/conv2d/Conv2D", "Conv2D", 300.0),
    ("sequential/conv2d/BiasAdd", "BiasAdd", 30.0),
    ("sequential/conv2d/Relu", "Relu", 25.0),
    ("sequential/max_pooling2d/MaxPool", "MaxPool", 60.0),
    ("sequential/conv2d_1/Conv2D", "Conv2D", 250.0),
    ("sequential/conv2d_1/BiasAdd", "BiasAdd", 20.0),
    ("sequential/conv2d_1/Relu", "Relu", 15.0),
    ("sequential/max_pooling2d_1/MaxPool", "MaxPool", 40.0),
    ("sequential/flatten/Reshape", "Reshape", 5.0),
    ("sequential/dense/MatMul", "MatMul", 90.0),
    ("sequential/dense/BiasAdd", "BiasAdd", 10.0),
    ("sequential/dense/Relu", "Relu", 8.0),
    ("sequential/dense_1/MatMul", "MatMul", 25.0),
    ("sequential/dense_1/BiasAdd", "BiasAdd", 5.0),
    ("sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits",
     "SparseSoftmaxCrossEntropyWithLogits", 20.0),
)
CNN_BACKWARD = (
    ("gradient_tape/sequential/dense_1/MatMul", "MatMul", 25.0),
    ("gradient_tape/sequential/dense_1/MatMul_1", "MatMul", 25.0),
    ("gradient_tape/sequential/dense_1/BiasAdd/BiasAddGrad", "BiasAddGrad", 8.0),
    ("gradient_tape/sequential/dense/ReluGrad", "ReluGrad", 8.0),
    ("gradient_tape/sequential/dense/MatMul", "MatMul", 90.0),
    ("gradient_tape/sequential/dense/MatMul_1", "MatMul", 90.0),
    ("gradient_tape/sequential/dense/BiasAdd/BiasAddGrad", "BiasAddGrad", 10.0),
    ("gradient_tape/sequential/flatten/Reshape", "Reshape", 5.0),
    ("gradient_tape/sequential/max_pooling2d_1/MaxPool/MaxPoolGrad", "MaxPoolGrad", 70.0),
    ("gradient_tape/sequential/conv2d_1/ReluGrad", "ReluGrad", 20.0),
    ("gradient_tape/sequential/conv2d_1/BiasAdd/BiasAddGrad", "BiasAddGrad", 25.0),
    ("gradient_tape/sequential/conv2d_1/Conv2D/Conv2DBackpropInput", "Conv2DBackpropInput", 260.0),
    ("gradient_tape/sequential/conv2d_1/Conv2D/Conv2DBackpropFilter", "Conv2DBackpropFilter", 280.0),
    ("gradient_tape/sequential/max_pooling2d/MaxPool/MaxPoolGrad", "MaxPoolGrad", 90.0),
    ("gradient_tape/sequential/conv2d/ReluGrad", "ReluGrad", 30.0),
    ("gradient_tape/sequential/conv2d/BiasAdd/BiasAddGrad", "BiasAddGrad", 35.0),
    ("gradient_tape/sequential/conv2d/Conv2D/Conv2DBackpropFilter", "Conv2DBackpropFilter", 310.0),
    ("Adam/AssignAddVariableOp", "AssignAddVariableOp", 6.0),
    ("Adam/ResourceApplyAdam", "ResourceApplyAdam", 40.0),
)
CNN_OPS = CNN_FORWARD + CNN_BACKWARD


def cnn_step(*, slower: dict[str, float] | None = None, gap_us: float = 0.0, input_us: float = 0.0) -> list:
    """One step of the small CNN: ``input_us`` waiting for the batch, ``gap_us`` of Python
    work, then its ops end to end; ``slower``: op type -> factor on those ops' time."""
    slower = slower or {}
    items: list = [input_wait(input_us)] if input_us else []
    if gap_us:
        items.append(gap(gap_us))
    items += [op(name, op_type, us * slower.get(op_type, 1.0)) for name, op_type, us in CNN_OPS]
    return items


def cnn_ms() -> float:
    """The CNN's op time a step, in ms (no noise)."""
    return sum(us for _, _, us in CNN_OPS) / 1000


__all__ = ["CNN_BACKWARD", "CNN_FORWARD", "CNN_OPS", "CPU", "GPU", "GPU1", "GRAPH_BUILDING", "KiB", "MiB", "call",
           "cnn_ms", "cnn_step", "data", "eager", "gap", "host", "input_wait", "kernel", "mem", "op", "run", "together",
           "xla"]
