"""Malformed inputs for every reader, made from valid seeds (``tests/test_malformed.py``,
``tests/fuzz.py``).

Seeds are small real files from the shared corpus (Chrome traces, a slice of a real
XSpace, the profiler's marker event file) and small traces written by tracebridge's own
writers, so every format has at least one: RunMetadata and bare StepStats (``.pb``),
their text dumps (``.pbtxt``), XSpace, Chrome JSON and ``.json.gz``, event files, tfvis
pickles and, for the codemod, Jupyter notebooks.

Each mutation kind is a function ``kind(ctx, rng, i) -> (detail, data)``: ``ctx`` holds a
seed and its parsed structure, ``rng`` a seeded :class:`random.Random`, ``i`` the variant
number (kinds that cover a closed set of options, such as wire types or JSON value types,
walk through it with ``i``). Everything is deterministic: the random generator of a case
is seeded from its seed name, kind and variant, so adding a kind does not change others.

Case names read ``format/seed/kind/detail`` (the detail says where: a byte offset, a
protobuf field path such as ``1.0.2`` = field index path, a JSON path), so a failure
names what to look at; ``Case.write(folder)`` gives the file to reproduce it.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import random
import re
import signal
import struct
import tempfile
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

FORMATS = ("runmetadata", "stepstats", "pbtxt", "xspace", "chrome", "chrome_gz", "events", "pickle",
           "notebook")
MB = 1 << 20
MAX_CASE_SIZE = 16 * MB  # the fuzzer's stacked mutations stay below this


@dataclass(frozen=True)
class Seed:
    format: str
    name: str
    filename: str  # the suffix decides how tracebridge.load sniffs the file
    data: bytes


@dataclass
class Case:
    name: str
    format: str
    kind: str
    filename: str
    data: bytes

    def folder(self, root: Path) -> Path:
        """The case's own folder under ``root`` (file names repeat across cases)."""
        return Path(root) / "".join(c if c.isalnum() or c in "-._" else "_" for c in self.name)[:120]

    def write(self, root: Path) -> Path:
        """The case as a file, in :meth:`folder`."""
        target = self.folder(root)
        target.mkdir(parents=True, exist_ok=True)
        path = target / self.filename
        path.write_bytes(self.data)
        return path


# ============================================================================= seeds
def small_trace(steps: int = 2):
    """A small trace made with the builder: a few ops on a CPU and a GPU device, inputs,
    overlapping ops, a transfer and allocator counters."""
    from tracebridge.model.builder import TraceBuilder

    builder = TraceBuilder({"source_format": "generated", "host": "seedhost"})
    base = 1_700_000_000_000_000_000
    cpu = builder.device("/job:localhost/replica:0/task:0/device:CPU:0")
    gpu = builder.device("/job:localhost/replica:0/task:0/device:GPU:0")
    for number in range(steps):
        step = builder.step(number)
        t = base + number * 10_000_000
        builder.add_op(name="_SOURCE", op_type="NoOp", start_ns=t, end_ns=t + 1000, device=cpu, step=step,
                       flags=1 | 8)
        builder.add_op(name="x", op_type="Placeholder", start_ns=t + 2000, end_ns=t + 5000, device=cpu,
                       step=step, flags=1 | 8)
        builder.add_op(name="dense/MatMul", op_type="MatMul", start_ns=t + 6000, end_ns=t + 90_000,
                       device=gpu, inputs=("x", "w"), step=step, flags=1 | 8)
        builder.add_op(name="dense/BiasAdd", op_type="BiasAdd", start_ns=t + 50_000, end_ns=t + 120_000,
                       device=gpu, inputs=("dense/MatMul", "b"), step=step, flags=1 | 8)
        recv = builder.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=t + 3000, end_ns=t + 9000,
                              device=cpu, step=step, flags=8)
        builder.add_row("transfers", op=recv, bytes=4096, rate_bps=1.5e6, src="/job:ps/task:0",
                        dst="/job:worker/task:0", tensor="w")
        builder.add_row("counters", allocator="cpu", time_ns=t + 2500, bytes_in_use=1024 * (number + 1))
    return builder.build()


def rich_run_metadata() -> bytes:
    """A RunMetadata that fills every field the StepStats reader looks at: both time
    units, thread names, canonical and other labels, RecvTensor, GPU tracer streams,
    outputs with shapes and allocations, memory with allocation records, memory stats,
    partition graphs and a few fields it ignores."""
    from tracebridge import protos

    md = protos.RunMetadata()
    cpu = md.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    cpu.thread_names[7] = "executor thread"
    start_us = 1_700_000_000_000_000
    cpu.node_stats.add(node_name="_SOURCE", all_start_micros=start_us, op_end_rel_micros=1,
                       all_end_rel_micros=2, timeline_label="_SOURCE = NoOp()", thread_id=7)
    node = cpu.node_stats.add(node_name="dense/MatMul", all_start_micros=start_us + 10, op_start_rel_micros=1,
                              op_end_rel_micros=40, all_end_rel_micros=41, scheduled_micros=start_us + 5,
                              timeline_label="dense/MatMul = MatMul(x, dense/kernel/read)", thread_id=7,
                              all_start_nanos=(start_us + 10) * 1000 + 123, op_start_rel_nanos=1500,
                              op_end_rel_nanos=40_200, all_end_rel_nanos=41_000,
                              scheduled_nanos=(start_us + 5) * 1000)
    out = node.output.add(slot=0)
    out.tensor_description.dtype = 1
    out.tensor_description.shape.dim.add(size=64)
    out.tensor_description.shape.dim.add(size=-1)
    alloc = out.tensor_description.allocation_description
    alloc.requested_bytes, alloc.allocated_bytes, alloc.allocator_name = 16384, 16384, "cpu"
    alloc.allocation_id, alloc.has_single_reference, alloc.ptr = 3, True, 0x7F00_0000_1000
    unknown = node.output.add(slot=1)
    unknown.tensor_description.dtype = 101
    unknown.tensor_description.shape.unknown_rank = True
    memory = node.memory.add(allocator_name="cpu", total_bytes=16384, peak_bytes=32768, live_bytes=0,
                             allocator_bytes_in_use=65536)
    memory.allocation_records.add(alloc_micros=start_us + 11, alloc_bytes=16384)
    memory.allocation_records.add(alloc_micros=start_us + 50, alloc_bytes=-16384)
    node.memory_stats.temp_memory_size = 128
    node.memory_stats.persistent_memory_size = 64
    node.memory_stats.persistent_tensor_alloc_ids.append(3)
    node.referenced_tensor.add(requested_bytes=8, allocator_name="cpu")
    cpu.node_stats.add(node_name="RecvTensor", all_start_micros=start_us + 3, all_end_rel_micros=20,
                       timeline_label="[4096B] [1.5Mb/s] edge_12_dense/kernel/read from "
                                      "/job:ps/replica:0/task:0/device:CPU:0 to "
                                      "/job:localhost/replica:0/task:0/device:CPU:0")
    cpu.node_stats.add(node_name="odd", all_start_micros=start_us + 60, all_end_rel_micros=3,
                       timeline_label="a label of another form")
    stream = md.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:GPU:0/stream:12")
    stream.node_stats.add(node_name="conv:Conv2D", all_start_micros=start_us + 15, all_end_rel_micros=30,
                          timeline_label="Conv2D @@conv2d/Conv2D#id=3#")
    copy = md.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:GPU:0/memcpy")
    copy.node_stats.add(node_name="MEMCPYHtoD", all_start_micros=start_us + 12, all_end_rel_micros=2,
                        timeline_label="MEMCPYHtoD 16384 bytes")
    graph = md.partition_graphs.add()
    graph.node.add(name="dense/MatMul", op="MatMul", input=["x", "dense/kernel/read"],
                   device="/job:localhost/replica:0/task:0/device:CPU:0")
    graph.node.add(name="_SOURCE", op="NoOp")
    md.cost_graph = b"\x0a\x04cost"
    md.session_metadata.name = "seed"
    md.session_metadata.version = 2
    return md.SerializeToString()


def _notebook(cells: list[tuple[str, str | list[str]]]) -> bytes:
    return json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": source,
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                  for kind, source in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }, indent=1).encode("utf-8")


_TF1_CELL = ("import tensorflow as tf\n"
             "from tensorflow.python.client import timeline\n"
             "options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)\n"
             "run_metadata = tf.RunMetadata()\n"
             "sess.run(train_op, options=options, run_metadata=run_metadata)\n"
             "tl = timeline.Timeline(run_metadata.step_stats)\n"
             "open('timeline.json', 'w').write(tl.generate_chrome_trace_format())\n")


def _slice_xspace(data: bytes, lines: int = 5, events: int = 6) -> bytes:
    """A small real XSpace: each plane keeps its first ``lines`` lines, each line a few
    events (its first ones, then ones carrying stats not seen yet on the plane), and the
    metadata those events refer to."""
    from tracebridge import protos

    space = protos.XSpace.FromString(data)
    for plane in space.planes:
        del plane.lines[lines:]
        seen_stats: set[int] = set()
        for line in plane.lines:
            keep = []
            for index, event in enumerate(line.events):
                ids = {stat.metadata_id for stat in event.stats}
                if index < 3 or (ids - seen_stats and len(keep) < events):
                    keep.append(index)
                    seen_stats |= ids
            kept = [line.events[i] for i in keep]
            copies = [type(e)() for e in kept]
            for copy, event in zip(copies, kept):
                copy.CopyFrom(event)
            del line.events[:]
            line.events.extend(copies)
        used = {e.metadata_id for line in plane.lines for e in line.events}
        for key in [k for k in plane.event_metadata if k not in used]:
            del plane.event_metadata[key]
        stat_ids = {s.metadata_id for s in plane.stats}
        for line in plane.lines:
            for event in line.events:
                stat_ids |= {s.metadata_id for s in event.stats}
                stat_ids |= {s.ref_value for s in event.stats if s.WhichOneof("value") == "ref_value"}
        for meta in plane.event_metadata.values():
            stat_ids |= {s.metadata_id for s in meta.stats}
        for key in [k for k in plane.stat_metadata if k not in stat_ids]:
            del plane.stat_metadata[key]
    return space.SerializeToString()


