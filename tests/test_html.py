"""The standalone HTML timeline (tracebridge/writers/html.py) in headless Chromium.

Pages are generated from a real TF1 training step, the corpus GPU trace, a synthetic TF1
distributed-style trace (RecvTensor transfers, _Send/_Recv, NCCL and collectives, memory),
a trace whose every string is hostile, an empty trace and a 1M-op synthetic trace. Each is
opened from file:// in Debian's chromium through Playwright, with every request recorded,
and checked: no console errors, no request but the file itself, ops drawn for every device,
hover and click show the right op (compared with the trace's own columns), wheel and
W/S/A/D change the visible range, search counts and highlights, the step selector and the
top-ops table work, and the ``tracebridge:first-draw`` mark exists (under 2 s at 1M ops).

Screenshots go to ``$TRACEBRIDGE_HTML_SHOTS`` (default ``/tmp/html-shots``). Setup:
``tests/viewers/setup.sh``. The tests at the end need no browser.
"""

from __future__ import annotations

import base64
import contextlib
import html.parser
import importlib.util
import json
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tracebridge
from tests.conftest import skip_without_corpus
from tests.helpers.browser import browser_mark
from tracebridge import OutputError, Trace
from tracebridge.model.builder import TraceBuilder
from tracebridge.model.schema import Category, OpFlag
from tracebridge.writers.html import html_document, is_network_type, notebook_html, write_html

REPO = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("TRACEBRIDGE_HTML_SHOTS", "/tmp/html-shots"))
VIEWPORT = {"width": 1600, "height": 1000}
BASE = 1_700_000_000_000_000_000


# --------------------------------------------------------------------------- traces


def distributed_trace() -> Trace:
    """A TF1 parameter-server step, three times: workers' GPUs receive variables from the ps
    (RecvTensor with transfers), compute, all-reduce (NCCL) and send gradients back; the
    ps receives them and applies them; worker CPUs run the input pipeline and collectives."""
    rng = np.random.default_rng(7)
    b = TraceBuilder({"source_format": "test-distributed"})
    ps = b.device("/job:ps/replica:0/task:0/device:CPU:0")
    gpus = [b.device(f"/job:worker/replica:0/task:{t}/device:GPU:0") for t in range(2)]
    cpus = [b.device(f"/job:worker/replica:0/task:{t}/device:CPU:0") for t in range(2)]
    ps_name = "/job:ps/replica:0/task:0/device:CPU:0"
    layers = ["conv1", "conv2", "conv3", "fc1", "logits"]
    for number in range(3):
        step = b.step(number, name=f"train_op {number}")
        t0 = BASE + number * 30_000_000
        for w, gpu in enumerate(gpus):
            dst = f"/job:worker/replica:0/task:{w}/device:GPU:0"
            t = t0 + 100_000
            for k, layer in enumerate(layers):  # variables arrive, partly overlapping
                size = int(4 * 2 ** rng.integers(16, 22))
                start = t + k * 150_000
                recv = b.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=start,
                                end_ns=start + 400_000 + size // 20, device=gpu, step=step,
                                label=f"[{size} B] {ps_name} from {dst}")
                b.add_row("transfers", op=recv, bytes=size, rate_bps=size * 2.5, src=ps_name, dst=dst,
                          tensor=f"{layer}/weights:0")
            t += 1_500_000
            previous = "IteratorGetNext"
            for phase, ops in (("", ("Conv2D", "BiasAdd", "Relu")), ("gradients/", ("ReluGrad", "Conv2DBackpropInput", "Conv2DBackpropFilter"))):
                for layer in (layers if not phase else layers[::-1]):
                    for op_type in (("MatMul", "BiasAdd") if layer in ("fc1", "logits") and not phase else ops):
                        name = f"tower_{w}/{phase}{layer}/{op_type}"
                        duration = int(rng.integers(200_000, 900_000))
                        op = b.add_op(name=name, op_type=op_type, start_ns=t, end_ns=t + duration, device=gpu,
                                      step=step, inputs=(previous, f"{layer}/weights/read"), flags=OpFlag.LABEL_CANONICAL)
                        size = int(rng.integers(1, 64)) * 65536
                        mem = b.add_row("memory", op=op, allocator="GPU_0_bfc", total_bytes=size, peak_bytes=size)
                        b.add_row("allocations", memory=mem, time_ns=t, bytes=size)
                        b.add_row("allocations", memory=mem, time_ns=t + duration + 3_000_000, bytes=-size)
                        previous = name
                        t += duration + int(rng.integers(20_000, 120_000))
            b.add_op(name=f"tower_{w}/AllReduce/NcclAllReduce", op_type="NcclAllReduce", start_ns=t,
                     end_ns=t + 2_000_000, device=gpu, step=step, inputs=(previous,), flags=OpFlag.LABEL_CANONICAL)
            b.add_op(name=f"tower_{w}/grads/_Send", op_type="_Send", start_ns=t + 2_100_000,
                     end_ns=t + 2_600_000, device=gpu, step=step, flags=OpFlag.LABEL_CANONICAL)
            cpu = cpus[w]
            b.add_op(name="IteratorGetNext", op_type="IteratorGetNext", start_ns=t0, end_ns=t0 + 1_200_000,
                     device=cpu, step=step, flags=OpFlag.LABEL_CANONICAL)
            b.add_op(name="input/_Recv", op_type="_Recv", start_ns=t0 + 50_000, end_ns=t0 + 900_000,
                     device=cpu, step=step, flags=OpFlag.LABEL_CANONICAL)
            b.add_op(name="sync/CollectiveReduceV2", op_type="CollectiveReduceV2", start_ns=t - 500_000,
                     end_ns=t + 1_800_000, device=cpu, step=step, flags=OpFlag.LABEL_CANONICAL)
            # the ps receives this worker's gradients
            size = 4 * 2 ** 20
            recv = b.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=t + 2_200_000,
                            end_ns=t + 3_400_000 + w * 300_000, device=ps, step=step)
            b.add_row("transfers", op=recv, bytes=size, rate_bps=size * 1.2, src=dst, dst=ps_name,
                      tensor=f"tower_{w}/grads:0")
        end = t0 + 25_000_000
        for k, layer in enumerate(layers):
            b.add_op(name=f"GradientDescent/update_{layer}/ApplyGradientDescent", op_type="ApplyGradientDescent",
                     start_ns=end - 1_000_000 + k * 150_000, end_ns=end - 900_000 + k * 150_000, device=ps,
                     step=step, inputs=(f"{layer}/weights", "learning_rate", f"tower_0/grads/{layer}"),
                     flags=OpFlag.LABEL_CANONICAL)
    return b.build()


