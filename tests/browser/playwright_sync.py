"""Playwright's sync API, or None where the package is not installed.

The browser tests import `expect` from here at the top of their modules, so they are still
collected without playwright; the `browser` fixture (conftest.py) then skips them, or fails
them with CI=true.
"""

from __future__ import annotations

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser fixture says so
    expect = sync_playwright = None

__all__ = ["expect", "sync_playwright"]