def _pickle_opcodes(serialized: bytes, *, protocol: int = 4, module: str = "tensorflow.core.protobuf.config_pb2",
                    name: str = "RunMetadata") -> bytes:
    """``pickle.dump(run_metadata, protocol=...)`` as TF's message would write it, by hand:
    the class by name, called without arguments, then ``{"serialized": bytes}``."""
    if protocol >= 4:
        def text(value: str) -> bytes:
            data = value.encode("utf-8")
            return b"\x8c" + bytes([len(data)]) + data
        head = b"\x80" + bytes([protocol]) + text(module) + text(name) + b"\x93"
        payload = (b"C" + bytes([len(serialized)]) + serialized if len(serialized) < 256
                   else b"B" + struct.pack("<I", len(serialized)) + serialized)
        return head + b")R}" + text("serialized") + payload + b"sb."
    # protocol 2: GLOBAL, NEWOBJ, and bytes as _codecs.encode(text, "latin1")
    latin = serialized.decode("latin1")
    encoded = latin.encode("utf-8")
    return (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\nq\x00)\x81q\x01}q\x02X\n\x00\x00\x00"
            b"serializedq\x03c_codecs\nencode\nq\x04X" + struct.pack("<I", len(encoded)) + encoded
            + b"X\x06\x00\x00\x00latin1q\x05\x86q\x06Rq\x07sb.")


@functools.lru_cache(maxsize=4)
def seeds(corpus: Path | None = None) -> tuple[Seed, ...]:
    """Every seed: generated ones always, corpus ones when ``corpus`` exists."""
    import tracebridge
    from tracebridge.compat.tfvis import Timeline
    from tracebridge import protos
    from tracebridge.writers.tensorboard import write_events, write_tensorboard_xplane

    out: list[Seed] = []
    rich = rich_run_metadata()
    out.append(Seed("runmetadata", "rich", "rich.pb", rich))
    out.append(Seed("stepstats", "rich", "rich_step_stats.pb",
                    protos.RunMetadata.FromString(rich).step_stats.SerializeToString()))
    small = small_trace()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        rich_path = root / "rich.pb"
        rich_path.write_bytes(rich)
        rich_trace = tracebridge.load(rich_path)
        # Both steps in one RunMetadata, as files written before save refused that.
        (root / "small.pb").write_bytes(small.to_run_metadata().SerializeToString(deterministic=True))
        out.append(Seed("runmetadata", "saved", "small.pb", (root / "small.pb").read_bytes()))
        rich_trace.save(root / "rich.pbtxt")
        out.append(Seed("pbtxt", "rich", "rich.pbtxt", (root / "rich.pbtxt").read_bytes()))
        out.append(Seed("pbtxt", "step_stats", "step_stats.pbtxt",
                        str(protos.RunMetadata.FromString(rich).step_stats).encode()))
        xspace = write_tensorboard_xplane(small, root / "logdir", run="run", host="seedhost")
        out.append(Seed("xspace", "written", "written.xplane.pb", Path(xspace).read_bytes()))
        for name, trace in (("rich", rich_trace), ("small", small)):
            trace.save(root / f"{name}.json", memory=True)
            out.append(Seed("chrome", f"written_{name}", f"{name}.json", (root / f"{name}.json").read_bytes()))
        small.save(root / "small.json.gz", memory=True)
        out.append(Seed("chrome_gz", "written_small", "small.json.gz", (root / "small.json.gz").read_bytes()))
        write_events(rich_trace, root / "events.out.tfevents.1.rich")
        out.append(Seed("events", "written_rich", "events.out.tfevents.1.rich",
                        (root / "events.out.tfevents.1.rich").read_bytes()))
        Timeline(run_metadata=protos.RunMetadata.FromString(rich)).to_pickle(root / "rich.pickle")
        out.append(Seed("pickle", "to_pickle", "rich.pickle", (root / "rich.pickle").read_bytes()))
    small_md = small.to_run_metadata().SerializeToString()
    out.append(Seed("pickle", "protocol2", "small.pkl", _pickle_opcodes(small_md, protocol=2)))
    out.append(Seed("notebook", "tf1", "profile.ipynb", _notebook([
        ("markdown", "# Profiling\nA TF1 notebook."),
        ("code", _TF1_CELL.splitlines(keepends=True)),
        ("code", "%matplotlib inline\n!nvidia-smi\nprint(run_metadata)"),
        ("code", ["x = [i for i in range(3)]\n", "x"]),
    ])))
    out.append(Seed("notebook", "plain", "plain.ipynb", _notebook([("code", "print('hello')\n")])))

    if corpus is not None and Path(corpus).is_dir():
        corpus = Path(corpus)
        for name in ("ikhlestov_cpu_timeline_01.json", "ikhlestov_gpu_timeline_01.json",
                     "blackbox_attacks_timeline_01.json"):
            path = corpus / "chrome" / name
            if path.exists():
                out.append(Seed("chrome", name.removesuffix(".json"), name, path.read_bytes()))
        path = corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
        if path.exists():
            out.append(Seed("chrome_gz", "ikhlestov_cpu_timeline_01", "timeline.json.gz",
                            gzip.compress(path.read_bytes(), mtime=0)))
            converted = tracebridge.load(path).to_run_metadata().SerializeToString()
            out.append(Seed("runmetadata", "from_chrome_corpus", "converted.pb", converted))
        for name in ("tfprofiler_gpu_multi_worker", "xprof_tpu_inference_2"):
            path = corpus / "xspace" / f"{name}.xplane.pb"
            if path.exists():
                out.append(Seed("xspace", f"{name}_slice", f"{name}.xplane.pb", _slice_xspace(path.read_bytes())))
        path = corpus / "events" / "events.out.tfevents.1583461681.localhost.profile-empty"
        if path.exists():
            out.append(Seed("events", "profile_empty", path.name, path.read_bytes()))
    return tuple(out)


# ============================================================================= protobuf trees
VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5


@dataclass
class PField:
    """One field of a protobuf message. A length-delimited payload that parses as a
    message is kept as ``children``; ``claim`` overrides the length written."""

    number: int
    wire: int
    value: int = 0
    payload: bytes = b""
    children: list | None = None
    claim: int | None = None
    raw: bytes | None = None  # written instead of the value or payload (non-canonical varints)
    start: int = 0            # where the field started in the seed, and where its payload did
    payload_start: int = 0


