"""The Perfetto writer (.pftrace), its reader, slices of traces, and ``tracebridge view``.

Every .pftrace written here is decoded with Perfetto's official schema (``perfetto_trace_pb2``
from PyPI's ``perfetto`` package) and checked packet by packet: interned ids are defined
earlier in their sequence, slices nest on every track, timestamps of a sequence never go
back, flows link two tracks, and the slice and counter counts equal those of the Chrome
trace of the same trace (TF1 CPU and GPU timelines, a real TF 2.21 capture, GPU and TPU
XSpaces, a multi-host logdir); each format's flows are the edges between its own tracks.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tests.conftest import drawn_flows, profile_logdir, run_cli
from tracebridge.errors import OptionError, TraceFormatError
from tracebridge.model.hlo import TF_OP_SPAN_CAT

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

CORPUS_FILES = ["chrome/ikhlestov_cpu_timeline_01.json", "chrome/ikhlestov_cpu_timeline_02_step_0.json",
                "chrome/ikhlestov_gpu_timeline_01.json", "chrome/blackbox_attacks_timeline_01.json",
                "chrome/ikhlestov_gpu_timeline_03_merged_5_runs.json",
                "xspace/tfprofiler_gpu_multi_worker.xplane.pb", "xspace/xprof_tpu_inference_2.xplane.pb",
                "xspace/jax_h100_mlp_graphs.xplane.pb"]
INCREMENTAL_CLEARED = 1


def check_pftrace(path: Path) -> dict:
    """Decode ``path`` with the official schema and check the rules every tracebridge
    .pftrace keeps; returns counts of slices, flows and counters and per-track slices."""
    trace = pb.Trace.FromString(path.read_bytes())
    interned: dict[int, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    defaults: dict[int, pb.TracePacketDefaults] = {}
    clock: dict[int, int] = {}
    tracks: dict[int, pb.TrackDescriptor] = {}
    open_slices: dict[int, list] = defaultdict(list)
    closed: dict[int, list] = defaultdict(list)
    counts = Counter()
    flows_started, flows_ended = {}, {}  # flow id -> the track of that end
    for packet in trace.packet:
        seq = packet.trusted_packet_sequence_id
        assert seq, "every packet names its sequence"
        if packet.sequence_flags & INCREMENTAL_CLEARED:
            interned[seq].clear()
            clock.pop(seq, None)
        if packet.HasField("trace_packet_defaults"):
            defaults[seq] = packet.trace_packet_defaults
        if packet.HasField("clock_snapshot"):
            clocks = {c.clock_id: c for c in packet.clock_snapshot.clocks}
            assert clocks[6].timestamp == clocks[1].timestamp, "BOOTTIME and REALTIME are the trace's own time"
            if 64 in clocks:
                assert clocks[64].is_incremental
                clock[seq] = clocks[64].timestamp
        if packet.HasField("interned_data"):
            data = packet.interned_data
            for kind in ("event_names", "event_categories", "debug_annotation_names",
                         "debug_annotation_string_values"):
                for entry in getattr(data, kind):
                    interned[seq][kind].add(entry.iid)
        if packet.HasField("track_descriptor"):
            descriptor = packet.track_descriptor
            if descriptor.HasField("parent_uuid"):
                assert descriptor.parent_uuid in tracks, "a track's parent is described first"
            tracks[descriptor.uuid] = descriptor
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        assert seq in clock, "an event's sequence has its clock snapshot first"
        clock[seq] += packet.timestamp  # incremental: a delta, never negative (uint64)
        time = clock[seq]
        track = event.track_uuid if event.HasField("track_uuid") else defaults[seq].track_event_defaults.track_uuid
        assert track in tracks, "events go on described tracks"
        mine = interned[seq]
        if event.name_iid:
            assert event.name_iid in mine["event_names"]
        for iid in event.category_iids:
            assert iid in mine["event_categories"]
        for annotation in event.debug_annotations:
            assert annotation.name_iid in mine["debug_annotation_names"]
            if annotation.HasField("string_value_iid"):
                assert annotation.string_value_iid in mine["debug_annotation_string_values"]
        if event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stack = open_slices[track]
            assert not stack or stack[-1][0] <= time
            stack.append((time, event))
            counts["slices"] += 1
            flows_started.update(dict.fromkeys(event.flow_ids, track))
            flows_ended.update(dict.fromkeys(event.terminating_flow_ids, track))
        elif event.type == pb.TrackEvent.TYPE_SLICE_END:
            begin, _ = open_slices[track].pop()  # an end closes the innermost open slice
            assert begin <= time
            closed[track].append((begin, time))
        elif event.type == pb.TrackEvent.TYPE_COUNTER:
            assert tracks[track].HasField("counter")
            counts["counters"] += 1
    assert not any(open_slices.values()), "every slice ends"
    assert flows_started.keys() == flows_ended.keys(), "every flow has both ends"
    assert all(flows_started[f] != flows_ended[f] for f in flows_started), "a flow links two tracks"
    counts["flows"] = len(flows_started)
    # nesting: on every track, slices are disjoint or nested
    for spans in closed.values():
        ends: list[int] = []
        for begin, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while ends and ends[-1] <= begin:
                ends.pop()
            assert not ends or end <= ends[-1], "slices of a track nest"
            ends.append(end)
    counts["tracks"] = len(tracks)
    spans = sorted(span for track_spans in closed.values() for span in track_spans)
    return {"counts": counts, "tracks": tracks, "trace": trace, "spans": spans}


def slice_spans(trace) -> list[tuple[int, int]]:
    """(start, end) of every op and step: the slices a .pftrace of ``trace`` holds, each with
    its own times when a track's begin/end events pair up as its ops do."""
    ops = trace.ops
    return sorted(list(zip(ops["start_ns"].tolist(), ops["end_ns"].tolist()))
                  + [(s.start_ns, s.end_ns) for s in trace.steps])


