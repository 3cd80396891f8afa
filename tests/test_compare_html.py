"""The HTML diff view of two runs (tracebridge/writers/compare_html.py) in headless Chromium.

Two runs of one small MLP training step are built with TraceBuilder: the control named the
TF1 way (``dense/MatMul``, ``gradients/dense/MatMul_grad/MatMul_1``,
``GradientDescent/update_dense/kernel/ResourceApplyGradientDescent``), the test the TF2 way
(``sequential/dense/MatMul``, ``gradient_tape/sequential/dense/MatMul/MatMul_1``,
``SGD/AssignSubVariableOp``), with other step numbers, other start times, some ops slower,
some faster, and ops only one run has. ``tracebridge.analysis.compare.compare`` aligns them
and the page is opened from file:// in Debian's chromium through Playwright (every request
recorded) and checked: no console errors, no request but the file itself, both timelines
draw the ops of every device, the table starts with the largest regression and re-sorts on
a header click, a row highlights its op in both timelines (the drawn highlights too) and
zooms to it, the step selector aligns both runs, hostile names run nothing.

Screenshots go to ``$TRACEBRIDGE_HTML_SHOTS`` (default ``/tmp/html-shots``); setup:
``tests/viewers/setup.sh``. The tests at the end need no browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers.browser import browser_mark
from tests.test_html import EVIL, EVIL_TITLE, Opened, _Scripts, _unpack
from tracebridge import OutputError, Trace, compare
from tracebridge.analysis.common.types import PerSide
from tracebridge.model.builder import TraceBuilder
from tracebridge.model.schema import OpFlag
from tracebridge.writers.compare_html import compare_document, write_compare_html
from tracebridge.writers.html import html_document

BASE = 1_700_000_000_000_000_000

# --------------------------------------------------------------------------- two runs of one model

# (TF1 name, TF2 name, op type, control us, test us); None: the op is not in that run.
MLP_OPS = [
    ("IteratorGetNext", "IteratorGetNext", "IteratorGetNext", 300, 280),
    ("dense/MatMul", "sequential/dense/MatMul", "MatMul", 900, 1900),        # the big regression
    ("dense/BiasAdd", "sequential/dense/BiasAdd", "BiasAdd", 120, 125),
    ("dense/Relu", "sequential/dense/Relu", "Relu", 400, 150),               # faster
    ("logits/MatMul", "sequential/logits/MatMul", "MatMul", 500, 760),       # slower
    (None, "sequential/dense/Cast", "Cast", None, 90),                       # only in test
    ("loss/SparseSoftmaxCrossEntropyWithLogits", "sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits",
     "SparseSoftmaxCrossEntropyWithLogits", 200, 210),
    ("gradients/logits/MatMul_grad/MatMul", "gradient_tape/sequential/logits/MatMul/MatMul", "MatMul", 450, 470),
    ("gradients/logits/MatMul_grad/MatMul_1", "gradient_tape/sequential/logits/MatMul/MatMul_1", "MatMul", 430, 440),
    ("gradients/dense/Relu_grad/ReluGrad", "gradient_tape/sequential/dense/ReluGrad", "ReluGrad", 250, 240),
    ("gradients/dense/BiasAdd_grad/BiasAddGrad", "gradient_tape/sequential/dense/BiasAdd/BiasAddGrad",
     "BiasAddGrad", 180, 175),
    ("gradients/dense/MatMul_grad/MatMul_1", "gradient_tape/sequential/dense/MatMul/MatMul_1", "MatMul", 800, 1300),
    ("gradients/AddN", None, "AddN", 60, None),                                # only in control
    ("GradientDescent/update_dense/kernel/ResourceApplyGradientDescent", "SGD/AssignSubVariableOp",
     "ResourceApplyGradientDescent", 150, 100),
    ("GradientDescent/update_logits/kernel/ResourceApplyGradientDescent", "SGD/AssignSubVariableOp_1",
     "ResourceApplyGradientDescent", 140, 90),
]


def mlp_run(flavour: str, *, steps=(0, 1, 2), start=BASE, rename=None) -> Trace:
    """One run of MLP_OPS: ``flavour`` "tf1" (control names and times) or "tf2" (test)."""
    tf1 = flavour == "tf1"
    rng = np.random.default_rng(1 if tf1 else 2)
    b = TraceBuilder({"source_format": "tf1-run-metadata" if tf1 else "tf2-xspace", "model": "mlp"})
    gpu = b.device("/job:localhost/replica:0/task:0/device:GPU:0")
    cpu = b.device("/job:localhost/replica:0/task:0/device:CPU:0")
    for k, number in enumerate(steps):
        step = b.step(number, name="train_op" if tf1 else "train_function")
        t = start + k * 20_000_000
        previous = ""
        for c_name, t_name, op_type, c_us, t_us in MLP_OPS:
            name, us = (c_name, c_us) if tf1 else (t_name, t_us)
            if name is None:
                continue
            if rename:
                name = rename(name)
            if not tf1 and op_type == "ResourceApplyGradientDescent":
                op_type = "AssignSubVariableOp"
            duration = int(us * 1000 * rng.uniform(0.97, 1.03))
            device = cpu if op_type == "IteratorGetNext" else gpu
            b.add_op(name=name, op_type=op_type, start_ns=t, end_ns=t + duration, device=device, step=step,
                     inputs=(previous,) if previous else (), flags=OpFlag.LABEL_CANONICAL)
            previous = name
            t += duration + 40_000
    return b.build()


def mlp_pair():
    """The control (TF1 names, steps 0-2) and the test (TF2 names, steps 10-12, later)."""
    return mlp_run("tf1"), mlp_run("tf2", steps=(10, 11, 12), start=BASE + 5_000_000_000)


def hostile_pair():
    """Both runs named with the hostile strings, and hostile devices and formats."""
    def run(flavour, start, extra):
        b = TraceBuilder({"source_format": f"<script>window.__pwned='{flavour}'</script>", "notes": EVIL[1]})
        devices = [b.device(f"/job:{EVIL[0]}/replica:0/task:0/device:CPU:0"), b.device(EVIL[1] + "/device:GPU:0")]
        for k in range(2):
            step = b.step(k, name=EVIL[4])
            t = start + k * 10_000_000
            for i, name in enumerate(EVIL + [extra]):
                d = devices[i % 2]
                duration = 300_000 + i * 10_000 + (200_000 if flavour == "test" and i % 3 == 0 else 0)
                op_type = EVIL[(i + 1) % len(EVIL)] if i < len(EVIL) else extra + " type"  # extra: unmatched
                b.add_op(name=name, op_type=op_type, start_ns=t, end_ns=t + duration, device=d,
                         step=step, inputs=(EVIL[(i + 3) % len(EVIL)],), label=EVIL[(i + 5) % len(EVIL)])
                t += duration + 50_000
        return b.build()
    return (run("control", BASE, '<b onmouseover="window.__pwned=1">only control</b>'),
            run("test", BASE + 1_000_000_000, "<iframe src=javascript:window.__pwned=2>only test"))


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Lazily written pages: name -> (comparison, path)."""
    folder = tmp_path_factory.mktemp("compare_html")
    made = {}

    def make(name: str, build, **options):
        if name not in made:
            comparison = compare(*build())
            path = folder / f"{name}.html"
            write_compare_html(comparison, path, **options)
            made[name] = (comparison, path)
        return made[name]

    return make



