"""Playwright with Debian's chromium (Playwright cannot download its own browser here).

Locally, a missing chromium or playwright skips these tests; with CI=true it fails them, so
CI can never pass without having driven a browser.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tests.browser.playwright_sync import expect, sync_playwright

# Playwright's sync API runs an event loop in this thread; Django's ORM calls from the test
# body would otherwise be refused as "async unsafe".
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
# The superuser every browser test signs in as.
OPERATOR = "operator"
PASSWORD = "s3cret-pass"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: browser tests must run, not skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        _unavailable("chromium is not installed: apt-get install -y chromium")
    return path


# Module-scoped: Playwright's sync API keeps an event loop running in this thread while the
# browser is open, and Django's test client cannot run an async view (the gateway's) in a
# thread that has one: the loop ends with the module, not with the worker's session.
@pytest.fixture(scope="module")
def browser(chromium_path):
    if sync_playwright is None:
        _unavailable("playwright is not installed: pip install playwright==1.65.2")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    opened = context.new_page()
    yield opened
    context.close()


@pytest.fixture
def screenshot(page):
    """Save a full-page screenshot as artifacts/browser/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        target = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(target), full_page=True)
        return target

    return take


@pytest.fixture
def log_in(page, transactional_db) -> Callable[[str], None]:
    """The operator superuser exists; `log_in(base)` signs `page` in to the admin at `base`."""
    User.objects.create_superuser(OPERATOR, "op@example.com", PASSWORD)

    def sign_in(base: str) -> None:
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", OPERATOR)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.locator("#site-name")).to_be_visible()
        expect(page.locator("#site-name")).to_have_text("contextproto")

    return sign_in
