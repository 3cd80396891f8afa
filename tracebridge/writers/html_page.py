"""The shell of the HTML pages (:mod:`.html`'s timeline, :mod:`.compare_html`'s diff): the
style, the page script joined from its source files, and the head whose
Content-Security-Policy lets only that script run.

The script is written as several files in ``html_assets/``, each one part of the page (see
:data:`SCRIPT_PARTS`), joined in that order inside one strict-mode function and started
with the page's kind. A comparison page also carries ``diff_view.js``; a timeline page does
not. The CSP names the joined script by its SHA-256, so the page stays one file that works
from ``file://``, with no network and no other script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from importlib import resources

# The page script's source files, in the order they are joined (each defines what the
# later ones use; start.js runs the page).
SCRIPT_PARTS = (
    "helpers.js",      # layout constants, DOM building, formats, binary search, colours
    "trace_data.js",   # TraceData: one trace's columns, decoded from the data blocks
    "timeline.js",     # Timeline: one trace's device panels, ruler and memory, on canvases
    "toolbar.js",      # Toolbar: title, search, step selector, buttons
    "sidebar.js",      # Sidebar: selected op details, top ops, a trace's facts
    "tooltip.js",      # Tooltip: the hover box; the op fields it and the details show
    "input.js",        # Input: pointer, wheel and keys
    "page.js",         # Page: the timelines' shared range, highlight and selection
)
DIFF_VIEW_PART = "diff_view.js"  # DiffView: comparison pages only
START_PART = "start.js"          # start(): builds the Page, publishes window.tracebridge


def page_script(*, comparison: bool) -> str:
    """The script of a timeline page, or (``comparison``) of a comparison page."""
    parts = SCRIPT_PARTS + ((DIFF_VIEW_PART,) if comparison else ()) + (START_PART,)
    body = "".join(f"// ---- {name}\n{_asset(name)}\n" for name in parts)
    entry = "DiffView" if comparison else "null"
    return ("/* The tracebridge page script: tracebridge/writers/html_assets/*.js, joined. */\n"
            f"(function () {{\n'use strict';\n\n{body}start({entry});\n}})();\n")


def page_head(script: str, title: str, what: str) -> str:
    """Everything before the data blocks: a CSP that lets only ``script`` run (by its
    hash), the title, the inlined style and the app's container. ``what`` names the page
    in the note shown without JavaScript."""
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{script_hash}'; style-src 'unsafe-inline'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<meta name=\"generator\" content=\"tracebridge\">\n<title>{_html_text(title)}</title>\n"
            f"<style>\n{_asset('timeline.css')}</style>\n</head>\n<body>\n"
            f'<div id="tb-app"><noscript>This {what} needs JavaScript.</noscript></div>\n')


def page_end(script: str) -> str:
    """The page's one executable script (after the data blocks) and the end of the page."""
    return f"<script>{script}</script>\n</body></html>\n"


def _asset(name: str) -> str:
    """An ``html_assets`` file: ASCII (the page is written as ASCII; the CSP hash is of
    these exact bytes), and never ending its own element."""
    text = (resources.files(__package__) / "html_assets" / name).read_text(encoding="utf-8")
    text.encode("ascii")
    if re.search(r"</(script|style)", text, re.IGNORECASE):
        raise ValueError(f"html_assets/{name} contains a closing script or style tag")
    return text


def _html_text(text: str) -> str:
    return html.escape(text, quote=True).encode("ascii", "xmlcharrefreplace").decode("ascii")
