"""Usage and cost in the admin (contract §8): the session overview and the AgentVersion page."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import ProjectionSnapshot
from sessions_app.services.usage import turn_usage_record
from tests.builders.sessions import build_session

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}
# One usage per turn of build_session's three snapshots: a cold start that writes the
# cache, then reads of it.
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
# Costs by the contract §8 formula, per turn:
#   (1000 x 3 + 4000 x 3.75 + 100 x 15) / 1e6 = 0.0195
#   (1600 x 3 + 4000 x 0.3 + 80 x 15) / 1e6 = 0.0072
#   (800 x 3 + 4000 x 0.3 + 1600 x 3.75 + 60 x 15) / 1e6 = 0.0105   -> 0.0372


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


def priced_session(published_version, app_name: str = "Acme", prices=PRICES):
    session, _fold, _last = build_session(published_version(app_name, prices=prices))
    turns = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at", "pk"))
    assert len(turns) == len(USAGES)
    for turn, usage in zip(turns, USAGES, strict=True):
        turn_usage_record(snapshot=turn, usage=usage)
    return session


def _svg(html: str) -> str:
    start = html.index('<svg xmlns="http://www.w3.org/2000/svg" class="tokens-chart"')
    return html[start : html.index("</svg>", start)]


def test_the_chart_stacks_input_kinds_and_draws_the_cost_line(operator, published_version):
    session = priced_session(published_version)
    html = operator.get(f"/admin/sessions_app/session/{session.pk}/browse/").content.decode()
    svg = _svg(html)
    for kind in ("cache-read", "cache-write", "uncached"):
        assert svg.count(f'class="stack stack-{kind}"') == 1, kind
    assert svg.count('class="turn"') == 3
    assert svg.count('class="cost-line"') == 1 and svg.count('class="cost-point"') == 3
    assert "turn 1: cost 0.0195" in svg and "turn 3: cost 0.0105" in svg
    assert "turn 2: 5600 input tokens (4000 cache read, 0 cache write, 1600 uncached)" in svg
    # The stacks end where the total line is: the top of the uncached band is the line.
    line = re.search(r'class="input-line"[^>]*points="([^"]+)"', svg).group(1).split()
    band = re.search(r'class="stack stack-uncached"[^>]*points="([^"]+)"', svg).group(1).split()
    assert band[: len(line)] == line
    # The totals beside the chart, and per run.
    usage = html[html.index('id="session-usage"') :]
    usage = usage[: usage.index("</td>")]
    assert "17000 input tokens (8000 cache read, 5600 cache write, 3400 uncached)" in usage
    assert "240 output" in usage and "3 turns" in usage and "0.037200" in usage
    assert '<td class="run-cost">0.037200</td>' in html


def test_without_prices_there_is_no_cost_line(operator, published_version):
    session = priced_session(published_version, prices=None)
    html = operator.get(f"/admin/sessions_app/session/{session.pk}/browse/").content.decode()
    svg = _svg(html)
    assert 'class="stack stack-cache-read"' in svg
    assert "cost-line" not in svg and "cost-point" not in svg
    assert "(no prices)" in html


def test_the_agent_version_page_shows_its_totals(operator, published_version):
    session = priced_session(published_version)
    version = session.agent_version
    html = operator.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    cells = dict(re.findall(r'<td class="number" id="usage-([a-z-]+)">([^<]*)<', html))
    assert cells == {
        "turns": "3",
        "input": "17000",
        "cache-read": "8000",
        "cache-write": "5600",
        "uncached": "3400",
        "output": "240",
        "cost": "0.037200",
    }
    assert 'id="usage-prices"' in html


def _bulk_turns(session, count: int) -> None:
    template = ProjectionSnapshot.objects.filter(session=session).first()
    ProjectionSnapshot.objects.bulk_create(
        ProjectionSnapshot(
            session=session,
            revision=template.revision,
            upper_bound=template.upper_bound,
            window_id=template.window_id,
            protocol=template.protocol,
            provider=template.provider,
            usage={"inputTokens": 10},
            input_tokens=10,
            output_tokens=0,
            cost="0.00003",
        )
        for _ in range(count)
    )


def test_the_agent_version_page_query_count_does_not_grow_with_turns(operator, published_version):
    small = priced_session(published_version, "Small")
    big = priced_session(published_version, "Big")
    _bulk_turns(big, 500)
    counts = []
    for session in (small, big):
        url = f"/admin/agents/agentversion/{session.agent_version_id}/change/"
        operator.get(url)  # warm caches (content types, permissions)
        with CaptureQueriesContext(connection) as queries:
            html = operator.get(url).content.decode()
        counts.append(len(queries))
        snapshot_queries = [q for q in queries if "projectionsnapshot" in q["sql"]]
        assert len(snapshot_queries) == 1, snapshot_queries
    assert counts[0] == counts[1]
    assert 'id="usage-turns">503<' in html
