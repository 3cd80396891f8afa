"""Headless Debian chromium for the browser tests (Playwright, never a browser download)."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

SETUP = "run tests/viewers/setup.sh"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not shutil.which("chromium"):
        return f"Debian's chromium is not installed ({SETUP})"
    if importlib.util.find_spec("playwright") is None:
        return f"playwright is not installed in this Python ({SETUP})"
    return None


def browser_mark(function):
    """Mark a test as a (slow) browser test, skipped with the reason when one is missing."""
    reason = missing_browser()
    for mark in (pytest.mark.browser, pytest.mark.slow, pytest.mark.skipif(reason is not None, reason=reason or "")):
        function = mark(function)
    return function