EVIL = [
    '</script><script>window.__pwned = "script"</script>',
    '<img src=x onerror="window.__pwned=\'img\'">',
    '"double" \'single\' `back` & &amp; <!-- comment --> ]]> </style>',
    "\u00fcn\u00efc\u00f8d\u00e9/\u65e5\u672c\u8a9e/\u03a9mega/\U0001F680/\u2028line\u2029sep",
    '<svg onload="window.__pwned=\'svg\'"></svg>',
    "${window.__pwned='template'}",
    "javascript:window.__pwned='url'",
    "\\u003c/script> <\\/script> \\x3c!--",
    "<!--<script>",
]
EVIL_TITLE = '</title><script>window.__pwned="title"</script>\u00e9'


def hostile_trace() -> Trace:
    b = TraceBuilder({"source_format": "<script>window.__pwned='meta'</script>", "notes": EVIL[1]})
    devices = [b.device(f"/job:{EVIL[0]}/replica:0/task:0/device:CPU:0"),
               b.device(EVIL[1] + "/device:GPU:0")]
    step = b.step(1, name=EVIL[4])
    t = BASE
    for i, name in enumerate(EVIL):
        for d in devices:
            op = b.add_op(name=name, op_type=EVIL[(i + 1) % len(EVIL)], kernel=EVIL[(i + 2) % len(EVIL)],
                          start_ns=t, end_ns=t + 500_000, device=d, step=step,
                          inputs=(EVIL[(i + 3) % len(EVIL)], "^" + EVIL[(i + 4) % len(EVIL)]),
                          label=EVIL[(i + 5) % len(EVIL)] if i % 2 else "",
                          flags=0 if i % 2 else OpFlag.LABEL_CANONICAL)
            mem = b.add_row("memory", op=op, allocator=EVIL[6], total_bytes=1024)
            b.add_row("allocations", memory=mem, time_ns=t, bytes=1024)
            b.add_row("allocations", memory=mem, time_ns=t + 400_000, bytes=-1024)
        t += 600_000
    recv = b.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=t, end_ns=t + 800_000, device=devices[1],
                    step=step)
    b.add_row("transfers", op=recv, bytes=123, src=EVIL[0], dst=EVIL[1], tensor=EVIL[2])
    return b.build()


