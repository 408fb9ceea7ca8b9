"""A model's answer as it gave it, through the API (contract §2.3, §4.5; issue 31 item 6).

A host writes a tool_call with the text its model wrote beside the call and Anthropic's
thinking blocks; the log returns it unchanged and every later view shows it per provider.
Thinking parts are stored on answers (assistant text and tool_call) only.
"""

from __future__ import annotations

import json

import pytest

from sessions_app.models import Message

THINKING = {"type": "thinking", "thinking": "The lookup tool has prices.", "signature": "c2lnLTE="}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
BESIDE = {"type": "text", "text": "Let me look the price up."}
ANSWER_PARTS = (
    "{type: text, text}, {type: image, mediaType, data|url}, "
    "{type: thinking, thinking, signature}, {type: redacted_thinking, data} or "
    "{type: reasoning, id, summary, encryptedContent?}"
)
BASE_PARTS = "{type: text, text} or {type: image, mediaType, data|url}"


def _answered(s) -> dict:
    """Input, a host-tool call written with text and thinking, its result, a text answer
    that thought; returns the call as written."""
    s.input("What does it cost?")
    view = s.project()
    call = s.write(
        role="assistant",
        kind="tool_call",
        content=[THINKING, REDACTED, BESIDE],
        toolCallId="toolu_01",
        toolName="lookup",
        arguments={"q": "price"},
        snapshotId=view["snapshotId"],
    )
    s.write(role="tool", kind="tool_result", content="42", toolCallId="toolu_01")
    s.write(
        role="assistant",
        kind="text",
        content=[{**THINKING, "thinking": "Answer now."}, {"type": "text", "text": "42."}],
    )
    s.input("And shipping?")
    return call


def test_a_call_with_text_and_thinking_is_stored_and_read_back_as_written(api_session):
    s = api_session()
    call = _answered(s)
    assert call["content"] == [THINKING, REDACTED, BESIDE]
    listed = s.client.get(s.path("messages/")).json()["messages"]
    read = next(m for m in listed if m["kind"] == "tool_call")
    assert read["content"] == [THINKING, REDACTED, BESIDE]
    assert Message.objects.get(id=call["id"]).content == [THINKING, REDACTED, BESIDE]


def test_later_views_show_the_text_beside_the_call_and_thinking_per_provider(api_session):
    s = api_session()
    _answered(s)

    openai = s.project("openai-chat")["request"]
    calls = next(m for m in openai["messages"] if m.get("tool_calls"))
    assert calls["content"] == BESIDE["text"]
    assert "signature" not in json.dumps(openai) and "lookup tool has" not in json.dumps(openai)
    assert openai["parallel_tool_calls"] is False

    anthropic = s.project("anthropic-messages")["request"]
    turn = next(
        m["content"]
        for m in anthropic["messages"]
        if any(b["type"] == "tool_use" for b in m["content"])
    )
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in turn] == [
        THINKING,
        REDACTED,
        BESIDE,
        {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"q": "price"}},
    ]
    assert not any("cache_control" in b for b in turn[:2])
    assert anthropic["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}

    neutral = s.project()["messages"]
    assert next(m for m in neutral if m["kind"] == "tool_call")["content"] == [
        THINKING,
        REDACTED,
        BESIDE,
    ]


REASONING = {
    "type": "reasoning",
    "id": "rs_0a1b",
    "summary": [{"type": "summary_text", "text": "Look the price up."}],
    "encryptedContent": "gAAAAB-opaque",
}


def test_an_openai_reasoning_item_is_stored_with_its_answer_and_sent_back_to_responses_only(
    api_session,
):
    s = api_session()
    s.input("What does it cost?")
    view = s.project()
    call = s.write(
        role="assistant",
        kind="tool_call",
        content=[REASONING, BESIDE],
        toolCallId="call_01",
        toolName="lookup",
        arguments={"q": "price"},
        snapshotId=view["snapshotId"],
    )
    assert call["content"] == [REASONING, BESIDE]
    s.write(role="tool", kind="tool_result", content="42", toolCallId="call_01")
    s.input("And shipping?")
    responses = s.project("openai-responses")["request"]
    at = responses["input"].index(
        {
            "type": "reasoning",
            "id": "rs_0a1b",
            "summary": REASONING["summary"],
            "encrypted_content": "gAAAAB-opaque",
        }
    )
    assert [i["type"] for i in responses["input"][at + 1 : at + 3]] == ["message", "function_call"]
    for provider in ("openai-chat", "anthropic-messages"):
        sent = json.dumps(s.project(provider)["request"])
        assert "gAAAAB-opaque" not in sent and "rs_0a1b" not in sent, provider
    # Reasoning is a model's: a user input carrying it is refused.
    refused = s.client.post(s.path("inputs/"), {"content": [REASONING]})
    assert refused.status_code == 400
    assert (
        "reasoning parts are stored only on a model's answer" in refused.json()["error"]["message"]
    )


def test_an_answer_that_only_thought_is_accepted(api_session):
    s = api_session()
    s.input("hi")
    written = s.write(role="assistant", kind="text", content=[REDACTED])
    assert written["content"] == [REDACTED]
    s.input("again")
    assert s.project("openai-chat")["request"]["messages"]
    assert s.project("anthropic-messages")["request"]["messages"]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"role": "tool", "kind": "tool_result", "toolCallId": "h1"}, "tool_result"),
        ({"role": "user", "kind": "runtime_instruction"}, "runtime_instruction"),
        ({"role": "user", "kind": "approval_feedback", "toolCallId": "h1"}, "approval_feedback"),
    ],
)
def test_thinking_on_user_and_tool_messages_is_refused_naming_the_allowed_parts(
    api_session, body, kind
):
    s = api_session()
    s.input("look it up")
    view = s.project()
    s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="h1",
        toolName="lookup",
        arguments={},
        snapshotId=view["snapshotId"],
    )
    response = s.client.post(s.path("messages/"), {**body, "content": [BESIDE, THINKING]})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["details"]["field"]) == ("content_invalid", "content[1]")
    assert error["message"] == (
        "content[1]: thinking parts are stored only on a model's answer (assistant text or "
        f"tool_call); a {kind} message takes {BASE_PARTS}."
    )


def test_thinking_in_an_input_is_refused(api_session):
    s = api_session()
    response = s.client.post(s.path("inputs/"), {"content": [REDACTED]})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "content_invalid"
    assert "redacted_thinking parts are stored only on a model's answer" in error["message"]
    assert Message.objects.filter(session_id=s.id).count() == 0


@pytest.mark.parametrize(
    "part",
    [
        {"type": "thinking", "thinking": "no signature"},
        {"type": "thinking", "thinking": None, "signature": "s"},
        {"type": "redacted_thinking"},
        {"type": "redacted_thinking", "data": 7},
        {"type": "reasoning", "text": "other vendors' shapes are not thinking parts"},
    ],
)
def test_a_malformed_thinking_part_on_an_answer_is_refused(api_session, part):
    s = api_session()
    s.input("hi")
    response = s.client.post(
        s.path("messages/"), {"role": "assistant", "kind": "text", "content": [part]}
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "content_invalid"
    assert error["message"] == f"content[0] must be {ANSWER_PARTS}."