def varint(value: int) -> bytes:
    value &= (1 << 70) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(10):
        if pos + i >= end:
            raise ValueError("varint past end")
        byte = data[pos + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + i + 1
        shift += 7
    raise ValueError("varint too long")


def _is_text(payload: bytes) -> bool:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return text.isprintable()


def parse_proto(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[PField]:
    """The fields of a message; raises ValueError when ``data`` is not one."""
    end = len(data) if end is None else end
    fields, pos = [], start
    while pos < end:
        field_start = pos
        tag, pos = _read_varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("field 0")
        if wire == VARINT:
            value, pos = _read_varint(data, pos, end)
            fields.append(PField(number, wire, value, start=field_start, payload_start=field_start))
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if pos + width > end:
                raise ValueError("fixed past end")
            value = int.from_bytes(data[pos:pos + width], "little")
            fields.append(PField(number, wire, value, start=field_start, payload_start=pos))
            pos += width
        elif wire == LENGTH:
            length, pos = _read_varint(data, pos, end)
            if pos + length > end:
                raise ValueError("length past end")
            payload = data[pos:pos + length]
            children = None
            if length and depth < 12 and not _is_text(payload):
                try:
                    children = parse_proto(data, pos, pos + length, depth + 1)
                except ValueError:
                    children = None
            fields.append(PField(number, wire, payload=payload, children=children, start=field_start,
                                 payload_start=pos))
            pos += length
        else:
            raise ValueError(f"wire type {wire}")
    return fields


def encode_proto(fields: list[PField], subst: dict | None = None, prefix: tuple = ()) -> bytes:
    """Serialize ``fields``; ``subst`` maps a field path (indices) to the fields written
    in its place (none: deleted; several: duplicated or inserted)."""
    subst = subst or {}
    out = bytearray()
    for index, f in enumerate(fields):
        path = prefix + (index,)
        for g in subst.get(path, (f,)):
            out += _encode_field(g, subst if g is f else {}, path)
    return bytes(out)


def _encode_field(f: PField, subst: dict, path: tuple) -> bytes:
    tag = varint(f.number << 3 | (f.wire & 7))
    if f.wire == VARINT:
        return tag + (f.raw if f.raw is not None else varint(f.value))
    if f.wire == FIXED64:
        return tag + (f.raw if f.raw is not None else struct.pack("<Q", f.value & (2**64 - 1)))
    if f.wire == FIXED32:
        return tag + (f.raw if f.raw is not None else struct.pack("<I", f.value & (2**32 - 1)))
    if f.wire == LENGTH:
        body = encode_proto(f.children, subst, path) if f.children is not None else f.payload
        length = f.raw if f.raw is not None else varint(len(body) if f.claim is None else f.claim)
        return tag + length + body
    if f.wire == START_GROUP:
        body = encode_proto(f.children or [], subst, path) if f.children is not None else f.payload
        return tag + body + varint(f.number << 3 | END_GROUP)
    return tag + f.payload  # wire types 4, 6, 7: whatever follows


def walk(fields: list[PField], prefix: tuple = ()) -> Iterator[tuple[tuple, PField]]:
    for index, f in enumerate(fields):
        path = prefix + (index,)
        yield path, f
        if f.children is not None:
            yield from walk(f.children, path)


def _dotted(path: tuple) -> str:
    return ".".join(map(str, path)) or "top"


# ============================================================================= contexts
class Context:
    """A seed with its structure parsed once (protobuf fields, JSON document, ...)."""

    def __init__(self, seed: Seed):
        self.seed = seed
        self.data = seed.data
        self._cache: dict = {}

    def cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # protobuf formats: the message itself; events and pickles: the RunMetadata inside
    @property
    def proto(self) -> list[PField]:
        return self.cached("proto", lambda: parse_proto(self.message_bytes))

    @property
    def proto_nodes(self) -> list[tuple[tuple, PField]]:
        return self.cached("nodes", lambda: list(walk(self.proto)))

    @property
    def message_bytes(self) -> bytes:
        return self.cached("message", self._message_bytes)

    def _message_bytes(self) -> bytes:
        fmt = self.seed.format
        if fmt in ("runmetadata", "stepstats", "xspace"):
            return self.data
        if fmt == "events":
            for _, record in _records(self.data):
                event = parse_proto(record)
                for f in event:
                    if f.number == 8 and f.children is not None:
                        for g in f.children:
                            if g.number == 2:
                                return g.payload
            return b""
        if fmt == "pickle":
            from tracebridge.readers.pickles import read_pickle
            return read_pickle(self.data)[0][1]
        raise ValueError(fmt)

    def wrap(self, message: bytes) -> bytes:
        """A RunMetadata (or XSpace) put back where the seed had it."""
        fmt = self.seed.format
        if fmt == "events":
            return _events_with_run_metadata(self.data, message)
        if fmt == "pickle":
            return _pickle_opcodes(message)
        return message

    @property
    def json(self):
        return self.cached("json", lambda: json.loads(self.json_text))

    @property
    def json_text(self) -> bytes:
        return self.cached("json_text", lambda: gzip.decompress(self.data) if self.data[:2] == b"\x1f\x8b"
                           else self.data)


def _records(data: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        if pos + 16 + length > len(data):
            break
        out.append((pos, data[pos + 12:pos + 12 + length]))
        pos += 16 + length
    return out


def _frame(record: bytes) -> bytes:
    from tracebridge.tfrecord import frame
    return frame(record)


def _events_with_run_metadata(data: bytes, run_metadata: bytes) -> bytes:
    """The event file ``data`` with the RunMetadata of its first tagged record replaced
    (framing and checksums recomputed)."""
    out, done = bytearray(), False
    for _, record in _records(data):
        event = parse_proto(record)
        if not done and any(f.number == 8 for f in event):
            for f in event:
                if f.number == 8 and f.children is not None:
                    f.children = [replace(g, payload=run_metadata, children=None) if g.number == 2 else g
                                  for g in f.children]
            record = encode_proto(event)
            done = True
        out += _frame(record)
    return bytes(out)


# ============================================================================= byte-level kinds
def _offsets(ctx: Context) -> list[int]:
    """Interesting cut points: every field start, payload start and middle (inside
    length-delimited fields), then points spread evenly."""
    def make():
        n = len(ctx.data)
        points = {1, 2, n // 2, n - 1}
        if ctx.seed.format in ("runmetadata", "stepstats", "xspace"):
            try:
                nodes = ctx.proto_nodes
            except ValueError:  # a mutated file, cut again by the fuzzer: no structure to follow
                nodes = []
            for _, f in nodes:
                points |= {f.start, f.start + 1, f.payload_start, f.payload_start + len(f.payload) // 2}
        points |= {n * k // 64 for k in range(1, 64)}
        return sorted(p for p in points if 0 < p < n)
    return ctx.cached("offsets", make)


def truncate(ctx: Context, rng: random.Random, i: int):
    offsets = _offsets(ctx)
    cut = offsets[i % len(offsets)] if i < len(offsets) else rng.randrange(1, len(ctx.data))
    return f"{cut}", ctx.data[:cut]


def flip_byte(ctx: Context, rng: random.Random, i: int):
    data = bytearray(ctx.data)
    at = rng.randrange(len(data))
    value = rng.choice([0x00, 0xFF, 0x80, 0x7F, data[at] ^ 0xFF, rng.randrange(256)])
    data[at] = value
    return f"{at}={value:#04x}", bytes(data)


def flip_bits(ctx: Context, rng: random.Random, i: int):
    data = bytearray(ctx.data)
    spots = []
    for _ in range(1 + i % 4):
        at, bit = rng.randrange(len(data)), rng.randrange(8)
        data[at] ^= 1 << bit
        spots.append(f"{at}.{bit}")
    return "+".join(spots), bytes(data)


def splice(ctx: Context, rng: random.Random, i: int):
    """A chunk of the file copied over another place, or inserted, or removed."""
    data = ctx.data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randrange(1, 64))
    at = rng.randrange(len(data))
    mode = ("insert", "overwrite", "remove")[i % 3]
    if mode == "insert":
        out = data[:at] + data[a:b] + data[at:]
    elif mode == "overwrite":
        out = data[:at] + data[a:b] + data[at + (b - a):]
    else:
        out = data[:a] + data[b:]
    return f"{mode}:{a}-{b}@{at}", out or b"\x00"


BYTE_KINDS = {"truncate": truncate, "flip_byte": flip_byte, "flip_bits": flip_bits, "splice": splice}


# ============================================================================= protobuf kinds
_UNKNOWN_NUMBERS = (999, 15, 16, 2047, 19_000, (1 << 29) - 1)
_HUGE_CLAIMS = (1 << 31, (1 << 32) + 7, 1 << 62, (1 << 64) - 1, 1 << 40)
_EXTREME_VALUES = (1 << 63, (1 << 64) - 1, (1 << 63) - 1, 1 << 62, 1 << 32, 0, 1, (1 << 64) - 1000)


class NotApplicable(Exception):
    """The kind has nothing to work on in this seed (no length fields, no events, ...)."""


def _pick(ctx: Context, rng: random.Random, wire: int | None = None, *, message: bool = False):
    nodes = ctx.proto_nodes
    if wire is not None:
        nodes = [(p, f) for p, f in nodes if f.wire == wire]
    if message:
        nodes = [(p, f) for p, f in nodes if f.children is not None]
    if not nodes:
        raise NotApplicable
    return rng.choice(nodes)


def _rebuild(ctx: Context, subst: dict) -> bytes:
    return ctx.wrap(encode_proto(ctx.proto, subst))


def wire_type(ctx: Context, rng: random.Random, i: int):
    """A field re-encoded with another wire type, the framing kept valid."""
    path, f = _pick(ctx, rng)
    targets = [w for w in (VARINT, FIXED64, LENGTH, FIXED32, START_GROUP) if w != f.wire]
    target = targets[i % len(targets)]
    value = f.value if f.wire != LENGTH else len(f.payload)
    body = f.payload if f.wire == LENGTH else varint(f.value)
    if target == LENGTH:
        new = PField(f.number, LENGTH, payload=body)
    elif target == START_GROUP:
        new = PField(f.number, START_GROUP, children=f.children if f.children is not None else [])
    else:
        new = PField(f.number, target, value=value)
    return f"{_dotted(path)}:{f.wire}->{target}", _rebuild(ctx, {path: [new]})


def huge_length(ctx: Context, rng: random.Random, i: int):
    """A length field claiming gigabytes (the fields around it still consistent)."""
    path, f = _pick(ctx, rng, LENGTH)
    claim = _HUGE_CLAIMS[i % len(_HUGE_CLAIMS)]
    return f"{_dotted(path)}:{claim}", _rebuild(ctx, {path: [replace(f, claim=claim)]})


def extreme_varint(ctx: Context, rng: random.Random, i: int):
    """A varint (time, id, size, count) set to an extreme: negative as int64, 2**64-1, ..."""
    path, f = _pick(ctx, rng, VARINT)
    value = _EXTREME_VALUES[i % len(_EXTREME_VALUES)]
    return f"{_dotted(path)}:{value}", _rebuild(ctx, {path: [replace(f, value=value)]})


def padded_varint(ctx: Context, rng: random.Random, i: int):
    """A varint or length written with redundant continuation bytes: 10 bytes (valid),
    11 (invalid)."""
    path, f = _pick(ctx, rng)
    if f.wire not in (VARINT, LENGTH):
        path, f = _pick(ctx, rng, LENGTH)
    size = 10 if i % 2 == 0 else 11
    value = f.value if f.wire == VARINT else len(encode_proto(f.children) if f.children is not None else f.payload)
    raw = bytearray(varint(value))
    raw[-1] |= 0x80
    raw += b"\x80" * max(0, size - len(raw) - 1) + b"\x00"
    return f"{_dotted(path)}:{size}", _rebuild(ctx, {path: [replace(f, raw=bytes(raw))]})


def unknown_field(ctx: Context, rng: random.Random, i: int):
    """An unknown field number of every wire type inserted into some message."""
    path, f = _pick(ctx, rng)
    wires = (VARINT, FIXED64, LENGTH, FIXED32, START_GROUP, 6, 7, END_GROUP)
    wire = wires[i % len(wires)]
    number = _UNKNOWN_NUMBERS[(i // len(wires)) % len(_UNKNOWN_NUMBERS)]
    new = {VARINT: PField(number, VARINT, value=rng.choice([0, 1, 2**63, 300])),
           FIXED64: PField(number, FIXED64, value=rng.getrandbits(64)),
           LENGTH: PField(number, LENGTH, payload=bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))),
           FIXED32: PField(number, FIXED32, value=rng.getrandbits(32)),
           START_GROUP: PField(number, START_GROUP, children=[PField(1, VARINT, value=5)]),
           }.get(wire, PField(number, wire, payload=b"\x01\x02"))
    return f"{_dotted(path)}:{number}/{wire}", _rebuild(ctx, {path: [new, f]})


def duplicate(ctx: Context, rng: random.Random, i: int):
    """A field written twice or three times (duplicate events, a singular field repeated)."""
    path, f = _pick(ctx, rng)
    times = 2 + i % 2
    return f"{_dotted(path)}x{times}", _rebuild(ctx, {path: [f] * times})


def repeat_many(ctx: Context, rng: random.Random, i: int):
    """A message field repeated thousands of times: many identical, overlapping events."""
    try:
        path, f = _pick(ctx, rng, LENGTH, message=True)
    except NotApplicable:
        path, f = _pick(ctx, rng)
    size = max(1, len(_encode_field(f, {}, path)))
    times = max(2, min((5000, 20_000, 1000)[i % 3], (512 * 1024) // size))
    return f"{_dotted(path)}x{times}", _rebuild(ctx, {path: [f] * times})


def delete(ctx: Context, rng: random.Random, i: int):
    path, f = _pick(ctx, rng)
    return _dotted(path), _rebuild(ctx, {path: []})


def empty_payload(ctx: Context, rng: random.Random, i: int):
    """A string or message emptied: empty names, empty events, empty devices."""
    path, f = _pick(ctx, rng, LENGTH)
    return _dotted(path), _rebuild(ctx, {path: [PField(f.number, LENGTH)]})


def huge_string(ctx: Context, rng: random.Random, i: int):
    """A string or message replaced by 1 MB: text, invalid UTF-8, NULs, a run of
    RecvTensor label heads (``[1B] [1b/s]``), CJK text."""
    text_fields = [(p, f) for p, f in ctx.proto_nodes if f.wire == LENGTH and f.children is None] or \
        [(p, f) for p, f in ctx.proto_nodes if f.wire == LENGTH]
    if not text_fields:
        raise NotApplicable
    path, f = rng.choice(text_fields)
    kinds = {"text": b"a" * MB, "invalid_utf8": b"\xff\xfe" * (MB // 2), "nul": b"\x00" * MB,
             "label": (b"[1B] [1b/s]" * (MB // 11)), "wide": ("\u4e2d" * (MB // 3)).encode()}
    name = list(kinds)[i % len(kinds)]
    return f"{_dotted(path)}:{name}", _rebuild(ctx, {path: [PField(f.number, LENGTH, payload=kinds[name])]})


# Texts that parsers of names take apart: device names with digits int() refuses or
# thousands of digits, "name:Type" forms, RecvTensor labels, Python tracer names, separators.
ODD_TEXTS = ["/job:w/replica:\u00b2/task:1/device:GPU:\u00b9", "/job:w/task:" + "1" * 5000 + "/device:CPU:0",
             "/device:GPU:" + "9" * 30 + "/stream:all", "/gpu:0/stream:", "/host:", "::", ":MatMul", "a:b:c",
             "x = MatMul(" + "a, " * 3000 + ")", "x = Kernel(", " = ()", "[9999999999999999999999B] [1.2.3b/s] e from a to b",
             "[1B] [" + "9" * 400 + "Gb/s] edge_1_x from a to b", "@@#", "@@" + "a" * 1000 + "#", "$file.py:1 f",
             "Iterator::Map", "MemoryAllocation", "RecvTensor", "_SOURCE", "\u2028\x85\x00", "%s%n{}", "../../etc",
             "\ud800", "edge_", "^ctrl"]


def odd_text(ctx: Context, rng: random.Random, i: int):
    """A string field (a name, device, label, stat) replaced by a text its parsers must
    survive: see ``ODD_TEXTS``."""
    text_fields = [(p, f) for p, f in ctx.proto_nodes if f.wire == LENGTH and f.children is None]
    if not text_fields:
        raise NotApplicable
    path, f = rng.choice(text_fields)
    text = ODD_TEXTS[i % len(ODD_TEXTS)]
    return f"{_dotted(path)}:{i % len(ODD_TEXTS)}", _rebuild(
        ctx, {path: [PField(f.number, LENGTH, payload=text.encode("utf-8", "surrogatepass"))]})


def deep_nesting(ctx: Context, rng: random.Random, i: int):
    """A message nested thousands of levels deep, as an unknown field or in a known one."""
    path, f = _pick(ctx, rng)
    depth = (2000, 20_000, 100)[i % 3]
    number = f.number if (i // 3) % 2 else 999
    tag = varint(number << 3 | LENGTH)
    sizes = [0]  # the size of each level's body, innermost first
    for _ in range(depth - 1):
        sizes.append(len(tag) + len(varint(sizes[-1])) + sizes[-1])
    body = b"".join(tag + varint(size) for size in reversed(sizes))
    return f"{_dotted(path)}:{number}x{depth}", ctx.wrap(_encode_with_raw(ctx.proto, {path: [_Raw(0, -1, payload=body), f]}))


class _Raw(PField):
    """Already-encoded bytes standing in for a field."""


def _encode_with_raw(fields, subst, prefix=()) -> bytes:
    out = bytearray()
    for index, f in enumerate(fields):
        path = prefix + (index,)
        for g in subst.get(path, (f,)):
            if isinstance(g, _Raw):
                out += g.payload
            elif g is f and g.wire == LENGTH and g.children is not None:
                body = _encode_with_raw(g.children, subst, path)
                out += varint(g.number << 3 | LENGTH) + varint(len(body)) + body
            else:
                out += _encode_field(g, {}, path)
    return bytes(out)


def random_payload(ctx: Context, rng: random.Random, i: int):
    """A submessage's bytes replaced by random bytes of the same length."""
    path, f = _pick(ctx, rng, LENGTH)
    size = len(encode_proto(f.children)) if f.children is not None else len(f.payload)
    noise = bytes(rng.getrandbits(8) for _ in range(size))
    return _dotted(path), _rebuild(ctx, {path: [PField(f.number, LENGTH, payload=noise)]})


PROTO_KINDS: dict[str, Callable] = {
    "wire_type": wire_type, "huge_length": huge_length, "extreme_varint": extreme_varint,
    "padded_varint": padded_varint, "unknown_field": unknown_field, "duplicate": duplicate,
    "repeat_many": repeat_many, "delete": delete, "empty_payload": empty_payload,
    "huge_string": huge_string, "deep_nesting": deep_nesting, "random_payload": random_payload,
    "odd_text": odd_text,
}


# ============================================================================= text dumps (.pbtxt)
_NUMBER = re.compile(rb"(?<=: )-?[0-9][0-9.eE+-]*")
_STRING = re.compile(rb'(?<=: )"(?:[^"\\\n]|\\.)*"')
_BLOCK_OPEN = re.compile(rb"^( *)(\w+) \{\n", re.M)
_LINE_STARTS = re.compile(rb"^", re.M)


def _line_starts(ctx: Context) -> list[int]:
    return ctx.cached("lines", lambda: [m.start() for m in _LINE_STARTS.finditer(ctx.data)])


def _choose(rng: random.Random, matches: list):
    if not matches:
        raise NotApplicable
    return rng.choice(matches)


def text_number(ctx: Context, rng: random.Random, i: int):
    """A number replaced: out of int64 range, negative, a float, a word, 5000 digits."""
    options = [b"99999999999999999999999", b"-1", b"-9223372036854775809", b"18446744073709551615",
               b"1.5", b"abc", b"0x7fffffffffffffff", b"1e400", b"nan", b"-inf", b'"12"', b"9" * 5000, b""]
    match = _choose(rng, ctx.cached("numbers", lambda: list(_NUMBER.finditer(ctx.data))))
    new = options[i % len(options)]
    return f"{match.start()}:{new[:24].decode()}", ctx.data[:match.start()] + new + ctx.data[match.end():]


def text_string(ctx: Context, rng: random.Random, i: int):
    """A quoted string replaced: empty, 1 MB, invalid UTF-8 escapes, unterminated, bad escapes."""
    options = [b'""', b'"' + b"a" * MB + b'"', b'"\\377\\376"', b'"unterminated', b'"\\x"', b'"\\u2028\\x85"',
               b'"a\\nb"', b'"\\000"', b"'single'", b'"\\' + b"\\" * 1000 + b'"']
    match = _choose(rng, ctx.cached("strings", lambda: list(_STRING.finditer(ctx.data))))
    new = options[i % len(options)]
    return f"{match.start()}:{i % len(options)}", ctx.data[:match.start()] + new + ctx.data[match.end():]


def text_unknown(ctx: Context, rng: random.Random, i: int):
    """Unknown fields, scalar and message, inserted at a line start."""
    options = [b"unknown_field_xyz: 5\n", b'unknown_msg { a: 1 b { c: "x" } }\n', b"[some.ext] { }\n",
               b"unknown_list: [1, 2, 3]\n", b"unknown_s: 'x'\n", b"zz: 1e400\n", b"9: 1\n"]
    at = rng.choice(_line_starts(ctx))
    new = options[i % len(options)]
    return f"{at}:{i % len(options)}", ctx.data[:at] + new + ctx.data[at:]


def text_deep(ctx: Context, rng: random.Random, i: int):
    """Messages nested thousands deep, unknown (skipped by the parser) or known."""
    depth = (100, 2000, 100_000)[i % 3]
    name = (b"zz", b"step_stats")[(i // 3) % 2]
    at = rng.choice(_line_starts(ctx))
    nested = (name + b" { ") * depth + b"}" * depth + b"\n"
    return f"{at}:{name.decode()}x{depth}", ctx.data[:at] + nested + ctx.data[at:]


def text_duplicate(ctx: Context, rng: random.Random, i: int):
    """A line (a field) or a whole block (``node_stats { ... }``) repeated."""
    data = ctx.data
    blocks = ctx.cached("blocks", lambda: list(_BLOCK_OPEN.finditer(data)))
    times = (2, 3, 2000)[i % 3]
    if i % 2 and blocks:
        match = rng.choice(blocks)
        indent = match.group(1)
        end = data.find(b"\n" + indent + b"}\n", match.end() - 1)
        if end < 0:
            raise NotApplicable
        block = data[match.start():end + len(indent) + 3]
        times = min(times, max(2, MB // max(1, len(block))))
        return f"block@{match.start()}x{times}", data[:match.start()] + block * times + data[match.start():]
    starts = _line_starts(ctx)
    at = rng.randrange(len(starts) - 1) if len(starts) > 1 else 0
    line = data[starts[at]:starts[at + 1]] if at + 1 < len(starts) else data[starts[at]:]
    return f"line@{starts[at]}x{times}", data[:starts[at]] + line * times + data[starts[at]:]


def text_wrong_type(ctx: Context, rng: random.Random, i: int):
    """A scalar given as a message, a message given as a scalar, a string for a number."""
    data = ctx.data
    scalars = ctx.cached("scalar_lines", lambda: list(re.finditer(rb"^( *)(\w+): (.*)$", data, re.M)))
    blocks = ctx.cached("blocks", lambda: list(_BLOCK_OPEN.finditer(data)))
    if i % 2 and blocks:
        match = rng.choice(blocks)
        new = match.group(1) + match.group(2) + rng.choice([b": 5\n", b': "x"\n', b": [1]\n"]) + \
            match.group(1) + b"other {\n"
        return f"block@{match.start()}", data[:match.start()] + new + data[match.end():]
    match = _choose(rng, scalars)
    value = match.group(3)
    new = match.group(1) + match.group(2) + (b" { a: 1 }" if i % 4 == 0 else
                                             b": \"" + value.replace(b'"', b"") + b"\"" if not value.startswith(b'"')
                                             else b": 12345")
    return f"line@{match.start()}", data[:match.start()] + new + data[match.end():]


def text_encoding(ctx: Context, rng: random.Random, i: int):
    """Bytes that are not UTF-8 inside, a BOM, UTF-16."""
    data = ctx.data
    at = rng.randrange(len(data))
    options = [data[:at] + b"\xff\xfe\x80" + data[at:], b"\xef\xbb\xbf" + data,
               data.decode("utf-8").encode("utf-16"), data[:at] + b"\x00" + data[at:],
               data[:at] + "\u2028\x85".encode() + data[at:]]
    return f"{i % len(options)}@{at}", options[i % len(options)]


TEXT_KINDS = {"text_number": text_number, "text_string": text_string, "text_unknown": text_unknown,
              "text_deep": text_deep, "text_duplicate": text_duplicate, "text_wrong_type": text_wrong_type,
              "text_encoding": text_encoding}


# ============================================================================= Chrome JSON
class _RawJSON(str):
    """A JSON literal written as it is (``1e400``, 5000 digits, deep nesting)."""


_NAN, _INF = float("nan"), float("inf")
_JSON_VALUES = [
    ("str", "x"), ("empty", ""), ("null", None), ("true", True), ("object", {}), ("list", []),
    ("neg", -1), ("neg_float", -1.5), ("half", 0.5), ("big", 10**30), ("neg_big", -10**30),
    ("i64", 2**63), ("num_str", "12.5"), ("neg_str", "-3"), ("nan", _NAN), ("inf", _INF),
    ("neg_inf", -_INF), ("e400", _RawJSON("1e400")), ("neg_e400", _RawJSON("-1e400")),
    ("digits", _RawJSON("9" * 5000)), ("huge_str", "a" * MB), ("deep", _RawJSON("[" * 900 + "]" * 900)),
    ("unhashable_list", [1, [2]]), ("nested_obj", {"a": {"b": [None]}}), ("zero", 0), ("float_str", "1e30"),
    ("text_nan", "NaN"), ("tiny", 5e-324), ("neg_zero", -0.0), ("exp", _RawJSON("1E+400")),
]
_EVENT_KEYS = ("ts", "dur", "pid", "tid", "name", "ph", "cat", "args", "id")
_ARG_KEYS = ("name", "op", "input0", "input1", "step_num", "bytes", "src", "dst", "rate_bps", "tensor",
             "bytes_in_use", "labels")


def dump_json(document) -> bytes:
    """``json.dumps`` with :class:`_RawJSON` values written raw and NaN/Infinity allowed."""
    raws: list[str] = []

    def encode(value):
        if isinstance(value, _RawJSON):
            raws.append(str(value))
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    text = json.dumps(encode(document), allow_nan=True)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{index}\x00"), raw, 1)
    return text.encode("utf-8")


def _json_paths(document, limit: int = 6) -> list[tuple]:
    out = []

    def visit(value, path):
        if len(path) >= limit:
            return
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            out.append(path + (key,))
            visit(child, path + (key,))
    visit(document, ())
    return out


def _set_path(document, path: tuple, value, *, delete: bool = False):
    """A copy of ``document`` (copied along ``path`` only) with the value at ``path`` set."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy = dict(document) if isinstance(document, dict) else list(document)
    if rest:
        copy[head] = _set_path(document[head], rest, value, delete=delete)
    elif delete:
        del copy[head]
    else:
        copy[head] = value
    return copy


def _events(ctx: Context) -> list:
    document = ctx.json
    events = document.get("traceEvents") if isinstance(document, dict) else document
    return events if isinstance(events, list) else []


def _events_path(ctx: Context) -> tuple:
    return ("traceEvents",) if isinstance(ctx.json, dict) else ()


def _with_events(ctx: Context, events: list):
    return _set_path(ctx.json, _events_path(ctx), events) if _events_path(ctx) else events


def _complete_events(ctx: Context) -> list[int]:
    return ctx.cached("x_events", lambda: [k for k, e in enumerate(_events(ctx))
                                            if isinstance(e, dict) and e.get("ph") == "X"])


def json_value(ctx: Context, rng: random.Random, i: int):
    """A value replaced by another type or an extreme: strings for numbers, objects for
    lists, null, 1e400, NaN, Infinity, negative times, 1 MB strings, deep nesting."""
    label, value = _JSON_VALUES[i % len(_JSON_VALUES)]
    events = _events(ctx)
    if rng.random() < 0.7 and events:
        k = rng.randrange(len(events))
        event = events[k]
        key = rng.choice(_EVENT_KEYS)
        path = _events_path(ctx) + (k, key)
        if key == "args" and isinstance(event, dict) and isinstance(event.get("args"), dict) and rng.random() < 0.7:
            path += (rng.choice(_ARG_KEYS),)
        if not isinstance(event, dict):
            path = _events_path(ctx) + (k,)
    else:
        path = rng.choice(ctx.cached("json_paths", lambda: _json_paths(ctx.json)))
    return f"{'.'.join(map(str, path))}:{label}", dump_json(_set_path(ctx.json, path, value))


def json_delete(ctx: Context, rng: random.Random, i: int):
    paths = ctx.cached("json_paths", lambda: _json_paths(ctx.json))
    if not paths:
        raise NotApplicable
    path = rng.choice(paths)
    return ".".join(map(str, path)), dump_json(_set_path(ctx.json, path, None, delete=True))


def json_unknown_key(ctx: Context, rng: random.Random, i: int):
    """Unknown keys, of every value type, in the document, an event or its args."""
    containers = [p for p in ctx.cached("json_paths", lambda: _json_paths(ctx.json))
                  if isinstance(_get(ctx.json, p), dict)] + [()]
    path = rng.choice(containers)
    label, value = _JSON_VALUES[i % len(_JSON_VALUES)]
    target = dict(_get(ctx.json, path))
    target[rng.choice(["zzz_unknown", "\u2028", "", "input99999999999999999999", "input" + "1" * 5000,
                       "traceEvents2", "ph2"])] = value
    return f"{'.'.join(map(str, path))}:{label}", dump_json(_set_path(ctx.json, path, target))


def _get(document, path: tuple):
    for key in path:
        document = document[key]
    return document


def duplicate_event(ctx: Context, rng: random.Random, i: int):
    """Events repeated: twice, or thousands of times (all overlapping, on one lane)."""
    events = _events(ctx)
    if not events:
        raise NotApplicable
    pool = _complete_events(ctx) or list(range(len(events)))
    k = rng.choice(pool)
    times = (2, 5000, 3, 20_000, 2)[i % 5]
    size = len(json.dumps(events[k], allow_nan=True))
    times = min(times, max(2, MB // max(1, size)))
    new = events[:k] + [events[k]] * times + events[k + 1:]
    return f"{k}x{times}", dump_json(_with_events(ctx, new))


def overlap_event(ctx: Context, rng: random.Random, i: int):
    """Events copied with shifted times, so that they overlap others on the same thread."""
    events = _events(ctx)
    pool = _complete_events(ctx)
    if not pool:
        raise NotApplicable
    new = list(events)
    count = (1, 50, 500)[i % 3]
    for _ in range(count):
        k = rng.choice(pool)
        event = dict(events[k])
        ts, dur = event.get("ts"), event.get("dur")
        if isinstance(ts, (int, float)) and isinstance(dur, (int, float)):
            event["ts"] = ts + dur * rng.choice([0.5, 0, -0.5, 1])
            event["dur"] = dur * rng.choice([1, 2, 0])
        new.append(event)
    return f"x{count}", dump_json(_with_events(ctx, new))


def json_names(ctx: Context, rng: random.Random, i: int):
    """Empty and huge (1 MB) names: of events, their args, processes and threads."""
    events = _events(ctx)
    if not events:
        raise NotApplicable
    k = rng.randrange(len(events))
    if not isinstance(events[k], dict):
        raise NotApplicable
    options = ["", "a" * MB, " ", "\u2028\n\x00", "</script>" * 1000, "\ud800", "_SOURCE", "RecvTensor"] + ODD_TEXTS
    value = options[i % len(options)]
    event = dict(events[k])
    if rng.random() < 0.5 or not isinstance(event.get("args"), dict):
        event["name"] = value
    else:
        event["args"] = dict(event["args"], name=value)
    new = events[:k] + [event] + events[k + 1:]
    return f"{k}:{i % len(options)}", dump_json(_with_events(ctx, new))


def json_deep(ctx: Context, rng: random.Random, i: int):
    """Nesting 100k deep: the whole document, or inside an event."""
    depth = (100_000, 5000, 990)[i % 3]
    if i % 2 == 0:
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        return f"top:{depth}", (opener * depth + "1" + closer * depth).encode()
    events = _events(ctx)
    if not events:
        raise NotApplicable
    k = rng.randrange(len(events))
    new = list(events)
    event = dict(events[k]) if isinstance(events[k], dict) else {}
    event[rng.choice(["args", "name", "ts", "pid"])] = _RawJSON("[" * depth + "]" * depth)
    new[k] = event
    return f"{k}:{depth}", dump_json(_with_events(ctx, new))


def json_container(ctx: Context, rng: random.Random, i: int):
    """The document's shape wrong: traceEvents not a list, events not objects, ..."""
    events = _events(ctx)
    options = [
        ("events_obj", {"traceEvents": {"0": events[:1]}}), ("events_str", {"traceEvents": "x"}),
        ("events_null", {"traceEvents": None}), ("events_num", {"traceEvents": 5}), ("empty", {"traceEvents": []}),
        ("bare_list", events), ("number", 5), ("string", "x"), ("null", None), ("empty_obj", {}),
        ("items", {"traceEvents": [1, "x", None, [], True] + events[:2]}),
        ("other_list", {"traceEvents": events, "otherData": [1]}),
        ("other_values", {"traceEvents": events, "otherData": {"source_format": {"a": 1}, "tf_version": 5,
                                                              "host": ["x"]}}),
        ("metadata_only", {"traceEvents": [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]}),
        ("bare_empty", []),
    ]
    label, document = options[i % len(options)]
    return label, dump_json(document)


def json_steps(ctx: Context, rng: random.Random, i: int):
    """tracebridge's step markers (a ``Steps`` process) with odd values, or thousands of them."""
    events = [e for e in _events(ctx)]
    values = [0, -1, 2**63, 10**30, "3", 1.5, None, [1], True]
    value = values[i % len(values)]
    count = (1, 3, 3000)[(i // len(values)) % 3]
    steps = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "Steps"}}]
    ts = next((e.get("ts") for e in events if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))), 0)
    for k in range(count):
        steps.append({"ph": "X", "pid": 0, "tid": 0, "name": f"step {k}", "ts": ts + k, "dur": 1,
                      "args": {"step_num": value if k == 0 else k}})
    return f"{value}x{count}", dump_json(_with_events(ctx, steps + events))


def json_sources(ctx: Context, rng: random.Random, i: int):
    """Many runs: thousands of ``_SOURCE`` ops (each opens a run of a merged file)."""
    events = _events(ctx)
    pool = _complete_events(ctx)
    if not pool:
        raise NotApplicable
    template = dict(events[rng.choice(pool)])
    size = len(json.dumps(template, allow_nan=True))
    count = min((10, 3000, 10_000)[i % 3], max(2, 4 * MB // size))  # a few MB at most
    args = dict(template.get("args") or {}) if isinstance(template.get("args"), dict) else {}
    base = template.get("ts") if isinstance(template.get("ts"), (int, float)) else 0
    added = []
    for k in range(count):
        added.append(dict(template, ts=base + (k * 7919) % (count + 1), args=dict(args, name="_SOURCE", op="NoOp")))
    return f"x{count}", dump_json(_with_events(ctx, events + added))


def json_encoding(ctx: Context, rng: random.Random, i: int):
    """Not UTF-8: a stray byte inside a string, UTF-16/32 with and without BOM, a UTF-8 BOM."""
    text = ctx.json_text
    quote = [m.start() for m in re.finditer(rb'"[A-Za-z]', text)] or [0]
    at = rng.choice(quote) + 1
    decoded = text.decode("utf-8")
    options = [text[:at] + b"\xff" + text[at:], decoded.encode("utf-16"), decoded.encode("utf-16-le"),
               decoded.encode("utf-32"), b"\xef\xbb\xbf" + text, text[:at] + b"\xc3" + text[at:],
               text[:at] + b"\xed\xa0\x80" + text[at:], b"\x00" + text]
    return f"{i % len(options)}@{at}", options[i % len(options)]


CHROME_KINDS = {"json_value": json_value, "json_delete": json_delete, "json_unknown_key": json_unknown_key,
                "duplicate_event": duplicate_event, "overlap_event": overlap_event, "json_names": json_names,
                "json_deep": json_deep, "json_container": json_container, "json_steps": json_steps,
                "json_sources": json_sources, "json_encoding": json_encoding}


# ============================================================================= gzip
def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=5, mtime=0)


def gz_damage(ctx: Context, rng: random.Random, i: int):
    """The gzip layer broken: cut in the header, the deflate stream or the trailer, bytes
    flipped (CRC and size trailer too), garbage after it."""
    data = ctx.data
    n = len(data)
    mode = ("cut_header", "cut_body", "cut_trailer", "flip_body", "flip_crc", "flip_size", "garbage",
            "zeros", "bad_method", "header_only")[i % 10]
    if mode == "cut_header":
        return mode, data[:rng.randrange(1, 10)]
    if mode == "cut_body":
        return mode, data[:rng.randrange(10, n - 8)]
    if mode == "cut_trailer":
        return mode, data[:n - rng.randrange(1, 8)]
    flipped = bytearray(data)
    if mode == "flip_body":
        flipped[rng.randrange(10, n - 8)] ^= 1 << rng.randrange(8)
    elif mode == "flip_crc":
        flipped[n - 8] ^= 0x01
    elif mode == "flip_size":
        flipped[n - 1] ^= 0x40
    elif mode == "garbage":
        return mode, data + bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64)))
    elif mode == "zeros":
        return mode, data + b"\x00" * 1000
    elif mode == "bad_method":
        flipped[2] = 0x07
    else:
        return mode, data[:10]
    return mode, bytes(flipped)


def gz_members(ctx: Context, rng: random.Random, i: int):
    """Several gzip members: the trace twice (not one JSON value), an empty member first."""
    inner = ctx.json_text
    options = [("twice", ctx.data + ctx.data), ("empty_first", _gz(b"") + ctx.data),
               ("split", _gz(inner[:len(inner) // 2]) + _gz(inner[len(inner) // 2:])),
               ("double_gzip", _gz(ctx.data)), ("empty_member", _gz(b""))]
    return options[i % len(options)]


def gz_bomb(ctx: Context, rng: random.Random, i: int):
    """Tiny files that inflate enormously: whitespace before the trace, or one huge string."""
    size = (64 * MB, 8 * MB, 300 * MB)[i % 3]
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * MB
    body = bytearray()
    for _ in range(size // MB):
        body += compressor.compress(chunk)
    body += compressor.compress(ctx.json_text) + compressor.flush()
    return f"{size // MB}MB", bytes(body)


def gz_of(ctx: Context, rng: random.Random, i: int):
    """A Chrome mutation (wrong types, deep nesting, duplicates, ...) inside valid gzip."""
    kinds = list(CHROME_KINDS.items())
    name, kind = kinds[i % len(kinds)]
    inner = Context(Seed("chrome", ctx.seed.name, "x.json", ctx.json_text))
    detail, data = kind(inner, rng, i // len(kinds))
    return f"{name}:{detail}", _gz(data)


GZ_KINDS = {"gz_damage": gz_damage, "gz_members": gz_members, "gz_bomb": gz_bomb, "gz_of": gz_of}


# ============================================================================= event files
def _reframe(records: list[bytes]) -> bytes:
    return b"".join(_frame(r) for r in records)


def _record_list(ctx: Context) -> list[bytes]:
    return ctx.cached("records", lambda: [r for _, r in _records(ctx.data)])


def event_framing(ctx: Context, rng: random.Random, i: int):
    """TFRecord framing broken: length or data CRC wrong, a length claiming gigabytes
    (with a matching CRC), a record cut short, garbage after the last one, empty records."""
    from tracebridge.tfrecord import masked_crc32c

    records = _record_list(ctx)
    if not records:
        raise NotApplicable
    k = rng.randrange(len(records))
    offsets = [pos for pos, _ in _records(ctx.data)]
    data = bytearray(ctx.data)
    at = offsets[k]
    mode = ("length_crc", "data_crc", "claim", "cut", "garbage", "empty_record", "repeat", "short_header",
            "zero_length_bad_crc")[i % 9]
    if mode == "length_crc":
        data[at + 8] ^= 0x01
    elif mode == "data_crc":
        end = at + 12 + len(records[k])
        data[end] ^= 0x01
    elif mode == "claim":
        claim = rng.choice([1 << 31, 1 << 40, (1 << 64) - 1, (1 << 63) + 5, len(records[k]) + 1])
        length = struct.pack("<Q", claim)
        data[at:at + 12] = length + struct.pack("<I", masked_crc32c(length))
        return f"{mode}@{at}:{claim}", bytes(data)
    elif mode == "cut":
        return f"{mode}@{at}", bytes(data[:at + rng.randrange(1, 12 + len(records[k]) + 4)])
    elif mode == "garbage":
        return mode, bytes(data) + bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 40)))
    elif mode == "empty_record":
        return f"{mode}@{k}", _reframe(records[:k] + [b""] + records[k:])
    elif mode == "repeat":
        times = rng.choice([2, 500])
        return f"{mode}@{k}x{times}", _reframe(records[:k] + [records[k]] * times + records[k + 1:])
    elif mode == "short_header":
        return mode, bytes(data) + b"\x01\x00\x00"
    else:
        data = bytearray(ctx.data) + struct.pack("<Q", 0) + b"\x00\x00\x00\x00"
    return f"{mode}@{at}", bytes(data)


class _RecordContext(Context):
    """One record of an event file as the message to mutate; framing recomputed after."""

    def __init__(self, parent: Context, index: int):
        super().__init__(parent.seed)
        self.parent, self.index = parent, index

    def _message_bytes(self) -> bytes:
        return _record_list(self.parent)[self.index]

    def wrap(self, message: bytes) -> bytes:
        records = list(_record_list(self.parent))
        records[self.index] = message
        return _reframe(records)


def event_record(ctx: Context, rng: random.Random, i: int):
    """A protobuf mutation of one Event record (wrong types, unknown fields, huge
    lengths, deep nesting, ...), the framing and CRCs valid."""
    records = _record_list(ctx)
    if not records:
        raise NotApplicable
    k = rng.randrange(len(records))
    inner = ctx.cached(("record", k), lambda: _RecordContext(ctx, k))
    name, kind = list(PROTO_KINDS.items())[i % len(PROTO_KINDS)]
    detail, data = kind(inner, rng, i // len(PROTO_KINDS))
    return f"{k}:{name}:{detail}", data


def inner_run_metadata(ctx: Context, rng: random.Random, i: int):
    """A protobuf mutation of the RunMetadata inside a tagged record (or a pickle)."""
    if not ctx.proto_nodes:
        raise NotApplicable
    name, kind = list(PROTO_KINDS.items())[i % len(PROTO_KINDS)]
    detail, data = kind(ctx, rng, i // len(PROTO_KINDS))
    return f"{name}:{detail}", data


EVENT_KINDS = {"event_framing": event_framing, "event_record": event_record, "run_metadata": inner_run_metadata}


# ============================================================================= pickles
def _short_text(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return (b"\x8c" + bytes([len(data)]) + data if len(data) < 256
            else b"\x8d" + struct.pack("<Q", len(data)) + data)


def pickle_global(ctx: Context, rng: random.Random, i: int):
    """Other callables than RunMetadata, also with odd names (newlines, 1000 characters)."""
    targets = [("os", "system"), ("builtins", "eval"), ("builtins", "getattr"), ("copyreg", "_reconstructor"),
               ("subprocess", "Popen"), ("tensorflow.core.protobuf.config_pb2", "RunMetadataX"),
               ("tensorflow.core.protobuf.config_pb2\n", "RunMetadata"), ("x\u2028y", "z\x85"),
               ("a" * 1000, "b"), ("_codecs", "decode"), ("numpy.core.multiarray", "_reconstruct"),
               ("", ""), ("builtins", "__import__")]
    module, name = targets[i % len(targets)]
    data = (b"\x80\x04" + _short_text(module) + _short_text(name) + b"\x93" + _short_text("id") + b"\x85R.")
    return f"{module[:20]!r}.{name[:20]!r}", data


def pickle_wrong_type(ctx: Context, rng: random.Random, i: int):
    """Pickles of other values than RunMetadata, including a RunMetadata mixed with them."""
    import pickle
    body = ctx.data[2:-1]  # the opcodes that push the message, without PROTO and STOP
    values = [1, "x", None, {}, {"a": 1}, [], [1, 2], (None,), b"bytes", 1.5, [[[]]], [None] * 100_000,
              set(), 2**10000, True, bytearray(b"x")]
    k = i % (len(values) + 2)
    if k < len(values):
        return f"{type(values[k]).__name__}:{k}", pickle.dumps(values[k], protocol=rng.choice([0, 2, 4, 5]))
    if k == len(values):  # [RunMetadata, 1]: a list whose second item is not a message
        return "mixed_list", b"\x80\x04]" + body + b"aK\x01a."
    return "dict_of", b"\x80\x04}" + _short_text("a") + body + b"s."


def pickle_state(ctx: Context, rng: random.Random, i: int):
    """The message's state wrong: not a dict, ``serialized`` not bytes or missing, a
    ``_codecs.encode`` call other than a latin1 literal, constructor arguments."""
    head = b"\x80\x04" + _short_text("tensorflow.core.protobuf.config_pb2") + _short_text("RunMetadata") + b"\x93"
    options = [
        ("list_state", head + b")R]b."),
        ("none_state", head + b")RNb."),
        ("str_serialized", head + b")R}" + _short_text("serialized") + _short_text("abc") + b"sb."),
        ("int_serialized", head + b")R}" + _short_text("serialized") + b"K\x05sb."),
        ("missing", head + b")R}b."),
        ("ctor_args", head + b"K\x01\x85R."),
        ("codecs_utf8", head + b")R}" + _short_text("serialized") + _short_text("_codecs") + _short_text("encode")
         + b"\x93" + _short_text("abc") + _short_text("utf-8") + b"\x86R" + b"sb."),
        ("codecs_int", head + b")R}" + _short_text("serialized") + _short_text("_codecs") + _short_text("encode")
         + b"\x93K\x05" + _short_text("latin1") + b"\x86R" + b"sb."),
        ("never_built", head + b")R."),
        ("huge_random", head + b")R}" + _short_text("serialized") + b"B" + struct.pack("<I", MB)
         + bytes(rng.getrandbits(8) for _ in range(MB)) + b"sb."),
        ("built_twice", head + b")R}" + _short_text("serialized") + b"C\x00sb}b."),
        ("newobj_ex", head + b")}\x92."),
    ]
    return options[i % len(options)]


def pickle_counts(ctx: Context, rng: random.Random, i: int):
    """Counted opcodes whose count claims gigabytes: BINBYTES(8), BINUNICODE(8), LONG4,
    BYTEARRAY8, FRAME; and memo lookups of ids never stored."""
    counts = [(1 << 31), (1 << 32) - 1, (1 << 40), (1 << 63) - 1]
    claim = counts[(i // 9) % len(counts)]
    options = [
        ("binbytes", b"\x80\x04B" + struct.pack("<I", min(claim, 2**32 - 1)) + b"abc"),
        ("binbytes8", b"\x80\x04\x8e" + struct.pack("<Q", claim) + b"abc"),
        ("binunicode", b"\x80\x04X" + struct.pack("<I", min(claim, 2**32 - 1)) + b"abc"),
        ("binunicode8", b"\x80\x04\x8d" + struct.pack("<Q", claim) + b"abc"),
        ("long4", b"\x80\x02\x8b" + struct.pack("<i", min(claim, 2**31 - 1)) + b"\x01"),
        ("bytearray8", b"\x80\x05\x96" + struct.pack("<Q", claim) + b"abc"),
        ("frame", b"\x80\x04\x95" + struct.pack("<Q", claim) + ctx.data[2:]),
        ("binget", b"\x80\x04h\x05."),
        ("long_binget", b"\x80\x04j" + struct.pack("<I", min(claim, 2**32 - 1)) + b"."),
    ]
    label, data = options[i % len(options)]
    return f"{label}:{claim}", data


def pickle_misc(ctx: Context, rng: random.Random, i: int):
    """Persistent ids, extension codes, stack underflow, a MARK never closed, deep nesting,
    no STOP, protocol 0 and 1 spellings."""
    depth = 100_000
    options = [
        ("persid", b"\x80\x04" + _short_text("x") + b"Q."), ("persid0", b"Pabc\n."),
        ("ext1", b"\x80\x02\x82\x01."), ("ext4", b"\x80\x02\x84\xff\xff\xff\x7f."),
        ("pop_empty", b"\x80\x040."), ("stop_empty", b"\x80\x04."), ("mark_open", b"\x80\x04(K\x01."),
        ("deep_list", b"\x80\x04" + b"]" * depth + b"a" * (depth - 1) + b"."),
        ("deep_tuple", b"\x80\x04" + b")" + b"\x85" * depth + b"."),
        ("no_stop", ctx.data[:-1]), ("proto0_inst", b"(itensorflow.core.protobuf.config_pb2\nRunMetadata\n."),
        ("proto0_global", b"ctensorflow.core.protobuf.config_pb2\nRunMetadata\n(tR."),
        ("bad_proto", b"\x80\x09N."), ("reduce_none", b"\x80\x04N)R."), ("build_on_int", b"\x80\x04K\x01}b."),
        ("setitems_odd", b"\x80\x04}(K\x01u."), ("dup_memo", b"\x80\x04K\x01\x94\x94h\x00."),
        ("unicode_bad", b"\x80\x04\x8c\x02\xff\xfe."), ("int_digits", b"I" + b"9" * 5000 + b"\n."),
        ("float_nan", b"Fnan\n."), ("string0", b"S'abc\n."),
    ]
    return options[i % len(options)]


PICKLE_KINDS = {"pickle_global": pickle_global, "pickle_wrong_type": pickle_wrong_type,
                "pickle_state": pickle_state, "pickle_counts": pickle_counts, "pickle_misc": pickle_misc,
                "run_metadata": inner_run_metadata}


# ============================================================================= notebooks
def _nb(ctx: Context) -> dict:
    return ctx.json


def notebook_shape(ctx: Context, rng: random.Random, i: int):
    """nbformat shapes wrong: cells not a list, a cell not an object, keys missing, source
    an int or a list of ints, the notebook itself a list."""
    nb = _nb(ctx)
    cells = nb["cells"]
    code = next(k for k, c in enumerate(cells) if c["cell_type"] == "code")
    options = [
        ("cells_dict", dict(nb, cells={"0": cells[0]})), ("cells_str", dict(nb, cells="x")),
        ("cells_int", dict(nb, cells=5)), ("cells_null", dict(nb, cells=None)),
        ("no_cells", {k: v for k, v in nb.items() if k != "cells"}),
        ("cell_str", dict(nb, cells=["print(1)"])), ("cell_int", dict(nb, cells=[1])),
        ("cell_list", dict(nb, cells=[[cells[code]]])),
        ("no_cell_type", _set_path(nb, ("cells", code), {"source": "x = 1"})),
        ("no_source", _set_path(nb, ("cells", code), {"cell_type": "code"})),
        ("source_int", _set_path(nb, ("cells", code, "source"), 5)),
        ("source_null", _set_path(nb, ("cells", code, "source"), None)),
        ("source_dict", _set_path(nb, ("cells", code, "source"), {"a": "b"})),
        ("source_ints", _set_path(nb, ("cells", code, "source"), [1, 2])),
        ("source_nested", _set_path(nb, ("cells", code, "source"), [["x = 1"]])),
        ("cell_type_int", _set_path(nb, ("cells", code, "cell_type"), 3)),
        ("cell_type_list", _set_path(nb, ("cells", code, "cell_type"), ["code"])),
        ("notebook_list", [nb]), ("notebook_str", "notebook"), ("notebook_null", None),
        ("nbformat_3", dict(nb, nbformat=3, worksheets=[{"cells": cells}])),
        ("empty_cells", dict(nb, cells=[])), ("unknown_keys", dict(nb, zzz={"a": [1]}, cells=cells + [{"cell_type": "raw", "source": ""}])),
    ]
    label, document = options[i % len(options)]
    return label, json.dumps(document).encode()


def _with_source(ctx: Context, source) -> bytes:
    nb = _nb(ctx)
    code = next(k for k, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    return json.dumps(_set_path(nb, ("cells", code, "source"), source)).encode()


def notebook_cells(ctx: Context, rng: random.Random, i: int):
    """Huge cells (1 MB comment, string, line), many lines, NUL, lone surrogates, IPython
    lines in odd places, the codemod's own markers in a cell."""
    options = [
        ("comment_1mb", "# " + "a" * MB + "\n"), ("string_1mb", "x = '" + "a" * MB + "'\n"),
        ("line_1mb", "x = " + repr("a" * MB) + " + y\n"), ("code_500_lines", "".join(f"v{k} = {k}\n" for k in range(500))),
        ("blank_3k", "\n" * 3000), ("spaces_1mb", " " * MB), ("nul", "x = 1\x00\n"), ("surrogate", "x = '\ud800'\n"),
        ("magics", "%time x\n  !ls\n?x\n%%bash\n" * 50), ("magic_in_block", "if x:\n    %time y\n"),
        ("marker", "# tracebridge-notebook-cell 0\nx = 1\n"), ("hidden_marker", "# tracebridge-ipython: %x\n"),
        ("crlf", "x = 1\r\ny = 2\r\n"), ("tabs_mixed", "if x:\n\ty = 1\n        z = 2\n"),
        ("vertical_ws", "x = 1\x0b\x0c\n%magic\x0b\n"), ("unicode_seps", "x = 1\u2028y = 2\x85\n"),
        ("tf1_repeat", _TF1_CELL * 5), ("syntax_error", "def f(:\n"), ("bom", "\ufeffx = 1\n"),
        ("source_list_huge", ["x = 1\n"] * 300 + ["# " + "a" * 3000 + "\n"] * 300),
    ]
    label, source = options[i % len(options)]
    return label, _with_source(ctx, source)


def notebook_code_depth(ctx: Context, rng: random.Random, i: int):
    """Deeply nested code: brackets, unary operators, attribute and call chains, indentation."""
    shapes = [
        ("paren", lambda n: "x = " + "(" * n + "1" + ")" * n), ("list", lambda n: "x = " + "[" * n + "]" * n),
        ("neg", lambda n: "x = " + "-" * n + "1"), ("not", lambda n: "x = " + "not " * n + "1"),
        ("pow", lambda n: "x = " + "2**" * n + "1"), ("attr", lambda n: "x = a" + ".b" * n),
        ("call", lambda n: "x = f" + "()" * n), ("plus", lambda n: "x = " + "1 + " * n + "1"),
        ("lambda", lambda n: "x = " + "lambda: " * n + "1"), ("ternary", lambda n: "x = " + "1 if 1 else " * n + "1"),
        ("indent", lambda n: "".join(" " * k + "if 1:\n" for k in range(min(n, 500))) + " " * min(n, 500) + "pass\n"),
        ("open_only", lambda n: "x = " + "(" * n),
    ]
    depths = (1500, 100_000, 150)
    label, make = shapes[i % len(shapes)]
    depth = depths[(i // len(shapes)) % len(depths)]
    return f"{label}:{depth}", _with_source(ctx, make(depth) + "\n")


def notebook_json(ctx: Context, rng: random.Random, i: int):
    """The file is not a notebook's JSON: nesting 100k deep, not UTF-8, UTF-16, a BOM, lone
    surrogate escapes, empty."""
    data = ctx.data
    at = rng.randrange(len(data))
    options = [("deep", b"[" * 100_000 + b"]" * 100_000), ("deep_obj", b'{"cells":' * 50_000 + b"1" + b"}" * 50_000),
               ("latin1", data[:at] + b"\xe9" + data[at:]), ("utf16", data.decode().encode("utf-16")),
               ("bom", b"\xef\xbb\xbf" + data), ("surrogate_key", data.replace(b'"cells"', b'"\\ud800cells"', 1)),
               ("empty", b""), ("spaces", b"   "), ("nul", b"\x00" * 64), ("number", b"1e400"),
               ("trailing", data + b"garbage"), ("dup_keys", data[:-1] + b', "cells": 5}' if data.rstrip().endswith(b"}") else data)]
    return options[i % len(options)]


NOTEBOOK_KINDS = {"notebook_shape": notebook_shape, "notebook_cells": notebook_cells,
                  "notebook_code_depth": notebook_code_depth, "notebook_json": notebook_json}


# ============================================================================= cases
def kinds_for(fmt: str) -> dict[str, Callable]:
    if fmt in ("runmetadata", "stepstats", "xspace"):
        return {**BYTE_KINDS, **PROTO_KINDS}
    if fmt == "pbtxt":
        return {**BYTE_KINDS, **TEXT_KINDS}
    if fmt == "chrome":
        return {**BYTE_KINDS, **CHROME_KINDS}
    if fmt == "chrome_gz":
        return {**BYTE_KINDS, **GZ_KINDS}
    if fmt == "events":
        return {**BYTE_KINDS, **EVENT_KINDS}
    if fmt == "pickle":
        return {**BYTE_KINDS, **PICKLE_KINDS}
    if fmt == "notebook":
        return {**BYTE_KINDS, **NOTEBOOK_KINDS}
    raise ValueError(fmt)


# Variants of each kind in the CI corpus: enough to walk each kind's closed set of
# options once (wire types, JSON value types, pickle opcodes, ...) on some seed.
CI_COUNTS = {"truncate": 14, "flip_byte": 6, "flip_bits": 4, "splice": 3,
             "wire_type": 10, "huge_length": 5, "extreme_varint": 8, "padded_varint": 2, "unknown_field": 16,
             "duplicate": 4, "repeat_many": 3, "delete": 4, "empty_payload": 4, "huge_string": 5,
             "deep_nesting": 6, "random_payload": 3, "odd_text": 26,
             "text_number": 13, "text_string": 10, "text_unknown": 7, "text_deep": 6, "text_duplicate": 6,
             "text_wrong_type": 4, "text_encoding": 5,
             "json_value": 30, "json_delete": 4, "json_unknown_key": 8, "duplicate_event": 5, "overlap_event": 3,
             "json_names": 34, "json_deep": 6, "json_container": 15, "json_steps": 18, "json_sources": 3,
             "json_encoding": 8,
             "gz_damage": 10, "gz_members": 5, "gz_bomb": 3, "gz_of": 22,
             "event_framing": 9, "event_record": 12, "run_metadata": 12,
             "pickle_global": 13, "pickle_wrong_type": 18, "pickle_state": 12, "pickle_counts": 36,
             "pickle_misc": 21,
             "notebook_shape": 23, "notebook_cells": 20, "notebook_code_depth": 24, "notebook_json": 12}
# Kinds whose every variant is about one seed only: run them on the first seed of a format.
_ONCE_PER_FORMAT = {"gz_bomb", "pickle_global", "pickle_counts", "pickle_misc", "json_container", "json_steps",
                    "json_sources", "duplicate_event",
                    "notebook_code_depth", "notebook_json", "notebook_shape", "notebook_cells", "pickle_state"}


def _rng(*parts) -> random.Random:
    return random.Random("/".join(map(str, parts)))


def make_case(ctx: Context, kind: str, i: int, rng: random.Random | None = None) -> Case:
    """Variant ``i`` of ``kind`` on the seed of ``ctx``. Raises NotApplicable."""
    seed = ctx.seed
    rng = rng or _rng(seed.format, seed.name, kind, i)
    detail, data = kinds_for(seed.format)[kind](ctx, rng, i)
    return Case(f"{seed.format}/{seed.name}/{kind}/{i}:{detail}", seed.format, kind, seed.filename, data)


def ci_cases(corpus: Path | None = None, *, fmt: str | None = None, kind: str | None = None) -> Iterator[Case]:
    """The CI corpus, made as it is consumed: every kind on every seed of its format,
    ``CI_COUNTS`` variants on the format's first seed and half as many on the others
    (identical outputs once); ``fmt``/``kind`` select a group."""
    seen_formats: set[str] = set()
    for seed in seeds(corpus):
        first = seed.format not in seen_formats
        seen_formats.add(seed.format)
        if fmt is not None and seed.format != fmt:
            continue
        ctx = Context(seed)
        for name in kinds_for(seed.format):
            if (kind is not None and name != kind) or (name in _ONCE_PER_FORMAT and not first):
                continue
            digests = set()
            count = CI_COUNTS.get(name, 4)  # other seeds of the format: half, for time
            for i in range(count if first else max(2, count // 2)):
                try:
                    case = make_case(ctx, name, i)
                except NotApplicable:
                    break
                digest = hash(case.data)
                if digest not in digests:
                    digests.add(digest)
                    yield case


def groups() -> list[tuple[str, str]]:
    """Every (format, kind) pair of the corpus."""
    return [(fmt, kind) for fmt in FORMATS for kind in kinds_for(fmt)]


def random_case(contexts: list[Context], rng: random.Random, index: int) -> Case:
    """One random case for the fuzzer: a random seed and kind, a random variant, and
    almost one time in two a second mutation on top of it."""
    while True:
        ctx = rng.choice(contexts)
        kinds = kinds_for(ctx.seed.format)
        kind = rng.choice(list(kinds))
        variant = rng.randrange(64)
        try:
            case = make_case(ctx, kind, variant, random.Random(rng.getrandbits(64)))
        except NotApplicable:
            continue
        roll = rng.random()
        if roll < 0.45 and 1 < len(case.data) < 4 * MB:
            # A second mutation on the first one's output: any kind of the format (when
            # the output still has the structure it needs), else a byte-level one.
            stacked = Context(Seed(case.format, ctx.seed.name, case.filename, case.data))
            extra = rng.choice(list(kinds)) if roll < 0.15 else rng.choice(list(BYTE_KINDS))
            try:
                detail, data = kinds[extra](stacked, random.Random(rng.getrandbits(64)), rng.randrange(64))
            except Exception:  # noqa: BLE001 - the output no longer parses as the kind needs
                extra = rng.choice(list(BYTE_KINDS))
                detail, data = BYTE_KINDS[extra](stacked, rng, rng.randrange(64))
            if len(data) <= MAX_CASE_SIZE:  # two multiplying kinds could make gigabytes
                case = Case(f"{case.name}+{extra}:{detail}", case.format, f"{case.kind}+{extra}", case.filename,
                            data)
        return case


# ============================================================================= running a case
class Hang(BaseException):
    """Raised by the alarm: a case ran longer than its time limit. A BaseException, so
    that no ``except Exception`` in the code under test swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`Hang` once the case has used ``seconds`` of CPU time, or five times
    that in wall time (main thread only).

    CPU time, because a reader that hangs on a malformed file loops: on a loaded machine
    (a CI runner, the other test worker) wall time grows with the load and a slow but
    finite read would pass for a hang. The wall clock is the backstop for a read that
    blocks instead of looping."""
    def on_signal(signum, frame):
        clock = "CPU time" if signum == signal.SIGPROF else "wall time"
        raise Hang(f"still running after {seconds if signum == signal.SIGPROF else 5 * seconds:g} s of {clock}")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, 5 * seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def memory_limit(fmt: str, size: int) -> int:
    """The most reading an input of ``size`` bytes may allocate (Python and numpy, as
    tracemalloc counts them).

    Readers: 64x the size, at least 32 MB. Reading a valid trace costs a constant factor:
    a Chrome event of ~60 bytes is a dict of ~10 Python objects (~600 B) before it is a
    row, a 2-byte empty NodeExecStats an op row (~150 B of columns) plus the decoder's
    rows; the floor covers numpy's and the builder's fixed costs. What the bound catches is
    the malformed corpus's point: a length or count field that makes a reader allocate
    what the file claims rather than what it holds. For ``.json.gz`` the size is the
    inflated size, which the reader caps at 256x the file's (see ``readers._gunzip``).

    Notebooks (the codemod): 256x, at least 128 MB. LibCST keeps every token and run of
    whitespace as Python objects, ~100-200 bytes per byte of source (a notebook of 1 MB of
    spaces: ~190 MB), and CPython's parser, run first to refuse over-deep nesting, builds
    its own tree (100k chained calls, 200 KB: ~70 MB before it gives up)."""
    if fmt == "notebook":
        return max(128 * MB, 256 * size)
    return max(32 * MB, 64 * size)


@dataclass
class Outcome:
    status: str        # "trace", "error" (the library's own), or "bug"
    detail: str = ""
    peak: int = 0
    seconds: float = 0.0


def run_case(case: Case, folder: Path, *, timeout: float = 10.0, measure_memory: bool = True,
             check_output: bool = True) -> Outcome:
    """Read ``case`` as a user would (``tracebridge.load``, or ``migrate_path`` for a
    notebook) and check the contract: a usable trace, or the library's own error on one
    line naming the file; no other exception, no hang, no allocation far beyond the size."""
    import traceback

    import tracebridge
    from tracebridge.errors import MigrationError, TraceFormatError

    path = case.write(folder)
    timeout += 2.0 * len(case.data) / MB  # reading is linear: big inputs get time in proportion
    started = time.perf_counter()
    if measure_memory:
        tracemalloc.start()
    result = error = None
    try:
        with time_limit(timeout):
            try:
                if case.format == "notebook":
                    from tracebridge.migrate import migrate_path
                    result = migrate_path(path)
                else:
                    result = tracebridge.load(path)
            except (TraceFormatError, MigrationError) as caught:
                error = caught
    except Hang as hang:
        return Outcome("bug", f"hang: {hang}", seconds=time.perf_counter() - started)
    except RecursionError:  # before the traceback, which would recurse as deep
        return Outcome("bug", "RecursionError", seconds=time.perf_counter() - started)
    except BaseException as other:  # noqa: BLE001 - anything else is what we look for
        if isinstance(other, KeyboardInterrupt):
            raise
        return Outcome("bug", f"{type(other).__name__}: {other}\n{traceback.format_exc()}"[:4000],
                       seconds=time.perf_counter() - started)
    finally:
        peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
        if measure_memory:
            tracemalloc.stop()
    seconds = time.perf_counter() - started
    size = len(case.data)
    if case.format == "chrome_gz":  # what the reader may inflate before it refuses a bomb
        size = max(size, min(_inflated_size(case.data), 256 * size + MB))
    if peak > memory_limit(case.format, size):
        return Outcome("bug", f"allocated {peak / MB:.1f} MB reading {size} bytes", peak, seconds)
    if error is not None:
        message = str(error)
        lines = message.splitlines()
        if len(lines) != 1 or message != lines[0]:
            return Outcome("bug", f"message not one line: {message[:500]!r}", peak, seconds)
        if str(path) not in message:
            return Outcome("bug", f"message does not name the file: {message[:500]!r}", peak, seconds)
        return Outcome("error", message.replace(str(path), "<file>")[:300], peak, seconds)
    if case.format == "notebook":
        result.diff(), result.report_lines()
        return Outcome("trace", f"{len(result.code)} chars", peak, seconds)
    if not check_output:
        return Outcome("trace", f"{len(result)} ops", peak, seconds)
    try:
        with time_limit(timeout * 3):
            len(result), result.summary(), result.info(), list(result.records())[:10]
            out = path.with_name("written.json")
            result.save(out)
            tracebridge.load(out)
            out.unlink()
    except Hang as hang:
        return Outcome("bug", f"hang using the trace: {hang}", peak, seconds)
    except Exception as other:  # noqa: BLE001
        return Outcome("bug", f"using the trace: {type(other).__name__}: {other}\n{traceback.format_exc()}"[:4000],
                       peak, seconds)
    return Outcome("trace", f"{len(result)} ops", peak, seconds)


def _inflated_size(data: bytes, cap: int = 1 << 30) -> int:
    """What a gzip file inflates to, every member (up to ``cap``; what is readable of a
    damaged one), streamed: a bomb is not inflated into memory here either."""
    total = 0
    while data and total < cap:
        inflater = zlib.decompressobj(31)
        try:
            while data and not inflater.eof and total < cap:
                total += len(inflater.decompress(data, MB))
                data = inflater.unconsumed_tail
            total += len(inflater.flush())
        except zlib.error:
            return total
        if not inflater.eof:
            return total
        data = inflater.unused_data.lstrip(b"\x00")
    return total