def million_trace() -> Trace:
    spec = importlib.util.spec_from_file_location("bench_html", REPO / "bench" / "bench_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_trace(1_000_000)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Lazily written pages: name -> (trace, path)."""
    folder = tmp_path_factory.mktemp("html")
    made = {}

    def make(name: str, build, **options):
        if name not in made:
            trace = build()
            path = folder / f"{name}.html"
            write_html(trace, path, **options)
            made[name] = (trace, path)
        return made[name]

    return make



class Opened:
    """A page loaded from file:// with everything it said and asked for."""

    def __init__(self, browser, path: Path, *, name: str | None = None):
        self.url = path.as_uri()
        self.name = name  # a screenshot "<name>-failed" is taken when a check fails
        self.context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.console: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        self.page.goto(self.url, timeout=120_000)
        self.page.wait_for_function("() => performance.getEntriesByName('tracebridge:first-draw').length > 0",
                                    timeout=120_000)
        self.first_draw_ms = self.js("() => performance.getEntriesByName('tracebridge:first-draw')[0].startTime")
        self.page.wait_for_function("() => window.tracebridge && tracebridge.ready", timeout=120_000)
        self.ready_ms = self.js("() => performance.getEntriesByName('tracebridge:ready')[0].startTime")

    def _on_console(self, message):
        self.console.append(f"[{message.type}] {message.text}")
        if message.type == "error":
            self.errors.append(f"console.error: {message.text}")

    def js(self, code: str, arg=None):
        return self.page.evaluate(code, arg)

    def range(self) -> tuple[float, float]:
        r = self.js("() => tracebridge.visibleRange()")
        return r["start_ns"], r["end_ns"]

    def wait_for_new_range(self, before: tuple[float, float], timeout_ms: int = 10_000) -> None:
        """Wait until the visible range is no longer ``before``: the page has handled the
        wheel or key that changes it (Playwright's wheel does not wait for the handler)."""
        self.page.wait_for_function(
            "([a, b]) => { const r = tracebridge.visibleRange(); return r.start_ns !== a || r.end_ns !== b; }",
            arg=list(before), timeout=timeout_ms)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"))

    def check_clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.requests == [self.url], f"requests beyond the file itself: {self.requests}"

    def close(self) -> None:
        self.context.close()

    def __enter__(self) -> "Opened":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        """Closes the page; a block that ended normally must have left it clean."""
        try:
            if kind is None:
                self.check_clean()
            elif self.name:
                self.shot(self.name + "-failed")
        finally:
            self.close()


# --------------------------------------------------------------------------- what every page must do


def _row_of(trace: Trace, op: dict) -> int:
    """The trace row an op shown by the page stands for, found by content."""
    ops = trace.ops
    names = np.array([trace.strings[i] == op["name"] for i in range(len(trace.strings))])
    devices = [i for i, d in enumerate(trace.devices) if d.name == op["device"]]
    match = np.flatnonzero(names[ops["name"]] & np.isin(ops["device"], devices)
                           & (ops["start_ns"] == int(op["start_epoch_ns"])))
    assert len(match) >= 1, op
    return int(match[0])


def _check_op(trace: Trace, op: dict) -> None:
    """What the page says of an op is what the trace holds."""
    row = _row_of(trace, op)
    expected = trace.op(row)
    base = int(trace.ops["start_ns"].min())
    assert op["type"] == expected.op_type and op["kernel"] == expected.kernel
    assert op["inputs"] == list(expected.inputs)
    assert op["end_ns"] - op["start_ns"] == expected.end_ns - expected.start_ns
    assert op["start_ns"] == expected.start_ns - base
    assert op["step"] == expected.step
    if trace.ops["flags"][row] & OpFlag.LABEL_CANONICAL:
        assert op["description"] == f"{expected.name} = {expected.kernel}({', '.join(expected.inputs)})"
    else:
        assert op["description"] == expected.label
    transfers = trace.transfers
    mine = np.flatnonzero(transfers["op"] == row)
    assert [(t["bytes"], t["src"], t["dst"]) for t in op["transfers"]] == [
        (float(transfers["bytes"][i]), trace.strings[transfers["src"][i]], trace.strings[transfers["dst"][i]])
        for i in mine]


def _hover_and_click(opened: Opened, trace: Trace, positions: list[int]) -> None:
    for pos in positions:
        op = opened.js("(pos) => tracebridge.op(pos)", pos)
        pad = max(op["duration_ns"], 1000)
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [op["start_ns"] - pad, op["end_ns"] + pad])
        point = opened.js("(pos) => tracebridge.screenPoint(pos)", pos)
        opened.page.mouse.move(point["x"], point["y"])
        hit = opened.js("([x, y]) => tracebridge.hitTest(x, y)", [point["x"], point["y"]])
        assert hit is not None and hit["pos"] == pos, (pos, hit)
        tip = opened.js("() => tracebridge.tooltipText()")
        for label in ("Name", "op", "Duration", "Start", "End"):
            assert re.search(rf"^{label}$", tip, re.M), tip
        assert op["name"] in tip
        _check_op(trace, hit)
        opened.page.mouse.click(point["x"], point["y"])
        selected = opened.js("() => tracebridge.selected()")
        assert selected is not None and selected["pos"] == pos
        details = opened.js("() => tracebridge.detailsText()")
        assert op["name"] in details and op["start_epoch_ns"] in details and op["device"] in details


def _time_area_point(opened: Opened) -> tuple[float, float]:
    box = opened.page.locator(".tb-device .tb-canvas-wrap").first.bounding_box()
    return box["x"] + box["width"] * 0.6, box["y"] + 5


