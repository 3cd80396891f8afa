"""The overview page of a multi-host profile: a host x step heat map, the stragglers, and a
link from each host to its own timeline page.

One static page with no script at all: the heat map is a table whose cells are shaded
by the step's time relative to the median host's time for that step (classes of a small
style sheet, nothing computed in the browser). Every text is HTML-escaped and every link
is a relative, URL-quoted file name; the Content-Security-Policy admits the page's own
style sheet (by hash) and nothing else, no network. Timeline pages are written on demand
(:func:`write_host_timelines`, the writer of :mod:`tracebridge.writers.html`); the
overview shows, for each host, the command that writes its page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import shlex
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from .._files import atomic_output

MAX_STEPS = 400  # columns of the heat map; more steps are summarized, not drawn
# Shades of a step's time over the median host's: <= 0.9x, ..., > 2x.
_BUCKETS = (0.9, 1.05, 1.2, 1.5, 2.0)
_STYLE = """body{font:13px system-ui,sans-serif;margin:16px;color:#222}
table{border-collapse:collapse}td,th{padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#eee}td.h{text-align:left}td.c{padding:0;width:8px;height:18px;border:1px solid #fff}
.b0{background:#cfe8cf}.b1{background:#e8f0d8}.b2{background:#fbe7b5}.b3{background:#f7c08a}
.b4{background:#ef8a62}.b5{background:#b2182b}.nd{background:#f4f4f4}code{font-size:12px}
.s{color:#b2182b;font-weight:600}"""


def timeline_name(host: str) -> str:
    """The file name of a host's timeline page, beside the overview's folder of pages."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in host) or "host"
    return f"{safe}.html"


def hosts_document(report, parts: Sequence, pages_folder: str, *, title: str = "Hosts") -> str:
    """The overview page (ASCII) of a :class:`~tracebridge.analysis.hosts.stragglers.HostReport`
    and the :class:`~tracebridge.analysis.hosts.summary.HostPart` s it was made of; links
    point into ``pages_folder`` (relative)."""
    style_hash = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
    straggling = {s["host"] for s in report.stragglers}
    out = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
           f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
           f"style-src 'sha256-{style_hash}'\">",
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1>",
           f"<p>{len(report.hosts)} hosts, median step {_ms(report.median_step_ns)}; a straggler's median "
           f"step exceeds it by more than {100 * report.threshold:.0f}%.</p>"]
    out += _straggler_list(report)
    out += _heat_map(report, parts, pages_folder, straggling)
    out.append("</body></html>")
    return "\n".join(out).encode("ascii", "xmlcharrefreplace").decode("ascii")


def write_hosts_html(report, parts: Sequence, path: str | os.PathLike, *, title: str = "Hosts") -> str:
    """Write the overview to ``path``; returns the folder its timeline links point to
    (``NAME_hosts`` beside it, written by :func:`write_host_timelines`)."""
    path = os.fspath(path)
    folder = os.path.splitext(os.path.basename(path))[0] + "_hosts"
    with atomic_output(path) as handle:
        handle.write(hosts_document(report, parts, folder, title=title).encode("ascii"))
    return os.path.join(os.path.dirname(path), folder)


def write_host_timelines(traces: Iterable[tuple[str, object]], folder: str) -> list[str]:
    """Each ``(host, trace)``'s timeline page in ``folder``; returns the paths written."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for host, trace in traces:
        path = os.path.join(folder, timeline_name(host))
        trace.to_html(path, title=f"{host}")
        written.append(path)
    return written


def _straggler_list(report) -> list[str]:
    if not report.stragglers:
        return ["<h2>Stragglers: none</h2>"]
    out = ["<h2>Stragglers</h2><ul>"]
    for s in report.stragglers:
        causes = [f"op {_e(o['key'])} +{_ms(o['extra_ns'])}" for o in s["ops"][:3]]
        causes += [f"lane {_e(lane['lane'])} ({_e(lane['device'])}) +{_ms(lane['extra_ns'])}" for lane in s["lanes"][:2]]
        causes.append(f"in no op {_ms(s['unaccounted_ns'])}")
        out.append(f"<li><span class=\"s\">{_e(s['host'])}</span>: median step {_ms(s['median_step_ns'])}, "
                   f"+{_ms(s['extra_ns'])} ({100 * s['extra_share']:.0f}%) a step; " + "; ".join(causes) + "</li>")
    out.append("</ul>")
    return out


def _heat_map(report, parts: Sequence, pages_folder: str, straggling: set) -> list[str]:
    numbers = sorted({step["number"] for part in parts for step in part.summary.steps})
    shown = numbers[:MAX_STEPS]
    times = [{step["number"]: step["duration_ns"] for step in part.summary.steps} for part in parts]
    typical = {}
    for number in shown:
        values = sorted(t[number] for t in times if number in t)
        typical[number] = values[len(values) // 2] if values else 0
    out = ["<h2>Step time per host</h2>",
           f"<p>Each cell is one step of one host, shaded by its time over the median host's for that step "
           f"(green: at most 0.9x, dark red: over 2x). Steps {len(shown)} of {len(numbers)}.</p>",
           "<table><tr><th>host</th><th>median step</th><th>collectives</th><th>clock offset</th>"
           "<th>timeline</th>" + "".join(f"<th title=\"step {n}\"></th>" for n in shown) + "</tr>"]
    for part, host, steps in zip(parts, report.hosts, times):
        page = f"{pages_folder}/{timeline_name(host['host'])}"
        command = f"tracebridge html {shlex.quote(part.path)} {shlex.quote(page)}"
        name = f"<span class=\"s\">{_e(host['host'])}</span>" if host["host"] in straggling else _e(host["host"])
        offset = "-" if host["clock_offset_ns"] is None else _ms(host["clock_offset_ns"])
        cells = []
        for number in shown:
            if number not in steps:
                cells.append("<td class=\"c nd\"></td>")
                continue
            ratio = steps[number] / typical[number] if typical[number] else 1.0
            bucket = sum(ratio > edge for edge in _BUCKETS)
            cells.append(f"<td class=\"c b{bucket}\" title=\"{_e(host['host'])} step {number}: "
                         f"{_ms(steps[number])}\"></td>")
        out.append(f"<tr><td class=\"h\">{name}</td><td>{_ms(host['median_step_ns'])}</td>"
                   f"<td>{_ms(host['collective_ns'])}</td><td>{offset}</td>"
                   f"<td class=\"h\"><a href=\"{_e(quote(page))}\" title=\"written by: {_e(command)}\">"
                   f"timeline</a></td>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return out


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"
