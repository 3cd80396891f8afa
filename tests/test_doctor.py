"""``tracebridge doctor``: each problem code on a real capture that has the problem (TF 2.21 on
this CPU, corpus files, folders laid out from real files, real XSpaces with the profiler's own
error and warning text set in their fields), and every healthy capture exits 0 with nothing to
report."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracebridge
from tracebridge import protos
from tracebridge.analysis.run.doctor import CODES
from tests.conftest import profile_logdir, run_cli

HELPERS = Path(__file__).parent / "helpers"
GPU = "tfprofiler_gpu_multi_worker.xplane.pb"
TPU = "xprof_tpu_inference_2.xplane.pb"
# TF's own texts (XLA's cupti_tracer.cc ErrorIfAny and cupti_collector.cc
# ReportNumEventsIfDropped), as its GPU tracer puts them in XSpace.errors and .warnings.
CUPTI_PRIVILEGE_ERROR = "34.83.195.179: Insufficient privilege to run libcupti (you need root permission)."
DROPPED_WARNING = ("Detected GPU events dropped on 34.83.195.179: Profiler has collected 2097152 driver events "
                   "and 2097152 device events. 1834 events dropped because total device(activity) events "
                   "reaches max.")


def _capture(root: Path, mode: str) -> Path:
    out = root / mode
    done = subprocess.run([sys.executable, str(HELPERS / "doctor_captures.py"), str(out), mode],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """The real TF captures of tests/helpers/doctor_captures.py, both modes."""
    pytest.importorskip("tensorflow")
    root = tmp_path_factory.mktemp("doctor")
    return {"plain": _capture(root, "plain"), "bfc": _capture(root, "bfc")}


def _xplane(logdir: Path) -> Path:
    (found,) = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
    return found


def doctor_json(*paths) -> tuple[int, dict]:
    done = run_cli("doctor", *paths, "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def codes(*paths) -> list[str]:
    status, found = doctor_json(*paths)
    # warnings (no_memory_records) are reported but do not fail the check
    assert found["ok"] == all(p["severity"] == "warning" for p in found["problems"])
    assert status == (0 if found["ok"] else 1)
    return [p["code"] for p in found["problems"]]


def _edit_xspace(source: Path, target: Path, edit) -> Path:
    space = protos.XSpace.FromString(source.read_bytes())
    edit(space)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(space.SerializeToString())
    return target



# --- healthy captures: nothing to report ------------------------------------------------------
@pytest.mark.tf
def test_healthy_captures_of_each_kind_report_nothing(captures, tf_run):
    healthy = [_xplane(captures["bfc"] / "healthy"), captures["bfc"] / "healthy",  # TF2 with BFC and steps
               captures["plain"] / "full.pb", captures["plain"] / "software.pb",  # TF1 trace levels
               tf_run["pb"], tf_run["pbtxt"], tf_run["events_dir"], tf_run["timeline"]]
    for path in healthy:  # (a ProfilerHook's events of 2 steps: few_steps, tested on its own below)
        done = run_cli("doctor", path, "--min-steps", "1")
        assert done.returncode == 0 and done.stdout == "" and done.stderr == "", (path, done.stdout, done.stderr)
        assert tracebridge.doctor(path).ok
    trace = tracebridge.load(captures["bfc"] / "healthy")
    assert trace.counters.rows and trace.steps  # healthy indeed: memory events and marked steps
    assert tracebridge.doctor(trace).problems == []


def test_healthy_corpus_profiles_report_nothing(corpus):
    for name in ("jax_h100_mlp_graphs.xplane.pb", "jax_h100_convnet_nographs.xplane.pb"):
        assert codes(corpus / "xspace" / name) == []


# --- each code on its real case -----------------------------------------------------------------
@pytest.mark.tf
def test_no_trace_level_on_runs_without_a_trace_level(captures):
    empty = captures["plain"] / "notrace.pb"
    assert empty.stat().st_size == 0  # what TF writes for session.run(..., run_metadata=md) alone
    done = run_cli("doctor", empty)
    assert done.returncode == 1
    line = done.stdout.splitlines()[0]
    assert line.startswith("no_trace_level: ") and "0 bytes" in line and "FULL_TRACE" in line
    _, found = doctor_json(captures["plain"] / "partition_only.pb")
    (problem,) = found["problems"]
    assert problem["code"] == "no_trace_level" and "1 partition_graphs" in problem["evidence"]
    assert "RunOptions(trace_level=" in problem["fix"]


def test_empty_files_say_so_and_where(corpus, tmp_path):
    """A 0-byte trace file is an empty file (layout), whatever its format, except a RunMetadata:
    session.run(..., run_metadata=md) without a trace_level leaves one that serializes to 0 bytes."""
    for name in ("timeline.json", "timeline.json.gz", "host.xplane.pb", "run.pickle", "trace.pftrace"):
        path = tmp_path / name
        path.write_bytes(b"")
        done = run_cli("doctor", path)
        assert done.returncode == 1, (name, done.stdout, done.stderr)
        assert done.stdout.startswith(f"layout: {path}: an empty file ({name} is 0 bytes"), done.stdout
        assert "session.run" not in done.stdout and "trace_level" not in done.stdout
    for name in ("run_metadata.pb", "run_metadata.pbtxt"):
        (tmp_path / name).write_bytes(b"")
        assert codes(tmp_path / name) == ["no_trace_level"]
    xplane = corpus / "xspace" / GPU  # several hosts, one of them an empty file
    _, found = doctor_json(xplane, tmp_path / "host.xplane.pb")
    assert [(p["code"], p["path"]) for p in found["problems"]] == [("layout", str(tmp_path / "host.xplane.pb"))]


def test_the_profilers_marker_file_given_for_the_profile(corpus, tmp_path):
    marker = corpus / "events" / "events.out.tfevents.1583461681.localhost.profile-empty"
    done = run_cli("doctor", marker)  # alone in its folder: no profile beside it
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"layout: {marker}: the profiler's marker file, and no profile beside it")
    assert "plugins/profile/<run>/" in done.stdout
    logdir = profile_logdir(tmp_path / "logdir", {"worker": corpus / "xspace" / GPU})  # where it belongs
    shutil.copy(marker, logdir)
    _, found = doctor_json(logdir / marker.name)
    (problem,) = found["problems"]
    assert problem["code"] == "layout" and problem["missing"] == "the profiler's marker file, not the profile"
    assert "plugins/profile/<run>/" in problem["evidence"] and "2026_01_01_00_00_00" in problem["evidence"]
    assert problem["fix"] == f"give the logdir instead: tracebridge doctor {logdir} (tensorboard --logdir {logdir})"
    assert "layout" not in codes(logdir)  # the logdir itself is laid out well


def test_tracebridges_own_chrome_output_is_checked(tmp_path):
    """tracebridge's .json keeps its steps and, when asked, its memory: doctor checks it as
    it checks timeline.py's files, where another writer's Chrome trace gets "not checked"."""
    from tests.conftest import RECORDED_TF1, file_paths
    trace = tracebridge.load(file_paths(RECORDED_TF1)["pb"])
    trace.save(tmp_path / "with_memory.json", memory=True)
    trace.save(tmp_path / "plain.json")
    assert tracebridge.load(tmp_path / "plain.json").metadata["chrome_writer"] == "tracebridge"
    done = run_cli("doctor", tmp_path / "with_memory.json", "--min-steps", "1")  # (one step: few_steps, below)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    _, found = doctor_json(tmp_path / "plain.json")  # written without memory: a warning, with the fix
    assert found["not_checked"] == [] and found["ok"]
    (problem,) = [p for p in found["problems"] if p["code"] != "few_steps"]
    assert (problem["code"], problem["severity"]) == ("no_memory_records", "warning")
    assert "memory=True" in problem["fix"] and "--memory" in problem["fix"]


def test_warnings_are_reported_but_do_not_fail(corpus):
    """no_memory_records says what a default capture leaves out (timeline.py without
    show_memory, TF2 on a CPU without the BFC allocator): exit status 0, the line and its fix."""
    path = corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
    done = run_cli("doctor", path)
    assert done.returncode == 0 and done.stdout.startswith(f"no_memory_records: {path}: ")
    assert "show_memory=True" in done.stdout
    found = tracebridge.doctor(path)
    assert found.ok and found.codes == ["no_memory_records"]
    assert [p.severity for p in found.problems] == ["warning"]
    assert json.loads(found.to_json())["problems"][0]["severity"] == "warning"


def test_layout_of_folders_built_from_real_files(corpus, tmp_path):
    xplane = corpus / "xspace" / GPU
    too_high = tmp_path / "high"
    (too_high / "plugins" / "profile").mkdir(parents=True)
    shutil.copy(xplane, too_high / "plugins" / "profile" / "worker.xplane.pb")
    _, found = doctor_json(too_high)
    assert [p["code"] for p in found["problems"]] == ["layout"]
    assert "one folder too high" in found["problems"][0]["missing"]
    assert "plugins/profile/2024_01_01_00_00_00/worker.xplane.pb" in found["problems"][0]["fix"]

    above = tmp_path / "above"  # the logdir given one folder too high
    profile_logdir(above / "train", {"worker": xplane})
    _, found = doctor_json(above)
    assert [p["code"] for p in found["problems"]] == ["layout"]
    assert "train/plugins/profile/2026_01_01_00_00_00/worker.xplane.pb" in found["problems"][0]["evidence"]
    assert f"--logdir {above / 'train'}" in found["problems"][0]["fix"]

    old = tmp_path / "old" / "plugins" / "profile" / "2020_01_01_00_00_00"  # only an older plugin's file
    old.mkdir(parents=True)
    with gzip.open(old / "worker.trace.json.gz", "wb") as handle:
        handle.write((corpus / "chrome" / "ikhlestov_cpu_timeline_01.json").read_bytes())
    _, found = doctor_json(tmp_path / "old")
    assert [p["code"] for p in found["problems"]] == ["layout"]
    assert "worker.trace.json.gz" in found["problems"][0]["evidence"]

    marker_only = tmp_path / "marker"  # the profiler's event file, its plugins/profile missing
    marker_only.mkdir()
    shutil.copy(corpus / "events" / "events.out.tfevents.1583461681.localhost.profile-empty", marker_only)
    assert codes(marker_only) == ["layout"]

    empty_run = profile_logdir(tmp_path / "runs", {"worker": xplane})  # a good run and a run without host files
    (empty_run / "plugins" / "profile" / "2026_01_02_00_00_00").mkdir()
    _, found = doctor_json(empty_run)
    assert found["problems"][0]["code"] == "layout"
    assert "2026_01_02_00_00_00 holds no host files" in found["problems"][0]["missing"]


def test_profiler_errors_quotes_a_cupti_error_set_in_a_real_xspace(corpus, tmp_path):
    path = _edit_xspace(corpus / "xspace" / GPU, tmp_path / "cupti.xplane.pb",
                        lambda space: space.errors.append(CUPTI_PRIVILEGE_ERROR))
    _, found = doctor_json(path)
    assert found["problems"][0]["code"] == "profiler_errors"  # most serious first
    assert CUPTI_PRIVILEGE_ERROR in found["problems"][0]["evidence"]
    assert "NVreg_RestrictProfilingToAdminUsers=0" in found["problems"][0]["fix"]
    assert "profiler_errors" not in codes(corpus / "xspace" / GPU)


def test_dropped_events_from_the_gpu_tracers_warning(corpus, tmp_path):
    path = _edit_xspace(corpus / "xspace" / GPU, tmp_path / "dropped.xplane.pb",
                        lambda space: space.warnings.append(DROPPED_WARNING))
    _, found = doctor_json(path)
    dropped = [p for p in found["problems"] if p["code"] == "dropped_events"]
    assert len(dropped) == 1 and "1834 profiler events were dropped" in dropped[0]["missing"]
    assert "total device(activity) events reaches max" in dropped[0]["missing"]
    assert "profiler_errors" not in [p["code"] for p in found["problems"]]  # counted, not quoted twice


@pytest.mark.tf
def test_no_steps_on_a_tf_function_loop_and_keras_fit(captures, corpus):
    for logdir in ("nosteps", "keras_fit"):
        _, found = doctor_json(captures["plain"] / logdir)
        (problem,) = [p for p in found["problems"] if p["code"] == "no_steps"]
        assert "0 events with a step_num stat" in problem["evidence"]
        assert 'tf.profiler.experimental.Trace("train", step_num=step, _r=1)' in problem["fix"]
    assert "steps taken from tf.function calls" in problem["evidence"]
    _, found = doctor_json(corpus / "xspace" / TPU)  # an XLA program (TPU inference), no markers
    assert [p["code"] for p in found["problems"]] == ["no_steps"]
    assert "jax.profiler.StepTraceAnnotation" in found["problems"][0]["fix"]


def test_no_device_activity_on_empty_gpu_planes_and_a_gpu_host_without_planes(corpus, tmp_path):
    _, found = doctor_json(corpus / "xspace" / GPU)  # (and one step: too few for timing findings)
    assert [p["code"] for p in found["problems"]] == ["no_device_activity", "few_steps"]
    assert "5 of 8 device planes" in found["problems"][0]["missing"]
    assert "/device:GPU:0, /device:GPU:2" in found["problems"][0]["evidence"]

    def drop_gpu_planes(space):
        kept = [p for p in space.planes if not p.name.startswith("/device:GPU")]
        del space.planes[:]
        space.planes.extend(kept)
    path = _edit_xspace(corpus / "xspace" / GPU, tmp_path / "host_only.xplane.pb", drop_gpu_planes)
    _, found = doctor_json(path)
    (problem,) = [p for p in found["problems"] if p["code"] == "no_device_activity"]
    assert problem["missing"] == "a GPU host without a device plane" and "GPU_4_bfc" in problem["evidence"]


@pytest.mark.tf
def test_ops_without_time_on_eager_ops(captures):
    _, found = doctor_json(captures["plain"] / "eager")
    (problem,) = [p for p in found["problems"] if p["code"] == "ops_without_time"]
    trace = tracebridge.load(captures["plain"] / "eager")
    eager = sum(1 for op in trace.records() if op.name.startswith("eager/") and op.step is not None)
    assert eager >= 3 * 2 and problem["missing"].startswith(f"{eager} ops ran eagerly")
    assert "tf.function" in problem["fix"]


@pytest.mark.tf
def test_no_memory_records_without_bfc_and_in_old_timelines(captures, corpus):
    _, found = doctor_json(captures["plain"] / "nosteps")
    (problem,) = [p for p in found["problems"] if p["code"] == "no_memory_records"]
    assert "/host:CPU" in problem["missing"] and "TF_CPU_ALLOCATOR_USE_BFC=true" in problem["fix"]
    assert "no_memory_records" not in codes(captures["bfc"] / "healthy")
    _, found = doctor_json(corpus / "chrome" / "ikhlestov_cpu_timeline_01.json")  # TF ~1.0 timeline.py
    assert [p["code"] for p in found["problems"]] == ["no_memory_records"]
    assert "show_memory=True" in found["problems"][0]["fix"]


@pytest.mark.tf
def test_clock_skew_between_hosts_of_a_real_capture(captures, tmp_path):
    healthy = _xplane(captures["bfc"] / "healthy")
    shift_ns = 5 * 10**9

    def shift_clock(space):
        for plane in space.planes:
            if plane.name == "Task Environment":
                names = {k: v.name for k, v in plane.stat_metadata.items()}
                for stat in plane.stats:
                    if names[stat.metadata_id] in ("profile_start_time", "profile_stop_time"):
                        stat.uint64_value += shift_ns
    shifted = _edit_xspace(healthy, tmp_path / "shifted.xplane.pb", shift_clock)
    logdir = profile_logdir(tmp_path / "skewed", {"worker-0": healthy, "worker-1": shifted})
    _, found = doctor_json(logdir)
    (problem,) = found["problems"]
    assert problem["code"] == "clock_skew" and problem["missing"] == "worker-1's clock disagrees with worker-0's"
    assert "5000.000 ms apart over 4 shared steps" in problem["evidence"]
    assert codes(healthy, shifted) == ["clock_skew"]  # the same as two XSpace files
    assert codes(profile_logdir(tmp_path / "same", {"worker-0": healthy, "worker-1": healthy})) == []


@pytest.mark.tf
def test_empty_window_on_a_profile_stopped_before_the_steps(captures):
    done = run_cli("doctor", captures["plain"] / "window")
    assert done.returncode == 1
    assert done.stdout.startswith("empty_window: ") and "/host:CPU 0 events" in done.stdout


def test_empty_window_of_a_capture_that_traced_no_run():
    from tracebridge.model.builder import TraceBuilder
    # What tracebridge.trace(session, warmup=10) builds when the with-block made 3 runs.
    trace = TraceBuilder({"source_format": "session", "runs_seen": 3, "runs_traced": 0}).build()
    assert [p.code for p in tracebridge.doctor(trace).problems] == ["empty_window"]


# --- the other formats, the notes, the page, usage -----------------------------------------------
def test_a_chrome_trace_from_another_writer_says_what_was_not_checked(corpus, tmp_path):
    events = json.loads((corpus / "chrome" / "ikhlestov_cpu_timeline_01.json").read_text())["traceEvents"]
    other = tmp_path / "other.json"  # the same events, as another tool writes them: a bare list
    other.write_text(json.dumps([e for e in events if e.get("ph") == "X"]))
    assert not any(d.type for d in tracebridge.load(other).devices)  # processes are numbers, not TF devices
    done = run_cli("doctor", other)
    assert done.returncode == 0
    assert "not checked: no_memory_records" in done.stdout and "not checked: no_steps" in done.stdout


@pytest.mark.tf
def test_info_summary_and_compare_print_the_same_findings(captures):
    path = captures["plain"] / "nosteps"
    notes = [f"note: {p.note()}" for p in tracebridge.doctor(path).problems]
    info = run_cli("info", path)
    assert info.returncode == 0 and all(note in info.stdout for note in notes)
    assert json.loads(run_cli("info", path, "--json").stdout)["notes"] == [n[len("note: "):] for n in notes]
    memory = [n for n in notes if "no_memory_records" in n]
    assert memory and memory[0] in run_cli("summary", path).stdout
    comparison = tracebridge.compare(path, captures["bfc"] / "healthy")
    assert [n for n in comparison.notes if n.startswith(("control: ", "test: "))] == \
        [f"control: {n[len('note: '):]}" for n in notes]


@pytest.mark.tf
def test_html_page_shows_the_findings_escaped_and_inert(captures, tmp_path):
    from tracebridge.analysis.run.doctor import diagnose
    from tracebridge.writers.html import problems_panel

    def doctor_panel(trace):
        return problems_panel(diagnose(trace).problems)

    trace = tracebridge.load(captures["plain"] / "nosteps")
    trace = trace.with_metadata(xspace_errors="<script>alert(1)</script>")
    page = tmp_path / "page.html"
    trace.to_html(page)
    text = page.read_text()
    panel = doctor_panel(trace)
    assert panel in text and "no_steps" in panel and "profiler_errors" in panel
    assert "<script" not in panel and "&lt;script&gt;alert(1)&lt;/script&gt;" in panel
    assert doctor_panel(tracebridge.load(captures["bfc"] / "healthy")) == ""


def test_codes_are_stable_and_usage_errors_exit_2(corpus, tmp_path):
    assert CODES == ("layout", "no_trace_level", "empty_window", "profiler_errors", "dropped_events",
                     "no_device_activity", "clock_skew", "no_steps", "few_steps", "ops_without_time",
                     "no_memory_records")
    missing = run_cli("doctor", tmp_path / "nothing.pb")
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr
    broken = run_cli("doctor", corpus / "bad" / "xprof_tpu_inference_2_reencoded.xplane.pb")
    assert broken.returncode == 2 and len(broken.stderr.splitlines()) == 1
    assert run_cli("doctor").returncode == 2


def test_few_steps_is_a_warning_with_the_steps_to_capture(tmp_path):
    """A profile with steps, but fewer than timing findings are judged on: a warning (exit 0)
    that says how many to capture; --min-steps sets the bar. A TF1 RunMetadata holds one step
    by design and gets none (compare's own note says it)."""
    from tests.conftest import RECORDED_TF1, file_paths
    from tests.helpers.synthetic import cnn_step, mem, run
    run([cnn_step() + [mem(1024), mem(-1024)]] * 2).save(tmp_path / "two.json", memory=True)
    done = run_cli("doctor", tmp_path / "two.json")
    assert done.returncode == 0 and done.stdout.startswith(f"few_steps: {tmp_path / 'two.json'}: ")
    assert "2 step(s)" in done.stdout and "3 or more" in done.stdout and "steps=5" in done.stdout
    assert run_cli("doctor", tmp_path / "two.json", "--min-steps", "2").stdout == ""
    assert "few_steps" in run_cli("doctor", tmp_path / "two.json", "--min-steps", "4").stdout
    _, found = doctor_json(tmp_path / "two.json")
    assert [(p["code"], p["severity"]) for p in found["problems"]] == [("few_steps", "warning")] and found["ok"]
    assert "few_steps" not in codes(file_paths(RECORDED_TF1)["pb"])
    from tracebridge.analysis.common.thresholds import Thresholds
    assert tracebridge.doctor(tmp_path / "two.json", thresholds=Thresholds(min_steps=2)).problems == []