def _check_navigation(opened: Opened) -> None:
    opened.js("() => tracebridge.reset()")
    t0, t1 = opened.range()
    x, y = _time_area_point(opened)
    opened.page.mouse.move(x, y)
    opened.page.mouse.wheel(0, -400)
    opened.wait_for_new_range((t0, t1))
    z0, z1 = opened.range()
    assert z1 - z0 < (t1 - t0) * 0.8, "the wheel did not zoom in"
    opened.page.mouse.move(5, 5)  # keys zoom around the middle when the mouse is away
    for key, check in (("w", lambda a, b: b[1] - b[0] < (a[1] - a[0]) * 0.9),
                       ("s", lambda a, b: b[1] - b[0] > (a[1] - a[0]) * 1.1),
                       ("a", lambda a, b: b[0] < a[0] and abs((b[1] - b[0]) - (a[1] - a[0])) < 1e-3 * (a[1] - a[0])),
                       ("d", lambda a, b: b[0] > a[0])):
        before = opened.range()
        opened.page.keyboard.press(key)
        opened.wait_for_new_range(before)
        after = opened.range()
        assert check(before, after), (key, before, after)
    # drag pans
    opened.js("() => tracebridge.reset()")
    opened.js("() => tracebridge.zoom(0.25)")
    before = opened.range()
    x, y = _time_area_point(opened)
    opened.page.mouse.move(x, y)
    opened.page.mouse.down()
    opened.page.mouse.move(x - 200, y, steps=5)
    opened.page.mouse.up()
    after = opened.range()
    assert after[0] > before[0] and abs((after[1] - after[0]) - (before[1] - before[0])) < 1e-3 * (before[1] - before[0])


def _expected_matches(trace: Trace, needle: str) -> int:
    needle = needle.lower()
    hit = np.array([needle in s.lower() for s in trace.strings])
    ops = trace.ops
    return int((hit[ops["name"]] | hit[ops["op_type"]] | hit[ops["kernel"]]).sum())


def _check_search(opened: Opened, trace: Trace, needle: str) -> None:
    expected = _expected_matches(trace, needle)
    assert expected > 0
    opened.js("() => tracebridge.reset()")
    opened.page.fill(".tb-search", needle)
    opened.page.wait_for_function("(n) => tracebridge.highlighted() === n", arg=expected, timeout=5000)
    label = opened.page.locator(".tb-count").inner_text()
    assert label.startswith(f"{expected:,} match"), label
    # the matching ops are the highlighted ones
    names = opened.js("""(needle) => {
        const t = tracebridge.timelines[0], n = t.data.n, out = [];
        for (let i = 0; i < n && out.length < 50; i++) if (tracebridge.isHighlighted(i)) out.push(tracebridge.op(i));
        return out;
    }""", needle)
    for op in names:
        assert needle.lower() in (op["name"] + op["type"] + op["kernel"]).lower()
    assert opened.js("(needle) => tracebridge.search(needle)", needle) == expected
    opened.page.keyboard.press("Escape")
    assert opened.js("() => tracebridge.highlighted()") in (0, expected)
    opened.js("() => tracebridge.clearHighlight()")
    assert opened.js("() => tracebridge.highlighted()") == 0