def chrome_counts(path: Path) -> Counter:
    """The events of a Chrome trace a .pftrace of the same trace holds too: every op, step,
    flow and counter (not the TF op spans the Chrome writer derives above XLA lanes)."""
    events = json.loads(path.read_text())["traceEvents"]
    phases = Counter(e["ph"] for e in events if e.get("cat") != TF_OP_SPAN_CAT)
    return Counter(slices=phases["X"], flows=phases["s"], counters=phases["C"])


def assert_same_counts(trace, folder: Path, name: str) -> dict:
    """The .pftrace holds the Chrome trace's slices and counters, and the arrows of its
    own tracks: an op that starts as its producer ends shares their lane at nanoseconds,
    where the Chrome trace may put it on a sub-row and draw one more."""
    ours = folder / f"{name}.pftrace"
    chrome = folder / f"{name}.json"
    trace.save(ours)
    trace.save(chrome, memory=True)
    checked = check_pftrace(ours)
    expected = chrome_counts(chrome)
    for kind in ("slices", "counters"):
        assert checked["counts"][kind] == expected[kind], (name, kind, checked["counts"], expected)
    assert checked["counts"]["flows"] == drawn_flows(trace, decimal_times=False), (name, checked["counts"])
    assert expected["flows"] == drawn_flows(trace, decimal_times=True), (name, expected)
    return checked


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_pftrace_decodes_with_the_official_schema(corpus, tmp_path, name):
    source = corpus / name
    if not source.is_file():
        pytest.skip(f"corpus file not found: {source}")
    trace = tracebridge.load(source)
    checked = assert_same_counts(trace, tmp_path, source.name.split(".")[0])
    assert checked["counts"]["slices"] == len(trace) + len(trace.steps)
    assert checked["spans"] == slice_spans(trace)
    names = {d.process.process_name for d in checked["tracks"].values() if d.HasField("process")}
    assert {d.name for d in trace.devices} <= names


