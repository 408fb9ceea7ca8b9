"""The admin as the real servers serve it: `make demo`'s runserver and `make serve`'s uvicorn.

Django's live_server serves static files itself, so the other browser tests cannot see a
server that does not. Here each server runs as its Makefile target starts it (DEBUG off,
after `collectstatic`, on the test's PostgreSQL database) and the browser checks that the
admin's stylesheet loaded and applies, then that the session browser, the chart, the
context viewer and the diff render.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from sessions_app.models import ProjectionSnapshot
from tests.browser.playwright_sync import expect
from tests.builders.sessions import build_session
from tests.servers import current_database_url, free_port, running_server

ROOT = Path(__file__).resolve().parents[2]
HEADER_BLUE = "rgb(65, 118, 144)"  # the admin's --header-bg (#417690) from base.css
HASHED_BASE_CSS = re.compile(r"/static/admin/css/base\.[0-9a-f]{12}\.css$")

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.slow]

SERVERS = {
    # `make demo`: manage.py runserver (DEBUG off: Django's own static handler is off too).
    "runserver": lambda port: [sys.executable, "manage.py", "runserver", "--noreload", port],
    # `make serve` and the README's production command.
    "uvicorn": lambda port: [
        sys.executable,
        "-m",
        "uvicorn",
        "contextproto.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        port.rsplit(":", 1)[1],
    ],
}


def served_env(var_dir: Path) -> dict[str, str]:
    """A server's environment: the test database, DEBUG off, not under pytest."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DEBUG")}
    env.update(
        DATABASE_URL=current_database_url(),
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOW_DEV_SECRET_KEY="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        VAR_DIR=str(var_dir),
        RUNTIME_AUTOSTART="false",
    )
    env.pop("REDIS_URL", None)  # the pages need no broker; the cache falls back to memory
    return env


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    """A VAR_DIR whose static/ holds what `make demo` / `make serve` collect first."""
    var_dir = tmp_path_factory.mktemp("served")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DEBUG")}
    env.update(VAR_DIR=str(var_dir), ALLOW_DEV_SECRET_KEY="true")
    env.pop("DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    assert (var_dir / "static" / "staticfiles.json").exists()
    return var_dir


@pytest.fixture(params=sorted(SERVERS))
def served(request, collected, transactional_db):
    port = free_port()
    with running_server(
        SERVERS[request.param](f"127.0.0.1:{port}"),
        env=served_env(collected),
        log=collected / f"{request.param}-{port}.log",
        base=f"http://127.0.0.1:{port}",
        probe="/admin/login/",
    ) as base:
        yield base


@pytest.mark.django_db(transaction=True)
def test_served_admin_is_styled_and_the_session_pages_render(
    served, page, log_in, application, make_version
):
    session, fold_id, snapshot = build_session(make_version(application, version=2))
    turns = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "pk"))
    for n, turn in enumerate(turns):
        ProjectionSnapshot.objects.filter(pk=turn.pk).update(
            usage={"inputTokens": 1800 + 700 * n, "outputTokens": 40},
            input_tokens=1800 + 700 * n,
            output_tokens=40,
        )
    responses: list = []
    page.on("response", lambda response: responses.append(response))

    log_in(served)

    # The stylesheet: a hashed name from the manifest, served 200 with a far-future cache.
    css = [r for r in responses if HASHED_BASE_CSS.search(r.url)]
    assert css, [r.url for r in responses]
    assert css[0].status == 200
    assert "immutable" in (css[0].headers.get("cache-control") or "")
    statics = [r for r in responses if "/static/" in r.url]
    assert statics and all(r.status in (200, 304) for r in statics), [
        (r.url, r.status) for r in statics if r.status not in (200, 304)
    ]
    # ... and it applies: the header has the admin's colour, not the browser default.
    background = page.eval_on_selector(
        "#header", "element => getComputedStyle(element).backgroundColor"
    )
    assert background == HEADER_BLUE

    browse = f"{served}/admin/sessions_app/session/{session.pk}/browse/"
    page.goto(browse)
    expect(page.locator("h1")).to_have_text("Session overview")
    expect(page.locator("svg.tokens-chart circle.turn")).to_have_count(len(turns))
    assert page.eval_on_selector(
        "#tab-overview", "element => getComputedStyle(element).fontWeight"
    ) in ("600", "bold")  # the browser's own stylesheet applies too

    page.locator("svg.tokens-chart circle.turn").last.click()
    expect(page.locator("#token-breakdown")).to_be_visible()
    assert page.url.startswith(f"{browse}snapshots/{snapshot.pk}/")
    expect(page.locator("#projection-table tr.projection-row")).to_have_count(
        len(snapshot.messages)
    )
    fold = page.locator("tr.projection-row.derived-context_fold")
    expect(fold.locator(".projection-source")).to_contain_text(fold_id)
    fold.locator("a.locate-link").click()
    folded = page.locator("tr.raw-row.status-folded")
    expect(folded).to_have_count(2)  # the host call and its result
    folded.first.locator("a.view-link").click()
    assert re.search(r"#v\d+$", page.url)

    page.click("#diff-link")
    expect(page.locator("#diff-table")).to_be_visible()
    removed = page.locator('tr.diff-row[data-op="removed"] .diff-reason')
    expect(removed.first).to_contain_text(f"folded into {fold_id}")
