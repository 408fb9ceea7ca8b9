"""The gateway through the Django test client: sessions, turns, reconciliation (contract §14)."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from sessions_app.models import (
    GatewayExchange,
    KVEntry,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
)

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


def test_metrics_count_gateway_requests_and_their_time_outside_the_model(gateway, scripted):
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    scripted([{"text": "ok"}])
    ok = {"format": "openai", "status": "200", "code": "ok"}
    unknown = {"format": "openai", "status": "404", "code": "gateway_model_not_found"}
    before = sample("contextproto_gateway_requests_total", **ok)
    refused_before = sample("contextproto_gateway_requests_total", **unknown)
    observed = sample("contextproto_gateway_overhead_seconds_count", format="openai")
    gateway.openai({"model": "helper", "messages": [{"role": "user", "content": "hi"}]})
    gateway.openai({"model": "nobody", "messages": [{"role": "user", "content": "hi"}]})
    assert sample("contextproto_gateway_requests_total", **ok) == before + 1
    assert sample("contextproto_gateway_requests_total", **unknown) == refused_before + 1
    assert sample("contextproto_gateway_overhead_seconds_count", format="openai") == observed + 2


def test_an_idempotency_key_answers_its_first_reply_and_refuses_another_body(gateway, scripted):
    scripted([{"text": "first"}, {"text": "second"}])
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Idempotency-Key": "req-1"}
    first = gateway.openai(body, headers=headers)
    again = gateway.openai(body, headers=headers)
    assert again.status_code == 200 and again.content == first.content
    assert again["X-Contextproto-Replayed"] == "true"
    assert again["X-Contextproto-Session"] == first["X-Contextproto-Session"]
    assert Session.objects.count() == 1
    other = gateway.openai({**body, "temperature": 0.5}, headers=headers)
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert other["x-should-retry"] == "false"
    fresh = gateway.openai(body, headers={"Idempotency-Key": "req-2"})
    assert fresh.status_code == 200
    assert fresh["X-Contextproto-Session"] != first["X-Contextproto-Session"]


def test_a_conversation_is_imported_into_an_empty_session(gateway, scripted):
    scripted([{"expect": {"contains": ["earlier answer", "found: 42"]}, "text": "Continuing."}])
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "old1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "old1", "content": "found: 42"},
    ]
    response = gateway.openai({"model": "helper", "messages": messages})
    assert response.status_code == 200, response.content
    assert _text(response) == "Continuing."
    log = Message.objects.filter(session_id=response["X-Contextproto-Session"]).order_by("index")
    assert [(m.role, m.kind) for m in log] == [
        ("user", "input"),
        ("assistant", "text"),
        ("user", "input"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "text"),
    ]
    # The next request continues it like any other session.
    scripted([{"text": "x"}], name="other")
    key = response["X-Contextproto-Session-Key"]
    nothing = gateway.openai(
        {"messages": [*messages[1:], response.json()["choices"][0]["message"]]}, key=key
    )
    assert nothing.status_code == 400
    assert nothing.json()["error"]["code"] == "gateway_nothing_new"


def test_a_user_message_while_a_client_call_waits_is_refused(gateway, scripted):
    scripted([{"toolCalls": [{"id": "c1", "name": "lookup", "arguments": {}}]}])
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    first = gateway.openai(
        {"model": "helper", "tools": tools, "messages": [{"role": "user", "content": "go"}]}
    )
    key = first["X-Contextproto-Session-Key"]
    refused = gateway.openai(
        {"tools": tools, "messages": [{"role": "user", "content": "never mind"}]}, key=key
    )
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "tool_call_pending"
    # The id the client was given: minted by the gateway, unique across the service.
    handed = first.json()["choices"][0]["message"]["tool_calls"][0]["id"]
    assert error["details"]["toolCallId"] == handed != "c1"


def test_client_system_text_and_tools_commit_one_revision_only_when_they_change(gateway, scripted):
    scripted([{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "4"}])
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    history = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "a"}]
    first = gateway.openai({"model": "helper", "tools": tools, "messages": history})
    key = first["X-Contextproto-Session-Key"]
    session = Session.objects.get(pk=first["X-Contextproto-Session"])
    revision = session.state_revision
    history += [first.json()["choices"][0]["message"], {"role": "user", "content": "b"}]
    gateway.openai({"tools": tools, "messages": history}, key=key)
    session.refresh_from_db()
    assert session.state_revision == revision  # same text, same tools: nothing committed
    history[0]["content"] = "Be brief."
    history += [{"role": "assistant", "content": "2"}, {"role": "user", "content": "c"}]
    gateway.openai({"tools": tools, "messages": history}, key=key)
    session.refresh_from_db()
    assert session.state_revision == revision + 1  # the new system text
    # The tools dropped, with the conversation's system text (other text without tools would
    # be a side request, contract §19.1).
    history += [{"role": "assistant", "content": "3"}, {"role": "user", "content": "d"}]
    reply = gateway.openai({"messages": history}, key=key)
    assert reply.json()["choices"][0]["message"]["content"] == "4"
    session.refresh_from_db()
    assert session.state_revision == revision + 2

    stored = dict(KVEntry.objects.filter(session=session).values_list("key", "value"))
    assert stored["gateway/system"] == "Be brief."
    assert stored["gateway/tools"] == []
    assert "gateway/tool/lookup" not in stored


def test_refusals_and_unknown_paths_are_counted_and_recorded_with_a_log_line(
    gateway, scripted, caplog
):
    """Every answer under /gateway/ is counted by client API, status and code and has a row
    and a log line: a refused key, an unknown path (with and without a known key)."""

    def sample(**labels: str) -> float:
        return REGISTRY.get_sample_value("contextproto_gateway_requests_total", labels) or 0.0

    unknown = {"format": "openai", "status": "404", "code": "not_found"}
    refused = {"format": "anthropic", "status": "401", "code": "not_authenticated"}
    before = sample(**unknown), sample(**refused)
    caplog.set_level("INFO", logger="contextproto.gateway")
    assert gateway.post("/gateway/openai/v1/nothing", {}).status_code == 404
    bad_key = gateway.post("/gateway/anthropic/v1/messages", {}, key="cp_nobody")
    assert bad_key.status_code == 401
    assert bad_key.json()["error"]["type"] == "authentication_error"
    assert (sample(**unknown), sample(**refused)) == (before[0] + 1, before[1] + 1)
    rows = list(
        GatewayExchange.objects.order_by("created_at").values_list(
            "application_id", "path", "http_status", "error_code"
        )
    )
    assert rows[-2][1:] == ("/gateway/openai/v1/nothing", 404, "not_found")
    assert rows[-2][0] is not None  # the key was known
    assert rows[-1] == (None, "/gateway/anthropic/v1/messages", 401, "not_authenticated")
    lines = [r.getMessage() for r in caplog.records if r.name == "contextproto.gateway"]
    assert any("status=404" in line and "code=not_found" in line for line in lines)
    assert any("status=401" in line and "requestId=" in line for line in lines)


def test_claude_codes_connectivity_probe_is_answered_and_not_counted_as_refused(gateway):
    """Claude Code probes `HEAD <base>/api/hello` once per run (docs/clients.md): a 404 there
    would show every working run as refused on the dashboard."""
    before = GatewayExchange.objects.count()
    assert gateway.client.head("/gateway/anthropic/api/hello").status_code == 200
    assert gateway.client.get("/gateway/anthropic/api/hello").status_code == 200
    assert GatewayExchange.objects.count() == before
    # The OpenAI base has no such probe: still an unknown path.
    assert gateway.client.head("/gateway/openai/v1/api/hello").status_code == 404


def test_an_output_limit_above_the_models_is_lowered_and_thinking_goes_to_anthropic_only(
    gateway, scripted
):
    """Contract §19 (issue 40 item 4): a client's max_tokens above the model's limit is
    lowered and named; Anthropic `thinking` reaches an Anthropic upstream and is named ignored
    for an OpenAI one."""
    thinking = {"type": "enabled", "budget_tokens": 2000}
    body = {
        "model": "helper",
        "max_tokens": 64000,
        "thinking": thinking,
        "messages": [{"role": "user", "content": "hi"}],
    }
    version = scripted([{"text": "ok"}], wire="anthropic-messages")
    version.model_config = {**version.model_config, "maxOutputTokens": 32768}
    version.save()
    reply = gateway.anthropic(body)
    assert reply.status_code == 200, reply.content
    assert reply["X-Contextproto-Adjusted"] == "max_tokens=64000->32768"
    assert "thinking" not in reply.get("X-Contextproto-Ignored", "")
    sent = ProjectionSnapshot.objects.get(session_id=reply["X-Contextproto-Session"]).request
    assert sent["max_tokens"] == 32768 and sent["thinking"] == thinking

    other = scripted([{"text": "ok"}], name="chatty", wire="openai-chat")
    assert other.pk
    reply = gateway.anthropic({**body, "model": "chatty"})
    assert reply.status_code == 200, reply.content
    assert "thinking" in reply["X-Contextproto-Ignored"].split(",")
    sent = ProjectionSnapshot.objects.get(session_id=reply["X-Contextproto-Session"]).request
    assert "thinking" not in sent