def test_gpu_xspace_layout_flows_and_counters(corpus, tmp_path):
    trace = tracebridge.load(corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")
    checked = assert_same_counts(trace, tmp_path, "gpu")
    assert checked["counts"]["flows"] > 1000  # launch -> kernel
    assert checked["counts"]["counters"] > 0
    threads = [d for d in checked["tracks"].values() if d.HasField("thread")]
    assert any(d.thread.thread_name.endswith(" (derived)") for d in threads)
    # a device's lanes in the Chrome order: their ranks ascend in the order written
    by_parent = defaultdict(list)
    for d in threads:
        by_parent[d.parent_uuid].append(d.sibling_order_rank)
    assert all(ranks == sorted(ranks) for ranks in by_parent.values())
    # a kernel's slice: the TF op and op type as annotations, its category
    names = {}
    for packet in checked["trace"].packet:
        if packet.HasField("interned_data"):
            for entry in packet.interned_data.debug_annotation_names:
                names[(packet.trusted_packet_sequence_id, entry.iid)] = entry.name
    seen = {names[(p.trusted_packet_sequence_id, a.name_iid)] for p in checked["trace"].packet
            if p.HasField("track_event") for a in p.track_event.debug_annotations}
    assert {"tf_op", "op_type", "step"} <= seen


def test_overlapping_transfers_keep_their_times(tmp_path):
    """RecvTensor transfers that overlap on one device (a TF1 cluster's, most steps) go to
    the network track and its sub-rows: on one track, the later one's end closed the first
    one, and both slices got the wrong times."""
    from tests.test_roundtrip import _transfer_trace
    trace = _transfer_trace([(100, 500), (300, 800), (900, 1000)], lanes=3)
    out = tmp_path / "network.pftrace"
    trace.save(out)
    checked = check_pftrace(out)
    assert checked["spans"] == slice_spans(trace)
    network = [d for d in checked["tracks"].values() if d.HasField("thread") and d.thread.thread_name == "network"]
    assert len(network) == 2


def test_op_starting_as_its_producer_ends_shares_its_track(tmp_path):
    """A consumer that starts the nanosecond its producer ends (a TF1 executor's next op on
    the same thread): at today's epoch times Perfetto reads the JSON's decimal start up to
    250 ns early, so the Chrome trace puts it on the lane's sub-row with an arrow; the
    .pftrace keeps both on the lane at their exact times, with none (a CI run's TF1 step
    had three such pairs)."""
    from tracebridge.model.builder import TraceBuilder
    builder = TraceBuilder({"source_format": "test"})
    device = builder.device("/job:localhost/replica:0/task:0/device:CPU:0")
    step = builder.step(0)
    base = 1_795_862_082_448_219_031  # the CI run's step start
    builder.add_op(name="read", op_type="ReadVariableOp", start_ns=base, end_ns=base + 1001, device=device,
                   step=step)
    builder.add_op(name="mean", op_type="Mean", start_ns=base + 1001, end_ns=base + 3000, device=device,
                   step=step, inputs=("read",))
    trace = builder.build()
    checked = assert_same_counts(trace, tmp_path, "touching")
    assert checked["counts"]["flows"] == 0
    assert checked["spans"] == slice_spans(trace)
    lanes = [d.thread.thread_name for d in checked["tracks"].values() if d.HasField("thread")]
    assert sorted(lanes) == ["lane 0", "steps"]
    events = json.loads((tmp_path / "touching.json").read_text())["traceEvents"]
    threads = {e["name"]: e["tid"] for e in events if e["ph"] == "X" and e.get("cat") != "Step"}
    assert threads["ReadVariableOp"] != threads["Mean"]
    assert [e["ph"] for e in events if e["ph"] in "st"] == ["s", "t"]


def test_tf1_capture(tf_run, tmp_path):
    """A real TF 2.21 FULL_TRACE step (a TF1 session): inputs and shapes as annotations."""
    trace = tracebridge.load(tf_run["pb"])
    checked = assert_same_counts(trace, tmp_path, "tf1")
    assert checked["counts"]["slices"] == len(trace) + len(trace.steps)
    back = tracebridge.load(tmp_path / "tf1.pftrace")
    assert_round_trip(trace, back)
    assert back.outputs.rows > 0


def multi_host_logdir(corpus: Path, folder: Path) -> Path:
    return profile_logdir(folder / "logdir", {"worker-0": corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb",
                                              "worker-1": corpus / "xspace" / "xprof_tpu_inference_2.xplane.pb"})


@pytest.mark.parametrize("workers", [1, 2])
def test_multi_host_logdir_host_by_host(corpus, tmp_path, workers):
    from tracebridge.formats import save_hosts_perfetto
    if workers == 2:
        pytest.importorskip("distributed")
    logdir = multi_host_logdir(corpus, tmp_path)
    merged = tracebridge.load(logdir)
    merged.save(tmp_path / "merged.json", memory=True)
    assert save_hosts_perfetto(logdir, tmp_path / "hosts.pftrace", workers=workers) == 2
    checked = check_pftrace(tmp_path / "hosts.pftrace")
    expected = chrome_counts(tmp_path / "merged.json")
    for kind in ("slices", "flows", "counters"):
        assert checked["counts"][kind] == expected[kind], (kind, checked["counts"], expected)
    labels = {label for d in checked["tracks"].values() if d.HasField("process") for label in d.process.process_labels}
    assert labels == {"host:worker-0", "host:worker-1"}


def test_cli_converts_a_logdir_host_by_host(corpus, tmp_path):
    logdir = multi_host_logdir(corpus, tmp_path)
    done = run_cli("convert", logdir, tmp_path / "out.pftrace")
    assert done.returncode == 0, done.stderr
    assert "host by host" in done.stdout
    back = tracebridge.load(tmp_path / "out.pftrace")
    assert len(back) == len(tracebridge.load(logdir))


def assert_round_trip(trace, back) -> None:
    key = ["device", "start_ns", "end_ns", "name", "kernel", "lane"]
    ours = trace.to_dataframe().sort_values(key, kind="stable").reset_index(drop=True)
    theirs = back.to_dataframe().sort_values(key, kind="stable").reset_index(drop=True)
    assert list(ours.columns) == list(theirs.columns)
    for column in ours.columns:
        assert (ours[column].values == theirs[column].values).all(), column
    assert [(lane.device, lane.name) for lane in trace.lanes] == [(lane.device, lane.name) for lane in back.lanes]
    assert [(d.name, d.host) for d in trace.devices] == [(d.name, d.host) for d in back.devices]
    assert [(s.number, s.start_ns, s.end_ns) for s in trace.steps] == [(s.number, s.start_ns, s.end_ns)
                                                                        for s in back.steps]
    assert np.array_equal(np.sort(trace.ops["category"]), np.sort(back.ops["category"]))
    assert sorted(trace.column_strings("inputs", "name")) == sorted(back.column_strings("inputs", "name"))
    from tracebridge.writers.chrome import _merged_counters
    allocator, time_ns, in_use = _merged_counters(trace.counters)
    assert back.counters.rows == len(time_ns)
    assert sorted(zip([trace.strings[a] for a in allocator.tolist()], time_ns.tolist(), in_use.tolist())) == \
        sorted(zip(back.column_strings("counters", "allocator"), back.counters["time_ns"].tolist(),
                   back.counters["bytes_in_use"].tolist()))


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_round_trip(corpus, tmp_path, name):
    pytest.importorskip("pandas")
    source = corpus / name
    if not source.is_file():
        pytest.skip(f"corpus file not found: {source}")
    trace = tracebridge.load(source)
    trace.save(tmp_path / "t.pftrace")
    back = tracebridge.load(tmp_path / "t.pftrace")
    assert back.source_format == "perfetto"
    assert_round_trip(trace, back)
    ours, theirs = trace.summary().to_dict(), back.summary().to_dict()
    assert (theirs["total_ns"], theirs["op_count"]) == (ours["total_ns"], ours["op_count"])
    for key in ("by_op", "by_type", "by_device"):  # rows of equal time may come in another order
        assert sorted(theirs[key], key=str) == sorted(ours[key], key=str), key
    # launch flows survive: the same arrows once more
    back.save(tmp_path / "again.pftrace")
    assert check_pftrace(tmp_path / "again.pftrace")["counts"] == check_pftrace(tmp_path / "t.pftrace")["counts"]


def test_bad_pftrace_is_one_clear_error(tmp_path, corpus):
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0fgarbage")
    with pytest.raises(TraceFormatError):
        tracebridge.load(bad)
    done = run_cli("info", bad)
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr
    other = tmp_path / "other.pftrace"  # a valid trace without track events
    other.write_bytes(pb.Trace(packet=[pb.TracePacket(timestamp=1, trusted_packet_sequence_id=1)]).SerializeToString())
    with pytest.raises(TraceFormatError, match="without track events"):
        tracebridge.load(other)


# --------------------------------------------------------------------------- slices


def test_slice_by_steps_window_and_duration(corpus):
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    two = trace.slice(steps="1-2")
    assert [s.number for s in two.steps] == [1, 2]
    kept_steps = {two.steps[i].number for i in two.ops["step"].tolist() if i >= 0}
    assert kept_steps == {1, 2}
    assert "steps 1-2" in two.metadata["slice"] and "left out" in two.metadata["notes"]
    assert trace.slice(steps="1,3").steps == (trace.steps[1], trace.steps[3])
    assert trace.slice(steps=[0]).steps == (trace.steps[0],)

    origin = trace.start_ns
    window = trace.slice(start="1ms", end="2ms")
    assert len(window) > 0
    from tracebridge.model.accelerator import launches
    followers = np.zeros(len(window), dtype=bool)
    followers[list(launches(window))] = True  # kernels stay with their launch, wherever they fall
    assert (window.ops["end_ns"][~followers] >= origin + 1_000_000).all()
    assert (window.ops["start_ns"][~followers] <= origin + 2_000_000).all()

    long = trace.slice(min_duration="10us")
    durations = long.ops["end_ns"] - long.ops["start_ns"]
    short_before = int(((trace.ops["end_ns"] - trace.ops["start_ns"]) < 10_000).sum())
    kept_short = int((durations < 10_000).sum())  # kernels of kept ops stay with them
    assert f"dropped {short_before - kept_short} events shorter" in long.metadata["slice"]
    assert len(long) == len(trace) - short_before + kept_short


def test_slice_keeps_the_kernels_of_kept_ops(corpus):
    trace = tracebridge.load(corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")
    from tracebridge.model.accelerator import launches
    sliced = trace.slice(start="100ms", end="300ms", min_duration="5us")
    pairs = launches(sliced)
    assert pairs, "launch -> kernel pairs stay in the slice"
    # every launch the conditions keep has all its kernels, however short or late they are
    ops, origin = trace.ops, trace.start_ns
    kept_launches = [k for k, h in launches(trace).items() if
                     ops["end_ns"][h] >= origin + 100_000_000 and ops["start_ns"][h] <= origin + 300_000_000
                     and ops["end_ns"][h] - ops["start_ns"][h] >= 5_000]
    assert len(pairs) == len(kept_launches)
    assert "kernels or copies of kept ops" in sliced.metadata["slice"]


@pytest.mark.parametrize("bad", [{"steps": "9"}, {"steps": "x"}, {"start": "1 parsec"}, {"min_duration": "10"},
                                 {"start": "2ms", "end": "1ms"}])
def test_slice_refuses_bad_options(corpus, bad):
    trace = tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    with pytest.raises(OptionError):
        trace.slice(**bad)


@pytest.mark.parametrize("suffix", [".json", ".pftrace", ".html", ".pb"])
def test_cli_slices_every_output(corpus, tmp_path, suffix):
    source = corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"
    out = tmp_path / f"out{suffix}"
    done = run_cli("convert", source, out, "--steps", "2", "--min-duration", "5us")
    assert done.returncode == 0, done.stderr
    assert "slice: steps 2" in done.stderr
    expected = tracebridge.load(source).slice(steps="2", min_duration="5us")
    if suffix in (".json", ".pftrace", ".pb"):
        assert len(tracebridge.load(out)) == len(expected)
    else:
        assert out.stat().st_size > 0
    refused = run_cli("convert", source, out, "--steps", "77")
    assert refused.returncode == 2 and "no such step" in refused.stderr


# --------------------------------------------------------------------------- view


def test_view_serves_the_pftrace_once_for_the_perfetto_ui(corpus, tmp_path):
    from tracebridge.view import serve_for_perfetto
    trace_file = tmp_path / "run.pftrace"
    tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json").save(trace_file)
    opened, fetched, fetchers = [], {}, []

    def fetch(url: str) -> None:
        target = url.split("url=", 1)[1]
        with urllib.request.urlopen(urllib.request.Request(target, headers={"Origin": "https://ui.perfetto.dev"}),
                                    timeout=10) as response:
            fetched["cors"] = response.headers["Access-Control-Allow-Origin"]
            fetched["body"] = response.read()

    def browser(url: str) -> bool:  # a "browser" that is a local HTTP client, never the internet
        opened.append(url)
        fetchers.append(threading.Thread(target=fetch, args=(url,), daemon=True))
        fetchers[-1].start()
        return True

    messages = []

    class Out:
        def write(self, text):
            messages.append(text)

        def flush(self):
            pass

    assert serve_for_perfetto(trace_file, port=0, open_browser=browser, out=Out(), timeout_s=30)
    for fetcher in fetchers:  # the server stops once it has sent the file; the client may still be reading
        fetcher.join(timeout=30)
    assert opened and opened[0].startswith("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:")
    assert fetched["cors"] == "https://ui.perfetto.dev"
    assert fetched["body"] == trace_file.read_bytes()
    # the server stopped: the port no longer answers
    with pytest.raises(OSError):
        urllib.request.urlopen(opened[0].split("url=", 1)[1], timeout=2)


def test_view_prints_the_url_without_a_browser(corpus, tmp_path):
    from tracebridge.view import serve_for_perfetto
    trace_file = tmp_path / "run.pftrace"
    tracebridge.load(corpus / "chrome" / "ikhlestov_gpu_timeline_01.json").save(trace_file)
    said = []

    class Out:
        def write(self, text):
            said.append(text)

        def flush(self):
            pass

    def no_browser(url: str) -> bool:
        return False

    served = threading.Thread(target=lambda: said.append(
        serve_for_perfetto(trace_file, port=0, open_browser=no_browser, out=Out(), timeout_s=30)))
    served.start()
    for _ in range(600):  # up to 30 s: the server thread may wait long for a CPU on a loaded machine
        text = "".join(s for s in said if isinstance(s, str))
        if "until the UI has fetched it" in text:
            break
        threading.Event().wait(0.05)
    text = "".join(s for s in said if isinstance(s, str))
    assert "no browser could be started" in text
    url = text.split("open this URL:\n", 1)[1].split("\n", 1)[0]
    with urllib.request.urlopen(url.split("url=", 1)[1], timeout=10) as response:
        assert response.read() == trace_file.read_bytes()
    served.join(10)
    assert said[-1] is True


def test_two_processes_and_small_chunks_write_the_same_file(corpus, tmp_path, monkeypatch):
    """The forked second writer (large traces) and chunked tracks give the bytes of one
    process writing whole tracks."""
    from tracebridge.writers import perfetto
    trace = tracebridge.load(corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")
    trace.save(tmp_path / "one.pftrace", workers=1)
    trace.save(tmp_path / "two.pftrace", workers=2)
    assert (tmp_path / "one.pftrace").read_bytes() == (tmp_path / "two.pftrace").read_bytes()
    monkeypatch.setattr(perfetto, "CHUNK_EVENTS", 997)
    trace.save(tmp_path / "chunks.pftrace", workers=2)
    assert (tmp_path / "chunks.pftrace").read_bytes() == (tmp_path / "one.pftrace").read_bytes()
    assert not list(tmp_path.glob(".tracebridge-*")), "no part file is left"


# --- the encoder's C loop and numpy alone write the same bytes -------------------------------

@pytest.mark.parametrize("name", CORPUS_FILES)
def test_compiled_and_numpy_encoders_write_the_same_bytes(corpus, tmp_path, monkeypatch, name):
    """Records assembled by the C loop of protowire (where built) are the numpy path's,
    byte for byte; TRACEBRIDGE_PURE_WIRE=1 picks numpy (tests/conftest.py: reading_with)."""
    from tracebridge.writers import protowire
    if protowire._protowirec is None:
        pytest.skip("the C encoder loop is not built here (no C compiler at install time)")
    source = corpus / name
    if not source.is_file():
        pytest.skip(f"corpus file not found: {source}")
    trace = tracebridge.load(source)
    trace.save(tmp_path / "compiled.pftrace", workers=1)
    monkeypatch.setenv("TRACEBRIDGE_PURE_WIRE", "1")
    assert not protowire.compiled()
    trace.save(tmp_path / "numpy.pftrace", workers=1)
    assert (tmp_path / "compiled.pftrace").read_bytes() == (tmp_path / "numpy.pftrace").read_bytes()


def test_compiled_encoder_is_built_where_a_compiler_is():
    """CI machines have gcc: the benchmark figures assume the C loop (as for the decoder,
    tests/test_wire.py), so its absence there must not go unnoticed."""
    import shutil

    from tracebridge.writers import protowire
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the numpy encoder is the one in use")
    assert protowire._protowirec is not None


def test_encoder_c_loop_refuses_spans_outside_their_buffers():
    """A piece or record that would read or write past a buffer raises; nothing is copied
    out of bounds (the numpy path would raise an IndexError). The merge agrees with numpy's."""
    from tracebridge.writers import protowire
    if protowire._protowirec is None:
        pytest.skip("the C encoder loop is not built here")
    gather, varints = protowire._protowirec.gather, protowire._protowirec.varints
    data = np.frombuffer(b"abcdef", dtype=np.uint8)
    out = np.zeros(8, dtype=np.uint8)
    gather(out, np.array([0, 3], np.int64), [(np.array([3, 3], np.int64), data, np.array([0, 3], np.int64))])
    assert out.tobytes() == b"abcdef\0\0"
    for lengths, starts, position in (([3, 4], [0, 3], [0, 3]), ([3, 3], [0, 4], [0, 3]), ([3, 3], [0, 3], [0, 6]),
                                      ([3, -1], [0, 3], [0, 3]), ([3, 3], [-1, 3], [0, 3]), ([3, 3], [0, 3], [-1, 3])):
        with pytest.raises(ValueError):
            gather(out, np.array(position, np.int64), [(np.array(lengths, np.int64), data, np.array(starts, np.int64))])
    with pytest.raises(ValueError):  # one length per record
        gather(out, np.array([0, 3], np.int64), [(np.array([3], np.int64), data, np.array([0, 3], np.int64))])
    values = np.array([1, 300, 1 << 63], dtype=np.uint64)
    matrix = np.zeros((3, 11), dtype=np.uint8)
    varints(values, matrix, 1)
    assert [bytes(row[1:1 + n]) for row, n in zip(matrix, protowire.varint_lengths(values))] == \
        [protowire.varint_bytes(int(v)) for v in values]
    with pytest.raises(ValueError):  # 1 << 63 needs 10 bytes after the column
        varints(values, np.zeros((3, 10), dtype=np.uint8), 1)
    keys = np.array([1, 5, 9], np.int64), np.array([5, 2, 8], np.int64)
    assert protowire.merged_order(*keys, np.array([1, 0, 2], np.int64)).tolist() == [0, 4, 1, 3, 5, 2]
    with pytest.raises(ValueError):  # a row of the second sequence past its end
        protowire._protowirec.merge(*keys, np.array([1, 0, 3], np.int64), np.empty(6, np.int64))
