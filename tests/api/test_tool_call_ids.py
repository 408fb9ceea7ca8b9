"""Tool call ids as providers make them (contract §5.2), over HTTP.

The story of issue 32: a `toolCallId` with `/` was accepted (201) but its dispatch route
404'd, so its result could never be written and every later projection failed with
`projection_pairing_violation`. Now the path segment is percent-decoded (`%2F`) and the
body form `tool-calls/dispatch/` takes any id.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest


def write_call(s, call_id: str, tool: str, snapshot: dict | None = None, **arguments):
    snapshot = snapshot or s.project()
    arguments.setdefault("purpose", "test")
    return s.client.post(
        s.path("messages/"),
        {
            "role": "assistant",
            "kind": "tool_call",
            "content": "",
            "toolCallId": call_id,
            "toolName": tool,
            "arguments": arguments,
            "snapshotId": snapshot["snapshotId"],
        },
    )


def dispatch_by_path(s, call_id: str):
    return s.client.post(s.path(f"tool-calls/{quote(call_id, safe='')}/dispatch/"))


def dispatch_by_body(s, call_id: str):
    return s.client.post(s.path("tool-calls/dispatch/"), {"toolCallId": call_id})


@pytest.mark.parametrize("dispatch", [dispatch_by_path, dispatch_by_body])
def test_a_slash_id_is_dispatched_answered_and_the_session_goes_on(api_session, dispatch):
    s = api_session(version=2)
    s.input("note the quote")
    call_id = "functions/context_task_memory_set:0"
    written = write_call(s, call_id, "context_task_memory_set", memory="quote 5000 x A-100")
    assert written.status_code == 201, written.content
    assert written.json()["toolCallId"] == call_id

    receipt = dispatch(s, call_id)
    assert receipt.status_code == 200, receipt.content
    body = receipt.json()
    assert body["toolCallId"] == call_id and body["replayed"] is False
    assert body["result"]["success"] is True
    assert body["resultMessage"]["toolCallId"] == call_id

    # The other form replays the same receipt: one call, one result, whichever form.
    other = dispatch_by_body if dispatch is dispatch_by_path else dispatch_by_path
    again = other(s, call_id).json()
    assert again["replayed"] is True and again["result"] == body["result"]

    # Paired: the next view builds, with the call and its result in it.
    view = s.project("openai-chat")
    ids = [m.get("toolCallId") for m in view["messages"] if m["kind"] == "tool_result"]
    assert ids == [call_id]


def test_ids_that_look_like_routes_or_use_any_script_are_dispatched(api_session):
    s = api_session(version=2)
    s.input("start")
    for call_id in ("dispatch", "a/dispatch", "x//y/", "%2F literally", "通話/1", "🙂" * 256):
        assert write_call(s, call_id, "context_task_memory_get").status_code == 201, call_id
        response = dispatch_by_path(s, call_id)
        assert response.status_code == 200, (call_id, response.content)
        assert response.json()["toolCallId"] == call_id
        assert response.json()["result"]["success"] is True


def test_a_host_call_with_a_slash_id_takes_its_result_and_the_view_builds(api_session):
    s = api_session(version=2)
    s.input("look it up")
    call_id = "lookup/price:7"
    assert write_call(s, call_id, "lookup", q="A-100").status_code == 201
    result = s.client.post(
        s.path("messages/"),
        {"role": "tool", "kind": "tool_result", "toolCallId": call_id, "content": "12.40"},
    )
    assert result.status_code == 201, result.content
    s.project()


@pytest.mark.parametrize(
    "call_id, says",
    [
        ("x" * 257, "1 to 256 characters"),
        ("call\n1", "U+000A"),
        ("call\t1", "U+0009"),
        ("\x7fdel", "U+007F"),
    ],
)
def test_an_id_outside_the_rule_is_refused_when_written(api_session, call_id, says):
    s = api_session(version=2)
    s.input("start")
    response = write_call(s, call_id, "context_task_memory_get")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "tool_call_id_invalid"
    assert says in error["message"] and error["details"]["field"] == "toolCallId"
    assert s.client.get(s.path()).json()["lastIndex"] == 1  # nothing written


def test_an_empty_id_is_an_incomplete_call(api_session):
    s = api_session(version=2)
    s.input("start")
    response = write_call(s, "", "context_task_memory_get")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "tool_call_incomplete"


def test_dispatch_by_body_refuses_a_missing_id_and_unknown_fields(api_session):
    s = api_session(version=2)
    s.input("start")
    missing = s.client.post(s.path("tool-calls/dispatch/"), {})
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "invalid_request"
    extra = s.client.post(s.path("tool-calls/dispatch/"), {"toolCallId": "a", "x": 1})
    assert extra.status_code == 400
    unknown = dispatch_by_body(s, "never/written")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"
