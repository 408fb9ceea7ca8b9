"""The gateway through the Django test client: sessions, turns, reconciliation (SPEC §19)."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import GatewayExchange, Message, Run, Session

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return response.json()["choices"][0]["message"]["content"]


def test_a_new_session_from_model_answers_in_chat_completion_shape(gateway, scripted):
    scripted([{"expect": {"contains": ["Hello there"]}, "text": "Hi!"}])
    response = gateway.openai(
        {"model": "helper@1", "messages": [{"role": "user", "content": "Hello there"}]}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "test-model"
    assert _text(response) == "Hi!"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )
    session = Session.objects.get(pk=response["X-Contextproto-Session"])
    assert response["X-Contextproto-Session-Key"].startswith("cps_")
    assert response["X-Contextproto-Turns"] == "1"
    assert session.via_gateway
    kinds = list(Message.objects.filter(session=session).order_by("index").values_list("kind"))
    assert kinds == [("input",), ("text",)]


def test_full_trimmed_and_incremental_clients_continue_the_same_session(gateway, scripted):
    scripted([{"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "four"}])
    first = gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "a"}]})
    key = first["X-Contextproto-Session-Key"]
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "b"},
    ]
    full = gateway.openai({"model": "x", "messages": history}, key=key)
    assert _text(full) == "two", full.content
    trimmed = gateway.openai(
        {
            "model": "x",
            "messages": [
                {"role": "assistant", "content": "two"},
                {"role": "user", "content": "c"},
            ],
        },
        key=key,
    )
    assert _text(trimmed) == "three", trimmed.content
    incremental = gateway.openai({"messages": [{"role": "user", "content": "d"}]}, key=key)
    assert _text(incremental) == "four", incremental.content
    session = Session.objects.get(pk=first["X-Contextproto-Session"])
    inputs = Message.objects.filter(session=session, kind="input").order_by("index")
    assert [m.content for m in inputs] == ["a", "b", "c", "d"]
    assert Run.objects.filter(session=session).count() == 4


def test_a_lost_reply_is_sent_again_without_a_model_call(gateway, scripted):
    scripted([{"text": "only once"}])
    first = gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "q"}]})
    key = first["X-Contextproto-Session-Key"]
    again = gateway.openai({"messages": [{"role": "user", "content": "q"}]}, key=key)
    assert again.status_code == 200, again.content
    assert again.content == first.content
    assert again["X-Contextproto-Replayed"] == "true"
    assert again["X-Contextproto-Turns"] == "0"
    assert GatewayExchange.objects.filter(replayed=True).count() == 1


def test_a_protocol_call_is_dispatched_and_the_text_comes_back(gateway, scripted):
    scripted(
        [
            {
                "text": "Let me note that.",
                "toolCalls": [
                    {
                        "name": "context_task_memory_set",
                        "arguments": {"purpose": "remember", "memory": "likes tea"},
                    }
                ],
            },
            {"expect": {"contains": ["likes tea"]}, "text": "Noted."},
        ]
    )
    response = gateway.openai(
        {"model": "helper", "messages": [{"role": "user", "content": "I like tea"}]}
    )
    assert response.status_code == 200, response.content
    assert _text(response) == "Let me note that.\n\nNoted."
    assert response["X-Contextproto-Turns"] == "2"
    session = Session.objects.get(pk=response["X-Contextproto-Session"])
    call = Message.objects.get(session=session, kind="tool_call")
    assert call.content == "Let me note that."


def test_a_client_tool_call_goes_to_the_client_and_its_result_continues_the_run(gateway, scripted):
    scripted(
        [
            {
                "toolCalls": [
                    {"id": "c1", "name": "lookup", "arguments": {"city": "Oslo"}},
                ]
            },
            {"expect": {"contains": ["sunny"]}, "text": "It is sunny."},
        ]
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    first = gateway.openai({"model": "helper", "messages": messages, "tools": tools})
    assert first.status_code == 200, first.content
    choice = first.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    key = first["X-Contextproto-Session-Key"]
    messages += [
        choice["message"],
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
    ]
    second = gateway.openai({"model": "helper", "messages": messages, "tools": tools}, key=key)
    assert second.status_code == 200, second.content
    assert _text(second) == "It is sunny."
    session = Session.objects.get(pk=first["X-Contextproto-Session"])
    assert Run.objects.filter(session=session).count() == 1


def test_the_anthropic_endpoint_answers_a_message(gateway, scripted):
    scripted([{"text": "Bonjour"}], wire="anthropic-messages")
    response = gateway.anthropic(
        {
            "model": "helper",
            "max_tokens": 100,
            "system": "Speak French.",
            "messages": [{"role": "user", "content": "Hello"}],
        }
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["type"] == "message"
    assert body["content"] == [{"type": "text", "text": "Bonjour"}]
    assert body["stop_reason"] == "end_turn"


def test_a_mismatch_is_refused_with_the_index_and_the_reason(gateway, scripted):
    scripted([{"text": "one"}, {"text": "two"}])
    first = gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "a"}]})
    key = first["X-Contextproto-Session-Key"]
    response = gateway.openai(
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "something else"},
                {"role": "user", "content": "b"},
            ]
        },
        key=key,
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "gateway_transcript_mismatch"
    assert error["details"]["index"] == 1
    assert response["x-should-retry"] == "false"
    assert response["X-Contextproto-Session"] == first["X-Contextproto-Session"]
