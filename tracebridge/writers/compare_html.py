"""The HTML diff view of two runs: one standalone page, no network, canvas-drawn.

The page of :mod:`tracebridge.writers.html` with two traces: the control run above the test
run (each with its own heading: role, source format, counts, coverage), one shared range
(zoom and pan move both), a step selector over the comparison's aligned step pairs (picking
one shifts the test timeline so that both steps start together and zooms to them), and
a findings panel in the sidebar (why the test run is slower: kind, share,
evidence, advice; :mod:`tracebridge.analysis.findings`), and below them the diff table of the aligned ops: change, op, how it was matched, op type,
per-step medians of both runs, delta and ratio, sortable by any column (largest regression
first), with a filter. Clicking a row highlights the op in both timelines (the control
names in the control run, the test names in the test run) and zooms to it.

The data is html.py's, unchanged: each trace as ``tb0-*`` (control) and ``tb1-*`` (test)
blocks (see that module), and the comparison as one more JSON block::

    <script type="application/json" id="tb-compare" class="tracebridge-compare">
    {"format": "tracebridge-compare", "version": 1, "title": ..., "coverage": {...},
     "step_pairs": [[control, test], ...], "traces": [{"role", "source_format"}, ...],
     "parts": {"control": {"median_ns", "parts", ...}, "test": {...}, "delta": {...}},
     "fields": [...], "rows": [[...], ...], "layers": [{"label", "phase", "control_total_ns",
     "test_total_ns", "delta_ns", "rows": [row index, ...]}, ...]}

``rows`` are lists in the order of ``fields`` (the comparison rows' attributes). ``layers``
is the comparison's layer table (empty without recorded graphs): the diff table then lists
the layers in the model's order, each with its op rows folded under it. The page
script is the timeline page's plus ``html_assets/diff_view.js``, which builds the diff view
from that block (see :mod:`.html_page`), so the safety rules are the same: all data is JSON
with ``<``, ``>`` and ``&`` escaped, the DOM is built with ``textContent`` only, and the
Content-Security-Policy admits the page's own script (by hash) and no network at all. No
TensorFlow import.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

from .._files import atomic_output
from .html import TimelineData, _json
from .html_page import page_end, page_head, page_script

FORMAT_VERSION = 1
ROW_FIELDS = ("key", "rule", "op_type", "control_names", "test_names", "control_total_ns", "test_total_ns",
              "control_median_ns", "test_median_ns", "delta_ns", "ratio", "change", "confidence")


def compare_document(comparison: Any, *, title: str | None = None, device_pattern: str | None = None,
                     names: tuple[str, str] | None = None) -> str:
    """The diff page of ``comparison`` as text (ASCII only). See :func:`write_compare_html`."""
    return "".join(_document_parts(comparison, title=title, device_pattern=device_pattern, names=names))


def write_compare_html(comparison: Any, path: str | os.PathLike, *, title: str | None = None,
                       device_pattern: str | None = None, names: tuple[str, str] | None = None) -> None:
    """Write the diff page of ``comparison`` (what
    :func:`tracebridge.analysis.compare.compare` returns) to ``path``: one self-contained
    HTML file that works from ``file://`` without any network (gzipped if the name ends
    in ``.gz``).

    ``title``: the page title (default: both source formats and the row count).
    ``names``: what each run's panel is headed with, control's then test's (their file
    names, say; default: their source formats).
    ``device_pattern``: a regular expression searched in device names; only matching
    devices of either run are drawn (the table is the comparison's, whole). Raises
    :class:`~tracebridge.errors.OutputError` when the file cannot be written (no partial
    file is left).
    """
    parts = _document_parts(comparison, title=title, device_pattern=device_pattern, names=names)
    with atomic_output(path, compress=os.fspath(path).endswith(".gz")) as out:
        for part in parts:
            out.write(part.encode("ascii"))


# --------------------------------------------------------------------------- the page

def default_title(comparison: Any) -> str:
    control, test = comparison.control, comparison.test
    return (f"{control.source_format} vs {test.source_format}: "
            f"{len(comparison.rows):,} ops compared")


def _document_parts(comparison: Any, *, title: str | None, device_pattern: str | None,
                    names: tuple[str, str] | None = None) -> Iterator[str]:
    script = page_script(comparison=True)
    title = title if title is not None else default_title(comparison)
    payloads = [
        TimelineData(trace, device_pattern=device_pattern,
                 title=f"{role}: {trace.source_format} trace, {len(trace):,} events")
        for role, trace in (("control", comparison.control), ("test", comparison.test))
    ]
    yield page_head(script, title, "comparison")
    yield (f'<script type="application/json" id="tb-compare" class="tracebridge-compare">'
           f"{_json(comparison_data(comparison, title=title, names=names))}</script>\n")
    for prefix, payload in zip(("tb0", "tb1"), payloads):
        yield from payload.blocks(prefix)
    yield page_end(script)


def comparison_data(comparison: Any, *, title: str, names: tuple[str, str] | None = None) -> dict:
    """What the page reads of the comparison (the ``tb-compare`` block)."""
    runs = (("control", comparison.control), ("test", comparison.test))
    names = names or tuple(trace.source_format for _, trace in runs)
    return {
        "format": "tracebridge-compare", "version": FORMAT_VERSION, "title": title,
        "traces": [{"role": role, "name": name, "source_format": trace.source_format, "ops": len(trace)}
                   for (role, trace), name in zip(runs, names)],
        "coverage": comparison.coverage.to_dict(_number),
        "rule_shares": {rule: share.to_dict(_number) for rule, share in comparison.rule_shares.items()},
        "step_pairs": [[int(c), int(t)] for c, t in comparison.step_pairs],
        # the header's measure, the text's first line: each run's median step time
        "headline": {key: _plain(value) for key, value in comparison.headline().to_dict().items()},
        "parts": parts_data(comparison),
        "findings": [_finding(f) for f in (getattr(comparison, "findings", None) or [])],
        "fields": list(ROW_FIELDS),
        "rows": [_row(row) for row in comparison.rows],
        "layers": _layers(comparison),
    }


def _layers(comparison: Any) -> list[dict]:
    """The layer table (compare.layers), each layer with the indices of its op rows."""
    index = {row.key: i for i, row in enumerate(comparison.rows)}
    return [{"label": str(layer.label), "phase": str(layer.phase),
             "control_total_ns": _number(layer.control_total_ns), "test_total_ns": _number(layer.test_total_ns),
             "delta_ns": _number(layer.delta_ns), "rows": [index[key] for key in layer.rows if key in index]}
            for layer in getattr(comparison, "layers", None) or []]


def parts_data(comparison: Any) -> dict | None:
    """Each run's median step by part, and the difference by part (the page's stacked bars;
    analysis/run/breakdown.py)."""
    breakdown = getattr(comparison, "breakdown", None)
    if breakdown is None:
        return None
    head = comparison.headline()
    runs = {role: {"median_ns": _number(run.median_ns), "parts": _plain(run.parts), "api": run.api,
                   "device": _plain(run.device), "notes": list(run.notes)}
            for role, run in (("control", breakdown.control), ("test", breakdown.test))}
    return {**runs, "delta": _plain(head.parts or {})}


def _plain(value: Any):
    """``value`` for the page's JSON: numbers through :func:`_number`, in dicts and lists too."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    return _number(value)


def _finding(finding: Any) -> dict:
    """A finding for the page's findings panel (its evidence as the JSON report has it)."""
    return {"kind": str(finding.kind), "share": _number(finding.share), "summary": str(finding.summary),
            "advice": str(finding.advice), "link": str(finding.link), "evidence": finding.evidence.to_dict()}


def _row(row: Any) -> list:
    ratio = getattr(row, "ratio", None)
    return [
        str(row.key), str(row.rule), str(row.op_type),
        [str(name) for name in row.names.control], [str(name) for name in row.names.test],
        int(row.total_ns.control), int(row.total_ns.test),
        _number(row.median_ns.control), _number(row.median_ns.test), _number(row.delta_ns),
        None if ratio is None else _number(ratio),
        str(row.change), _number(getattr(row, "confidence", 0.0)),
    ]


def _number(value: Any) -> float | int | None:
    """A finite number for JSON (NaN and infinities, which JSON lacks, become null)."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
