"""Screenshots of the main admin pages for the README (docs/screenshots/*.png).

Rerunnable: `.venv/bin/python scripts/screenshots.py` (about a minute). It does what
`make demo` does in a throwaway directory (SQLite, migrate, collectstatic, the demo story,
runserver with DEBUG off), then drives Debian's chromium through Playwright (Playwright
cannot download its own browser here) and writes one PNG per page, at a fixed viewport so
the files stay small and diffs of reruns stay readable.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 860}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOGIN = ("admin", "contextproto-demo")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str, capture: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
    )
    return done.stdout or ""


def wait_for(url: str, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start at {url}") from None
            time.sleep(0.3)


def demo_pages(output: str, base: str) -> dict[str, str]:
    """The admin URLs `manage.py demo` printed, by what they show."""
    pages = {}
    for label, key in (
        ("session browser, unified@2", "overview"),
        ("a turn with a fold and a checkpoint", "viewer"),
        ("the turn its fold was made (diff)", "diff"),
        ("the turn after a checkpoint (diff)", "checkpoint_diff"),
    ):
        found = re.search(rf"{re.escape(label)}\s+({re.escape(base)}\S+)", output)
        if found is None:
            raise SystemExit(f"the demo did not print {label!r}:\n{output}")
        pages[key] = found.group(1)
    return pages


def top(page, selector: str, margin: int) -> None:
    """Scroll so that `selector` starts `margin` pixels below the top of the viewport."""
    page.evaluate(
        "([s, m]) => window.scrollTo(0, document.querySelector(s).getBoundingClientRect().top"
        " + window.scrollY - m)",
        [selector, margin],
    )


def shoot(base: str, pages: dict[str, str], out: Path, chromium: str) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, headless=True
        )
        context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        page = context.new_page()
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", LOGIN[0])
        page.fill("#id_password", LOGIN[1])
        page.click("input[type=submit]")
        expect(page.locator("#site-name")).to_be_visible()

        def save(name: str) -> None:
            # The console is branded; the stock admin's title means a page fell back to it.
            expect(page.locator("body")).not_to_contain_text("Django administration")
            target = out / f"{name}.png"
            page.screenshot(path=str(target))
            written.append(target)

        # The admin index is the dashboard (it has no app-list sidebar to collapse).
        expect(page.locator("#dash-activity")).to_be_visible()
        save("dashboard")

        # Collapse the app list (remembered in localStorage): the pages get the width.
        page.goto(pages["overview"])
        page.click("#toggle-nav-sidebar")

        page.goto(pages["overview"])
        expect(page.locator("svg.tokens-chart circle.turn").first).to_be_visible()
        top(page, "#input-tokens", 20)
        save("session-overview")

        page.goto(pages["viewer"])
        expect(page.locator("#token-breakdown")).to_be_visible()
        save("context-viewer-breakdown")
        # Follow the fold's link into the raw log: the raw pane then shows the folded
        # messages beside the fold that stands for them.
        fold = page.locator("tr.projection-row.derived-context_fold").first
        fold.locator("a.locate-link").click()
        expect(page.locator("tr.raw-row.status-folded").first).to_be_visible()
        top(page, "tr.projection-row.derived-context_fold", 60)
        save("context-viewer-side-by-side")

        page.goto(pages["diff"])
        expect(page.locator("#diff-table")).to_be_visible()
        top(page, "#diff-summary", 10)
        save("snapshot-diff")

        page.goto(pages["overview"].replace("/browse/", "/browse/windows/"))
        save("windows")

        page.goto(pages["overview"] + "snapshots/")
        expect(page.locator("tr.snapshot-row").first).to_be_visible()
        save("snapshot-list")

        # The timeline of the session's longest run (the Runs table's turn counts).
        page.goto(pages["overview"])
        runs = page.locator("tr.run-row")
        expect(runs.first).to_be_visible()
        counts = [int(t or 0) for t in runs.locator("td:nth-child(3)").all_inner_texts()]
        runs.nth(counts.index(max(counts))).locator("a.run-timeline-link").click()
        expect(page.locator("tr.timeline-turn").first).to_be_visible()
        save("run-timeline")

        # Text search within the session: the budget, from the user's input to the memory.
        page.goto(pages["overview"] + "search/?q=budget")
        expect(page.locator("#search-results tbody tr").first).to_be_visible()
        save("message-search")

        # Session search, filtered by the demo's Application.
        page.goto(f"{base}/admin/sessions_app/session/search/")
        page.locator("#id_application").select_option(index=1)
        page.click("#session-search input[type=submit]")
        expect(page.locator("#search-sessions-table a.session-link").first).to_be_visible()
        save("session-search")

        # A new draft of the unified@2 agent: the option form generated from the schema.
        page.goto(pages["overview"])
        page.locator(".session-facts a").first.click()
        agent = page.locator(".field-agent a").first.get_attribute("href")
        agent_id = re.search(r"/agent/([^/]+)/", agent or "")
        if agent_id is None:
            raise SystemExit(f"no agent link on {page.url}")
        page.goto(f"{base}/admin/agents/agentversion/add/?agent={agent_id.group(1)}")
        page.click('a.protocol-link[data-protocol="unified@2"]')
        expect(page.locator("#id_protocol")).to_have_value("unified@2")
        top(page, "#id_protocol", 120)
        save("agent-version-form")
        # Further down the same form: the model settings, generated from the model schema.
        top(page, "fieldset:has(#id_model_provider)", 10)
        save("agent-version-model-settings")

        page.goto(f"{base}/admin/agents/agentversion/")
        expect(page.locator("#result_list")).to_be_visible()
        save("agent-version-list")
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="contextproto-screens-") as var:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "PYTEST_VERSION")
        }
        env.update(VAR_DIR=var, ALLOW_DEV_SECRET_KEY="true")
        manage(env, "migrate", "--noinput")
        manage(env, "collectstatic", "--noinput")
        output = manage(env, "demo", "--base-url", base, capture=True)
        pages = demo_pages(output, base)
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(f"{base}/admin/login/", server)
            written = shoot(base, pages, args.out, chromium)
        finally:
            server.terminate()
            server.wait(15)
    for path in written:
        print(f"{path}  {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
