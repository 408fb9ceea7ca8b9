"""An operator sees what a session costs: stacked input kinds, a cost line, version totals."""

from __future__ import annotations

import pytest

from sessions_app.models import ProjectionSnapshot
from sessions_app.services.usage import turn_usage_record
from tests.browser.playwright_sync import expect
from tests.builders.sessions import build_session

pytestmark = pytest.mark.browser

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}
USAGES = [
    {"inputTokens": 5000, "outputTokens": 100, "cacheWriteInputTokens": 4000},
    {"inputTokens": 5600, "outputTokens": 80, "cacheReadInputTokens": 4000},
    {
        "inputTokens": 6400,
        "outputTokens": 60,
        "cacheReadInputTokens": 4000,
        "cacheWriteInputTokens": 1600,
    },
]


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None, "not rendered"
    return box


@pytest.mark.django_db(transaction=True)
def test_the_overview_chart_draws_stacked_input_kinds_and_the_cost_line(
    live_server, page, log_in, screenshot, application, make_version
):
    version = make_version(application, prices=PRICES)
    session, _fold_id, _snapshot = build_session(version)
    turns = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "pk"))
    for turn, usage in zip(turns, USAGES, strict=True):
        turn_usage_record(snapshot=turn, usage=usage)

    log_in(live_server.url)

    page.goto(f"{live_server.url}/admin/sessions_app/session/{session.pk}/browse/")
    chart = page.locator("svg.tokens-chart")
    expect(chart).to_be_visible()
    plot = _box(chart)
    bands = {}
    for kind in ("cache-read", "cache-write", "uncached"):
        band = chart.locator(f"polygon.stack-{kind}")
        expect(band).to_have_count(1)
        box = _box(band)
        assert box["width"] > 100 and box["height"] > 5, (kind, box)  # drawn, not degenerate
        bands[kind] = box
    # Bottom up: the cache reads lie lowest, the uncached rest on top.
    assert bands["cache-read"]["y"] + bands["cache-read"]["height"] >= (
        bands["uncached"]["y"] + bands["uncached"]["height"]
    )
    assert bands["uncached"]["y"] <= bands["cache-read"]["y"]
    cost_line = chart.locator("polyline.cost-line")
    expect(cost_line).to_have_count(1)
    line_box = _box(cost_line)
    assert line_box["width"] > 100 and plot["y"] <= line_box["y"] <= plot["y"] + plot["height"]
    expect(chart.locator("rect.cost-point")).to_have_count(3)
    expect(chart.locator("rect.cost-point").first.locator("title")).to_have_text(
        "turn 1: cost 0.0195"
    )
    expect(chart.locator("text.cost-axis")).to_have_count(3)  # the cost scale, right
    expect(page.locator("#input-tokens .legend")).to_contain_text("cost per turn")
    expect(page.locator("#session-usage")).to_contain_text("0.037200")
    chart.scroll_into_view_if_needed()
    screenshot("usage-01-overview-chart")

    page.goto(f"{live_server.url}/admin/agents/agentversion/{version.pk}/change/")
    totals = page.locator("#usage-totals")
    expect(totals).to_be_visible()
    expect(totals.locator("#usage-input")).to_have_text("17000")
    expect(totals.locator("#usage-cache-read")).to_have_text("8000")
    expect(totals.locator("#usage-cost")).to_have_text("0.037200")
    totals.scroll_into_view_if_needed()
    screenshot("usage-02-version-totals")
