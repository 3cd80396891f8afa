"""What a new user still trips on (issue 34, part 3): each item tried with its command on a
real file of the corpus (TPU, JAX on an H100 and on a CPU, TF2 on GPUs, timeline.py's JSON),
and what it must say instead. The TF2 captures' items (dataflow arrows, the memory note of a
saved capture) are in tests/test_capture_tf2.py; a Keras fit under XLA (metrics' DivNoNan) in
tests/test_xla_capture.py; migrate's in tests/test_migrate.py."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import tracebridge
from tests.conftest import run_cli
from tests.helpers.browser import browser_mark
from tests.test_html import _Scripts, _unpack

DATA = Path(__file__).parent / "data" / "xla"
TPU = "xspace/xprof_tpu_inference_2.xplane.pb"
JAX_GPU = "xspace/jax_h100_convnet_nographs.xplane.pb"
JAX_GPU_GRAPHS = "xspace/jax_h100_convnet_graphs.xplane.pb"
TF2_GPU = "xspace/tfprofiler_gpu_multi_worker.xplane.pb"
GPU_JSON = "chrome/ikhlestov_gpu_timeline_03_merged_5_runs.json"  # 221 kernels, 847 events, 5 steps
CPU_JSON = "chrome/ikhlestov_cpu_timeline_01.json"               # 12 TF ops, 1 step, 1 device


def _page_meta(path) -> tuple[dict, list[str]]:
    """The meta and the string table of the first trace of an HTML page."""
    parser = _Scripts()
    parser.feed(Path(path).read_text())
    blocks = {attrs.get("id"): text for attrs, text in parser.scripts}
    meta = json.loads(blocks["tb0-meta"])
    packed = blocks["tb0-strings"]
    strings = json.loads(_unpack(packed) if "strings" in meta["deflated"] else base64.b64decode(packed))
    return meta, strings


# --- counts: one vocabulary (TF ops, kernels, events), and "1 device" ------------------------
def test_counts_use_one_vocabulary(corpus, tmp_path):
    gpu = tracebridge.load(corpus / GPU_JSON)
    cpu = tracebridge.load(corpus / CPU_JSON)
    # repr counts every row: events, as info's "(N events in all)" does
    assert repr(gpu) == "<Trace chrome: 847 events, 5 steps, 8 devices>"
    assert repr(cpu) == "<Trace chrome: 12 events, 1 step, 1 device>"
    info = run_cli("info", corpus / GPU_JSON).stdout
    assert "221 kernels (847 events in all)" in info, info
    assert "12 TF ops over" in run_cli("info", corpus / CPU_JSON).stdout
    assert "221 kernels, " in run_cli("summary", corpus / GPU_JSON).stdout.splitlines()[0]
    page = run_cli("html", corpus / GPU_JSON, tmp_path / "gpu.html")
    assert page.stdout.strip() == f"wrote {tmp_path / 'gpu.html'} (847 events)"
    meta, _ = _page_meta(tmp_path / "gpu.html")
    assert meta["summary"]["counted_as"] == "kernels"  # the page's top-ops table says it too
    converted = run_cli("convert", corpus / CPU_JSON, tmp_path / "cpu.pftrace")
    assert converted.stdout.strip() == f"wrote {tmp_path / 'cpu.pftrace'} (perfetto, 12 events, 1 step)"
    for text in (repr(cpu), info, converted.stdout, run_cli("info", corpus / CPU_JSON).stdout):
        assert not re.search(r"\b1 (devices|steps|events|lanes)\b", text), text


# --- the TPU summary ---------------------------------------------------------------------------
def test_tpu_summary_shows_async_copies_human_units_and_no_empty_host_column(corpus):
    summary = tracebridge.load(corpus / TPU).summary()
    types = {row["key"]: row for row in summary.by_type}
    # copy-start/copy-done pairs are XLA's asynchronous copies, not an unknown op type
    assert "Unknown" not in types and types["async copy"]["share"] > 0.9
    assert types["async copy"]["count"] == 4800
    text = run_cli("summary", corpus / TPU).stdout
    assert "async copy" in text and "Unknown" not in text
    # no TF op runs on the host: the host column (0 in every row) is left out
    assert not any(line.split()[:6] == ["device", "share", "count", "mean", "host", "name"]
                   for line in text.splitlines()), text
    info = run_cli("info", corpus / TPU).stdout
    assert "memory peaks: unknown 15.0 GiB" in info, info
    assert "16106341504 B" not in info


def test_a_host_column_with_time_stays(corpus):
    """A GPU run's TF ops have host time: the column stays there."""
    text = run_cli("summary", corpus / GPU_JSON).stdout
    assert any(line.split()[:6] == ["device", "share", "count", "mean", "host", "name"] for line in text.splitlines())


