"""One large XSpace converted to .pftrace a window of steps at a time (issue 35):
``tracebridge.readers.xspace_windows`` and ``tracebridge.writers.perfetto_stream``.

The corpus's XSpaces are small, so the window size is made small here (a few hundred
events, against a million by default): each real file with steps is then cut into windows
as a 10M-event profile is. What is checked, against the whole read and the whole
conversion of the same file:

- the windows' op rows, steps, devices, lanes and counters are the whole trace's;
- the streamed .pftrace holds the same slices (track, time, duration, name, category,
  annotations) and counters as the whole conversion, read as Perfetto's trace processor
  reads a trace: every sequence's events sorted by time (the file's order at one time),
  a slice's end closing the innermost open slice of its track; flows are the whole
  conversion's less those between windows;
- the writer keeps slices nested when ops run on from one window into the next (a real
  trace cut at arbitrary times, where many do);
- inputs that are not windowed convert to the bytes ``write_perfetto(load(...))`` writes;
- bad input gives the library's error, as the whole read does.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tests.conftest import profile_logdir, run_cli
from tracebridge.errors import TraceFormatError
from tracebridge.formats import convert_perfetto, save_hosts_perfetto
from tracebridge.readers import xspace_windows
from tracebridge.readers.xspace_windows import plan_windows
from tracebridge.writers import perfetto_stream
from tracebridge.writers.perfetto_stream import write_perfetto_windows

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

HERE = Path(__file__).resolve().parent
SMALL_WINDOW = 50  # events
# Real XSpaces with several steps: JAX's GPU and CPU profiles (XLA, CUDA graphs, a
# /host:metadata plane of HLO); the TF GPU and TPU files hold one step and none.
WINDOWED = ["xspace/jax_h100_mlp_graphs.xplane.pb", "xspace/jax_h100_convnet_nographs.xplane.pb",
            "gpu/jax_encoder_graphs.xplane.pb", "gpu/jax_encoder_cudnn_nographs.xplane.pb",
            "xla/jax_cpu_convnet.xplane.pb"]


def _path(corpus: Path, name: str) -> Path:
    path = corpus / name if name.startswith("xspace/") else HERE / "data" / name
    if not path.is_file():
        pytest.skip(f"not found: {path}")
    return path


@pytest.fixture
def small_windows(monkeypatch):
    monkeypatch.setattr(xspace_windows, "WINDOW_EVENTS", SMALL_WINDOW)


def pftrace_slices(path: Path) -> dict:
    """The slices, counters and flows of a .pftrace as the trace processor makes them:
    ``slices`` a Counter of (process, thread, start, duration, name, categories,
    annotations), ``counters`` of (track, time, value), ``flows`` the flow ids begun and
    ended, ``threads`` the thread tracks' (process, name). Checks on the way: interned ids
    are defined in their sequence, events go on described tracks, every slice ends, and
    a track's slices nest in the processor's order (an end closes the innermost slice:
    one that began after another ended at the same time ... is checked by the times)."""
    trace = pb.Trace.FromString(path.read_bytes())
    interned: dict = defaultdict(lambda: defaultdict(dict))
    defaults, clock, tracks, events = {}, {}, {}, []
    for index, packet in enumerate(trace.packet):
        seq = packet.trusted_packet_sequence_id
        if packet.sequence_flags & 1:
            interned[seq].clear()
            clock.pop(seq, None)
        if packet.HasField("trace_packet_defaults"):
            defaults[seq] = packet.trace_packet_defaults
        if packet.HasField("clock_snapshot"):
            clock.update({seq: c.timestamp for c in packet.clock_snapshot.clocks if c.clock_id == 64})
        if packet.HasField("interned_data"):
            data = packet.interned_data
            for kind in ("event_names", "event_categories", "debug_annotation_names"):
                interned[seq][kind].update({e.iid: e.name for e in getattr(data, kind)})
            interned[seq]["values"].update({e.iid: e.str for e in data.debug_annotation_string_values})
        if packet.HasField("track_descriptor"):
            tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        if not packet.HasField("track_event"):
            continue
        clock[seq] += packet.timestamp
        event = packet.track_event
        track = event.track_uuid if event.HasField("track_uuid") else defaults[seq].track_event_defaults.track_uuid
        assert track in tracks, "events go on described tracks"
        mine = interned[seq]
        if event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            notes = tuple(sorted((mine["debug_annotation_names"][a.name_iid],
                                  mine["values"][a.string_value_iid] if a.HasField("string_value_iid") else
                                  a.int_value if a.HasField("int_value") else a.double_value)
                                 for a in event.debug_annotations))
            label = (mine["event_names"][event.name_iid], tuple(mine["event_categories"][c] for c in event.category_iids),
                     notes)
            events.append((clock[seq], index, track, "B", label, tuple(event.flow_ids),
                           tuple(event.terminating_flow_ids)))
        elif event.type == pb.TrackEvent.TYPE_SLICE_END:
            events.append((clock[seq], index, track, "E", None, (), ()))
        else:
            events.append((clock[seq], index, track, "C", event.counter_value, (), ()))
    events.sort(key=lambda e: (e[0], e[1]))  # the processor's order: time, then the file's

    def name(uuid: int) -> tuple:
        d = tracks[uuid]
        if d.HasField("thread"):
            return tracks[d.parent_uuid].process.process_name, d.thread.thread_name
        return tracks[d.parent_uuid].process.process_name, d.name

    stacks: dict = defaultdict(list)
    slices, counters, begun, ended = Counter(), Counter(), set(), set()
    for time, _, track, kind, label, flows, terminating in events:
        if kind == "B":
            stacks[track].append((time, label))
            begun.update(flows)
            ended.update(terminating)
        elif kind == "E":
            start, label = stacks[track].pop()
            slices[(*name(track), start, time - start, *label)] += 1
        else:
            counters[(name(track), time, label)] += 1
    assert not any(stacks.values()), "every slice ends"
    threads = {name(uuid) for uuid, d in tracks.items() if d.HasField("thread")}
    return {"slices": slices, "counters": counters, "begun": begun, "ended": ended, "threads": threads}


def op_rows(trace) -> Counter:
    """Every op as (device, lane, start, end, name, type, kernel, category, step number)."""
    ops, strings = trace.ops, trace.strings
    numbers = [s.number for s in trace.steps] + [None]
    lanes = [(trace.devices[lane.device].name, lane.name) for lane in trace.lanes]
    return Counter(zip([lanes[i] for i in ops["lane"].tolist()], ops["start_ns"].tolist(), ops["end_ns"].tolist(),
                       [strings[i] for i in ops["name"].tolist()], [strings[i] for i in ops["op_type"].tolist()],
                       [strings[i] for i in ops["kernel"].tolist()], ops["category"].tolist(),
                       [numbers[i] for i in ops["step"].tolist()]))


def assert_same_slices(streamed: Path, whole: Path) -> dict:
    ours, theirs = pftrace_slices(streamed), pftrace_slices(whole)
    missing, extra = theirs["slices"] - ours["slices"], ours["slices"] - theirs["slices"]
    assert not missing and not extra, (list(missing)[:3], list(extra)[:3])
    assert ours["counters"] == theirs["counters"]
    assert ours["begun"] == ours["ended"], "every flow has both ends"
    assert len(ours["begun"]) <= len(theirs["begun"])  # less those between windows
    assert ours["threads"] == theirs["threads"]
    return ours, theirs


# --------------------------------------------------------------------------- the reader


@pytest.mark.parametrize("name", WINDOWED)
def test_windows_hold_the_whole_reads_ops_steps_and_lanes(corpus, name):
    path = _path(corpus, name)
    plan = plan_windows(str(path), path.read_bytes(), window_events=SMALL_WINDOW)
    assert plan is not None and plan.windows >= 2
    whole = tracebridge.load(path)
    rows, steps, counters = Counter(), [], 0
    for window in plan.traces():
        assert [(d.name, d.host) for d in window.devices] == [(d.name, d.host) for d in whole.devices]
        assert [(lane.device, lane.name) for lane in window.lanes] == [(lane.device, lane.name)
                                                                      for lane in whole.lanes]
        rows += op_rows(window)
        steps += window.steps
        counters += window.counters.rows
    assert rows == op_rows(whole)
    assert steps == list(whole.steps)
    assert counters == whole.counters.rows
    assert plan.steps == len(whole.steps)


def test_small_files_and_files_without_steps_are_not_windowed(corpus):
    for name in ("xspace/jax_h100_mlp_graphs.xplane.pb", "xspace/xprof_tpu_inference_2.xplane.pb",
                 "xspace/tfprofiler_gpu_multi_worker.xplane.pb"):
        path = _path(corpus, name)
        assert plan_windows(str(path), path.read_bytes()) is None  # below 2 windows of 1M events
    tpu = _path(corpus, "xspace/xprof_tpu_inference_2.xplane.pb")  # no step markers
    assert plan_windows(str(tpu), tpu.read_bytes(), window_events=SMALL_WINDOW) is None
    gpu = _path(corpus, "xspace/tfprofiler_gpu_multi_worker.xplane.pb")  # one step: no cut
    assert plan_windows(str(gpu), gpu.read_bytes(), window_events=SMALL_WINDOW) is None


# --------------------------------------------------------------------------- the writer


@pytest.mark.parametrize("name", WINDOWED)
def test_streamed_pftrace_has_the_whole_conversions_slices(corpus, tmp_path, small_windows, name):
    path = _path(corpus, name)
    whole = tracebridge.load(path)
    whole.save(tmp_path / "whole.pftrace")
    assert convert_perfetto(path, tmp_path / "streamed.pftrace") == (len(whole), len(whole.steps))
    ours, theirs = assert_same_slices(tmp_path / "streamed.pftrace", tmp_path / "whole.pftrace")
    assert sum(ours["slices"].values()) == len(whole) + len(whole.steps)
    assert bool(ours["begun"]) == bool(theirs["begun"]), "flows within a window are written"


@pytest.mark.parametrize("name", ["xspace/tfprofiler_gpu_multi_worker.xplane.pb",
                                  "xspace/xprof_tpu_inference_2.xplane.pb"])
def test_ops_that_run_on_into_the_next_window_keep_their_slices(corpus, tmp_path, name):
    """A real trace cut at ten arbitrary times: hundreds of ops (TPU ops timed by the
    device clock, GPU kernels, host ops around them) still run when the next window
    begins; their slices, and the next window's beside them, are the whole conversion's."""
    path = _path(corpus, name)
    whole = tracebridge.load(path)._with(steps=())  # (each window would hold every step and counter)
    whole.save(tmp_path / "whole.pftrace", memory=False)
    start, end = whole.ops["start_ns"], whole.ops["end_ns"]
    edges = np.quantile(np.unique(start), np.linspace(0, 1, 11)[1:-1]).astype(np.int64)
    window = np.searchsorted(edges, start, side="right")
    running_on = sum(int((end[window == k] > start[window == k].max()).sum()) for k in range(10))
    assert running_on > 50
    write_perfetto_windows((whole._take_ops(window == k) for k in range(10)), tmp_path / "streamed.pftrace",
                           memory=False)
    assert_same_slices(tmp_path / "streamed.pftrace", tmp_path / "whole.pftrace")


def test_windows_that_overlap_are_refused(corpus, tmp_path):
    from tracebridge.errors import OutputError
    trace = tracebridge.load(_path(corpus, "xspace/jax_h100_mlp_graphs.xplane.pb"))
    with pytest.raises(OutputError, match="overlap"):
        write_perfetto_windows([trace, trace], tmp_path / "out.pftrace")
    assert not (tmp_path / "out.pftrace").exists()


def test_inputs_that_are_not_windowed_convert_to_the_same_bytes(corpus, tmp_path):
    for name in ("xspace/jax_h100_mlp_graphs.xplane.pb", "xspace/tfprofiler_gpu_multi_worker.xplane.pb",
                 "chrome/ikhlestov_cpu_timeline_01.json"):
        path = corpus / name
        if not path.is_file():
            pytest.skip(f"not found: {path}")
        tracebridge.load(path).save(tmp_path / "whole.pftrace")
        convert_perfetto(path, tmp_path / "converted.pftrace")
        assert (tmp_path / "converted.pftrace").read_bytes() == (tmp_path / "whole.pftrace").read_bytes(), name


def test_without_the_c_walker_a_file_is_read_whole(corpus, tmp_path, small_windows, monkeypatch):
    path = _path(corpus, "xspace/jax_h100_mlp_graphs.xplane.pb")
    tracebridge.load(path).save(tmp_path / "whole.pftrace")
    monkeypatch.setenv("TRACEBRIDGE_PURE_WIRE", "1")
    assert plan_windows(str(path), path.read_bytes()) is None
    convert_perfetto(path, tmp_path / "converted.pftrace")
    assert (tmp_path / "converted.pftrace").read_bytes() == (tmp_path / "whole.pftrace").read_bytes()


def test_cli_convert_streams_one_xspace(corpus, tmp_path, small_windows, monkeypatch):
    path = _path(corpus, "xspace/jax_h100_convnet_nographs.xplane.pb")
    windows = []
    read = xspace_windows.XSpaceWindows.read_window
    monkeypatch.setattr(xspace_windows.XSpaceWindows, "read_window",
                        lambda self, index: windows.append(index) or read(self, index))
    done = run_cli("convert", path, tmp_path / "out.pftrace")
    assert done.returncode == 0, done.stderr
    whole = tracebridge.load(path)
    assert f"(perfetto, {len(whole)} events, {len(whole.steps)} steps)" in done.stdout
    assert len(windows) >= 2
    whole.save(tmp_path / "whole.pftrace")
    assert_same_slices(tmp_path / "out.pftrace", tmp_path / "whole.pftrace")
    # a filter or a slice reads the whole trace as before
    windows.clear()
    assert run_cli("convert", path, tmp_path / "step.pftrace", "--step", "1").returncode == 0
    assert not windows


def test_host_by_host_streams_each_large_host(corpus, tmp_path, monkeypatch):
    logdir = profile_logdir(tmp_path / "logdir", {"worker-0": _path(corpus, "xspace/jax_h100_mlp_graphs.xplane.pb"),
                                                  "worker-1": _path(corpus, "gpu/jax_encoder_graphs.xplane.pb")})
    assert save_hosts_perfetto(logdir, tmp_path / "whole.pftrace") == 2
    written = []
    monkeypatch.setattr(xspace_windows, "WINDOW_EVENTS", SMALL_WINDOW)
    monkeypatch.setattr(perfetto_stream._WindowWriter, "write_windows",
                        lambda self, windows, progress=None, original=perfetto_stream._WindowWriter.write_windows:
                        written.append(self.host_index) or original(self, windows, progress))
    assert save_hosts_perfetto(logdir, tmp_path / "streamed.pftrace") == 2
    assert written == [0, 1]
    assert_same_slices(tmp_path / "streamed.pftrace", tmp_path / "whole.pftrace")


# --------------------------------------------------------------------------- bad input


def test_bad_input_gives_the_whole_reads_error(corpus, tmp_path, small_windows):
    """Truncated and flipped copies of a file that is windowed: the same outcome as the
    whole read, a trace or the same TraceFormatError (its file and byte), nothing written."""
    data = _path(corpus, "gpu/jax_encoder_nographs.xplane.pb").read_bytes()
    rng = np.random.default_rng(35)
    cases = [data[:cut] for cut in rng.integers(len(data) // 2, len(data), 6).tolist()]
    for at in rng.integers(len(data) // 2, len(data), 12).tolist():
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        cases.append(bytes(flipped))
    errors = 0
    for index, case in enumerate(cases):
        path = tmp_path / f"case{index}.xplane.pb"
        path.write_bytes(case)
        out = tmp_path / f"case{index}.pftrace"
        try:
            tracebridge.load(path)
            expected = None
        except TraceFormatError as error:
            expected = str(error)
        if expected is None:
            convert_perfetto(path, out)
            assert out.is_file()
            continue
        errors += 1
        with pytest.raises(TraceFormatError) as raised:
            convert_perfetto(path, out)
        assert str(raised.value) == expected
        assert not out.exists()
    assert errors >= 3


# --------------------------------------------------------------------------- TF 2.21


@pytest.mark.tf
def test_a_tf_profile_of_many_steps_streams(tmp_path, small_windows):
    """A real TF 2.21 profile as bench/gen_xspace.py makes the 10M-event one (a
    tf.function of tiny ops, a ``Trace("train", step_num=i)`` per step), smaller."""
    path = tmp_path / "profile.xplane.pb"
    done = subprocess.run([sys.executable, str(HERE.parent / "bench" / "gen_xspace.py"), str(path), "30", "20"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    plan = plan_windows(str(path), path.read_bytes(), window_events=SMALL_WINDOW)
    assert plan is not None and plan.windows >= 5 and plan.steps == 20
    whole = tracebridge.load(path)
    whole.save(tmp_path / "whole.pftrace")
    assert convert_perfetto(path, tmp_path / "streamed.pftrace") == (len(whole), 20)
    assert_same_slices(tmp_path / "streamed.pftrace", tmp_path / "whole.pftrace")
