"""The console in Chromium (issue 27): the dashboard as the admin's front page, and search
from a session id prefix down to the view that showed a message."""

from __future__ import annotations

import re
import uuid

import pytest
from django.utils import timezone

from sessions_app.models import Message, ProjectionSnapshot, Run, ToolReceipt
from sessions_app.services.usage import turn_usage_record
from tests.browser.playwright_sync import expect
from tests.builders.sessions import build_session

pytestmark = pytest.mark.browser

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_shows_activity_failures_and_cost_and_links_to_them(
    live_server, page, log_in, screenshot, application, make_version
):
    version = make_version(application, prices=PRICES)
    session, _fold_id, _snapshot = build_session(version)
    for turn in ProjectionSnapshot.objects.filter(session=session):
        turn_usage_record(snapshot=turn, usage={"inputTokens": 1000, "outputTokens": 50})
    run = Run.objects.get(session=session)
    Run.objects.filter(pk=run.pk).update(
        status="failed",
        finished_at=timezone.now(),
        error={"code": "provider_unavailable", "message": "503"},
    )
    result = Message.objects.filter(session=session, kind="tool_result").first()
    ToolReceipt.objects.create(
        session=session,
        tool_call_id=f"call_{uuid.uuid4().hex[:6]}",
        tool_name="lookup_weather",
        result={"success": False, "error": {"code": "invalid_arguments"}},
        success=False,
        state_revision=1,
        result_message=result,
    )

    log_in(live_server.url)
    expect(page).to_have_title("Dashboard | contextproto console")
    expect(page.locator("body")).not_to_contain_text("Django administration")
    expect(page.locator("#dash-nodes tbody tr")).not_to_have_count(0)
    sessions_row = page.locator("#dash-activity tr", has_text="Sessions started")
    expect(sessions_row.locator("td").nth(0)).to_have_text("1")
    expect(page.locator("#dash-failures")).to_contain_text("provider_unavailable")
    expect(page.locator("#dash-failures")).to_contain_text("invalid_arguments")
    costs = page.locator("#dash-costs tbody tr").first
    expect(costs).to_contain_text("assistant v1")
    expect(costs.locator("td").nth(1)).to_have_text("3")  # three reported turns
    expect(page.locator("#content-main .app-sessions_app")).to_be_visible()  # the app list
    screenshot("console-dashboard")

    page.locator("#dash-failures tr.error-receipt a").first.click()
    expect(page).to_have_url(
        f"{live_server.url}/admin/sessions_app/session/{session.pk}/browse/messages/{result.pk}/"
    )
    page.go_back()
    page.locator("#dash-failures tr.failed-run a").first.click()
    expect(page).to_have_url(
        f"{live_server.url}/admin/sessions_app/session/{session.pk}/browse/messages/?run={run.id.hex}"
    )
    page.goto(f"{live_server.url}/admin/")
    page.get_by_role("link", name="Protocol catalog").click()
    expect(page.locator("h1")).to_contain_text("catalog")


@pytest.mark.django_db(transaction=True)
def test_search_from_an_id_prefix_to_a_message_and_the_view_that_showed_it(
    live_server, page, log_in, screenshot, application, make_version
):
    version = make_version(application)
    session, _fold_id, _snapshot = build_session(version, tool_result="sunny in Lisbon")
    build_session(version)  # another session, not to be found by the prefix

    log_in(live_server.url)
    page.get_by_role("link", name="Search sessions").click()
    page.fill("#id_created_from", "2020-02-31")
    page.click("#session-search input[type=submit]")
    expect(page.locator("#search-error")).to_contain_text("Enter a valid date")

    page.fill("#id_created_from", "")
    page.fill("#id_id", str(session.pk)[:8].upper())
    page.click("#session-search input[type=submit]")
    expect(page.locator("#search-sessions-table tbody tr")).to_have_count(1)
    screenshot("console-session-search")
    page.get_by_role("link", name="search its messages").click()

    page.fill("#id_q", "lisbon")
    page.click("#message-search input[type=submit]")
    results = page.locator("#search-results tbody tr")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("sunny in Lisbon")
    screenshot("console-message-search")
    results.first.locator("a.result-first-view").click()
    expect(page).to_have_url(
        re.compile(rf"/admin/sessions_app/session/{session.pk}/browse/snapshots/")
    )
    expect(page.locator("body")).to_contain_text("sunny in Lisbon")

    page.go_back()
    page.evaluate("document.querySelector('#id_q').removeAttribute('maxlength')")
    page.fill("#id_q", "x" * 201)
    page.click("#message-search input[type=submit]")
    expect(page.locator("#search-error")).to_contain_text("at most 200 characters")
