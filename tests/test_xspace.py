"""XSpace files and profile logdirs, read without TensorFlow (the corpus: GPU and TPU).

Tests of what is decoded run with each wire decoder (``wire_decoder``: the C loop and numpy
alone); tests of what is done with it afterwards (logdirs, writers) with the default one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import tracebridge
from tests.conftest import reading_with
from tracebridge import TraceFormatError, protos
from tracebridge.model.schema import Category

GPU = "tfprofiler_gpu_multi_worker.xplane.pb"
TPU = "xprof_tpu_inference_2.xplane.pb"


def all_events(path):
    space = protos.XSpace.FromString(path.read_bytes())
    total = memory = 0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                total += 1
                memory += plane.event_metadata[event.metadata_id].name.startswith("Memory")
    return space, total, memory


@pytest.mark.usefixtures("wire_decoder")
@pytest.mark.parametrize("name", [GPU, TPU])
def test_corpus_xspace_keeps_every_plane_and_event(corpus, name):
    path = corpus / "xspace" / name
    trace = tracebridge.load(path)
    space, total, memory = all_events(path)
    # every plane is a device but those that hold facts about the run: its settings, and the
    # HLO of its XLA modules (kept in the trace's metadata, tests/test_xla.py)
    facts = {"Task Environment"} | {p.name for p in space.planes if p.name == "/host:metadata"
                                    and not any(line.events for line in p.lines)}
    planes = [p.name for p in space.planes if p.name not in facts]
    assert sorted(d.name for d in trace.devices) == sorted(planes)
    # Every event is a row, except memory events, which are allocator counter samples.
    assert len(trace) + memory == total
    assert trace.counters.rows == memory
    for plane in space.planes:
        mine = trace.filter(device=f"^{plane.name}$") if plane.name not in facts else None
        if mine is not None:
            expected = sum(len(line.events) for line in plane.lines)
            got = len(mine) + sum(1 for line in plane.lines for e in line.events
                                  if plane.event_metadata[e.metadata_id].name.startswith("Memory"))
            assert got == expected, plane.name


@pytest.mark.usefixtures("wire_decoder")
def test_gpu_corpus_devices_streams_and_ops(corpus):
    trace = tracebridge.load(corpus / "xspace" / GPU)
    categories = {Category(c).label for c in set(trace.ops["category"].tolist())}
    assert {"op", "host", "device", "memcpy"} <= categories
    gpu4 = trace.filter(device="GPU:4$")
    lanes = {trace.lanes[i].name for i in set(gpu4.ops["lane"].tolist())}
    assert "Stream #134(Compute)" in lanes and "Stream #135(MemcpyH2D)" in lanes
    ops = trace.filter(op_type="^RandomUniform$")
    assert all(o.name.endswith("RandomUniform") for o in ops.records())
    assert trace.metadata["host"] == "34.83.195.179:6003"
    assert "relative" in trace.metadata["notes"]  # this old file has no Task Environment plane
    stats = dict(zip(trace.column_strings("event_stats", "key"), trace.column_strings("event_stats", "value")))
    assert "correlation_id" in stats and "memcpy_details" in stats
    assert trace.table("links").rows > 0


@pytest.mark.usefixtures("wire_decoder")
def test_tpu_corpus_absolute_time_and_xla_ops(corpus):
    trace = tracebridge.load(corpus / "xspace" / TPU)
    assert trace.metadata["profile_start_ns"] == 1741722099081044120
    assert trace.start_ns >= 1741722099081044120
    tpu = trace.filter(device="TPU:0")
    kernels = {o.kernel for o in tpu.records()}
    assert {"all-reduce", "broadcast.2"} <= kernels
    # An XLA op is credited to its framework op (its tf_op metadata), as xprof shows it.
    reduce = [o for o in tpu.records() if o.kernel == "all-reduce"]
    assert {(o.name, o.op_type) for o in reduce} == {("jit(_psum)/jit(main)/reduce_sum", "reduce_sum")}
    summary = trace.summary(top=5)
    assert summary.counted == "device+memcpy" and summary.by_type


@pytest.mark.usefixtures("wire_decoder")
def test_corrupt_xspace_fails_cleanly(corpus):
    with pytest.raises(TraceFormatError) as info:
        tracebridge.load(corpus / "bad" / "xprof_tpu_inference_2_reencoded.xplane.pb")
    message = str(info.value)
    assert "corrupt XSpace" in message and "byte " in message and "\n" not in message


def test_logdir_runs_and_hosts(corpus, tmp_path):
    logdir = tmp_path / "logs"
    old = logdir / "plugins" / "profile" / "2024_01_01_00_00_00"
    new = logdir / "plugins" / "profile" / "2024_01_02_00_00_00"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    shutil.copy(corpus / "xspace" / TPU, old / "hostA.xplane.pb")
    shutil.copy(corpus / "xspace" / GPU, new / "hostA.xplane.pb")
    shutil.copy(corpus / "xspace" / GPU, new / "hostB.xplane.pb")
    newest = tracebridge.load(logdir)
    assert newest.metadata["profile_run"] == "2024_01_02_00_00_00"
    assert {d.host for d in newest.devices} == {"hostA", "hostB"}
    assert len(newest) == 2 * len(tracebridge.load(corpus / "xspace" / GPU))
    out = tmp_path / "hosts.json"
    newest.save(out)
    again = tracebridge.load(out)  # hosts survive Chrome JSON as process labels
    assert {(d.name, d.host) for d in again.devices} == {(d.name, d.host) for d in newest.devices}
    chosen = tracebridge.load(logdir, run="2024_01_01_00_00_00")
    assert any(d.name.startswith("/device:TPU") for d in chosen.devices)
    with pytest.raises(TraceFormatError, match="no run"):
        tracebridge.load(logdir, run="nope")
    from tracebridge.readers import profile_runs
    assert profile_runs(logdir) == ["2024_01_01_00_00_00", "2024_01_02_00_00_00"]


def test_xspace_converts_to_every_writer(corpus, tmp_path):
    trace = tracebridge.load(corpus / "xspace" / GPU)
    for name in ("x.json", "x.json.gz", "x.pb", "x.pbtxt"):
        trace.save(tmp_path / name)
    back = tracebridge.load(tmp_path / "x.pb")
    nodes = trace.filter(op_type=".")  # every row with a type
    assert len(back) == int(((trace.ops["category"] == Category.OP) | (trace.ops["category"] == Category.DEVICE) |
                             (trace.ops["category"] == Category.MEMCPY)).sum())
    assert nodes is not None
    events = json.loads((tmp_path / "x.json").read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X" and e.get("cat") != "Step") == len(trace)
    again = tracebridge.load(tmp_path / "x.json")  # categories survive as the events' "cat"
    assert sorted(again.ops["category"].tolist()) == sorted(trace.ops["category"].tolist())
    assert Category.HOST in set(trace.ops["category"].tolist())


def test_reading_xspace_imports_no_tensorflow(corpus, tmp_path):
    code = f"""
