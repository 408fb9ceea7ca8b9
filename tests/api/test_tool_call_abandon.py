"""A call whose result will never come is abandoned, and the session goes on (contract §5.3a).

Issue 32's story: a new input while a host call is pending is accepted, and from then on
nothing can be projected (`projection_pairing_violation`) until the result is written; a
host that lost the call had no way out. `POST …/tool-calls/{id}/abandon/` writes the error
result `tool_call_abandoned`.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from contextproto.celery import app as celery_app
from sessions_app.models import KVEntry, Run, ToolReceipt
from tests.conftest import KeyClient


def write_call(s, call_id: str, tool: str, **arguments) -> dict:
    return s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId=call_id,
        toolName=tool,
        arguments=arguments,
        snapshotId=s.project()["snapshotId"],
    )


def abandon(s, call_id: str, body: dict | None = None):
    return s.client.post(s.path(f"tool-calls/{quote(call_id, safe='')}/abandon/"), body or {})


def test_a_lost_host_call_is_abandoned_and_the_session_projects_again(api_session):
    s = api_session(version=2)
    s.input("price of A-100?")
    write_call(s, "lookup/1", "price_lookup", product="A-100")
    # The host lost the call; the user asks again meanwhile, which is accepted...
    s.input("hello? still there?")
    stuck = s.client.post(s.path("projection/"), {"provider": "openai-chat"})
    assert stuck.status_code == 400
    assert stuck.json()["error"]["code"] == "projection_pairing_violation"

    answer = abandon(s, "lookup/1", {"reason": "the worker running it restarted"})
    assert answer.status_code == 200, answer.content
    receipt = answer.json()
    error = receipt["result"]["error"]
    assert receipt["result"]["success"] is False and receipt["replayed"] is False
    assert (error["code"], error["correctable"]) == ("tool_call_abandoned", True)
    assert "the worker running it restarted" in error["message"]
    assert error["reason"] == "the worker running it restarted"
    result = receipt["resultMessage"]
    assert (result["kind"], result["toolCallId"], result["isError"]) == (
        "tool_result",
        "lookup/1",
        True,
    )
    assert json.loads(result["content"]) == receipt["result"]

    # ...and now the session projects again, the model seeing the abandonment.
    view = s.project("openai-chat")["request"]["messages"]
    tool_message = next(m for m in view if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "lookup/1"
    assert "tool_call_abandoned" in tool_message["content"]

    # Exactly one result: abandoning again, or writing the result late, is refused.
    again = abandon(s, "lookup/1")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "tool_call_answered"
    assert again.json()["error"]["details"]["abandoned"] is True
    late = s.client.post(
        s.path("messages/"),
        {"role": "tool", "kind": "tool_result", "toolCallId": "lookup/1", "content": "12.40"},
    )
    assert late.status_code == 400
    assert late.json()["error"]["code"] == "tool_call_already_answered"


def test_an_abandoned_protocol_call_is_never_run_and_its_dispatch_replays(api_session):
    s = api_session(version=1)
    s.input("start")
    write_call(s, "m1", "context_task_memory_set", purpose="note", memory="never written")
    answer = s.client.post(s.path("tool-calls/abandon/"), {"toolCallId": "m1"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["result"]["error"]["code"] == "tool_call_abandoned"
    replay = s.dispatch("m1")
    assert replay["replayed"] is True and replay["result"] == answer.json()["result"]
    assert ToolReceipt.objects.filter(session_id=s.id, tool_call_id="m1").count() == 1
    assert not KVEntry.objects.filter(session_id=s.id, key="taskMemory").exists()


def test_an_answered_call_is_not_abandoned(api_session):
    s = api_session(version=2)
    s.input("start")
    call = s.call("context_task_memory_get")
    s.dispatch(call)
    refused = abandon(s, call)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "tool_call_answered" and error["details"]["abandoned"] is False


def test_unknown_calls_and_bad_bodies_are_refused(api_session):
    s = api_session(version=2)
    s.input("start")
    assert abandon(s, "nope").status_code == 404
    write_call(s, "h1", "lookup", q="x")
    assert abandon(s, "h1", {"reason": "x" * 2001}).status_code == 400
    assert abandon(s, "h1", {"why": "x"}).status_code == 400
    missing = s.client.post(s.path("tool-calls/abandon/"), {"reason": "lost"})
    assert missing.status_code == 400
    assert s.client.get(s.path()).json()["lastIndex"] == 2  # nothing written


STEPS = [
    {"toolCalls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Oslo"}}]},
    {
        "comment": "The abandonment reached the model as the call's result.",
        "expect": {"contains": ["tool_call_abandoned"]},
        "text": "The forecast is not available right now.",
    },
]


# transaction=True: the run is enqueued on commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_a_waiting_built_in_run_continues_after_its_call_is_abandoned(tenant, settings):
    settings.RUNTIME_AUTOSTART = True
    _, app = tenant("Weather Co")
    tool = app.post(
        "tools/",
        {"name": "get_weather", "inputSchema": {"type": "object", "properties": {}}},
    ).json()
    agent = app.post("agents/", {"name": "weather"}).json()
    version = app.post(
        f"agents/{agent['id']}/versions/",
        {
            "systemPrompt": "You answer weather questions.\n{{context_protocol}}",
            "contextProtocolId": "unified",
            "contextProtocolVersion": 2,
            "model": {
                "provider": "scripted",
                "name": "script",
                "maxInputTokens": 16000,
                "config": {"steps": STEPS},
            },
            "tools": [tool["id"]],
        },
    ).json()
    assert app.post(f"agent-versions/{version['id']}/publish/").status_code == 200
    session = app.post("sessions/", {"agentVersionId": version["id"]}).json()
    host = KeyClient(session["sessionKey"])
    path = f"sessions/{session['id']}/"
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        assert host.post(path + "inputs/", {"content": "Weather in Oslo?"}).status_code == 201
        run = Run.objects.get(session_id=session["id"])
        assert run.status == Run.Status.WAITING_FOR_HOST_TOOL
        answer = host.post(path + "tool-calls/w1/abandon/", {"reason": "weather API down"})
        assert answer.status_code == 200, answer.content
    finally:
        celery_app.conf.task_always_eager = eager
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    last = host.get(path + "messages/").json()["messages"][-1]
    assert last["content"] == "The forecast is not available right now."
