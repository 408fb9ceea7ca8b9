"""`POST sessions/{id}/turns/` refuses what it cannot record (contract §5.2a), over HTTP:
a malformed answer or usage names its field and writes nothing; a turn that died before its
dispatch is finished by its retry.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError

from contextproto import api_schema
from sessions_app.models import Message, ProjectionSnapshot, Run
from sessions_app.services import turn_commit as turn_commit_service
from tests.api.turn_bodies import (
    MEMORY,
    log,
    openai_completion,
    turn,
)


def _refused(s, body: dict, status: int, code: str, field: str | None = None) -> None:
    before = Message.objects.filter(session_id=s.id).count()
    answer = s.client.post(s.path("turns/"), body)
    assert answer.status_code == status, answer.content
    error = answer.json()["error"]
    assert error["code"] == code, error
    if field is not None:
        fields = [error["details"].get("field")] + [
            e["field"] for e in error["details"].get("errors", [])
        ]
        assert field in fields, error
        assert field in error["message"]
    # Nothing is half-written.
    assert Message.objects.filter(session_id=s.id).count() == before
    assert Run.objects.get(session_id=s.id).turns == 0


@pytest.mark.parametrize(
    "answer, status, code, field",
    [
        ({"text": "hi"}, 400, "answer_shape_unknown", "answer"),
        ([{"content": "hi"}], 400, "answer_shape_unknown", "answer"),
        (
            {
                "object": "chat.completion",
                "choices": [{"message": {"role": "assistant", "content": 5}}],
            },
            400,
            "answer_invalid",
            "answer.choices[0].message.content",
        ),
        (
            {"type": "message", "content": [{"type": "tool_use", "name": "lookup", "input": {}}]},
            400,
            "tool_call_id_invalid",
            "answer.content[0].id",
        ),
        ({"content": ""}, 400, "answer_invalid", "answer.content"),
        (
            {
                "content": None,
                "toolCalls": [{"id": "c", "name": "lookup", "arguments": '{"q": "\\u0000"}'}],
            },
            400,
            "unsupported_character",
            "answer.toolCalls[0].arguments.q",
        ),
        (
            {
                "content": None,
                "toolCalls": [{"id": "c", "name": "lookup", "arguments": '{"q": 1e999}'}],
            },
            400,
            "non_finite_number",
            "answer.toolCalls[0].arguments.q",
        ),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_field_and_writes_nothing(
    host, answer, status, code, field
):
    s = host()
    view = s.project()
    _refused(s, {"snapshotId": view["snapshotId"], "answer": answer}, status, code, field)


def test_a_snapshot_that_is_not_this_sessions_is_refused(host):
    s, other = host(), host(version=3)  # another application's session
    theirs = other.project()
    body = {"snapshotId": theirs["snapshotId"], "answer": {"content": "Hi."}}
    _refused(s, body, 400, "snapshot_not_found", "snapshotId")
    _refused(s, {**body, "snapshotId": "not-an-id"}, 400, "snapshot_not_found", "snapshotId")
    _refused(s, {"answer": {"content": "Hi."}}, 400, "invalid_request", "snapshotId")


@pytest.mark.parametrize(
    "usage, code, field",
    [
        ({"prompt_tokens": -1, "completion_tokens": 0}, "usage_invalid", "usage.prompt_tokens"),
        ({"total_tokens": 5}, "usage_invalid", "usage"),
        ({"inputTokens": "12", "outputTokens": 1}, "invalid_request", "usage.inputTokens"),
        ({"inputTokens": 10, "outputTokens": 1, "bogus": 1}, "invalid_request", "usage.bogus"),
        (
            {"inputTokens": 10, "outputTokens": 1, "cacheReadInputTokens": 11},
            "invalid_request",
            "usage.cacheReadInputTokens",
        ),
    ],
)
def test_malformed_usage_is_refused_naming_the_field(host, usage, code, field):
    s = host()
    view = s.project()
    body = {"snapshotId": view["snapshotId"], "answer": {"content": "Hi."}, "usage": usage}
    _refused(s, body, 400, code, field)


def test_a_replys_own_usage_that_is_malformed_is_refused_naming_it(host):
    s = host()
    view = s.project()
    answer = openai_completion("Hi.", usage={"prompt_tokens": 5})
    _refused(
        s,
        {"snapshotId": view["snapshotId"], "answer": answer},
        400,
        "usage_invalid",
        "answer.usage.completion_tokens",
    )


def test_usage_other_than_the_snapshots_reported_one_is_refused(host):
    s = host()
    view = s.project()
    s.client.post(
        s.path(f"snapshots/{view['snapshotId']}/usage/"), {"inputTokens": 5, "outputTokens": 1}
    )
    body = {"snapshotId": view["snapshotId"], "answer": openai_completion("Hi.")}
    _refused(s, body, 409, "usage_already_reported")
    # The same counts are no conflict.
    turn(s, {**body, "usage": {"inputTokens": 5, "outputTokens": 1}})


def test_the_schemas_run_statuses_are_the_runs():
    assert api_schema.RUN_STATUSES == [status.value for status in Run.Status]


def test_a_turn_whose_dispatch_dies_leaves_nothing_and_its_retry_records_it_once(host, monkeypatch):
    """Answer, dispatch and usage share one commit (issue 42's turn_commit): a failure in the
    dispatch leaves nothing of the turn, and the same body sent again records all of it."""
    s = host()
    view = s.project()
    body = {
        "snapshotId": view["snapshotId"],
        "answer": openai_completion("Noting.", ("call_A1", "context_task_memory_set", MEMORY)),
    }
    dispatch = turn_commit_service.tool_dispatch

    def lost(**kwargs):
        raise OperationalError("the connection went away")

    monkeypatch.setattr(turn_commit_service, "tool_dispatch", lost)
    died = s.client.post(s.path("turns/"), body)
    assert died.status_code == 503, died.content
    # Nothing of the turn: no answer, no usage, no count.
    assert [m["kind"] for m in log(s)] == ["input"]
    assert ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage is None
    assert Run.objects.get(session_id=s.id).turns == 0

    monkeypatch.setattr(turn_commit_service, "tool_dispatch", dispatch)
    retried = turn(s, body)

    assert retried["replayed"] is False
    assert retried["receipt"]["replayed"] is False and retried["receipt"]["result"]["success"]
    assert [m["kind"] for m in retried["messages"]] == ["tool_call", "tool_result"]
    assert ProjectionSnapshot.objects.get(id=view["snapshotId"]).usage["inputTokens"] == 3512
    assert Run.objects.get(session_id=s.id).turns == 1
    # And once more: the stored turn, replayed.
    again = turn(s, body, status=200)
    assert again["replayed"] is True and again["receipt"]["replayed"] is True
