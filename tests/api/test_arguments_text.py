"""A call's `arguments` as the JSON text the provider returned (contract §5.2), over HTTP.

Text of an object is stored as that object; any other text is stored as written, projected
back as the provider wants it, and its dispatch answers the correctable `invalid_arguments`.
"""

from __future__ import annotations

import json

import pytest

MALFORMED = '{"purpose": "note it", "memory": "5000 x A-100'  # cut off mid-string


def write_call(s, call_id: str, tool: str, arguments, snapshot: dict | None = None):
    snapshot = snapshot or s.project()
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


def test_text_of_an_object_is_stored_as_that_object_and_dispatched(api_session):
    s = api_session(version=1)
    s.input("note the quote")
    text = json.dumps({"purpose": "note it", "memory": "Quote 5000 x A-100"})
    written = write_call(s, "call_1", "context_task_memory_set", text)
    assert written.status_code == 201, written.content
    assert written.json()["arguments"] == {"purpose": "note it", "memory": "Quote 5000 x A-100"}
    receipt = s.dispatch("call_1")
    assert receipt["result"]["success"] is True


def test_malformed_text_is_stored_projected_and_answered_invalid_arguments(api_session):
    s = api_session(version=2)
    s.input("note the quote")
    written = write_call(s, "call_1", "context_task_memory_set", MALFORMED)
    assert written.status_code == 201, written.content
    assert written.json()["arguments"] == MALFORMED
    log = s.client.get(s.path("messages/")).json()["messages"]
    assert log[-1]["arguments"] == MALFORMED

    receipt = s.dispatch("call_1")
    error = receipt["result"]["error"]
    assert receipt["result"]["success"] is False
    assert error["code"] == "invalid_arguments" and error["correctable"] is True
    assert "not valid JSON" in error["message"]

    # The session goes on: each adapter shows the call as its provider wants it.
    neutral = s.project()
    call = next(m for m in neutral["messages"] if m["kind"] == "tool_call")
    assert call["arguments"] == MALFORMED
    openai = s.project("openai-chat")["request"]
    sent = next(m for m in openai["messages"] if m.get("tool_calls"))
    assert sent["tool_calls"][0]["function"]["arguments"] == MALFORMED  # the text, as is
    anthropic = s.project("anthropic-messages")
    blocks = [b for m in anthropic["request"]["messages"] for b in m["content"]]
    tool_use = next(b for b in blocks if b.get("type") == "tool_use")
    assert tool_use["input"] == {}
    assert any("call_1" in note and "not a JSON object" in note for note in anthropic["notes"])

    # The model tries again, with an object this time.
    fixed = json.dumps({"purpose": "note it", "memory": "5000 x A-100"})
    assert write_call(s, "call_2", "context_task_memory_set", fixed).status_code == 201
    assert s.dispatch("call_2")["result"]["success"] is True


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", '"just a string"', "42", "", '{"purpose": NaN}', "{'purpose': 'single quotes'}"],
)
def test_text_that_is_no_json_object_is_kept_as_written(api_session, text):
    s = api_session(version=2)
    s.input("start")
    written = write_call(s, "call_1", "context_task_memory_get", text)
    assert written.status_code == 201, written.content
    assert written.json()["arguments"] == text
    error = s.dispatch("call_1")["result"]["error"]
    assert (error["code"], error["correctable"]) == ("invalid_arguments", True)


def test_a_host_call_with_malformed_text_reaches_the_host_as_written(api_session):
    s = api_session(version=2)
    s.input("look it up")
    assert write_call(s, "h1", "lookup", '{"q": "A-1').status_code == 201
    pending = s.client.get(s.path("messages/")).json()["messages"][-1]
    assert pending["arguments"] == '{"q": "A-1'
    result = {"role": "tool", "kind": "tool_result", "toolCallId": "h1", "isError": True}
    s.write(**result, content="arguments were not JSON")
    s.project("openai-chat")


@pytest.mark.parametrize(
    "arguments, code, field",
    [
        (42, "arguments_invalid", "arguments"),
        ([1, 2], "arguments_invalid", "arguments"),
        ('{"memory": "a\\u0000b"}', "unsupported_character", "arguments.memory"),
        ('{"n": 1e999}', "non_finite_number", "arguments.n"),
        ("[" * 70 + "]" * 70, None, None),  # text of no object: kept as written
        ('{"a":' * 70 + "1" + "}" * 70, "body_too_deep", None),
    ],
)
def test_arguments_no_database_can_store_are_refused_naming_the_field(
    api_session, arguments, code, field
):
    s = api_session(version=2)
    s.input("start")
    response = write_call(s, "call_1", "context_task_memory_get", arguments)
    if code is None:
        assert response.status_code == 201
        return
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == code
    if field is not None:
        assert error["details"]["field"] == field
    assert s.client.get(s.path()).json()["lastIndex"] == 1  # nothing written