# --- JAX and XLA names -------------------------------------------------------------------------
def test_mangled_kernel_names_are_demangled_and_shortened(corpus, tmp_path):
    from tracebridge.model.kernel_names import short_kernel_name
    trace = tracebridge.load(corpus / JAX_GPU)
    mangled = [k for k in set(trace.column_strings("ops", "kernel")) if k.startswith("_Z")]
    assert mangled and max(map(len, mangled)) > 1500
    for name in mangled:
        short = short_kernel_name(name)
        assert len(short) <= 80 and not short.startswith("_Z"), short
    cutlass = next(k for k in mangled if "ImplicitGemmConvolution" in k)
    assert short_kernel_name(cutlass) == "cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>"
    assert short_kernel_name("void convolve_common_engine_float_NHWC<float, float, 1024, 5, 5, 3, 3, 3, true, false, "
                             "false, false, false>(int, int, int, float const*, float const*, int, float*)") == \
        "convolve_common_engine_float_NHWC<float, float, 1024, …>"
    assert short_kernel_name("loop_add_fusion_1") == "loop_add_fusion_1"  # a plain name stays
    text = run_cli("summary", corpus / JAX_GPU).stdout
    assert "_ZN17cutlass" not in text and max(len(line) for line in text.splitlines()) < 400
    assert "cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>" in text
    # the page shows the short name and keeps the whole one (demangled) for hover
    run_cli("html", corpus / JAX_GPU, tmp_path / "jax.html")
    meta, strings = _page_meta(tmp_path / "jax.html")
    shown = {strings[int(index)]: names for index, names in meta["kernel_names"].items()}
    short, full = shown[cutlass]
    assert short == "cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>"
    assert full.startswith("void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<")


def test_jax_argument_paths_are_no_op_types(corpus):
    for name in (JAX_GPU, JAX_GPU_GRAPHS):
        types = [row["key"] for row in tracebridge.load(corpus / name).summary().by_type]
        assert not [t for t in types if re.search(r"[\[\]'()]", t)], types  # p['conv2']['kernel'], jit(train_step)


def test_profiler_bookkeeping_planes_are_no_devices(corpus):
    trace = tracebridge.load(corpus / JAX_GPU)
    assert [d.name for d in trace.devices] == ["/device:GPU:0", "/host:CPU"]
    assert "__ScopeRangeCallStack__" not in run_cli("info", corpus / JAX_GPU).stdout


def test_jax_lanes_are_labelled_jax_ops(corpus, tmp_path):
    run_cli("convert", corpus / TPU, tmp_path / "tpu.json")
    threads = [e["args"]["name"] for e in json.loads((tmp_path / "tpu.json").read_text())["traceEvents"]
               if e.get("ph") == "M" and e.get("name") == "thread_name"]
    assert "JAX ops · XLA Ops" in threads and not [t for t in threads if t.startswith("TF ops")]
    run_cli("html", corpus / TPU, tmp_path / "tpu.html")
    lanes = [lane["name"] for lane in _page_meta(tmp_path / "tpu.html")[0]["lanes"]]
    assert "JAX ops" in lanes and "TF ops" not in lanes
    # a TF run keeps its TF ops (the chrome reader reads back either name)
    again = tracebridge.load(tmp_path / "tpu.json")
    assert len(again) == len(tracebridge.load(corpus / TPU))


def test_doctor_speaks_jax_to_a_jax_profile(tmp_path):
    from tests.test_xla import _without_hlo
    stripped = _without_hlo(DATA / "jax_cpu_mlp.xplane.pb", tmp_path / "stripped.xplane.pb")
    problems = tracebridge.doctor(stripped).problems
    text = "\n".join(p.line() for p in problems)
    assert "XLA ops cannot be tied to JAX ops" in text, text
    assert "experimental_get_compiler_ir" not in text and "jit_compile" not in text
    assert "jax.jit(f).lower(*args).compile().as_text()" in text
    # TF's CPU allocator variable means nothing to JAX
    for path in (DATA / "jax_cpu_mlp.xplane.pb", DATA / "jax_cpu_convnet.xplane.pb"):
        assert "TF_CPU_ALLOCATOR_USE_BFC" not in run_cli("doctor", path).stdout


def test_notes_on_a_jax_profile_speak_jax(corpus):
    """summary reads a JAX run's op rows only: its notes claimed no step markers (3 steps,
    "train 0" to "train 2", are there) taken "from tf.function calls", and no memory; the TPU
    run's doctor counted "0 TF ops"."""
    text = run_cli("summary", corpus / JAX_GPU).stdout
    notes = [line for line in text.splitlines() if line.startswith("note:")]
    assert not [n for n in notes if "step marker" in n or "memory" in n], notes
    assert "tf.function" not in text, text
    assert "TF ops" not in run_cli("doctor", corpus / TPU).stdout


