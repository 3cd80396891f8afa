"""A drop-in for tfvis: ``from tracebridge.compat.tfvis import Timeline``.

tfvis's API, kept as it was::

    with Timeline() as tl:
        session.run(train_op, **tl.kwargs)      # FULL_TRACE options and a RunMetadata
    tl.visualize("timeline.html")               # tracebridge's HTML timeline
    tl.iteration_time(); tl.communication_time("worker"); tl.computation_time()
    tl.to_pickle("run.pickle"); Timeline.from_pickle("run.pickle")

What is new:

* **TF2 code.** When the block starts while TensorFlow executes eagerly, the same object
  traces the code inside the block with tracebridge's TF2 capture; at the end of the block
  that trace becomes ``run_metadata`` (StepStats written by
  :mod:`tracebridge.writers.stepstats`), so the metrics work on it unchanged. Ops of
  ``tf.function`` graphs are nodes there; single eager ops are only host annotations in a
  TF2 profile and are not. Touching ``tl.kwargs`` means a session will run: the TF2
  capture is stopped and discarded first, because FULL_TRACE fails while a TF2 profiler
  runs, and fails *after* executing the step. In graph mode nothing is profiled.
* ``tl.trace``: what was collected as a tracebridge :class:`~tracebridge.Trace`.
* Pickles are read with tracebridge's restricted unpickler, never ``pickle.load``: only a
  RunMetadata comes out of one, and any other object raises
  :class:`~tracebridge.errors.UnsafePickleError` before anything runs. ``from_pickle``
  gives a ``run_metadata`` of tracebridge's own protobuf class (same fields as TF's), so
  reading needs no TensorFlow.

The metrics are tfvis's definitions (all in microseconds, over ``all_start_micros`` and
``all_end_rel_micros`` of the nodes of devices whose name *contains*
``device_search_pattern``, ops in start order), computed with numpy over the columns of the
trace tracebridge reads of the RunMetadata instead of a Python loop per node; they give the
same integers. The micros are the trace's nanoseconds truncated as TF's executor truncates
them (``all_end_rel_micros = end_ns // 1000 - start_ns // 1000``).
"""

from __future__ import annotations

import os
import struct
import time
import warnings

import numpy as np

from .._files import write_bytes
from ..capture.interrupts import deferred_in as _deferred_in
from ..errors import CaptureError, TraceFormatError
from ..model.trace import Trace

COMM_OP_NAME = "RecvTensor"
HOROVOD_MARK = " = HorovodAllreduce("
# What pickle.dump(run_metadata) refers to; real tfvis loads it with TensorFlow installed.
_TF_MODULE, _TF_CLASS = "tensorflow.core.protobuf.config_pb2", "RunMetadata"