import sys, json, tracebridge
for name in ({GPU!r}, {TPU!r}):
    t = tracebridge.load({str(corpus / 'xspace')!r} + '/' + name)
    t.summary(); t.info(); t.save({str(tmp_path)!r} + '/x.json'); t.save({str(tmp_path)!r} + '/x.pb')
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'xprof'))))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.usefixtures("wire_decoder")
def test_events_find_their_metadata_whatever_the_ids(corpus, tmp_path, monkeypatch):
    """TF numbers event metadata from 1, and the reader looks ids up in a table; ids that
    do not fit one (huge, or negative) are searched for instead. All give the same rows,
    and an event whose metadata is missing is left out by all: a small table's per-column
    tables, a larger table's rows ("rows" below), the search."""
    space = protos.XSpace.FromString((corpus / "xspace" / GPU).read_bytes())
    plane = next(p for p in space.planes if any(line.events for line in p.lines))
    line = next(line for line in plane.lines if line.events)
    line.events[0].metadata_id = max(plane.event_metadata) + 1000  # no such metadata

    def renumbered(shift: int) -> bytes:
        copy = protos.XSpace()
        copy.CopyFrom(space)
        for plane in copy.planes:
            metadata = {key: type(value).FromString(value.SerializeToString())
                        for key, value in plane.event_metadata.items()}
            plane.ClearField("event_metadata")
            for key, value in metadata.items():
                value.id = key + shift
                plane.event_metadata[key + shift].CopyFrom(value)
            for line in plane.lines:
                for event in line.events:
                    event.metadata_id += shift
        return copy.SerializeToString()

    traces = {}
    for shift in (0, 1 << 50, -(1 << 40)):
        path = tmp_path / f"shift{shift}.xplane.pb"
        path.write_bytes(renumbered(shift))
        traces[shift] = tracebridge.load(path)
    from tracebridge.readers import xspace
    monkeypatch.setattr(xspace, "_COMPOSED_MAX", 0)
    traces["rows"] = tracebridge.load(tmp_path / "shift0.xplane.pb")
    _, total, memory = all_events(corpus / "xspace" / GPU)

    def rows(trace) -> dict:
        texts = {column: trace.column_strings("ops", column) for column in ("name", "op_type", "kernel")}
        return {**texts, **{column: trace.ops[column].tolist()
                            for column in ("category", "start_ns", "end_ns", "lane", "step")}}

    for shift, trace in traces.items():
        assert len(trace) + memory == total - 1, shift
        assert rows(trace) == rows(traces[0]), shift


