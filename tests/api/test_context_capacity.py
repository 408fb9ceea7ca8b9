"""A view whose protected part is above maxInputTokens is refused with 422 (contract §6)."""

from __future__ import annotations

import pytest

from sessions_app.models import Message, ProjectionSnapshot
from sessions_app.providers.base import canonical_json, estimate_tokens
from tests.conftest import KeyClient, SessionHandle

PARTS = {"system", "header", "runInputs", "toolSchemas"}


@pytest.fixture
def session_with_limit(tenant, make_version):
    """A unified@2 session started over HTTP on a version with this maxInputTokens."""
    made = []

    def build(limit: int) -> SessionHandle:
        made.append(limit)
        app, client = tenant(f"capacity-{len(made)}")
        version = make_version(app, max_input_tokens=limit)
        body = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
        return SessionHandle(app, client, KeyClient(body["sessionKey"]), body["id"], version)

    return build


def project(s):
    return s.client.post(s.path("projection/"), {"provider": "neutral"})


def test_one_huge_input_is_refused_and_the_session_continues_after_a_smaller_one(
    session_with_limit,
):
    s = session_with_limit(8000)
    huge = "x" * 40_000  # about 10000 tokens by itself
    s.input(huge)
    written = Message.objects.filter(session_id=s.id).count()

    refused = project(s)
    assert refused.status_code == 422, refused.content
    error = refused.json()["error"]
    assert error["code"] == "context_capacity_exceeded"
    details = error["details"]
    assert set(details) == PARTS | {"total", "limit", "estimator"}
    assert details["limit"] == 8000 and details["estimator"] == "chars/4"
    assert details["total"] == sum(details[part] for part in PARTS) > 8000
    assert details["runInputs"] == estimate_tokens(canonical_json(huge))
    assert details["system"] > 0 and details["header"] > 0 and details["toolSchemas"] > 0
    assert "maxInputTokens 8000" in error["message"]
    # Nothing is written: no snapshot, nothing in the log.
    assert not ProjectionSnapshot.objects.filter(session_id=s.id).exists()
    assert Message.objects.filter(session_id=s.id).count() == written
    assert project(s).status_code == 422  # refused again, not cached

    s.input("a shorter question")
    view = project(s)
    assert view.status_code == 201, view.content
    # The earlier run's input is plain history now: compression may shrink it later.
    kinds = [m["kind"] for m in view.json()["messages"]]
    assert kinds.count("input") == 2


def test_tool_schemas_count_and_the_limit_itself_is_allowed(session_with_limit):
    # unified@2's protocol prompt and tool schemas alone are above 1000 tokens.
    small = session_with_limit(1000)
    small.input("hello")
    refused = project(small)
    assert refused.status_code == 422
    sizes = refused.json()["error"]["details"]
    assert sizes["toolSchemas"] > sizes["system"] > 0
    # The same view fits a limit of exactly its size, and not one token less.
    exact = session_with_limit(sizes["total"])
    exact.input("hello")
    assert project(exact).status_code == 201
    below = session_with_limit(sizes["total"] - 1)
    below.input("hello")
    assert project(below).status_code == 422


def test_a_long_task_memory_is_counted_in_the_header(session_with_limit):
    s = session_with_limit(5000)
    s.input("remember this")
    assert project(s).status_code == 201
    assert s.tool("context_task_memory_set", memory="m" * 16_000)["success"] is True
    refused = project(s)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"]["header"] >= 4000
