"""Side requests (contract §19.1, issue 40 item 3): a client's background request (a title)
beside a conversation with tools is answered by the session's model from its own messages,
recorded and priced apart (`sideUsage`), and never enters the log, the transcript or a view."""

from __future__ import annotations

import json

from django.test import Client

from sessions_app.models import GatewayExchange, Message

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_a_title_request_is_answered_apart_and_the_conversation_goes_on(
    gateway, scripted, app_and_key
):
    version = scripted(
        [
            {"text": "Here is the plan."},
            {"text": "Trip to Oslo", "usage": {"inputTokens": 40, "outputTokens": 4}},
            {"expect": {"notContains": ["Name this conversation"]}, "text": "Next step."},
        ]
    )
    version.prices = {"input": 1, "cacheRead": 0.1, "cacheWrite": 1.25, "output": 4}
    version.save()
    conversation = [
        {"role": "system", "content": "You plan trips."},
        {"role": "user", "content": "Plan Oslo."},
    ]
    first = gateway.openai({"model": "helper", "tools": TOOLS, "messages": conversation})
    key, session = first["X-Contextproto-Session-Key"], first["X-Contextproto-Session"]
    title = gateway.openai(
        {
            "messages": [
                {"role": "system", "content": "Name this conversation in three words."},
                {"role": "user", "content": "Plan Oslo."},
            ]
        },
        key=key,
    )
    assert title.status_code == 200, title.content
    assert title.json()["choices"][0]["message"]["content"] == "Trip to Oslo"
    assert title["X-Contextproto-Side"] == "true"
    # Nothing of it in the log; the conversation's next request reconciles as if it never was.
    assert list(Message.objects.filter(session_id=session).values_list("kind", flat=True)) == [
        "input",
        "text",
    ]
    conversation += [first.json()["choices"][0]["message"], {"role": "user", "content": "And?"}]
    following = gateway.openai({"tools": TOOLS, "messages": conversation}, key=key)
    assert following.json()["choices"][0]["message"]["content"] == "Next step."
    side = GatewayExchange.objects.get(session_id=session, side=True)
    assert (side.input_tokens, side.output_tokens) == (40, 4)
    # The session's usage counts it apart, priced.
    detail = (
        Client()
        .get(f"/api/v1/sessions/{session}/", HTTP_AUTHORIZATION=f"Bearer {app_and_key[1]}")
        .json()
    )
    assert detail["usage"]["sideUsage"]["turns"] == 1
    assert detail["usage"]["sideUsage"]["inputTokens"] == 40
    assert detail["usage"]["sideUsage"]["cost"] == (40 * 1 + 4 * 4) / 1_000_000
    assert json.dumps(detail["usage"]).count("sideUsage") == 1


def test_a_request_without_tools_on_a_conversation_without_tools_is_the_conversation(
    gateway, scripted
):
    scripted([{"text": "One."}, {"text": "Two."}])
    first = gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "hi"}]})
    key = first["X-Contextproto-Session-Key"]
    second = gateway.openai(
        {
            "messages": [
                {"role": "system", "content": "Other words."},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "One."},
                {"role": "user", "content": "again"},
            ]
        },
        key=key,
    )
    assert second.json()["choices"][0]["message"]["content"] == "Two."
    assert "X-Contextproto-Side" not in second
    assert not GatewayExchange.objects.filter(side=True).exists()


def test_a_side_requests_output_limit_is_lowered_to_the_models_as_any_reply(gateway, scripted):
    version = scripted([{"text": "Plan."}, {"text": "Trip to Oslo"}], wire="anthropic-messages")
    version.model_config = {**version.model_config, "maxOutputTokens": 32768}
    version.save()
    anthropic_tools = [{"name": "lookup", "input_schema": {"type": "object"}}]
    first = gateway.anthropic(
        {
            "model": "helper",
            "max_tokens": 1000,
            "system": "You plan trips.",
            "tools": anthropic_tools,
            "messages": [{"role": "user", "content": "Plan Oslo."}],
        }
    )
    title = gateway.anthropic(
        {
            "max_tokens": 64000,
            "system": "Name this conversation.",
            "messages": [{"role": "user", "content": "Plan Oslo."}],
        },
        key=first["X-Contextproto-Session-Key"],
    )
    assert title.status_code == 200, title.content
    assert title["X-Contextproto-Side"] == "true"
    assert title["X-Contextproto-Adjusted"] == "max_tokens=64000->32768"