def _line_spans(raw: bytes):
    """The lines of an XSpace (owner plane, start, end), as the reader finds them."""
    from tracebridge.readers import wire
    from tracebridge.readers.xspace import _PLANE, _SPACE
    top = wire.decode(raw, [0], [len(raw)])
    _, starts, ends = top.spans(_SPACE.planes)
    return wire.decode(raw, starts, ends).spans(_PLANE.lines)


# The C loop's second pass alone, and shared by threads that split it at checkpoints: every
# 7 events, so that the corpus's files split in many places (mid-line, at a line's start).
_THREADINGS = ({"threads": 1}, {"threads": 2, "checkpoint_every": 7}, {"threads": 3, "checkpoint_every": 7},
               {"threads": 2})


def _event_columns_agree(raw: bytes, starts, ends) -> bool:
    """Where the C loop accepts the lines, wire.py's decoder gives the same columns (same
    values, same types), with one thread or several; returns whether the C loop accepted
    them (all threadings must agree on that)."""
    import numpy as np

    from tracebridge.readers import wire
    from tracebridge.readers.xspace import event_columns_compiled, event_columns_numpy
    found = [event_columns_compiled(raw, starts, ends, **threading) for threading in _THREADINGS]
    assert len({compiled is None for compiled in found}) == 1
    if found[0] is None:
        return False
    with reading_with("numpy"):
        reference = event_columns_numpy(raw, wire.decode(raw, starts, ends))
    for compiled, threading in zip(found, _THREADINGS):
        for name in ("line", "metadata_id", "offset_ps", "duration_ps", "aggregated", "stat_event", "stat_start",
                     "stat_end"):
            ours, theirs = getattr(compiled, name), getattr(reference, name)
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), (name, threading)
    return True


def test_one_pass_event_columns_are_the_decoders_ones(corpus):
    """The C loop's events (tracebridge/readers/_wirec.c: events) against wire.py's chunked
    decode, on real XSpaces of TF, xprof and JAX (GPU, TPU, CPU with XLA)."""
    from tracebridge.readers import wire
    if wire._wirec is None:
        pytest.skip("the C wire decoder is not built here")
    paths = [corpus / "xspace" / GPU, corpus / "xspace" / TPU, *sorted((corpus / "xspace").glob("jax_*.xplane.pb"))]
    for path in paths:
        raw = path.read_bytes()
        _, starts, ends = _line_spans(raw)
        assert _event_columns_agree(raw, starts, ends), path.name


def test_reading_in_two_threads_gives_the_trace_of_one(corpus, monkeypatch):
    """The read's per-event work by halves in two threads (kind lookup, gathers, clocks:
    readers/xspace.py with _fork.in_halves, here from the first rows on) and the C loop's
    threads make the same trace as one thread, column for column, on real XSpaces of TF,
    xprof and JAX (GPU, TPU, XLA on CPU, lines with their own start times)."""
    import numpy as np

    from tracebridge import _fork
    monkeypatch.setattr(_fork, "HALVES_MIN_ROWS", 0)
    paths = [corpus / "xspace" / GPU, corpus / "xspace" / TPU, *sorted((corpus / "xspace").glob("jax_*.xplane.pb"))]
    for path in paths:
        one, two = (tracebridge.load(path, workers=workers) for workers in (1, 2))
        assert one.strings == two.strings and one.steps == two.steps and one.devices == two.devices, path.name
        for kind in ("ops", "memory", "allocations", "transfers", "counters"):
            for column in one.table(kind):
                assert np.array_equal(one.table(kind)[column], two.table(kind)[column]), (path.name, kind, column)