class Timeline:
    """tfvis's ``Timeline``: collect one run's RunMetadata, view it, measure it.

    ``comm_op_name``: node name of communication ops (default ``RecvTensor``);
    ``horovod``: communication ops are those whose label holds ``= HorovodAllreduce(``;
    ``run_metadata``: a RunMetadata to measure (TF's or tracebridge's message).
    """

    def __init__(self, comm_op_name: str | None = None, horovod: bool = False, run_metadata=None):
        self.run_metadata = run_metadata
        self.options = None
        self.comm_op_name = comm_op_name if comm_op_name is not None else COMM_OP_NAME
        self.horovod = horovod
        self.notes: list[str] = []
        self._elapsed = 0.0
        self._started: float | None = None
        self._profile = None          # the TF2 capture while the block runs
        self._tf2_trace: Trace | None = None
        self._session_mode = False
        self._decoded: tuple[bytes, _Nodes] | None = None

    # --- collecting -----------------------------------------------------------------------
    def __enter__(self) -> "Timeline":
        import tensorflow as tf  # the with-block is the one part of tfvis that needs TF

        v1 = tf.compat.v1
        self._started = time.time()
        self.run_metadata = v1.RunMetadata()
        self.options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
        self._tf2_trace, self._session_mode, self._profile = None, False, None
        if tf.executing_eagerly():
            from ..capture.profiler import ProfileTrace
            profile = ProfileTrace()
            try:
                profile.__enter__()
            except CaptureError as error:
                # A session run in the block may still be traced; TF2 code will not be.
                self._note(f"TF2 code in this block was not traced: {error}")
            else:
                self._profile = profile
        return self

    @_deferred_in
    def __exit__(self, exc_type, exc, tb) -> None:
        self._elapsed = time.time() - self._started
        profile, self._profile = self._profile, None
        if profile is not None:
            profile.__exit__(exc_type, exc, tb)  # stops the profiler; keeps data only on success
            if exc_type is None:
                trace = profile.trace
                if len(trace):
                    self._tf2_trace = trace
                    self.run_metadata.ParseFromString(trace.to_run_metadata().SerializeToString())
        return None  # an exception raised in the block propagates unchanged

    @property
    def kwargs(self) -> dict:
        """``dict(run_metadata=..., options=...)`` for ``session.run``. A session is about
        to be traced: a TF2 capture of this block is stopped and discarded first."""
        if self.run_metadata is None:
            raise CaptureError("no RunMetadata to fill: use the Timeline as a context manager "
                               "first (with Timeline() as tl: session.run(..., **tl.kwargs))")
        if not self._session_mode:
            self._switch_to_session()
        return dict(run_metadata=self.run_metadata, options=self.options)

    def _switch_to_session(self) -> None:
        from ..capture.session import tf2_profiler_active
        self._session_mode = True
        profile, self._profile = self._profile, None
        if profile is not None:
            profile.discard()  # ends the block's capture and gives the profiler back
        if self._tf2_trace is not None:  # kwargs after the block: the session's data wins
            self._tf2_trace = None
            self.run_metadata.Clear()
        if self.options is not None and tf2_profiler_active():
            # Someone else's TF2 profiler: FULL_TRACE would fail after running the step.
            # SOFTWARE_TRACE records the same fields on a local session and never conflicts.
            self.options.trace_level = type(self.options).SOFTWARE_TRACE
            self._note("a TF2 profiler was running, so kwargs asks for SOFTWARE_TRACE")

    def _note(self, text: str) -> None:
        self.notes.append(text)
        warnings.warn(f"tracebridge.compat.tfvis: {text}", RuntimeWarning, stacklevel=3)

    @property
    def wall_clock_elapsed(self) -> float:
        """Seconds spent inside the ``with`` block."""
        return self._elapsed

    @property
    def trace(self) -> Trace:
        """What was collected, as a tracebridge trace: the TF2 capture of the block, else
        the RunMetadata (built anew on each access, as a session may refill it)."""
        if self._tf2_trace is not None:
            return self._tf2_trace
        if self.run_metadata is None:
            raise CaptureError("nothing has been collected yet")
        return _read(self.run_metadata)

    # --- viewing and saving ---------------------------------------------------------------
    def visualize(self, output_file: str | os.PathLike | None = None,
                  device_pattern: str | None = None) -> str | None:
        """tracebridge's HTML timeline of the collected run: written to ``output_file``, or
        returned as text when it is None. ``device_pattern``: a regular expression of the
        devices to show (searched in their names)."""
        from ..writers.html import html_document, write_html
        if output_file is None:
            return html_document(self.trace, device_pattern=device_pattern)
        write_html(self.trace, output_file, device_pattern=device_pattern)
        return None

    def to_pickle(self, pickle_file_name: str | os.PathLike) -> None:
        """Write ``run_metadata`` as tfvis did (``pickle.dump(run_metadata)``), atomically.

        The file is always the pickle of TF's ``RunMetadata`` class, whichever message is
        held here: TF's, or tracebridge's own after :meth:`from_pickle` or without TF. So
        real tfvis (with TensorFlow installed) and :meth:`from_pickle` both load it, and
        writing it needs no TensorFlow."""
        if self.run_metadata is None:
            raise CaptureError("no data has been collected yet")
        write_bytes(pickle_file_name, _run_metadata_pickle(self.run_metadata.SerializeToString()))

    @classmethod
    def from_pickle(cls, pickle_file_name: str | os.PathLike, **kwargs) -> "Timeline":
        """A Timeline over the RunMetadata in a tfvis pickle, loaded without executing
        anything: any other object in the pickle raises UnsafePickleError."""
        from .. import protos
        from ..readers.pickles import read_pickle
        name = os.fspath(pickle_file_name)
        try:
            with open(name, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise TraceFormatError(f"cannot read ({error.strerror or error})", path=name) from None
        messages = read_pickle(data, name)
        if len(messages) != 1:
            raise TraceFormatError(f"a tfvis pickle holds one RunMetadata, this one {len(messages)}", path=name)
        kind, serialized = messages[0]
        run_metadata = protos.RunMetadata()
        try:
            if kind == "StepStats":
                run_metadata.step_stats.ParseFromString(serialized)
            else:
                run_metadata.ParseFromString(serialized)
        except Exception:  # protobuf's DecodeError: the pickle's payload is not the message
            raise TraceFormatError(f"the pickled {kind} does not parse", path=name) from None
        return cls(run_metadata=run_metadata, **kwargs)

    # --- metrics (microseconds) -----------------------------------------------------------
    def iteration_time(self, device_search_pattern: str | None = None) -> int:
        """From the first op's start to the last op's end."""
        nodes = self._nodes()
        return _span(nodes, nodes.on_devices(device_search_pattern))

    def communication_elapsed_time(self, device_search_pattern: str | None = None,
                                   exclude_pattern: str | None = None) -> int:
        """The same span over communication ops, less those whose label holds ``exclude_pattern``."""
        nodes = self._nodes()
        return _span(nodes, self._communication(nodes, device_search_pattern, exclude_pattern))

    def communication_time(self, device_search_pattern: str | None = None,
                           exclude_pattern: str | None = None) -> int:
        """Time covered by at least one communication op."""
        nodes = self._nodes()
        return _covered(nodes, self._communication(nodes, device_search_pattern, exclude_pattern))

    def computation_time(self, device_search_pattern: str | None = None,
                         exclude_pattern: str | None = None) -> int:
        """Time covered by at least one op, communication ops included (tfvis's definition)."""
        nodes = self._nodes()
        return _covered(nodes, nodes.on_devices(device_search_pattern) & ~nodes.labelled(exclude_pattern))

    def _communication(self, nodes: "_Nodes", device_search_pattern, exclude_pattern) -> np.ndarray:
        kind = nodes.labelled(HOROVOD_MARK) if self.horovod else nodes.named(self.comm_op_name)
        return nodes.on_devices(device_search_pattern) & kind & ~nodes.labelled(exclude_pattern)

    def _nodes(self) -> "_Nodes":
        if self.run_metadata is None:
            raise CaptureError("no data has been collected yet")
        data = self.run_metadata.SerializeToString()
        if self._decoded is None or self._decoded[0] != data:
            self._decoded = (data, _Nodes(_read(self.run_metadata)))
        return self._decoded[1]


def _read(run_metadata) -> Trace:
    """The trace of a RunMetadata: each node an op, in the message's order."""
    if not run_metadata.step_stats.dev_stats:
        from ..model.builder import TraceBuilder
        return TraceBuilder({"source_format": "tfvis", "notes": "no step stats collected"}).build()
    from ..readers.stepstats import read_run_metadatas
    return read_run_metadatas([(0, "", run_metadata.SerializeToString())], {"source_format": "tfvis"})


class _Nodes:
    """The nodes of a RunMetadata as tfvis measures them, from the columns of its trace:
    in the message's order (devices in order, each device's nodes in order), start and
    duration in the whole microseconds of TF's micros fields."""

    def __init__(self, trace: Trace):
        start_ns, end_ns = trace.ops["start_ns"], trace.ops["end_ns"]
        self.start = start_ns // 1000
        self.duration = end_ns // 1000 - self.start
        self._trace = trace
        self._texts: tuple[list[str], list[str]] | None = None  # node names, labels

    def on_devices(self, pattern: str | None) -> np.ndarray:
        wanted = np.array([(pattern or "") in device.name for device in self._trace.devices], dtype=bool)
        return wanted[self._trace.ops["device"]] if len(self._trace) else np.zeros(0, dtype=bool)

    def named(self, name: str) -> np.ndarray:
        names = self._node_texts()[0]
        return np.fromiter((n == name for n in names), dtype=bool, count=len(names))

    def labelled(self, pattern: str | None) -> np.ndarray:
        """Nodes whose timeline_label contains ``pattern``; none for None (tfvis's test is
        ``pattern is not None and pattern in label``, so ``""`` matches every node)."""
        if pattern is None:
            return np.zeros(len(self._trace), dtype=bool)
        labels = self._node_texts()[1]
        return np.fromiter((pattern in label for label in labels), dtype=bool, count=len(labels))

    def _node_texts(self) -> tuple[list[str], list[str]]:
        """Node names and labels as the message holds them (made when first needed)."""
        if self._texts is None:
            from ..writers.stepstats import node_texts
            self._texts = node_texts(self._trace)
        return self._texts


def _span(nodes: _Nodes, selected: np.ndarray) -> int:
    """tfvis's elapsed time: max(0, latest end) - earliest start; 0 without ops. (Its
    running maximum starts at 0, hence the max with 0.)"""
    if not selected.any():
        return 0
    start, duration = nodes.start[selected], nodes.duration[selected]
    return max(0, int((start + duration).max())) - int(start.min())


def _covered(nodes: _Nodes, selected: np.ndarray) -> int:
    """tfvis's sweep over ops sorted by start (stable): an op that starts after every
    earlier op ended adds its duration, one that ends later than all of them adds the part
    past that end. Vectorized with a running maximum of the ends; the same integers,
    negative durations of hand-made data included."""
    start, duration = nodes.start[selected], nodes.duration[selected]
    if not len(start):
        return 0
    order = np.argsort(start, kind="stable")
    start, duration = start[order], duration[order]
    end = start + duration
    latest = np.maximum.accumulate(end)
    before = np.empty_like(latest)
    before[1:] = latest[:-1]
    added = np.where(start > before, duration, np.where(end > before, end - before, 0))
    added[0] = duration[0]  # the first op is after "-infinity"
    return int(added.sum())


def _run_metadata_pickle(serialized: bytes) -> bytes:
    """The pickle ``pickle.dump(tf.compat.v1.RunMetadata)`` writes (protocol 4), from the
    message's bytes alone: the class by name, called with no arguments, then its state
    ``{"serialized": bytes}``. Loading it calls exactly that class, which is what both
    tfvis and tracebridge's restricted unpickler expect."""
    def text(value: str) -> bytes:  # SHORT_BINUNICODE
        data = value.encode("utf-8")
        return b"\x8c" + bytes([len(data)]) + data

    size = len(serialized)
    if size < 256:
        payload = b"C" + bytes([size]) + serialized             # SHORT_BINBYTES
    elif size < 1 << 32:
        payload = b"B" + struct.pack("<I", size) + serialized   # BINBYTES
    else:
        payload = b"\x8e" + struct.pack("<Q", size) + serialized  # BINBYTES8
    return (b"\x80\x04" + text(_TF_MODULE) + text(_TF_CLASS) + b"\x93"  # PROTO 4, STACK_GLOBAL
            + b")R"                                                      # EMPTY_TUPLE, REDUCE
            + b"}" + text("serialized") + payload + b"s"                 # EMPTY_DICT, SETITEM
            + b"b.")                                                     # BUILD, STOP