def _check_steps(opened: Opened, trace: Trace) -> None:
    if not trace.steps:
        return
    base = int(trace.ops["start_ns"].min())
    step = trace.steps[len(trace.steps) // 2]
    before = opened.range()
    opened.page.select_option(".tb-steps", str(step.number))
    opened.wait_for_new_range(before)
    t0, t1 = opened.range()
    duration = max(step.duration_ns, 20)
    assert t0 <= step.start_ns - base <= t0 + duration * 0.05, (t0, step)
    assert t1 - duration * 0.05 <= step.end_ns - base <= t1, (t1, step)
    opened.page.select_option(".tb-steps", "")
    assert opened.js("(n) => tracebridge.selectStep(n)", step.number) is True


def _check_top_ops(opened: Opened, trace: Trace) -> None:
    summary = trace.summary(top=5)
    if not summary.by_op:
        return
    row = opened.page.locator(".tb-top tbody tr").first
    row.click()
    key = summary.by_op[0]["key"]
    expected = int((trace.ops["name"] == trace.strings.index(key)).sum())
    assert opened.js("() => tracebridge.highlighted()") == expected >= summary.by_op[0]["count"]
    assert "tb-selected" in row.get_attribute("class")
    assert opened.js("() => tracebridge.selected().name") == key
    row.click()  # a second click clears it
    assert opened.js("() => tracebridge.highlighted()") == 0


def _check_drawn(opened: Opened, trace: Trace) -> None:
    opened.js("() => tracebridge.reset()")
    counts = opened.js("() => tracebridge.drawnCounts()")
    per_device = np.bincount(trace.ops["device"], minlength=len(trace.devices))
    for i, device in enumerate(trace.devices):
        if per_device[i]:
            assert counts[device.name]["ops"] == per_device[i], (device.name, counts)
            assert counts[device.name]["rects"] > 0, (device.name, counts)


def _sample_positions(opened: Opened, count: int = 4) -> list[int]:
    """Ops to hover: the longest of each device, and a few chosen at random."""
    return opened.js("""(count) => {
        const t = tracebridge.timelines[0], d = t.data, out = [];
        for (const device of d.devices) {
            let best = -1;
            for (const lane of device.lanes) {
                for (let i = d.laneFirst[lane]; i < d.laneFirst[lane + 1]; i++) {
                    if (best < 0 || d.end[i] - d.start[i] > d.end[best] - d.start[best]) best = i;
                }
            }
            if (best >= 0) out.push(best);
        }
        let seed = 12345;
        for (let k = 0; k < count && d.n; k++) { seed = (seed * 1103515245 + 12345) % 2147483648; out.push(seed % d.n); }
        return out;
    }""", count)


@contextlib.contextmanager
def fully_checked(browser, trace: Trace, path: Path, name: str, needle: str) -> Iterator[Opened]:
    """The page, open, after everything every page must do was checked on it."""
    with Opened(browser, path, name=name) as opened:
        assert opened.first_draw_ms > 0
        _check_drawn(opened, trace)
        opened.shot(name)
        _hover_and_click(opened, trace, _sample_positions(opened))
        _check_navigation(opened)
        _check_search(opened, trace, needle)
        _check_steps(opened, trace)
        _check_top_ops(opened, trace)
        opened.check_clean()
        yield opened


# --------------------------------------------------------------------------- browser tests


@browser_mark
def test_tf1_training_step(tf_run, pages, browser):
    trace, path = pages("tf1_step", lambda: tracebridge.load(tf_run["pb"]))
    with fully_checked(browser, trace, path, "tf1_step", "matmul") as opened:
        assert opened.js("() => document.querySelectorAll('.tb-memory').length") == 1  # allocator counters


@browser_mark
def test_corpus_gpu_trace(pages, browser):
    source = skip_without_corpus() / "chrome" / "ikhlestov_gpu_timeline_01.json"
    trace, path = pages("corpus_gpu", lambda: tracebridge.load(source))
    with fully_checked(browser, trace, path, "corpus_gpu", "random_normal") as opened:
        # the GPU streams' longest kernel, zoomed in and hovered
        longest = opened.js("""() => { const d = tracebridge.timelines[0].data; let best = -1;
            for (let i = 0; i < d.n; i++) {
                if (!/stream/.test(d.devices[d.lanes[d.laneOf(i)].device].name)) continue;
                if (best < 0 || d.end[i] - d.start[i] > d.end[best] - d.start[best]) best = i;
            }
            return best; }""")
        op = opened.js("(pos) => tracebridge.op(pos)", longest)
        assert "stream" in op["device"]
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [op["start_ns"] - 3 * op["duration_ns"],
                                                              op["end_ns"] + 3 * op["duration_ns"]])
        point = opened.js("(pos) => tracebridge.screenPoint(pos)", longest)
        opened.page.mouse.move(point["x"], point["y"])
        assert opened.js("([x, y]) => tracebridge.hitTest(x, y).pos", [point["x"], point["y"]]) == longest
        opened.shot("corpus_gpu-zoom")
        _check_linked_clicks(opened, trace)


def _check_linked_clicks(opened: Opened, trace: Trace) -> None:
    """Clicking a TF op (its dispatch on /gpu:0) highlights its kernels on the streams;
    clicking one of those kernels highlights the op."""
    ops = trace.ops
    device_work = np.isin(ops["category"], (Category.DEVICE, Category.MEMCPY))
    with_host = set(ops["name"][ops["category"] == Category.OP].tolist())
    kernels = [i for i in np.flatnonzero(device_work).tolist() if int(ops["name"][i]) in with_host]
    longest = max(kernels, key=lambda i: int(ops["end_ns"][i] - ops["start_ns"][i]))
    name = trace.strings[int(ops["name"][longest])]
    expected = int((ops["name"] == ops["name"][longest]).sum())  # the op, its kernel on each stream
    assert expected >= 3
    for on_stream in (False, True):
        pos = opened.js("""([name, onStream]) => { const d = tracebridge.timelines[0].data;
            for (let i = 0; i < d.n; i++) {
                const op = tracebridge.op(i);
                if (op.name === name && /stream/.test(op.device) === onStream) return i;
            }
            return -1; }""", [name, on_stream])
        assert pos >= 0
        op = opened.js("(pos) => tracebridge.op(pos)", pos)
        opened.js("() => tracebridge.clearHighlight()")
        pad = max(op["duration_ns"], 1000)
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [op["start_ns"] - pad, op["end_ns"] + pad])
        point = opened.js("(pos) => tracebridge.screenPoint(pos)", pos)
        opened.page.mouse.click(point["x"], point["y"])
        assert opened.js("() => tracebridge.selected().pos") == pos
        assert opened.js("() => tracebridge.highlighted()") == expected
        lit = opened.js("""() => { const d = tracebridge.timelines[0].data, out = [];
            for (let i = 0; i < d.n; i++) if (tracebridge.isHighlighted(i)) out.push(tracebridge.op(i));
            return out; }""")
        assert {o["name"] for o in lit} == {name}
        # Both sides lit: the dispatch on the GPU device and the kernels on its streams.
        assert {"stream" in o["device"] for o in lit} == {False, True}
        assert f"{expected:,} ops: {name}" in opened.page.locator(".tb-count").inner_text()
    opened.js("() => tracebridge.clearHighlight()")


