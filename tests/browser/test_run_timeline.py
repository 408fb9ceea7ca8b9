"""An operator follows a host-driven run on its overview and timeline while the host works
(issue 27): new turns appear without a reload, and the refresh stops when the run ends."""

from __future__ import annotations

import re

import pytest

from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from sessions_app.services.usage import snapshot_usage_report
from tests.browser.playwright_sync import expect
from tests.builders.sessions import HostTurns

pytestmark = pytest.mark.browser

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


@pytest.mark.django_db(transaction=True)
def test_the_run_timeline_shows_turns_and_a_new_turn_appears_live(
    live_server, page, log_in, screenshot, application, make_version
):
    version = make_version(application, prices=PRICES)
    session, _key = session_create(agent_version=version, inputs={})
    run, _ = run_start(session_id=session.id, content="Find the laptop prices.")
    turns = HostTurns(session)
    turns.host("price_lookup", "Laptop A: 1300 EUR.")
    turns.context(
        "context_window_open",
        expectedWindowId="main",
        windowId="research",
        goal="Research prices",
        input="Compare laptops.",
    )
    snapshot_usage_report(
        session_id=session.id,
        snapshot_id=str(turns.views[0].id),
        usage={"inputTokens": 5000, "outputTokens": 100, "cacheWriteInputTokens": 4000},
    )

    log_in(live_server.url)

    # The session overview refreshes while the host works: its Runs table counts the turn.
    page.goto(f"{live_server.url}/admin/sessions_app/session/{session.pk}/browse/")
    expect(page.locator("#live-badge")).to_contain_text("live")
    run_turns = page.locator("tr.run-row").first.locator("td").nth(2)
    expect(run_turns).to_have_text("2")
    turns.host("price_lookup", "Laptop A2: 1290 EUR.")
    expect(run_turns).to_have_text("3", timeout=15_000)

    # From the Runs table to the run's timeline.
    page.locator("a.run-timeline-link").first.click()
    expect(page.locator("#run-facts h2")).to_contain_text(run.id.hex)
    rows = page.locator("tr.timeline-turn")
    expect(rows).to_have_count(3)
    first = rows.nth(0)
    expect(first.locator(".turn-latency")).to_contain_text("host")
    expect(first.locator(".turn-tokens")).to_have_text("5000 / 0 / 4000 / 100")
    expect(first.locator(".turn-cost")).to_have_text("0.019500")
    expect(first.locator(".call-outcome")).to_have_text("success")
    expect(rows.nth(1).locator(".turn-calls")).to_contain_text("context_window_open")
    expect(rows.nth(1).locator(".call-duration")).to_have_text(
        re.compile(r"^\d+ ms$|^\d+\.\d{3} s$")
    )
    expect(page.locator("#run-turns")).to_have_text("3")
    expect(page.locator("#live-badge")).to_contain_text("refreshing every 3 s")
    screenshot("run-timeline")

    # The host takes another turn: the open page shows it without a reload, and what the
    # operator unfolded stays open.
    page.evaluate("window.__notReloaded = true")
    rows.nth(0).locator("details summary").click()
    expect(rows.nth(0).locator("details pre")).to_contain_text('"q": "price_lookup"')
    turns.host("price_lookup", "Laptop B: 1250 EUR.")
    expect(rows).to_have_count(4, timeout=15_000)
    expect(rows.nth(3).locator(".turn-calls")).to_contain_text("price_lookup")
    expect(page.locator("#run-turns")).to_have_text("4")
    assert page.evaluate("window.__notReloaded") is True
    expect(rows.nth(0).locator("details pre")).to_be_visible()

    # The next input ends the run: the page shows it and stops refreshing.
    run_start(session_id=session.id, content="Now the monitors.")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=15_000)
    expect(page.locator("#live-badge")).to_contain_text("refresh stopped")
    assert page.evaluate("document.getElementById('live-state').dataset.live") == "0"

    # Each turn opens its view in the context viewer.
    rows.nth(0).locator("a.turn-snapshot").click()
    expect(page).to_have_url(re.compile(rf"/snapshots/{turns.views[0].pk}/$"))
