"""The README is written for users and stays short; the developer material lives in docs/.
Every relative link in them leads to a file that exists, and to a heading in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


def test_readme_is_short_and_starts_with_install_and_tracebridge_run():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 260
    first_screen = "\n".join(lines[:60])
    assert "pip install 'tracebridge[tf]'" in first_screen
    assert "tensorflow[and-cuda]" in first_screen  # what a GPU user installs: the tf extra pins tensorflow-cpu
    assert "tracebridge demo" in first_screen
    assert "tracebridge run" in text and "tracebridge compare" in text and "tracebridge migrate" in text
    # the developer's two commands
    assert re.search(r"^make demo\b", text, re.M) and re.search(r"^make test\b", text, re.M)


def test_the_first_comparison_is_tracebridge_run_of_a_tf1_script_and_its_port():
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    first = next(block for block in blocks if "tracebridge compare" in block).splitlines()
    assert [line.split("#")[0].split()[:2] for line in first][:3] == [["tracebridge", "run"]] * 2 + [
        ["tracebridge", "compare"]]
    assert "tf1" in first[0] and "tf2" in first[1]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown page."""
    headings = re.findall(r"^#+ (.+)$", _prose(page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def _prose(text: str) -> str:
    """The text outside fenced code blocks (where # starts a comment, not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_lead_somewhere(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name}: {target}: no such heading"
