"""What a new user hits first (issue 25): crashes, piped output, the --top type, help text."""

from __future__ import annotations

import contextlib
import functools
import os

from tests.conftest import REPO, run_cli
from tests.helpers.browser import browser_mark


def test_tensorboard_on_an_empty_trace_is_one_line_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    result = run_cli("tensorboard", empty, tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "no ops" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_closed_pipe_ends_quietly(corpus):
    """``summary T --top 1000 | head -2``: the reader is gone before the tables are written."""
    from tracebridge.cli import main
    read, write = os.pipe()
    os.close(read)
    stdout = os.fdopen(write, "w", buffering=1)
    try:
        with contextlib.redirect_stdout(stdout):
            code = main(["summary", str(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"),
                         "--top", "1000"])
    finally:
        with contextlib.suppress(OSError):
            stdout.close()
    assert code == 141


def test_top_takes_positive_row_counts_only(corpus):
    trace = corpus / "chrome" / "ikhlestov_gpu_timeline_01.json"
    for command in (("summary", trace), ("compare", trace, trace)):
        for bad in ("-3", "0", "x"):
            result = run_cli(*command, "--top", bad)
            assert result.returncode == 2 and "--top" in result.stderr, (command, bad, result.stderr)
        assert run_cli(*command, "--top", "2").returncode == 0


def _written_five_times(source, target):
    """One real run written again under four more pids with the same timestamps: the shape
    of tp-nscan/SharedIpynb's timeline_02.json (five pids, one device name, one _SOURCE each)."""
    import json
    events = json.loads(source.read_text())["traceEvents"]
    pids = sorted({e["pid"] for e in events if "pid" in e})
    copies = []
    for copy in range(5):
        copies += [{**e, "pid": e["pid"] + copy * (max(pids) + 1)} for e in events if "pid" in e]
    target.write_text(json.dumps({"traceEvents": copies}))
    return target


def test_one_run_written_under_five_pids_is_one_step(corpus, tmp_path):
    import tracebridge
    source = corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json"
    once = tracebridge.load(source)
    assert len(once.steps) == 1
    five = tracebridge.load(_written_five_times(source, tmp_path / "five.json"))
    durations = [s.duration_ns for s in five.steps]
    assert durations == [once.steps[0].duration_ns], durations
    shared = corpus / "chrome" / "tp-nscan_SharedIpynb_timeline_02.json"
    if shared.exists():  # the file issue 25 names, where the corpus has it
        steps = tracebridge.load(shared).steps
        assert len(steps) == 1 and abs(steps[0].duration_ns / 1e6 - 1071.121) < 0.01


def test_info_counts_what_summary_counts(corpus):
    """Profiler bookkeeping and host annotations are events, not ops: info's op count is summary's."""
    import json
    for path in (corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb",
                 corpus / "chrome" / "ikhlestov_gpu_timeline_01.json",
                 corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json"):
        info = json.loads(run_cli("info", "--json", path).stdout)
        summary = json.loads(run_cli("summary", "--json", path).stdout)
        assert info["ops"] == summary["op_count"] and info["events"] >= info["ops"], path
        assert run_cli("info", path).stdout.splitlines()[3 if "host" in info["metadata"] else 2].startswith(
            f"{info['ops']} "), path


def test_info_outlines_a_recorded_graph(tf1_files, tmp_path):
    """A capture's graph (860 kB for ResNet-50) is outlined in text; --json keeps it whole."""
    import json

    import tracebridge
    trace = tracebridge.load(tf1_files["pb"])
    graph = {"nodes": [[f"layer_{i}/MatMul", "MatMul", [f"layer_{i - 1}/MatMul"], [64, 64]] for i in range(5000)],
             "variables": [[f"layer_{i}/kernel", [64, 64], "weight"] for i in range(5000)]}
    trace = trace.with_metadata(graph=json.dumps(graph))
    path = tmp_path / "with_graph.json"
    trace.save(path)
    text = run_cli("info", path)
    assert text.returncode == 0, text.stderr
    assert max(map(len, text.stdout.splitlines())) < 200
    assert "recorded graph: 5,000 nodes, 5,000 variables" in text.stdout
    assert json.loads(json.loads(run_cli("info", "--json", path).stdout)["metadata"]["graph"]) == graph
    page = tmp_path / "page.html"
    assert run_cli("html", path, page).returncode == 0
    html = page.read_text()
    assert "recorded graph: 5,000 nodes" in html and "layer_4999/kernel" not in html


def _table_rows(text: str) -> list[list[str]]:
    """The rows of compare's text table: change, control, test, delta, ratio, conf, rule, op."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("control") and "delta" in line)
    rows = []
    for line in lines[start + 1:]:
        if not line[:1] in "+-=" or line.startswith("  ..."):
            break
        rows.append(line.split(None, 7))
    return rows


def test_compare_headline_and_rank_order(corpus):
    """A headline with both step times on one line; rows ranked by absolute change, rows of one
    run only after them, longest first; --sort and --top as asked."""
    control, test = corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json", corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
    result = run_cli("compare", control, test, "--top", "1000")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("step time: control ") and " -> test " in first and "ms (" in first
    assert "explain" in result.stdout.splitlines()[1] or "not slower" in result.stdout.splitlines()[1]
    rows = _table_rows(result.stdout)
    matched = [r for r in rows if r[6] != "unmatched"]
    alone = [r for r in rows if r[6] == "unmatched"]
    assert matched and alone and rows == matched + alone
    changes = [abs(float(r[3][:-2])) for r in matched]
    assert changes == sorted(changes, reverse=True)
    longest = [max(float(r[1][:-2]), float(r[2][:-2])) for r in alone]
    assert longest == sorted(longest, reverse=True)
    by_name = _table_rows(run_cli("compare", control, test, "--sort", "name", "--top", "3").stdout)
    assert len(by_name) == 3 and [r[7] for r in by_name] == sorted(r[7] for r in by_name)
    import json
    data = json.loads(run_cli("compare", control, test, "--json").stdout)
    assert {"rows", "findings", "steps", "unmatched"} <= set(data) and data["headline"]["findings"] == len(data["findings"])
    # the CSV twin: every row, ranked as the text ranks them
    csv_rows = _csv_rows(run_cli("compare", control, test, "--csv").stdout)
    assert len(csv_rows) == len(data["rows"]) and [r["key"] for r in csv_rows][:len(rows)] == [r[7] for r in rows]
    by_name = [r["key"] for r in _csv_rows(run_cli("compare", control, test, "--csv", "--sort", "name").stdout)]
    assert by_name[:3] == [r[7] for r in _table_rows(run_cli("compare", control, test, "--sort", "name", "--top", "3").stdout)]


def test_compare_page_leads_with_the_step_time_text_uses(corpus, tmp_path):
    import json
    import re
    control, test = corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json", corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
    page = tmp_path / "diff.html"
    result = run_cli("compare", control, test, "--html", page, "--json")
    data = json.loads(result.stdout)
    html = page.read_text()
    block = json.loads(re.search(r'<script type="application/json" id="tb-compare" class="tracebridge-compare">(.*?)</script>', html, re.DOTALL).group(1))
    assert block["headline"]["control_ns"] == data["steps"]["control"]["median_ns"] == data["headline"]["control_ns"]
    assert block["headline"]["test_ns"] == data["steps"]["test"]["median_ns"]
    assert "sum of medians" not in html and "only in test" in html
    # each run's panel is headed with its file's name, not "chrome" twice
    assert [(t["role"], t["name"]) for t in block["traces"]] == [("control", control.name), ("test", test.name)]
    assert block["title"] == f"{control.name} vs {test.name}"


def test_findings_say_what_their_share_is_of_and_what_fixing_saves(corpus, tmp_path):
    import json

    from tests.helpers.synthetic import cnn_step, run
    # a CNN whose Conv2D is twice as slow, and whose steps hold a gap of Python work (5 steps each)
    control, test = tmp_path / "control.json", tmp_path / "test.json"
    run([cnn_step()] * 5, sigma=0.05, seed=1).save(control)
    run([cnn_step(slower={"Conv2D": 2.0}, gap_us=3000)] * 5, sigma=0.05, seed=2).save(test)
    data = json.loads(run_cli("compare", control, test, "--json").stdout)
    difference = data["steps"]["test"]["median_ns"] - data["steps"]["control"]["median_ns"]
    assert data["findings"]
    for finding in data["findings"]:
        assert finding["of"] == "the test run's median step"
        assert 0 <= finding["saves_at_most_ns"] <= max(difference, 0) + 1
        assert finding["saves_at_most_ns"] <= finding["share"] * data["steps"]["test"]["median_ns"] + 1
    # the test run swapped with the control: it is faster, so no fix saves anything
    swapped = json.loads(run_cli("compare", test, control, "--json").stdout)
    assert all(f["saves_at_most_ns"] == 0 for f in swapped["findings"])
    text = run_cli("compare", control, test).stdout
    assert "of the test run's median step; fixing it saves at most" in text
    advice = json.loads(run_cli("advise", "--json", test).stdout)
    findings = advice["findings"]
    assert advice["thresholds"]["min_steps"] == 3 and advice["notes"] == []
    assert findings and all(f["of"] == "the run's step time" and f["saves_at_most_ns"] > 0 for f in findings)


def test_every_finding_link_target_exists_and_ships_with_the_package():
    """Each kind's link (migration_guide/README.md#KIND) names a file and a section that
    exist; the package holds the same guide; `tracebridge guide KIND` prints the section."""
    import re
    from pathlib import Path

    from tracebridge.analysis.findings.evidence import GUIDE
    from tracebridge.analysis.findings import DETECTORS, KINDS
    from tracebridge.guide import guide_text, sections
    repo = Path(__file__).parents[1]
    guide = repo / GUIDE
    assert guide_text() == guide.read_text()
    for detector in DETECTORS:
        finding = detector.finding(0.5, "measured", None)
        path, _, anchor = finding.link.partition("#")
        assert (repo / path).is_file() and anchor == detector.kind and anchor in sections(), finding.link
    for kind in KINDS:
        printed = run_cli("guide", kind)
        assert printed.returncode == 0 and printed.stdout.startswith(f"### {kind}\n") and len(printed.stdout) > 200
    for target in re.findall(r"\]\(([^)#\s:]+)[^)]*\)", guide.read_text()):  # the guide's own relative links
        assert (guide.parent / target).exists(), target
    wrong = run_cli("guide", "no_such_kind")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1


def _subcommands():
    import argparse

    from tracebridge.cli import _parser
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, commands.choices


def test_every_argument_of_every_subcommand_has_help():
    """Walk the parser: a positional, --json or a tracer level without help is a defect."""
    import argparse
    parser, commands = _subcommands()
    missing = []
    for name, command in commands.items():
        for action in command._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                missing.append(f"{name} {action.dest}")
    assert not missing, missing
    top = parser.description
    for word in ("XSpace", "compare", "advise", "doctor"):
        assert word in top, word
    assert "TF1 session" not in commands["demo"].format_help() and "TF2" in commands["demo"].format_help()
    html_options = [o for a in commands["html"]._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    assert "--device" in html_options and "--device-pattern" not in html_options
    workers = next(a for a in commands["summary"]._actions if a.dest == "workers")
    assert "Dask" in workers.help and "1, or 2" not in workers.help  # docs/reading.md runs --workers 4


def test_unreadable_inputs_say_what_they_are(tmp_path, corpus):
    notes = tmp_path / "notes.txt"
    notes.write_text("step 1: loss 0.3\nstep 2: loss 0.2\n")
    result = run_cli("info", notes)
    assert result.returncode == 2 and "not a trace tracebridge can read" in result.stderr and "tried:" in result.stderr
    assert "wire type" not in result.stderr
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes((corpus / "xspace" / "jax_h100_mlp_graphs.xplane.pb").read_bytes()[:150_000])
    result = run_cli("info", cut)
    assert result.returncode == 2 and "truncated" in result.stderr and result.stderr.count("\n") == 1


def test_migrate_report_offers_no_time_table_for_counts_and_says_what_tf_layers_needs(tmp_path):
    script = tmp_path / "old.py"
    script.write_text(
        "import tensorflow as tf\n"
        "x = tf.placeholder(tf.float32, [None, 4])\n"
        "h = tf.layers.dense(x, 8)\n"
        "params = tf.profiler.ProfileOptionBuilder.trainable_variables_parameter()\n"
        "flops = tf.profiler.ProfileOptionBuilder.float_operation()\n")
    report = run_cli("migrate", script).stderr.splitlines()
    counts = [line for line in report if "trainable_variables_parameter" in line or "float_operation" in line]
    assert len(counts) == 2 and all("summary(top=N)" not in line and "no equivalent" in line for line in counts)
    layers = [line for line in report if ":3: not in TF 2.21" in line]
    assert layers and "TF_USE_LEGACY_KERAS=1" in layers[0] and "tf_keras" in layers[0] and "port the layer" in layers[0]


def _page_meta(page, prefix: str = "tb0") -> dict:
    import json
    import re
    return json.loads(re.search(rf'<script type="application/json" id="{prefix}-meta"[^>]*>(.*?)</script>',
                                page.read_text(), re.DOTALL).group(1))


def test_html_pages_sort_devices_fold_hosts_and_take_the_file_name(corpus, tmp_path):
    """Accelerators first (a GPU, then its streams and copies), hosts after by activity, idle
    devices last; a host of many lanes starts folded; the title is the file's name."""
    merged = corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"
    page = tmp_path / "merged.html"
    assert run_cli("html", merged, page).returncode == 0
    meta = _page_meta(page)
    assert meta["title"] == merged.name and f"<title>{merged.name}" in page.read_text()
    shorts = [d["short"] for d in meta["devices"]]
    assert shorts[0].endswith("GPU:0") and shorts[-1].endswith("CPU:0"), shorts
    assert shorts.index("GPU:0/memcpy") > shorts.index("GPU:0/stream:all")
    worker = corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb"
    page = tmp_path / "worker.html"
    assert run_cli("html", worker, page).returncode == 0
    devices = _page_meta(page)["devices"]
    busy = [d for d in devices if d["ops"]]
    assert devices[:len(busy)] == busy and busy[-1]["kind"] == "host" and busy[0]["kind"] != "host"
    host = busy[-1]
    assert len(host["lanes"]) > 8 and host["folded"] and not any(d["folded"] for d in busy[:-1])
    page = tmp_path / "diff.html"
    control, test = corpus / "chrome" / "ikhlestov_cpu_timeline_02_step_0.json", corpus / "chrome" / "ikhlestov_cpu_timeline_01.json"
    assert run_cli("compare", control, test, "--html", page).returncode == 0
    assert f"<title>{control.name} vs {test.name}" in page.read_text()


@browser_mark
def test_table_names_keep_what_tells_rows_apart(corpus, browser, tmp_path):
    """Rows of the top-ops table whose names differ show different text (the scopes they share
    left out, not the middle that tells layer_1 from layer_2); the full name is the hover title."""
    from tests.test_html import Opened
    page = tmp_path / "merged.html"
    assert run_cli("html", corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json", page).returncode == 0
    with Opened(browser, page) as opened:
        cells = opened.js("() => Array.from(document.querySelectorAll('.tb-side table')[0].querySelectorAll('.tb-fit'),"
                          " c => [c.textContent, c.title])")
    assert len(cells) > 10 and len({title for _, title in cells}) == len(cells)
    shown = [text for text, _ in cells]
    import collections
    assert len(set(shown)) == len(shown), [(t, c) for t, c in collections.Counter(shown).items() if c > 1]  # 59 of 86 before (middle cut)
    assert any("/\u2026/" in text for text in shown)  # the scopes rows share, left out


def _csv_rows(text: str) -> list[dict]:
    import csv
    import io
    return list(csv.DictReader(io.StringIO(text)))


def _in_section(rows: list[dict], section: str) -> list[dict]:
    return [row for row in rows if row["section"] == section]


def test_every_json_option_has_a_csv_twin():
    """Output that pipes: wherever a subcommand prints --json, it prints --csv too, and the two
    exclude each other."""
    _, commands = _subcommands()
    for name, command in commands.items():
        options = {o for a in command._actions for o in a.option_strings}
        if "--json" in options:
            assert "--csv" in options, name
            both = run_cli(name, "--json", "--csv", "x", "y")
            assert both.returncode == 2 and "not allowed with" in both.stderr, (name, both.stderr)


def test_info_csv_has_a_row_for_every_line_step_and_device(corpus):
    import json
    for path in (corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json", REPO / "tests" / "data" / "xla" / "jax_cpu_mlp.xplane.pb"):
        info = json.loads(run_cli("info", "--json", path).stdout)
        result = run_cli("info", "--csv", path)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert result.stdout.splitlines()[0] == "section,key,kind,count,duration_ns,lanes,value"
        rows = _csv_rows(result.stdout)
        by = functools.partial(_in_section, rows)
        assert [r["value"] for r in by("format")] == [info["format"]]
        assert [(int(r["key"]), int(r["duration_ns"])) for r in by("step")] == \
            [(s["number"], s["duration_ns"]) for s in info["steps"]]
        assert [(r["key"], r["kind"], int(r["count"]), int(r["lanes"])) for r in by("device")] == \
            [(d["name"], d["kind"], d["ops"], d["lanes"]) for d in info["devices"]]
        assert int(by("ops")[0]["count"]) == info["ops"] and int(by("events")[0]["count"]) == info["events"]
        assert [r["value"] for r in by("note")] == info["notes"]
        assert {r["key"] for r in by("metadata")} == set(info["metadata"]) - {"source_format"}
        assert all(len(r["value"]) < 200 for r in rows), "a cell holds what grows with the model"
        text = run_cli("info", path).stdout  # the HLO modules' protos (base64) outlined, as the graph is
        assert max(map(len, text.splitlines())) < 300 and ("hlo_modules" not in info["metadata"]
                                                           or "hlo_modules: 1 HLO module (" in text)


def test_advise_and_doctor_csv_have_a_row_per_finding_and_problem(corpus, tmp_path):
    import json

    from tests.helpers.synthetic import cnn_step, eager, run
    merged = corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"
    # 5 steps, each with a gap of Python work and ops run eagerly: two findings
    findings_of = tmp_path / "gaps.json"
    run([cnn_step(gap_us=3000) + [eager("MatMul", 300, n) for n in range(4)]] * 5).save(findings_of)
    findings = json.loads(run_cli("advise", "--json", findings_of).stdout)["findings"]
    rows = _csv_rows(run_cli("advise", "--csv", findings_of).stdout)
    assert len(findings) >= 2 and [(r["kind"], float(r["share"]), r["link"]) for r in rows] == \
        [(f["kind"], f["share"], f["link"]) for f in findings]
    assert all(int(r["saves_at_most_ns"]) == round(f["saves_at_most_ns"]) for r, f in zip(rows, findings))
    hosts = [corpus / "chrome" / "ikhlestov_gpu_timeline_01.json", findings_of]  # one file per host
    by_host = json.loads(run_cli("advise", "--json", *hosts).stdout)["by_host"]
    result = run_cli("advise", "--csv", *hosts, "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("host,kind,share,")
    assert [(r["host"], r["kind"]) for r in _csv_rows(result.stdout)] == \
        [(h["host"], f["kind"]) for h in by_host for f in h["findings"]] != []
    for path in (merged, corpus / "events"):
        diagnosis = json.loads(run_cli("doctor", "--json", path).stdout)
        result = run_cli("doctor", "--csv", path)
        assert result.returncode == (0 if diagnosis["ok"] else 1), result.stderr
        rows = _csv_rows(result.stdout)
        assert [(r["code"], r["missing"], r["fix"]) for r in rows if r["code"] != "not_checked"] == \
            [(p["code"], p["missing"], p["fix"]) for p in diagnosis["problems"]]
        assert [r["missing"] for r in rows if r["code"] == "not_checked"] == diagnosis["not_checked"]


def test_csv_into_a_closed_pipe_ends_quietly(corpus):
    from tracebridge.cli import main
    merged = str(corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json")
    for argv in (["info", "--csv", merged], ["advise", "--csv", merged], ["doctor", "--csv", merged]):
        read, write = os.pipe()
        os.close(read)
        stdout = os.fdopen(write, "w", buffering=1)
        try:
            with contextlib.redirect_stdout(stdout):
                code = main(argv)
        finally:
            with contextlib.suppress(OSError):
                stdout.close()
        assert code == 141, argv


def test_info_outlines_what_grows_with_the_run(tmp_path):
    """Each step's input shapes (10,000 steps at most, kept by trace(fn)) and any other long
    metadata are outlined or cut in text and CSV; --json keeps them whole."""
    import json

    import tracebridge
    trace = tracebridge.load(REPO / "tests" / "data" / "xla" / "jax_cpu_mlp.xplane.pb")
    shapes = {str(n): f"float32[{4 * (1 + n % 6)},64], int32[{4 * (1 + n % 6)}]" for n in range(5000)}
    path = tmp_path / "long.json"
    trace.with_metadata(step_inputs=json.dumps(shapes)).save(path)
    text = run_cli("info", path).stdout
    assert max(map(len, text.splitlines())) < 400, max(text.splitlines(), key=len)[:200]
    assert "step_inputs: 5,000 steps, 6 input shapes: float32[4,64], int32[4]; float32[8,64], int32[8];" in text
    from tracebridge.analysis.run.summary import shown_metadata
    warned = trace.with_metadata(xspace_warnings="dropped events; " * 200)  # a reader's note on a damaged file
    shown = dict(shown_metadata(warned.info()))
    assert len(shown["xspace_warnings"]) < 400 and shown["xspace_warnings"].endswith("characters; --json prints it whole)")
    rows = _csv_rows(run_cli("info", "--csv", path).stdout)
    assert max(len(r["value"]) for r in rows) < 400
    assert json.loads(json.loads(run_cli("info", "--json", path).stdout)["metadata"]["step_inputs"]) == shapes


def test_host_by_host_tables_have_csv_twins(corpus, tmp_path):
    """summary --by-host: a row per host of its host table; compare --by-host-group: every
    group pair's aligned rows, led by the pair's group names (the rows of --json)."""
    import json
    import shutil
    hosts = []
    for name, source in (("worker-0", "ikhlestov_cpu_timeline_01.json"), ("worker-1", "ikhlestov_cpu_timeline_02_step_0.json")):
        hosts.append(tmp_path / f"{name}.json")
        shutil.copy(corpus / "chrome" / source, hosts[-1])
    report = json.loads(run_cli("summary", *hosts, "--by-host", "--json").stdout)["by_host"]
    result = run_cli("summary", *hosts, "--by-host", "--csv")
    assert result.returncode == 0, result.stderr
    rows = _csv_rows(result.stdout)
    assert [(r["host"], int(r["steps"]), int(r["median_step_ns"])) for r in rows] == \
        [(h["host"], h["steps"], h["median_step_ns"]) for h in report["hosts"]]
    assert {r["host"] for r in rows if r["straggler"] == "1"} == {s["host"] for s in report["stragglers"]} != set()
    sides = ",".join(map(str, hosts)), ",".join(map(str, reversed(hosts)))
    groups = json.loads(run_cli("compare", *sides, "--by-host-group", "--json").stdout)["groups"]
    result = run_cli("compare", *sides, "--by-host-group", "--csv")
    assert result.returncode == 0, result.stderr
    rows = _csv_rows(result.stdout)
    expected = [(g["control_group"], g["test_group"], row["key"], row["control_total_ns"], ";".join(row["test_names"]))
                for g in groups for row in g["comparison"]["rows"]]
    assert [(r["control_group"], r["test_group"], r["key"], int(r["control_total_ns"]), r["test_names"]) for r in rows] \
        == expected and len({(g, t) for g, t, *_ in expected}) == 2


def test_bytes_no_format_claims_say_so_not_only_that_a_run_metadata_is_corrupt(tmp_path):
    """Unclaimed bytes are read as a RunMetadata (TF1 scripts saved them under any name);
    where that fails, the one line says no format claimed the file, and why the default failed."""
    blob = tmp_path / "capture.bin"
    blob.write_bytes(bytes([0x0B, 0x00, 0x01, 0x02]) * 64)
    result = run_cli("info", blob)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "not a trace tracebridge can read: no format claims it (tried: " in result.stderr
    assert "read as a runmetadata (the default) it fails at byte" in result.stderr
    hosts = run_cli("advise", blob, blob, "--workers", "1")  # one file per host: read host by host
    assert hosts.returncode == 2 and "no format claims it" in hosts.stderr and hosts.stderr.count("\n") == 1
    renamed = tmp_path / "run_metadata"  # a real RunMetadata under a name no format claims still loads
    renamed.write_bytes((REPO / "tests" / "data" / "tf1_mlp" / "run_metadata.pb").read_bytes())
    assert run_cli("info", renamed).stdout.startswith(f"{renamed}: runmetadata")