def _expected_order(comparison, key="delta_ns", descending=True) -> list[int]:
    """Row indices in the order the table sorts them: missing values last, ties by index
    (the table's columns are the rows' JSON keys: ``control_median_ns``, ...)."""
    rows = [SimpleNamespace(**row.to_dict()) for row in comparison.rows]
    present = [i for i, r in enumerate(rows) if getattr(r, key) is not None]
    missing = [i for i, r in enumerate(rows) if getattr(r, key) is None]
    sign = -1 if descending else 1
    if key in ("key", "rule", "op_type"):
        # strings: a stable sort of the index order, reversed comparison for descending
        present.sort(key=lambda i: getattr(rows[i], key), reverse=descending)
        groups: dict = {}
        for i in present:
            groups.setdefault(getattr(rows[i], key), []).append(i)
        present = [i for value in dict.fromkeys(getattr(rows[i], key) for i in present) for i in sorted(groups[value])]
    else:
        present.sort(key=lambda i: (sign * getattr(rows[i], key), i))
    return present + missing


def _highlight_expected(trace: Trace, names) -> int:
    wanted = {trace.strings.index(n) for n in names if n in trace.strings}
    return int(np.isin(trace.ops["name"], sorted(wanted)).sum())


def _check_drawn_both(opened: Opened, comparison) -> None:
    opened.js("() => tracebridge.reset()")
    for index, trace in enumerate((comparison.control, comparison.test)):
        counts = opened.js("(i) => tracebridge.drawnCounts(i)", index)
        per_device = np.bincount(trace.ops["device"], minlength=len(trace.devices))
        for i, device in enumerate(trace.devices):
            if per_device[i]:
                assert counts[device.name]["ops"] == per_device[i], (index, device.name, counts)
                assert counts[device.name]["rects"] > 0, (index, device.name, counts)


