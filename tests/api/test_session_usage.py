"""`GET sessions/{id}/` carries the session's usage and cost (contract §8), in one query."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from sessions_app.models import ProjectionSnapshot
from tests.conftest import KeyClient, SessionHandle

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


@pytest.fixture
def new_session(tenant, make_version):
    """An external-host unified@2 session in an Application of its own."""
    made = []

    def build(**fields) -> SessionHandle:
        app, client = tenant(f"usage-{len(made)}")
        version = make_version(app, **fields)
        created = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
        made.append(created["id"])
        return SessionHandle(app, client, KeyClient(created["sessionKey"]), created["id"], version)

    return build


def _turn(s, content: str, usage: dict) -> str:
    s.input(content)
    snapshot = s.project()["snapshotId"]
    answer = s.client.post(s.path(f"snapshots/{snapshot}/usage/"), usage)
    assert answer.status_code == 200, answer.content
    return snapshot


NO_SIDE_REQUESTS = {
    "inputTokens": 0,
    "cacheReadInputTokens": 0,
    "cacheWriteInputTokens": 0,
    "outputTokens": 0,
    "turns": 0,
}


def _usage(s) -> dict:
    answer = s.client.get(s.path())
    assert answer.status_code == 200, answer.content
    return answer.json()["usage"]


def test_session_detail_sums_tokens_by_kind_and_cost_over_reported_turns(new_session):
    s = new_session(prices=PRICES)
    _turn(
        s,
        "first",
        {
            "inputTokens": 5000,
            "outputTokens": 100,
            "cacheReadInputTokens": 0,
            "cacheWriteInputTokens": 4000,
        },
    )
    _turn(s, "second", {"inputTokens": 6000, "outputTokens": 50, "cachedInputTokens": 4000})
    s.input("third")
    s.project()  # a turn whose usage was not reported (yet) counts nothing
    usage = _usage(s)
    # turn 1: (1000 x 3 + 4000 x 3.75 + 100 x 15) / 1e6 = 0.0195
    # turn 2: (2000 x 3 + 4000 x 0.3 + 50 x 15) / 1e6 = 0.00795
    assert usage == {
        "inputTokens": 11000,
        "cacheReadInputTokens": 4000,
        "cacheWriteInputTokens": 4000,
        "outputTokens": 150,
        "cost": 0.02745,
        "turns": 2,
        "sideUsage": {**NO_SIDE_REQUESTS, "cost": 0.0},  # (contract §19.1: none here)
    }


def test_cost_is_null_without_prices_and_zero_before_any_turn_with_prices(new_session):
    unpriced = new_session()
    _turn(unpriced, "hello", {"inputTokens": 1200, "outputTokens": 30})
    assert _usage(unpriced) == {
        "inputTokens": 1200,
        "cacheReadInputTokens": 0,
        "cacheWriteInputTokens": 0,
        "outputTokens": 30,
        "cost": None,
        "turns": 1,
        "sideUsage": {**NO_SIDE_REQUESTS, "cost": None},
    }
    fresh = new_session(prices=PRICES)
    assert _usage(fresh) == {
        "inputTokens": 0,
        "cacheReadInputTokens": 0,
        "cacheWriteInputTokens": 0,
        "outputTokens": 0,
        "cost": 0.0,
        "turns": 0,
        "sideUsage": {**NO_SIDE_REQUESTS, "cost": 0.0},
    }


def _bulk_turns(s, count: int) -> None:
    template = ProjectionSnapshot.objects.filter(session_id=s.id).first()
    ProjectionSnapshot.objects.bulk_create(
        ProjectionSnapshot(
            session_id=s.id,
            revision=template.revision,
            upper_bound=template.upper_bound,
            window_id=template.window_id,
            protocol=template.protocol,
            provider=template.provider,
            usage={"inputTokens": 100, "outputTokens": 1},
            input_tokens=100,
            cache_read_input_tokens=60,
            output_tokens=1,
            cost="0.000123",
        )
        for _ in range(count)
    )


def test_the_session_detail_reads_usage_in_one_query_whatever_the_turns(new_session):
    small, big = new_session(prices=PRICES), new_session(prices=PRICES)
    for s in (small, big):
        _turn(s, "hi", {"inputTokens": 100, "outputTokens": 1})
    _bulk_turns(big, 300)
    counts = []
    for s in (small, big):
        s.client.get(s.path())  # warm: authentication caches
        with CaptureQueriesContext(connection) as queries:
            assert s.client.get(s.path()).status_code == 200
        usage_queries = [q for q in queries.captured_queries if "projectionsnapshot" in q["sql"]]
        assert len(usage_queries) == 1, usage_queries
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert _usage(big)["turns"] == 301
    assert _usage(big)["cacheReadInputTokens"] == 300 * 60


def test_the_session_shape_declares_usage_in_the_openapi_schema(db):
    schema = APIClient().get("/api/v1/schema/", {"format": "json"}).json()
    get = schema["paths"]["/api/v1/sessions/{session_id}/"]["get"]
    ref = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    components = schema["components"]["schemas"]
    session = components[ref.rsplit("/", 1)[1]]
    usage = components[session["properties"]["usage"]["$ref"].rsplit("/", 1)[1]]
    assert set(usage["properties"]) == {
        "inputTokens",
        "cacheReadInputTokens",
        "cacheWriteInputTokens",
        "outputTokens",
        "cost",
        "turns",
        "sideUsage",
    }
    assert usage["properties"]["cost"]["nullable"] is True
    assert set(usage["required"]) == set(usage["properties"])