def test_info_lists_each_hlo_module_once(corpus):
    line = next(line for line in run_cli("info", corpus / JAX_GPU_GRAPHS).stdout.splitlines()
                if line.startswith("  hlo_modules:"))
    names = line.split(": ", 2)[2].split(", ")
    listed = [n.split(" (")[0] for n in names if not n.startswith("...")]
    assert len(listed) == len(set(listed)), line
    modules = tracebridge.load(corpus / JAX_GPU_GRAPHS).metadata["hlo_modules"]
    programs = sum(m["name"] == "jit_convert_element_type" for m in modules)
    assert programs > 1 and f"jit_convert_element_type ({programs} programs)" in line, line


# --- threads named by role ---------------------------------------------------------------------
def test_thread_lanes_are_named_by_role_with_the_id_kept(corpus, tmp_path):
    run_cli("html", corpus / TF2_GPU, tmp_path / "tf2.html")
    meta = _page_meta(tmp_path / "tf2.html")[0]
    host = next(i for i, device in enumerate(meta["devices"]) if device["name"] == "/host:CPU")
    lanes = [lane for lane in meta["lanes"] if lane["device"] == host]
    names = {lane["name"]: lane.get("thread") for lane in lanes}
    assert names["Python"] == "python3"
    assert names["TF compute 1"] == "tf_Compute/1105654971" and "TF compute 4" in names
    assert names["tf.data 1"].startswith("tf_data_iterator_get_next_as_optional/")
    assert not [n for n in names if re.search(r"\d{6}", n)], names  # no thread id in a label
    # lanes that are no threads keep their names, and no hover text of their own
    streams = [lane for lane in meta["lanes"] if lane["name"].startswith(("Stream #", "TensorFlow Ops"))]
    assert streams and not [lane for lane in streams if "thread" in lane]


# --- errors and help ---------------------------------------------------------------------------
def test_a_binary_file_mangled_by_a_text_conversion_says_so(corpus):
    result = run_cli("info", corpus / "bad" / "xprof_tpu_inference_2_reencoded.xplane.pb")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "corrupt XSpace" in result.stderr
    assert "text conversion" in result.stderr and "EF BF BD" in result.stderr, result.stderr


def test_a_subcommand_s_bad_option_prints_that_subcommand_s_usage(corpus):
    result = run_cli("info", corpus / CPU_JSON, "--bogus")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: tracebridge info "), result.stderr
    assert "unrecognized arguments: --bogus" in result.stderr


def test_every_subcommand_says_in_one_line_what_it_prints():
    from tracebridge.cli import _parser
    commands = next(a for a in _parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    listed = {choice.dest: choice.help for choice in commands._choices_actions}
    for name, parser in commands.choices.items():
        text = run_cli(name, "--help").stdout
        paragraphs = text.split("\n\n")
        description = " ".join(paragraphs[1].split())
        assert not description.startswith(("positional arguments:", "options:")), (name, text)
        one_line = listed[name]
        assert description.startswith(one_line[0].upper() + one_line[1:]), (name, description)


@browser_mark
def test_the_gutter_and_the_details_panel_show_whole_names_on_hover(corpus, browser, tmp_path):
    """In Chromium: a host lane's gutter label is its role, its hover text the thread's own
    name; a cuDNN kernel's details show its short name, its hover text the whole one."""
    from tests.test_html import Opened
    run_cli("html", corpus / TF2_GPU, tmp_path / "tf2.html")
    with Opened(browser, tmp_path / "tf2.html") as opened:
        hover = opened.js("""() => {
            const t = tracebridge.timelines[0], d = t.data;
            const lane = d.lanes.findIndex((l) => l.name === 'TF compute 1');
            const pos = d.laneFirst[lane];
            t.revealPanel(pos); tracebridge.draw();
            const point = tracebridge.screenPoint(pos), panel = t.panelOfLane(lane);
            return {x: panel.wrap.getBoundingClientRect().left + 20, y: point.y}; }""")
        opened.page.mouse.move(hover["x"], hover["y"])
        # the browser shows the title of the element under the mouse or of its nearest ancestor with one
        title = opened.js("([x, y]) => (document.elementFromPoint(x, y).closest('[title]') || {}).title",
                          [hover["x"], hover["y"]])
    assert title == "TF compute 1: tf_Compute/1105654971", title
    run_cli("html", corpus / JAX_GPU, tmp_path / "jax.html")
    with Opened(browser, tmp_path / "jax.html") as opened:
        shown = opened.js("""() => {
            const d = tracebridge.timelines[0].data;
            let pos = -1;
            for (let i = 0; i < d.n && pos < 0; i++) if (d.kernel(i).startsWith('_ZN17cutlass')) pos = i;
            tracebridge.select(pos);
            const dd = Array.from(document.querySelectorAll('.tb-side dd')).find((e) => e.textContent.includes('kernel '));
            return [dd.textContent, dd.title]; }""")
    assert shown[0].endswith("(kernel cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>)"), shown[0]
    assert shown[1].startswith("void cutlass__5x_cudnn::Kernel<") and len(shown[1]) > 5000