def _row_positions(opened: Opened) -> list[str]:
    """The op key of each drawn table row, top to bottom."""
    return opened.js("() => tracebridge.compare.tableKeys()")


def tracebridge_offset(opened: Opened, trace: int) -> float:
    """Timeline ``trace``'s offset: view time = its trace time - offset."""
    return opened.js("(i) => tracebridge.compare.offsets()[i]", trace)


@browser_mark
def test_compare_page_both_runs_and_coverage(pages, browser):
    comparison, path = pages("mlp", mlp_pair)
    with Opened(browser, path) as opened:
        assert opened.js("() => tracebridge.timelines.length") == 2
        assert opened.js("() => tracebridge.timelines.map(t => t.data.n)") == [len(comparison.control),
                                                                              len(comparison.test)]
        _check_drawn_both(opened, comparison)
        # the runs, one above the other, labelled with their role and source format
        heads = opened.js("""() => Array.from(document.querySelectorAll('.tb-trace-head'),
                                              e => [e.querySelector('.tb-role').textContent,
                                                    e.querySelector('.tb-trace-format').textContent,
                                                    e.getBoundingClientRect().top])""")
        assert [h[:2] for h in heads] == [["control", "tf1-run-metadata"], ["test", "tf2-xspace"]]
        assert heads[0][2] < heads[1][2]
        # coverage at the top
        bar = opened.page.locator(".tb-compare-bar").inner_text()
        for covered in comparison.coverage:
            assert f"{covered * 100:.1f}%" in bar, bar
        assert opened.js("() => tracebridge.compare.coverage()") == pytest.approx(comparison.coverage.to_dict())
        bar_box = opened.page.locator(".tb-compare-bar").bounding_box()
        assert bar_box["y"] < opened.page.locator(".tb-trace-head").first.bounding_box()["y"]
        # every row is in the table, unmatched ones too (one side empty, marked)
        assert sorted(_row_positions(opened)) == sorted(r.key for r in comparison.rows)
        unmatched = [r for r in comparison.rows if not r.names.control or not r.names.test]
        assert {r.key for r in unmatched} >= {"gradients/AddN", "sequential/dense/Cast"}
        assert opened.page.locator(".tb-diff-table tr.tb-unmatched").count() == len(unmatched)
        cells = opened.js("""() => Array.from(document.querySelectorAll('.tb-diff-table tr.tb-unmatched'),
                                              tr => Array.from(tr.cells, c => c.textContent))""")
        for cells_of_row in cells:
            assert "\u2014" in cells_of_row[4:6] and "only" in cells_of_row[2], cells_of_row
        # hover an op of the test run: its own details
        op = opened.js("() => tracebridge.op(0, 1)")
        opened.js("([a, b]) => tracebridge.setRange(a, b)", [op["start_ns"] - tracebridge_offset(opened, 1) - 1000,
                                                              op["end_ns"] - tracebridge_offset(opened, 1) + 1000])
        point = opened.js("() => tracebridge.screenPoint(0, 1)")
        opened.page.mouse.move(point["x"], point["y"])
        hit = opened.js("([x, y]) => tracebridge.hitTest(x, y)", [point["x"], point["y"]])
        assert hit["trace"] == 1 and hit["pos"] == 0 and op["name"] in opened.js("() => tracebridge.tooltipText()")
        opened.page.mouse.move(5, 5)
        # keys and wheel move both timelines (one shared range)
        opened.js("() => tracebridge.reset()")
        before = opened.range()
        box = opened.page.locator(".tb-device .tb-canvas-wrap").last.bounding_box()
        opened.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 5)
        opened.page.mouse.wheel(0, -400)
        opened.wait_for_new_range(before)
        after = opened.range()
        assert after[1] - after[0] < (before[1] - before[0]) * 0.8
        assert opened.js("() => tracebridge.timelines.map(t => t.page.range.t0)") == [after[0], after[0]]