@browser_mark
def test_distributed_trace_network_lanes(pages, browser):
    trace, path = pages("distributed", distributed_trace)
    with fully_checked(browser, trace, path, "distributed", "RecvTensor") as opened:
        ops = opened.js("() => Array.from({length: tracebridge.timelines[0].data.n}, (_, i) => tracebridge.op(i))")
        for op in ops:
            assert op["network"] == is_network_type(op["type"]), op["name"]
        recvs = [op for op in ops if op["type"] == "RecvTensor"]
        assert len(recvs) == trace.transfers.rows and all(len(op["transfers"]) == 1 for op in recvs)
        for op in recvs[:5]:
            _check_op(trace, op)
        # network ops sit in lanes of their own below the compute lanes of their device
        lanes = opened.js("() => tracebridge.timelines[0].data.lanes")
        for device in opened.js("() => tracebridge.timelines[0].data.devices"):
            flags = [lanes[i]["network"] for i in device["lanes"]]
            assert flags == sorted(flags)
        # hover a RecvTensor: bytes and source -> destination in the box
        recv = next(op for op in recvs if op["device"].endswith("task:0/device:GPU:0"))
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [recv["start_ns"] - 1000, recv["end_ns"] + 1000])
        point = opened.js("(pos) => tracebridge.screenPoint(pos)", recv["pos"])
        opened.page.mouse.move(point["x"], point["y"])
        tip = opened.js("() => tracebridge.tooltipText()")
        transfer = recv["transfers"][0]
        assert f"{transfer['src']} \u2192 {transfer['dst']}" in tip and "Bytes" in tip, tip
        assert f"{int(transfer['bytes']):,} B" in tip
        opened.js("() => tracebridge.selectStep(1)")
        opened.page.mouse.move(5, 5)
        opened.shot("distributed-step1")
        assert opened.js("() => document.querySelectorAll('.tb-memory').length") == 1


@browser_mark
def test_hostile_names_stay_text(pages, browser):
    trace, path = pages("hostile", hostile_trace, title=EVIL_TITLE)
    with Opened(browser, path) as opened:
        page = opened.page
        n = opened.js("() => tracebridge.timelines[0].data.n")
        assert n == len(trace)
        # every rendering path: hover, click (details), search, top ops, types tab, memory tip
        for pos in range(n):
            point = opened.js("(pos) => tracebridge.screenPoint(pos)", pos)
            page.mouse.move(point["x"], point["y"])
        page.mouse.click(point["x"], point["y"])
        opened.js("() => tracebridge.search('script')")
        page.locator(".tb-top tbody tr").first.click()
        page.locator(".tb-tab").nth(1).click()
        memory = page.locator(".tb-memory .tb-canvas-wrap").bounding_box()
        page.mouse.move(memory["x"] + memory["width"] / 2, memory["y"] + 20)
        page.wait_for_function("() => tracebridge.tooltipText().startsWith('Time')", timeout=10_000)  # the memory tip
        assert opened.js("() => window.__pwned") is None
        assert opened.js("() => document.querySelectorAll('img, svg, iframe, object, embed').length") == 0
        scripts = opened.js("() => Array.from(document.scripts, s => [s.id, s.type])")
        assert [s for s in scripts if s[1] == ""] == [["", ""]], scripts  # only the page's own code runs
        assert opened.js("() => document.title") == EVIL_TITLE
        # names shown verbatim
        shown = opened.js("() => Array.from({length: tracebridge.timelines[0].data.n}, (_, i) => tracebridge.op(i))")
        assert sorted(op["name"] for op in shown) == sorted(trace.column_strings("ops", "name"))
        for op in shown:
            _check_op(trace, op)
        heads = opened.js("() => Array.from(document.querySelectorAll('.tb-device-name'), e => e.textContent)")
        assert sorted(heads) == sorted(d.name for d in trace.devices)  # in page order (accelerators first)
        opened.js("(pos) => tracebridge.select(pos)", 0)
        details = opened.js("() => tracebridge.detailsText()")
        assert shown[0]["name"].replace("\u2028", "\n").replace("\u2029", "\n") in details.replace("\u2028", "\n").replace("\u2029", "\n")
        cell = page.locator(".tb-top tbody tr .tb-name").first.get_attribute("title")
        assert cell in EVIL
        opened.shot("hostile")


def many_devices_trace(devices: int = 40) -> Trace:
    """Many devices with very long names and op names."""
    b = TraceBuilder({"source_format": "test-many"})
    long = "/".join(f"scope_{k}_with_a_rather_long_name" for k in range(12))
    for d in range(devices):
        device = b.device(f"/job:worker_with_a_very_long_job_name_{'x' * 80}/replica:0/task:{d}/device:GPU:0")
        step = b.step(0) if d == 0 else 0
        for i in range(50):
            b.add_op(name=f"{long}/op_{i}", op_type="MatMul", start_ns=BASE + i * 10_000,
                     end_ns=BASE + i * 10_000 + 8_000, device=device, step=step)
    return b.build()


