"""A real xprof server opens what ``tracebridge tensorboard`` writes, steps included."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import tracebridge
from tracebridge.model.accelerator import launches
from tests.conftest import free_port
from tests.helpers.browser import browser_mark

# TF1 runs from the corpus (one training step each, written by timeline.py): on CPU, and on
# a GPU, whose kernels xprof puts in a step only through their launches (see docs/reading.md, "TensorBoard").
RUNS = {"cpu": "ikhlestov_cpu_timeline_02_step_0.json", "gpu": "ikhlestov_gpu_timeline_01.json"}
HOST = "tf1host"


@pytest.fixture(scope="module")
def xprof_server(corpus, tmp_path_factory):
    """``xprof --logdir LOGDIR --port P`` over the TF1 runs, written by tracebridge."""
    xprof = Path(sys.executable).with_name("xprof")
    if not xprof.exists():
        pytest.skip(f"xprof is not installed beside {sys.executable}")
    logdir = tmp_path_factory.mktemp("xprof_logdir")
    traces = {}
    for run, name in RUNS.items():
        traces[run] = tracebridge.load(corpus / "chrome" / name)
        traces[run].to_tensorboard(logdir, run=run)
        # write_tensorboard_xplane names the file after the host; one host name for both runs
        written = next((logdir / "plugins" / "profile" / run).glob("*.xplane.pb"))
        written.rename(written.with_name(f"{HOST}.xplane.pb"))
    port = free_port()
    server = subprocess.Popen([str(xprof), "--logdir", str(logdir), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{origin}/data/plugin/profile/runs", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("the xprof server did not answer within 60 s")
                time.sleep(0.5)
        yield origin, traces
    finally:
        server.terminate()
        server.wait(timeout=30)


def overview(origin: str, run: str) -> dict:
    url = f"{origin}/data/plugin/profile/data?run={run}&tag=overview_page&host={HOST}"
    body = urllib.request.urlopen(url, timeout=120).read()
    tables = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)  # the server gzips
    return next(table["p"] for table in tables if "steptime_ms_average" in table.get("p", {}))


def expected_step_ms(trace) -> float:
    """xprof's average step time: a CPU step's marker; a GPU step from its first kernel
    (the first one a launch links to the step) to the marker's end, as measured on the
    corpus runs: the device work decides where a GPU step begins."""
    launched = sorted(launches(trace))
    times = []
    for step in trace.steps:
        kernel_starts = [int(trace.ops["start_ns"][k]) for k in launched if trace.ops["step"][k] == step.number]
        begin = max(step.start_ns, min(kernel_starts)) if kernel_starts else step.start_ns
        times.append(step.end_ns - begin)
    return sum(times) / len(times) / 1e6


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(RUNS))
def test_overview_page_shows_the_steps(xprof_server, run):
    origin, traces = xprof_server
    page = overview(origin, run)
    steps = traces[run].steps
    assert len(steps) >= 1
    assert bool(launches(traces[run])) == (run == "gpu")
    # xprof's step time (its average over the steps, in ms, one decimal).
    average_ms = expected_step_ms(traces[run])
    assert float(page["steptime_ms_average"]) == pytest.approx(average_ms, abs=0.06)
    assert float(page["steptime_ms_average"]) > 0
    assert "No step time measured" not in page["input_conclusion"]


@browser_mark
@pytest.mark.parametrize("run", sorted(RUNS))
def test_overview_page_in_chromium(xprof_server, browser, run):
    origin, traces = xprof_server
    page = browser.new_page()
    try:
        page.goto(f"{origin}/data/plugin/profile/overview_page?run={run}&tag=overview_page&host={HOST}")
        page.wait_for_function("() => document.body.innerText.includes('Host Compute Time')", timeout=60_000)
        text = page.evaluate("() => document.body.innerText")
    finally:
        page.close()
    assert "No step marker observed" not in text
    if run == "cpu":  # the host's compute time inside the step, as a figure above zero ("7.9 ms")
        assert figure_after(text, "Host Compute Time") > 0
    else:  # the GPU's: the kernels its launches put in the step (all but one copy, 5.6 ms)
        ops = traces[run].ops
        kernel_ms = sum(int(ops["end_ns"][k] - ops["start_ns"][k]) for k in launches(traces[run])) / 1e6
        assert figure_after(text, "Device Compute Time") == pytest.approx(kernel_ms, abs=0.06)
        assert kernel_ms > 0


def figure_after(text: str, label: str) -> float:
    """The first figure after ``label`` on the page, skipping its "(σ = 0.0 ms)" note."""
    after = text.split(label, 1)[1].split(")", 1)[1]
    return float(next(part for part in after.split() if part.replace(".", "", 1).isdigit()))