@browser_mark
def test_table_sorted_largest_regression_first_and_resorts(pages, browser):
    comparison, path = pages("mlp", mlp_pair)
    with Opened(browser, path) as opened:
        page = opened.page
        rows = comparison.rows
        worst = max(range(len(rows)), key=lambda i: rows[i].delta_ns)
        assert rows[worst].key == "sequential/dense/MatMul" or "dense/MatMul" in rows[worst].key
        keys = _row_positions(opened)
        assert keys[0] == rows[worst].key
        assert [r["index"] for r in opened.js("() => tracebridge.compare.rows()")] == _expected_order(comparison)
        assert opened.js("() => tracebridge.compare.sortState()") == {"key": "delta_ns", "descending": True}
        header = page.locator(".tb-diff-table th.tb-col-delta-ns")
        assert header.get_attribute("aria-sort") == "descending"
        first = page.locator(".tb-diff-table tbody tr").first
        cells = first.locator("td").all_inner_texts()
        assert cells[0].endswith("slower") and cells[6].startswith("+"), cells
        # clicking a header sorts by it: text columns ascending first, numbers descending
        for key, css, descending in (("key", "key", False), ("key", "key", True), ("ratio", "ratio", True),
                                     ("control_median_ns", "control-median-ns", True),
                                     ("control_median_ns", "control-median-ns", False),
                                     ("rule", "rule", False), ("change", "change", True)):
            page.locator(f".tb-diff-table th.tb-col-{css} button").click()
            state = opened.js("() => tracebridge.compare.sortState()")
            assert state == {"key": key, "descending": descending}, (key, state)
            shown = [r["index"] for r in opened.js("() => tracebridge.compare.rows()")]
            if key == "change":
                order = {"+": 1, "=": 0, "-": -1}  # a row of one run only: new (0.5) or gone (-0.5)
                values = [order[rows[i].change] if rows[i].names.control and rows[i].names.test
                          else 0.5 if rows[i].names.test else -0.5 for i in shown]
                assert values == sorted(values, reverse=True)
            else:
                assert shown == _expected_order(comparison, key, descending), key
            assert _row_positions(opened) == [rows[i].key for i in shown]
            assert page.locator(f".tb-diff-table th.tb-col-{css}").get_attribute("aria-sort") == (
                "descending" if descending else "ascending")
        # ratio: the unmatched rows (no ratio) last
        page.locator(".tb-diff-table th.tb-col-ratio button").click()
        shown = [r["index"] for r in opened.js("() => tracebridge.compare.rows()")]
        ratios = [rows[i].ratio for i in shown]
        assert None in ratios and all(r is None for r in ratios[ratios.index(None):])
        # filters: text and kind
        assert opened.js("() => tracebridge.compare.filter('relu', '')") == sum(
            1 for r in rows if "relu" in "\n".join((r.key, r.op_type, r.rule) + r.names.control + r.names.test).lower())
        assert opened.js("() => tracebridge.compare.filter('', 'unmatched')") == sum(
            1 for r in rows if not r.names.control or not r.names.test)
        # slower: matched rows only; an op of the test run alone is new, not slower (issue 25)
        assert opened.js("() => tracebridge.compare.filter('', '+')") == sum(
            1 for r in rows if r.change == "+" and r.names.control and r.names.test)
        assert opened.js("() => tracebridge.compare.filter('', 'new')") == sum(1 for r in rows if not r.names.control)
        opened.js("() => tracebridge.compare.filter('', '')")
        assert len(_row_positions(opened)) == len(rows)