@browser_mark
def test_many_devices_long_names(pages, browser):
    trace, path = pages("many", many_devices_trace)
    with Opened(browser, path) as opened:
        page = opened.page
        names = [d.name for d in trace.devices]
        counts = opened.js("() => tracebridge.drawnCounts()")
        assert counts[names[0]]["rects"] > 0 and not counts[names[-1]]["drawn"]  # off screen: not drawn yet
        # nothing overflows sideways, however long the names
        assert opened.js("() => document.documentElement.scrollWidth <= window.innerWidth")
        head = page.locator(".tb-device-head").first
        assert opened.js("(e) => e.scrollWidth <= e.parentElement.clientWidth + 1", head.element_handle())
        # scrolling down draws the panels that come into view
        opened.js("() => { const m = document.querySelector('.tb-main'); m.scrollTop = m.scrollHeight; }")
        page.wait_for_function("(name) => tracebridge.drawnCounts()[name].drawn", arg=names[-1], timeout=5000)
        assert opened.js("() => tracebridge.drawnCounts()")[names[-1]]["ops"] == 50
        # the wheel over the lane names scrolls, over the time area it zooms
        opened.js("() => { const m = document.querySelector('.tb-main'); m.scrollTop = 0; }")
        box = page.locator(".tb-device .tb-canvas-wrap").nth(2).bounding_box()
        before = opened.range()
        page.mouse.move(box["x"] + 40, box["y"] + 5)
        page.mouse.wheel(0, 300)
        page.wait_for_function("() => document.querySelector('.tb-main').scrollTop > 0", timeout=10_000)
        assert opened.range() == before
        assert opened.js("() => document.querySelector('.tb-main').scrollTop") > 0
        # collapse one, all, expand all
        head.click()
        assert head.get_attribute("aria-expanded") == "false"
        page.get_by_role("button", name="Collapse all").click()
        assert page.locator(".tb-device.tb-collapsed").count() == len(names)
        page.get_by_role("button", name="Expand all").click()
        assert page.locator(".tb-device.tb-collapsed").count() == 0
        # the full name is in the details
        opened.js("(pos) => tracebridge.select(pos)", 0)
        op = opened.js("() => tracebridge.selected()")
        assert op["name"] in opened.js("() => tracebridge.detailsText()").replace("\n", "")
        opened.shot("many")


@browser_mark
def test_empty_trace(pages, browser):
    trace, path = pages("empty", lambda: TraceBuilder({"source_format": "empty"}).build())
    with Opened(browser, path) as opened:
        assert opened.js("() => tracebridge.timelines[0].data.n") == 0
        opened.page.keyboard.press("w")
        opened.js("() => tracebridge.search('x')")


@browser_mark
def test_million_ops_draw_and_interaction(pages, browser):
    """A million ops draw, zoom, pan, hover and search. How fast is bench/bench_html.py's
    business (CI asserts no timings); the figures are printed for the log."""
    trace, path = pages("million", million_trace)
    print(f"\n1M-op page: {path.stat().st_size / 1e6:.1f} MB")
    with Opened(browser, path, name="million") as opened:
        print(f"first draw: {opened.first_draw_ms:.0f} ms; names decoded: {opened.ready_ms:.0f} ms")
        _check_drawn(opened, trace)
        opened.shot("million")
        frames = opened.js("""() => {
            const tb = tracebridge, t = (f) => { const a = performance.now(); f(); return performance.now() - a; };
            tb.timelines[0].data.strings;
            return [1, 2, 3, 4, 5].map(() => t(() => tb.zoom(0.5))).concat([1, 2, 3].map(() => t(() => tb.pan(0.3))));
        }""")
        print(f"redraws: {[round(f, 1) for f in frames]} ms")
        before = opened.range()
        x, y = _time_area_point(opened)
        opened.page.mouse.move(x, y)
        opened.page.keyboard.press("w")
        opened.wait_for_new_range(before)
        zoomed_by_key = opened.range()
        opened.page.mouse.wheel(0, -200)
        opened.wait_for_new_range(zoomed_by_key)
        after = opened.range()
        assert after[1] - after[0] < (before[1] - before[0]) * 0.8
        _hover_and_click(opened, trace, _sample_positions(opened, 2)[:3])
        count = opened.js("() => tracebridge.search('Conv2DBackpropFilter')")
        assert count == _expected_matches(trace, "Conv2DBackpropFilter")


# --------------------------------------------------------------------------- without a browser


