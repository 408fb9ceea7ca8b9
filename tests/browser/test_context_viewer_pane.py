"""The context viewer opens its raw pane on the view's own range, counted whole (issue 27)."""

from __future__ import annotations

import pytest

from tests.browser.playwright_sync import expect
from tests.builders.sessions import build_context_session

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_the_raw_pane_opens_on_the_views_range_with_its_fold_and_checkpoint(
    live_server, page, log_in, screenshot, application, make_version
):
    session, turns, named, fold_id = build_context_session(make_version(application, version=2))
    snapshot = turns.views[-1]

    log_in(live_server.url)

    page.goto(
        f"{live_server.url}/admin/sessions_app/session/{session.pk}/browse/snapshots/{snapshot.pk}/"
    )
    legend = page.locator("#raw-legend")
    # Without a click, the counts are those of the view: a fold of four and a checkpoint of two.
    expect(legend.locator('[data-status="folded"] .status-count')).to_have_text("4")
    expect(legend.locator('[data-status="compressed"] .status-count')).to_have_text("2")
    expect(legend.locator('[data-status="shown"] .status-count')).to_have_text("5")
    expect(legend).to_contain_text(f"#{named['input'].index}\u2013#{snapshot.upper_bound}")
    # The pane's rows are that range, the folded and compressed ones among them.
    pane = page.locator("#raw-table tbody tr.raw-row")
    expect(pane).to_have_count(snapshot.upper_bound - named["input"].index + 1)
    expect(page.locator("#raw-table tr.status-folded")).to_have_count(4)
    expect(page.locator("#raw-table tr.status-compressed")).to_have_count(2)
    folded = page.locator(f"#r{named['b_call'].index}")
    expect(folded).to_contain_text(fold_id)
    expect(folded).to_be_visible()

    # The fold's link in the view scrolls the pane to the fold's first message.
    page.locator(".derived-context_fold a.locate-link").click()
    expect(page).to_have_url(
        f"{page.url.split('?')[0]}?raw_after={named['b_call'].index - 1}#r{named['b_call'].index}"
    )
    expect(page.locator(f"#r{named['b_call'].index}")).to_be_in_viewport()
    # Paging away keeps the range's counts and offers the way back.
    expect(legend.locator('[data-status="folded"] .status-count')).to_have_text("4")
    page.locator("#raw-range").click()
    expect(page.locator("#raw-table tbody tr.raw-row")).to_have_count(
        snapshot.upper_bound - named["input"].index + 1
    )
    screenshot("context-viewer-default-pane")