def test_one_pass_event_columns_on_damaged_bytes(corpus):
    """Bytes changed at random inside the lines: whatever the C loop accepts, wire.py's
    decoder reads to the same columns; what it refuses goes to wire.py, which names the
    error or reads it (the reader never sees a column of the C loop's that differs)."""
    import random

    from tracebridge.readers import wire
    if wire._wirec is None:
        pytest.skip("the C wire decoder is not built here")
    raw = (corpus / "xspace" / GPU).read_bytes()
    _, starts, ends = _line_spans(raw)
    lo, hi = int(starts.min()), int(ends.max())
    chance = random.Random(35)
    accepted = refused = 0
    for _ in range(60):
        damaged = bytearray(raw)
        for _ in range(chance.randint(1, 4)):
            damaged[chance.randrange(lo, hi)] = chance.randrange(256)
        damaged = bytes(damaged)
        if _event_columns_agree(damaged, starts, ends):
            accepted += 1
            continue
        refused += 1
        with reading_with("numpy"):
            try:
                from tracebridge.readers.xspace import event_columns_numpy
                event_columns_numpy(damaged, wire.decode(damaged, starts, ends))
            except wire.WireError:
                pass
    assert accepted and refused  # both ways were taken


def test_the_readers_field_numbers_are_the_schemas():
    """The XSpace reader's field numbers, written out (it imports no protobuf), are those of
    the schema tracebridge.protos builds."""
    from tracebridge.readers.xspace import FIELD_NUMBERS
    for message, numbers in FIELD_NUMBERS.items():
        schema = vars(protos.field_numbers(message))
        assert {name: schema[name] for name in vars(numbers)} == vars(numbers), message


def test_profile_options_read_as_protobuf_reads_them():
    from tracebridge.readers.xspace import _profile_options
    options = protos.ProfileOptions(host_tracer_level=3, python_tracer_level=1, device_tracer_level=2,
                                    session_id="s", repository_path="r")
    assert _profile_options(options.SerializeToString()) == {"host_tracer_level": 3, "python_tracer_level": 1,
                                                             "device_tracer_level": 2}
    assert _profile_options(b"") == {"host_tracer_level": 0, "python_tracer_level": 0, "device_tracer_level": 0}
    for damaged in (b"\x10", b"\x72\x02\xff\xfe", b"\x12\x05ab"):  # a cut varint, bad UTF-8, a cut string
        assert _profile_options(damaged) == {"profile_options": "unreadable"}
        with pytest.raises(Exception):
            protos.ProfileOptions.FromString(damaged)


@pytest.mark.parametrize("seed", range(6))
def test_step_of_each_event_as_numpy_finds_it(seed):
    """xspace_steps._assign_steps: the C loop's one pass (runs of events in start order, a
    search where a run begins) against numpy's search of every event."""
    import numpy as np

    from tracebridge.readers import wire, xspace_steps
    if wire._wirec is None:
        pytest.skip("the C wire decoder is not built here")
    chance = np.random.default_rng(seed)
    runs = [np.sort(chance.integers(-50, 5000, int(chance.integers(0, 2000)))) for _ in range(int(chance.integers(1, 5)))]
    start = np.concatenate(runs).astype(np.int64)
    chosen = chance.random(len(start)) < 0.8
    lows = np.sort(chance.integers(0, 5000, int(chance.integers(1, 40))))
    markers = sorted((int(lo), int(lo + chance.integers(0, 300)), k, "") for k, lo in enumerate(lows))
    ids = np.arange(len(markers), dtype=np.int64) + 7
    ours = np.full(len(start), -1, dtype=np.int32)
    xspace_steps._assign_steps(ours, start, chosen, markers, ids)
    with reading_with("numpy"):
        theirs = np.full(len(start), -1, dtype=np.int32)
        xspace_steps._assign_steps(theirs, start, chosen, markers, ids)
    assert np.array_equal(ours, theirs)