class _Scripts(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self._current = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._current = dict(attrs)
            self.scripts.append([self._current, ""])

    def handle_data(self, data):
        if self._current is not None:
            self.scripts[-1][1] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._current = None


def test_hostile_strings_cannot_end_their_script():
    document = html_document(hostile_trace(), title=EVIL_TITLE)
    document.encode("ascii")
    parser = _Scripts()
    parser.feed(document)
    kinds = [attrs.get("type") for attrs, _ in parser.scripts]
    assert kinds.count(None) == 1 and kinds[-1] is None  # one executable script, the last
    assert document.lower().count("<script") == len(parser.scripts) == document.lower().count("</script")
    blocks = {attrs.get("id"): text for attrs, text in parser.scripts}
    assert all(re.fullmatch(r"[A-Za-z0-9+/=]*", text) for key, text in blocks.items() if key != "tb0-meta" and key)
    strings_json = _unpack(blocks["tb0-strings"]).decode("ascii")
    for text in (blocks["tb0-meta"], strings_json):
        assert "<" not in text and ">" not in text and "&" not in text
    strings = json.loads(strings_json)
    for evil in EVIL:
        assert evil in strings
    meta = json.loads(blocks["tb0-meta"])
    assert meta["title"] == EVIL_TITLE
    assert sorted(d["name"] for d in meta["devices"]) == sorted(d.name for d in hostile_trace().devices)
    assert "<title>&lt;/title&gt;&lt;script&gt;" in document


def _unpack(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text), -15)


def test_output_is_deterministic_and_atomic(tmp_path):
    trace = distributed_trace()
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    write_html(trace, first)
    write_html(trace, second)
    assert first.read_bytes() == second.read_bytes() == html_document(trace).encode("ascii")
    with pytest.raises(OutputError):
        write_html(trace, tmp_path)  # a directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html"]


def test_device_pattern_and_lanes():
    trace = distributed_trace()
    parser = _Scripts()
    parser.feed(html_document(trace, device_pattern="GPU"))
    meta = json.loads(next(text for attrs, text in parser.scripts if attrs.get("id") == "tb0-meta"))
    assert [d["name"] for d in meta["devices"]] == [d.name for d in trace.devices if "GPU" in d.name]
    assert meta["hidden_devices"] == 3 and meta["op_count"] == int(
        np.isin(trace.ops["device"], [i for i, d in enumerate(trace.devices) if "GPU" in d.name]).sum())
    # every device lists compute lanes, then network lanes; lane runs cover all ops in order
    firsts = [lane["first"] for lane in meta["lanes"]] + [meta["lane_end"]]
    assert firsts == sorted(firsts)
    assert meta["summary"]["by_op"] and meta["columns"]["start"]["length"] == meta["op_count"]


def test_network_types():
    for op_type in ("RecvTensor", "_Send", "_Recv", "HorovodAllreduce", "NcclAllReduce", "CollectiveReduceV2",
                    "CollectiveBcastSend", "_HostRecv"):
        assert is_network_type(op_type), op_type
    for op_type in ("MatMul", "Send", "Recv", "AllReduceGrad", "_MklMatMul"):
        assert not is_network_type(op_type), op_type


def test_notebook_html_is_a_sandboxed_iframe():
    trace = hostile_trace()
    text = notebook_html(trace)
    assert text.startswith('<iframe sandbox="allow-scripts"') and text.endswith("></iframe>")
    srcdoc = text[text.index('srcdoc="') + 8:-len('"></iframe>')]
    assert '"' not in srcdoc and "<" not in srcdoc
    assert html.unescape(srcdoc) == html_document(trace)
    assert notebook_html(trace, max_ops=1).startswith("<p>")


def test_writing_html_imports_no_tensorflow(tmp_path):
    corpus = skip_without_corpus()
    code = f"""
import sys, tracebridge
from tracebridge.writers.html import write_html
write_html(tracebridge.load({str(corpus / 'chrome' / 'ikhlestov_gpu_timeline_01.json')!r}), {str(tmp_path / 'x.html')!r})
print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tensorboard')))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@browser_mark
def test_the_sidebar_draws_the_median_step_by_part(pages, browser, tmp_path):
    """The timeline page's "Median step by part": the summary's breakdown as a stacked bar, and
    the steady state's note (tests/helpers/synthetic.py: a first call traced in step 1)."""
    from tests.helpers.synthetic import call, gap, op, run
    steps = [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(500)], traced_us=3000)]] + \
        [[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(500)]), gap(200)]] * 4
    trace, path = pages("parts", lambda: run(steps))
    with Opened(browser, path) as opened:
        widths = opened.js("""() => Array.from(document.querySelectorAll('.tb-parts .tb-part'),
                                              p => [p.className.split('tb-part-')[1], parseFloat(p.style.width)])""")
        assert [(part, round(width, 1)) for part, width in widths] == [("ops", 30.0), ("framework", 50.0),
                                                                        ("idle", 20.0)]
        panel = opened.js("() => document.querySelector('.tb-parts').innerText")
        assert "Median step by part (4 steps)" in panel and "first-call tracing of train_step" in panel
        assert not opened.errors, opened.errors