@browser_mark
def test_row_click_highlights_the_op_in_both_runs(pages, browser):
    comparison, path = pages("mlp", mlp_pair)
    with Opened(browser, path) as opened:
        page = opened.page
        rows = comparison.rows
        page.locator(".tb-diff-table tbody tr").first.click()
        worst = max(range(len(rows)), key=lambda i: rows[i].delta_ns)
        row = rows[worst]
        page.wait_for_function("() => tracebridge.compare.selectedRow() >= 0 && tracebridge.highlighted() > 0")
        assert opened.js("() => tracebridge.compare.selectedRow()") == worst
        expected = [_highlight_expected(comparison.control, row.names.control),
                    _highlight_expected(comparison.test, row.names.test)]
        assert expected[0] > 0 and expected[1] > 0
        assert opened.js("() => tracebridge.compare.highlightCounts()") == expected
        # the highlighted ops are exactly the row's names, in each run
        for index, names in ((0, row.names.control), (1, row.names.test)):
            shown = opened.js("""(i) => { const t = tracebridge.timelines[i], out = [];
                for (let p = 0; p < t.data.n; p++) if (tracebridge.isHighlighted(p, i)) out.push(t.data.name(p));
                return out; }""", index)
            assert set(shown) == set(names) and len(shown) == expected[index]
        # zoomed to it: an instance of each run is in view and drawn highlighted
        start, end = opened.range()
        assert end - start < 0.5 * opened.js("() => { const r = tracebridge.page.home; return r.t1 - r.t0; }")
        instances = opened.js("() => tracebridge.compare.instances()")
        assert sorted(i["trace"] for i in instances) == [0, 1]
        for instance in instances:
            op = opened.js("([p, t]) => tracebridge.op(p, t)", [instance["pos"], instance["trace"]])
            offset = tracebridge_offset(opened, instance["trace"])
            assert start <= op["start_ns"] - offset and op["end_ns"] - offset <= end, (op, start, end)
            assert op["name"] in (row.names.control if instance["trace"] == 0 else row.names.test)
            drawn = opened.js("(i) => tracebridge.drawnCounts(i)", instance["trace"])
            assert drawn[op["device"]]["highlighted"] >= 1, drawn
        assert opened.js("() => tracebridge.selected().name") in row.names.control
        assert "tb-selected" in page.locator(".tb-diff-table tbody tr").first.get_attribute("class")
        details = page.locator(".tb-compared").inner_text()
        assert row.key in details and row.rule in details
        opened.shot("compare")
        # an op only the control has: highlighted there, nothing in the test run
        only = next(i for i, r in enumerate(rows) if r.names.control and not r.names.test)
        counts = opened.js("(i) => tracebridge.compare.selectRow(i)", only)
        assert counts == [_highlight_expected(comparison.control, rows[only].names.control), 0]
        assert counts[0] > 0
        test_drawn = opened.js("() => tracebridge.drawnCounts(1)")
        assert sum(d["highlighted"] for d in test_drawn.values()) == 0
        # the keyboard walks the table; a second click clears
        row_locator = page.locator(".tb-diff-table tbody tr").first
        row_locator.click()
        page.keyboard.press("ArrowDown")
        second = page.locator(".tb-diff-table tbody tr").nth(1)
        assert "tb-selected" in second.get_attribute("class")
        index = int(second.get_attribute("data-index"))
        assert opened.js("() => tracebridge.compare.selectedRow()") == index
        second.click()
        assert opened.js("() => tracebridge.highlighted()") == 0
        assert opened.js("() => tracebridge.compare.selectedRow()") == -1


