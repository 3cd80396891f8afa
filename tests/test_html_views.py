"""What a new user sees first on the HTML pages (issue 25, item 3; issue 24, item 6), in
headless Chromium, on real files: names that tell rows and lanes apart, lanes that fill the
view, a comparison that shows both runs' op at once, XLA kernels and thunks under their TF
op. One page load per test; the pages are written by the CLI, as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


from tests.helpers.browser import browser_mark
from tests.test_html import Opened

REPO = Path(__file__).resolve().parents[1]


def _page(tmp_path: Path, *args) -> Path:
    out = tmp_path / "page.html"
    result = subprocess.run([sys.executable, "-m", "tracebridge", *map(str, args), str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return out


@browser_mark
def test_names_are_told_apart_in_tables_and_lanes(corpus, browser, tmp_path):
    """The multi-worker GPU profile's top ops are 30 dropout ``RandomUniform`` ops of two
    replicas and 24 layers: each row must read differently (the middle cut read
    ``replica_…andomUniform`` for all of them), showing its replica and layer; the full name
    is the hover title. Lane names in a panel read differently too."""
    page = _page(tmp_path, "html", corpus / "xspace" / "tfprofiler_gpu_multi_worker.xplane.pb")
    with Opened(browser, page) as opened:
        cells = opened.js("() => Array.from(document.querySelectorAll('.tb-side table')[0].querySelectorAll('.tb-fit'),"
                          " c => [c.textContent, c.title])")
        lanes = opened.js("() => tracebridge.timelines[0].panels.filter(p => !p.collapsed)"
                          ".map(p => [p.laneLabels || [], p.lanes.map(l => tracebridge.timelines[0].data.lanes[l].name)])")
    shown = [text for text, _ in cells]
    assert len(cells) > 50 and len(set(shown)) == len({title for _, title in cells}), sorted(shown)
    dropout = [(text, title) for text, title in cells if title.endswith("random_uniform/RandomUniform")]
    assert len(dropout) >= 20
    for text, title in dropout:
        replica, layer = title.split("/")[0], next(p for p in title.split("/") if p.startswith("layer_"))
        assert text.startswith(replica + "/") and f"/{layer}/" in text and text.endswith("/RandomUniform"), (text, title)
    assert lanes and all(len(labels) == len(names) for labels, names in lanes)
    for labels, names in lanes:
        assert len(set(labels)) == len(set(names)), labels
        assert all(all(piece in name for piece in label.split("\u2026")) for label, name in zip(labels, names)), labels


@browser_mark
def test_a_tf1_cpu_step_fills_the_view(browser, tmp_path):
    """A TF1 CPU step has one lane and an allocator chart: they fill the view (the lane was
    18 px and about 80% of the canvas blank), and the taller lane says each op's type and
    duration beside its name."""
    page = _page(tmp_path, "html", REPO / "tests" / "data" / "tf1_mlp" / "run_metadata.pb")
    with Opened(browser, page) as opened:
        box = opened.js("() => { const r = document.querySelector('.tb-main').getBoundingClientRect();"
                        " return [r.top, r.bottom]; }")
        bottoms = opened.js("() => Array.from(document.querySelectorAll('.tb-canvas-wrap'), w => w.getBoundingClientRect().bottom)")
        row = opened.js("() => tracebridge.timelines[0].row")
        scrolls = opened.js("() => { const m = document.querySelector('.tb-main'); return m.scrollHeight > m.clientHeight; }")
        lines = opened.js("() => { const d = tracebridge.timelines[0].data; let best = 0;"
                          " for (let i = 1; i < d.n; i++) if (d.end[i] - d.start[i] > d.end[best] - d.start[best]) best = i;"
                          " return d.boxLines(best, 2).map(([text]) => text); }")
    top, bottom = box
    assert max(bottoms) >= bottom - 0.03 * (bottom - top), (bottoms, box)
    assert row > 3 * 18 and not scrolls
    assert len(lines) == 2 and "\u00b5s" in lines[1]


@browser_mark
def test_a_compare_row_shows_its_op_in_both_runs(corpus, browser, tmp_path):
    """Two GPU runs with every panel open are taller than the view together: a row click
    must bring the op of each run into view at once (one scroll box for both scrolled the
    control's op away to show the test's)."""
    control = corpus / "chrome" / "ikhlestov_gpu_timeline_03_merged_5_runs.json"
    test = corpus / "chrome" / "ikhlestov_gpu_timeline_01.json"
    page = _page(tmp_path, "compare", control, test, "--html")
    with Opened(browser, page) as opened:
        opened.js("() => { tracebridge.page.collapseAll(false); tracebridge.draw(); }")
        tall = opened.js("() => tracebridge.timelines.reduce((h, t) => h + t.root.offsetHeight, 0)"
                         " > document.querySelector('.tb-main').clientHeight")
        rows = opened.js("() => tracebridge.compare.rows().filter(r => r.side === 'both').slice(0, 12).map(r => r.index)")
        seen = []
        for index in rows:
            opened.js("(i) => tracebridge.compare.selectRow(i)", index)
            instances = opened.js("() => tracebridge.compare.instances()")
            assert len(instances) == 2
            for instance in instances:
                visible = opened.js("""([pos, trace]) => {
                    const p = tracebridge.screenPoint(pos, trace);
                    if (!p) return false;
                    const hit = document.elementFromPoint(p.x, p.y);
                    return !!hit && tracebridge.timelines[trace].root.contains(hit) && hit.tagName === 'CANVAS'; }""",
                                    [instance["pos"], instance["trace"]])
                seen.append((index, instance["trace"], visible))
    assert tall and len(rows) >= 3
    assert all(visible for _, _, visible in seen), [s for s in seen if not s[2]]


@browser_mark
def test_xla_thunks_sit_under_their_tf_op_and_clicks_link_both(browser, tmp_path):
    """A JAX CPU run's XLA thunks (tests/data/xla): a "TF ops" lane above each thread's lanes
    holds one span per run of thunks of one TF op, covering them; the thunks say their HLO
    instruction (read back from the file's own event stats here); clicking a thunk
    highlights its TF op's span, clicking the span highlights its thunks."""
    import tracebridge
    source = REPO / "tests" / "data" / "xla" / "jax_cpu_convnet.xplane.pb"
    trace = tracebridge.load(source)
    stats = trace.table("event_stats")
    key = trace.string_id("hlo_instruction")
    instructions = {(trace.strings[trace.ops["name"][op]], int(trace.ops["start_ns"][op]), trace.strings[value])
                    for op, k, value in zip(stats["op"].tolist(), stats["key"].tolist(), stats["value"].tolist()) if k == key}
    page = _page(tmp_path, "html", source)
    with Opened(browser, page) as opened:
        layout = opened.js("""() => {
            const d = tracebridge.timelines[0].data, out = {spans: [], thunks: []};
            for (let i = 0; i < d.n; i++) {
              const op = tracebridge.op(i);
              if (d.isSpan(i)) out.spans.push([i, op.name, op.start_ns, op.end_ns, d.laneOf(i), !!d.lanes[d.laneOf(i)].tf_ops]);
              else if (op.hlo.instruction) out.thunks.push([i, op.name, op.start_ns, op.end_ns, d.laneOf(i), op.hlo.instruction, op.start_epoch_ns]);
            }
            return out; }""")
        spans, thunks = layout["spans"], layout["thunks"]
        # the biggest thunk's span: its lane above the thunk's, covering it
        thunk = max(thunks, key=lambda t: t[3] - t[2])
        span = next(s for s in spans if s[1] == thunk[1] and s[2] <= thunk[2] and s[3] >= thunk[3])
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [span[2] - 2000, span[3] + 2000])
        clicks = {}
        for name, pos in (("thunk", thunk[0]), ("span", span[0])):
            opened.js("() => tracebridge.clearHighlight()")
            point = opened.js("(pos) => tracebridge.screenPoint(pos)", pos)
            opened.page.mouse.click(point["x"], point["y"])
            clicks[name] = opened.js("([a, b]) => [tracebridge.selected().pos, tracebridge.isHighlighted(a), tracebridge.isHighlighted(b)]",
                                     [thunk[0], span[0]])
        tip = opened.js("() => tracebridge.detailsText()")
    assert len(thunks) == len(instructions) and spans and all(s[5] for s in spans)
    assert {(t[1], int(t[6]), t[5]) for t in thunks} == instructions
    assert span[4] < thunk[4]  # the TF ops lane is above the thunk's
    assert clicks["thunk"] == [thunk[0], True, True] and clicks["span"] == [span[0], True, True]
    assert "XLA" in tip and span[1] in tip