@browser_mark
def test_step_selector_aligns_both_runs(pages, browser):
    comparison, path = pages("mlp", mlp_pair)
    with Opened(browser, path) as opened:
        page = opened.page
        pairs = [list(p) for p in comparison.step_pairs]
        assert pairs == [[0, 10], [1, 11], [2, 12]]
        assert opened.js("() => tracebridge.compare.stepPairs()") == pairs
        options = opened.js("() => Array.from(document.querySelectorAll('.tb-steps option'), o => [o.value, o.textContent])")
        assert [o[0] for o in options] == ["", "0", "1", "2"]
        assert "0 \u2194 10" in options[1][1]

        def view_steps(index):
            """Both steps of pair ``index`` in view time: [[start, end] control, [start, end] test]."""
            return opened.js("""(pair) => tracebridge.timelines.map((t, i) => {
                const s = t.data.steps.find(x => x.number === pair[i]);
                return [s.start - t.offset, s.end - t.offset]; })""", pairs[index])

        # the page opens aligned at the first pair
        assert opened.js("() => tracebridge.compare.currentPair()") == 0
        first = view_steps(0)
        assert first[0][0] == first[1][0]
        for index in (2, 1):
            page.select_option(".tb-steps", str(index))
            # the selector's draw waits for an animation frame: on a loaded machine 50 ms may
            # pass first, and drawnCounts would tell the last frame's
            page.wait_for_function("(i) => tracebridge.compare.currentPair() === i", arg=index)
            opened.js("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            assert opened.js("() => tracebridge.compare.currentPair()") == index
            steps = view_steps(index)
            assert steps[0][0] == pytest.approx(steps[1][0], abs=1e-6)  # both start together
            start, end = opened.range()
            span = max(steps[0][1], steps[1][1]) - steps[0][0]
            assert start <= steps[0][0] <= start + span * 0.05
            assert end - span * 0.05 <= max(steps[0][1], steps[1][1]) <= end
            # the two steps' ops are drawn and nothing else
            for trace_index, trace in enumerate((comparison.control, comparison.test)):
                number = pairs[index][trace_index]
                position = [s.number for s in trace.steps].index(number)
                drawn = opened.js("(i) => tracebridge.drawnCounts(i)", trace_index)
                per_device = np.bincount(trace.ops["device"][trace.ops["step"] == position],
                                         minlength=len(trace.devices))
                for i, device in enumerate(trace.devices):
                    assert drawn[device.name]["ops"] == per_device[i], (trace_index, device.name, drawn)
        # the API, by control step number and by pair
        assert opened.js("() => tracebridge.selectStep(0)") is True
        assert opened.js("() => tracebridge.compare.currentPair()") == 0
        assert opened.js("() => tracebridge.selectStep(10)") is False
        assert opened.js("() => tracebridge.compare.selectStepPair(7)") is False
        # All steps: everything in view, alignment kept
        page.select_option(".tb-steps", "")
        assert opened.js("() => tracebridge.compare.currentPair()") == 0
        _check_drawn_both(opened, comparison)
        # a row picked now zooms to its instances in the aligned pair
        opened.js("() => tracebridge.compare.selectStepPair(2)")
        worst = max(range(len(comparison.rows)), key=lambda i: comparison.rows[i].delta_ns)
        opened.js("(i) => tracebridge.compare.selectRow(i)", worst)
        for instance in opened.js("() => tracebridge.compare.instances()"):
            op = opened.js("([p, t]) => tracebridge.op(p, t)", [instance["pos"], instance["trace"]])
            assert op["step"] == pairs[2][instance["trace"]]


@browser_mark
def test_hostile_names_stay_text(pages, browser):
    comparison, path = pages("hostile", hostile_pair, title=EVIL_TITLE)
    with Opened(browser, path) as opened:
        page = opened.page
        assert len(comparison.rows) >= len(EVIL) + 2
        assert sum(1 for r in comparison.rows if not r.names.control or not r.names.test) == 2
        # every rendering path: every row (table, compared-op panel, details), hover, sorting
        for index in range(len(comparison.rows)):
            opened.js("(i) => tracebridge.compare.selectRow(i)", index)
        for trace in (0, 1):
            n = opened.js("(i) => tracebridge.timelines[i].data.n", trace)
            opened.js("() => tracebridge.reset()")
            for pos in range(0, n, 3):
                point = opened.js("([p, t]) => tracebridge.screenPoint(p, t)", [pos, trace])
                if point:
                    page.mouse.move(point["x"], point["y"])
        for css in ("key", "rule", "op-type", "ratio"):
            page.locator(f".tb-diff-table th.tb-col-{css} button").click()
        page.locator(".tb-diff-table tbody tr").first.click()
        opened.js("() => tracebridge.search('script')")
        page.fill(".tb-diff-filter", "<img")
        # the box applies its text after a pause in typing: wait until the table is filtered
        filtered = [r for r in comparison.rows if "<img" in "\n".join(
            (r.key, r.op_type, r.rule) + r.names.control + r.names.test).lower()]
        page.wait_for_function("(n) => tracebridge.compare.rows().length === n", arg=len(filtered), timeout=10_000)
        assert opened.js("() => window.__pwned") is None
        assert opened.js("() => document.querySelectorAll('img, svg, iframe, object, embed, b').length") == 0
        scripts = opened.js("() => Array.from(document.scripts, s => [s.id, s.type])")
        assert [s for s in scripts if s[1] == ""] == [["", ""]], scripts
        assert opened.js("() => document.title") == EVIL_TITLE
        # names shown verbatim
        keys = set(opened.js("() => tracebridge.compare.rows().map(r => r.key)"))
        assert keys == {r.key for r in comparison.rows if "<img" in "\n".join(
            (r.key, r.op_type, r.rule) + r.names.control + r.names.test).lower()} and keys
        page.fill(".tb-diff-filter", "")
        page.wait_for_function("(n) => tracebridge.compare.rows().length === n", arg=len(comparison.rows),
                               timeout=10_000)
        titles = opened.js("() => Array.from(document.querySelectorAll('.tb-diff-table tbody td.tb-fit'), e => e.title)")
        assert set(titles) == {r.key for r in comparison.rows} | {r.op_type for r in comparison.rows}
        formats = opened.js("() => Array.from(document.querySelectorAll('.tb-trace-format'), e => e.textContent)")
        assert formats == [comparison.control.source_format, comparison.test.source_format]
        opened.shot("compare-hostile")


# --------------------------------------------------------------------------- without a browser


def test_document_blocks_and_escaping():
    control, test = hostile_pair()
    comparison = compare(control, test)
    document = compare_document(comparison, title=EVIL_TITLE)
    document.encode("ascii")
    parser = _Scripts()
    parser.feed(document)
    kinds = [attrs.get("type") for attrs, _ in parser.scripts]
    assert kinds.count(None) == 1 and kinds[-1] is None
    assert document.lower().count("<script") == len(parser.scripts) == document.lower().count("</script")
    blocks = {attrs.get("id"): text for attrs, text in parser.scripts}
    assert {"tb-compare", "tb0-meta", "tb1-meta", "tb0-strings", "tb1-strings"} <= set(blocks)
    for key in ("tb-compare", "tb0-meta", "tb1-meta"):
        assert "<" not in blocks[key] and ">" not in blocks[key] and "&" not in blocks[key]
    data = json.loads(blocks["tb-compare"])
    assert data["format"] == "tracebridge-compare" and data["title"] == EVIL_TITLE
    assert len(data["rows"]) == len(comparison.rows)
    fields = data["fields"]
    for values, row in zip(data["rows"], comparison.rows):
        got = dict(zip(fields, values))
        assert got["key"] == row.key and got["control_names"] == list(row.names.control)
        assert got["test_names"] == list(row.names.test) and got["change"] == row.change
        assert got["delta_ns"] == pytest.approx(row.delta_ns) and got["ratio"] == (
            None if row.ratio is None else pytest.approx(row.ratio))
    assert data["step_pairs"] == [list(p) for p in comparison.step_pairs]
    strings = json.loads(_unpack(blocks["tb1-strings"]).decode("ascii")) if blocks["tb1-strings"] else []
    for evil in EVIL:
        assert evil in strings
    # the traces are encoded exactly as the one-trace page encodes them
    single = _Scripts()
    single.feed(html_document(control))
    single_blocks = {attrs.get("id"): text for attrs, text in single.scripts}
    for key, text in single_blocks.items():
        if key and key != "tb0-meta":
            assert blocks[key] == text, key
    meta, single_meta = json.loads(blocks["tb0-meta"]), json.loads(single_blocks["tb0-meta"])
    assert {k: v for k, v in meta.items() if k != "title"} == {k: v for k, v in single_meta.items() if k != "title"}
    assert "<title>&lt;/title&gt;&lt;script&gt;" in document


def test_nan_and_missing_values_become_null():
    control, test = mlp_pair()
    comparison = compare(control, test)
    comparison.rows[0].ratio = float("nan")
    comparison.rows[1].median_ns = PerSide(float("inf"), comparison.rows[1].median_ns.test)
    parser = _Scripts()
    parser.feed(compare_document(comparison))
    data = json.loads(next(text for attrs, text in parser.scripts if attrs.get("id") == "tb-compare"))
    first, second = (dict(zip(data["fields"], values)) for values in data["rows"][:2])
    assert first["ratio"] is None and second["control_median_ns"] is None


def test_output_is_deterministic_atomic_and_gzips(tmp_path):
    import gzip

    comparison = compare(*mlp_pair())
    first, second, zipped = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.html.gz"
    write_compare_html(comparison, first)
    write_compare_html(comparison, second)
    write_compare_html(comparison, zipped)
    assert first.read_bytes() == second.read_bytes() == compare_document(comparison).encode("ascii")
    assert gzip.decompress(zipped.read_bytes()) == first.read_bytes()
    with pytest.raises(OutputError):
        write_compare_html(comparison, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.html", "c.html.gz"]
    title = re.search(r"<title>(.*)</title>", first.read_text()).group(1)
    assert title == "tf1-run-metadata vs tf2-xspace: %d ops compared" % len(comparison.rows)


def test_device_pattern():
    comparison = compare(*mlp_pair())
    parser = _Scripts()
    parser.feed(compare_document(comparison, device_pattern="GPU"))
    metas = [json.loads(text) for attrs, text in parser.scripts if attrs.get("id") in ("tb0-meta", "tb1-meta")]
    for meta in metas:
        assert [d["name"] for d in meta["devices"]] == ["/job:localhost/replica:0/task:0/device:GPU:0"]
        assert meta["hidden_devices"] == 1


def _page_script(document: str) -> str:
    """The page's one executable script, checked against the hash its CSP admits."""
    parser = _Scripts()
    parser.feed(document)
    (script,) = [text for attrs, text in parser.scripts if attrs.get("type") is None]
    digest = base64.b64encode(hashlib.sha256(script.encode("ascii")).digest()).decode("ascii")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', document).group(1)
    assert f"script-src 'sha256-{digest}';" in csp
    return script


def test_only_comparison_pages_carry_the_diff_view():
    control, test = mlp_pair()
    timeline_script = _page_script(html_document(control))
    compare_script = _page_script(compare_document(compare(control, test)))
    for code in ("class DiffView", "DIFF_COLUMNS", "start(DiffView);"):
        assert code not in timeline_script and code in compare_script, code
    assert "class Page" in timeline_script and "start(null);" in timeline_script
    assert len(timeline_script) < len(compare_script)


def test_writing_the_diff_imports_no_tensorflow(tmp_path):
    code = f"""
import sys
from tests.test_compare_html import mlp_pair
from tracebridge import compare
from tracebridge.writers.compare_html import write_compare_html
write_compare_html(compare(*mlp_pair()), {str(tmp_path / 'x.html')!r})
print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tensorboard')))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@browser_mark
def test_rows_coloured_by_rule_with_shares_and_confidence(pages, browser):
    comparison, path = pages("mlp", mlp_pair)
    with Opened(browser, path) as opened:
        drawn = opened.js("""() => Array.from(document.querySelectorAll('.tb-diff-table tbody tr'),
                                tr => [tr.cells[1].title, tr.dataset.rule, tr.cells[2].className,
                                       getComputedStyle(tr.cells[2]).backgroundColor, tr.cells[2].title])""")
        by_key = {r.key: r for r in comparison.rows}
        colour_of_rule: dict[str, set[str]] = {}
        for key, rule, css, colour, title in drawn:
            row = by_key[key]
            assert rule == row.rule and "tb-rule-" + re.sub(r"[^a-z0-9]+", "-", row.rule) in css.split()
            colour_of_rule.setdefault(rule, set()).add(colour)
            if row.names.control and row.names.test:
                assert title == f"confidence {row.confidence:.2f}", (key, title)
        # one colour per rule, and rules of different certainty look different
        assert all(len(colours) == 1 for colours in colour_of_rule.values()), colour_of_rule
        matched_rules = {r.rule for r in comparison.rows if r.names.control and r.names.test}
        assert len(matched_rules) >= 3, matched_rules
        assert len({next(iter(colour_of_rule[rule])) for rule in matched_rules}) == len(matched_rules)
        # the bar lists each rule's share of both runs' op time
        legend = opened.page.locator(".tb-rule-shares").inner_text()
        for rule, share in comparison.rule_shares.items():
            assert f"{rule} {share.control * 100:.1f}%/{share.test * 100:.1f}%" in legend, legend
        shown = opened.js("() => tracebridge.compare.ruleShares()")
        assert shown.keys() == comparison.rule_shares.keys()
        for rule, share in comparison.rule_shares.items():
            assert shown[rule] == pytest.approx(share.to_dict()), rule


# --------------------------------------------------------------------------- where the step time goes
def parts_pair():
    """A tf.function step with 100 us of framework time (control) and with 700 us of it and
    200 us of Python after the call (test), 300 us of ops each (tests/helpers/synthetic.py)."""
    from tests.helpers.synthetic import call, gap, op, run
    control = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(100)])]] * 5)
    test = run([[call("train_step", 5, [op("dense/MatMul", "MatMul", 300), gap(700)]), gap(200)]] * 5)
    return control, test


def test_page_data_holds_each_runs_parts_and_the_difference():
    comparison = compare(*parts_pair())
    parser = _Scripts()
    parser.feed(compare_document(comparison))
    data = json.loads({attrs.get("id"): text for attrs, text in parser.scripts}["tb-compare"])
    parts = data["parts"]
    assert parts["control"]["median_ns"] == 400_000 and parts["test"]["median_ns"] == 1_200_000
    assert parts["control"]["parts"] == {"ops": 300_000, "framework": 100_000, "input": 0, "compile": 0, "idle": 0}
    assert parts["test"]["parts"] == {"ops": 300_000, "framework": 700_000, "input": 0, "compile": 0, "idle": 200_000}
    assert parts["delta"] == {"ops": 0, "framework": 600_000, "input": 0, "compile": 0, "idle": 200_000}
    assert data["headline"]["parts"] == parts["delta"]


@browser_mark
def test_diff_page_draws_a_stacked_bar_per_run_to_one_scale(pages, browser):
    comparison, path = pages("parts", parts_pair)
    with Opened(browser, path) as opened:
        bars = opened.js("() => tracebridge.compare.partBars()")
        # both runs to the test's 1.2 ms: control 300 + 100 us, test 300 + 700 + 200 us
        assert [[(p["part"], round(p["width"], 2)) for p in bar["pieces"]] for bar in bars] == [
            [("ops", 25.0), ("framework", 8.33)], [("ops", 25.0), ("framework", 58.33), ("idle", 16.67)]]
        assert [bar["total"] for bar in bars] == ["400.0 \u00b5s", "1.20 ms"]
        difference = opened.js("() => document.querySelector('.tb-parts-delta').textContent")
        assert "framework +600.0 \u00b5s" in difference and difference.endswith("= +800.0 \u00b5s")
        # the bars sit above the timelines, in view
        top = opened.js("() => document.querySelector('.tb-parts-compare').getBoundingClientRect().top")
        assert 0 < top < opened.js("() => document.querySelector('.tb-trace-head').getBoundingClientRect().top")
        assert not opened.errors, opened.errors
