"""`POST sessions/{id}/turns/` as a trace (contract §22), captured in memory.

One trace per request: the request's SERVER span, `invoke_agent {agent}` under it, and in
that the view span, the model call `chat {model}` with the usage the service recorded, and
one `execute_tool` per call the service answered. Every span names the session; contents
only when opted in; keys never; a caller's `traceparent` is continued.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from contextproto import telemetry
from sessions_app.models import ProjectionSnapshot
from tests.api.turn_bodies import MEMORY, openai_completion, turn

ROUTE = "POST /api/v1/sessions/{session_id}/turns/"
UPSTREAM_KEY = "sk-proj-UPSTREAMKEYdoNotLeak0123456789abcdef"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def _memory_turn(s, call_id: str = "call_A1", **headers):
    view = s.project("openai-chat")
    answer = openai_completion("Noting it first.", (call_id, "context_task_memory_set", MEMORY))
    response = s.client.client.post(
        f"/api/v1/{s.path('turns/')}",
        {"snapshotId": view["snapshotId"], "answer": answer},
        format="json",
        **headers,
    )
    assert response.status_code == 201, response.content
    return view, answer


def test_a_turn_is_one_trace_request_agent_view_model_call_and_tool(host, traces):
    s = host()
    view, answer = _memory_turn(s)

    root = traces.one(ROUTE)
    assert root.parent is None and root.kind is SpanKind.SERVER
    assert root.attributes["http.response.status_code"] == 201
    assert root.attributes["http.route"] == "/api/v1/sessions/{session_id}/turns/"
    agent = traces.one("invoke_agent ")
    assert agent.name == "invoke_agent assistant"
    assert traces.children(root) == ["invoke_agent assistant"]
    assert traces.children(agent) == [
        "context_view unified@2",
        "chat gpt-4.1-2025-04-14",
        "execute_tool context_task_memory_set",
    ]
    assert {s.context.trace_id for s in traces.spans()} == {root.context.trace_id}
    for span in traces.spans():
        assert span.attributes["gen_ai.conversation.id"] == s.id, span.name
        assert span.attributes["session.id"] == s.id, span.name
    for span in traces.spans()[:-1]:  # the session's spans (the root names it too)
        assert span.attributes["contextproto.protocol.id"] == "unified"
        assert span.attributes["contextproto.protocol.version"] == 2
        assert span.attributes["contextproto.snapshot.id"] == view["snapshotId"]
        assert span.attributes["contextproto.window.id"] == "main"
        assert span.attributes["gen_ai.agent.version"] == str(s.agent_version.number)

    chat = traces.one("chat ")
    recorded = ProjectionSnapshot.objects.get(id=view["snapshotId"])
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"  # the view's wire format
    assert chat.attributes["gen_ai.request.model"] == answer["model"]
    assert chat.attributes["gen_ai.response.model"] == answer["model"]
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-Bx1"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat.attributes["gen_ai.usage.input_tokens"] == recorded.input_tokens == 3512
    assert chat.attributes["gen_ai.usage.output_tokens"] == recorded.output_tokens == 48
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 3072
    assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0

    tool = traces.one("execute_tool ")
    assert tool.attributes["gen_ai.tool.name"] == "context_task_memory_set"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_A1"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["contextproto.tool.outcome"] == "ok"
    assert tool.attributes["contextproto.tool.replayed"] is False
    assert tool.status.status_code is StatusCode.UNSET

    shown = traces.one("context_view ")
    assert shown.attributes["contextproto.view.messages.shown"] == 1  # the input
    assert shown.attributes["contextproto.view.upper_bound"] == 1
    assert shown.attributes["contextproto.view.messages.folded"] == 0
    assert shown.attributes["contextproto.view.messages.covered"] == 0
    assert shown.attributes["contextproto.view.tokens_saved"] == 0


def test_the_cost_at_the_versions_prices_is_on_the_model_call(host, traces):
    s = host(prices={"input": 2, "output": 8, "cacheRead": 0.5, "cacheWrite": 2.5})
    view, _ = _memory_turn(s)

    cost = ProjectionSnapshot.objects.get(id=view["snapshotId"]).cost
    assert cost is not None and cost > 0
    assert traces.one("chat ").attributes["contextproto.usage.cost"] == pytest.approx(float(cost))


def test_contents_are_absent_unless_opted_in_and_keys_never_appear(host, traces):
    s = host()
    _memory_turn(s, HTTP_X_UPSTREAM_API_KEY=UPSTREAM_KEY)
    chat = traces.one("chat ")
    for name in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"):
        assert name not in chat.attributes
    assert "gen_ai.tool.call.arguments" not in traces.one("execute_tool ").attributes

    traces.clear()
    traces.capture(content=True)
    _memory_turn(s, "call_A2", HTTP_X_UPSTREAM_API_KEY=UPSTREAM_KEY)
    chat = traces.one("chat ")
    inputs = json.loads(chat.attributes["gen_ai.input.messages"])
    assert {
        "role": "user",
        "parts": [{"type": "text", "content": "What do 5000 units of A-100 cost?"}],
    } in inputs
    # The first turn's call and its result, as the view showed them to the model.
    assert inputs[3]["role"] == "tool" and inputs[3]["parts"][0]["id"] == "call_A1"
    system = json.loads(chat.attributes["gen_ai.system_instructions"])
    assert system[0]["type"] == "text" and "helpful agent" in system[0]["content"]
    output = json.loads(chat.attributes["gen_ai.output.messages"])
    assert output == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Noting it first."},
                {
                    "type": "tool_call",
                    "id": "call_A2",
                    "name": "context_task_memory_set",
                    "arguments": MEMORY,
                },
            ],
            "finish_reason": "tool_calls",
        }
    ]
    tool = traces.one("execute_tool ")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == MEMORY
    assert json.loads(tool.attributes["gen_ai.tool.call.result"])["success"] is True
    # Neither the session's key nor a key the caller sent beside it is in any span.
    for span in traces.spans():
        text = json.dumps(dict(span.attributes), default=str)
        assert UPSTREAM_KEY not in text and s.client.key not in text, span.name


def test_a_callers_traceparent_is_continued(host, traces):
    s = host()
    _memory_turn(
        s,
        HTTP_TRACEPARENT=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
        HTTP_TRACESTATE="vendor=opaque",
    )
    root = traces.one(ROUTE)
    assert format(root.context.trace_id, "032x") == CALLER_TRACE
    assert root.parent is not None and format(root.parent.span_id, "016x") == CALLER_SPAN
    assert root.parent.is_remote and root.context.trace_state.get("vendor") == "opaque"
    assert {format(s.context.trace_id, "032x") for s in traces.spans()} == {CALLER_TRACE}


def test_an_invalid_traceparent_starts_a_trace_of_its_own(host, traces):
    s = host()
    _memory_turn(s, HTTP_TRACEPARENT="00-not-a-trace-01")
    assert traces.one(ROUTE).parent is None


def test_a_replay_records_no_second_model_call_and_a_refusal_only_its_status(host, traces):
    s = host()
    view = s.project("openai-chat")
    body = {
        "snapshotId": view["snapshotId"],
        "answer": openai_completion("Noting.", ("call_A1", "context_task_memory_set", MEMORY)),
    }
    turn(s, body)
    traces.clear()

    turn(s, body, status=200)
    root = traces.one(ROUTE)
    assert root.attributes["contextproto.turn.replayed"] is True
    assert root.attributes["http.response.status_code"] == 200
    assert traces.named("chat ") == [] and traces.named("execute_tool ") == []

    traces.clear()
    other = {**body, "answer": openai_completion("Another answer.")}
    turn(s, other, status=409)
    root = traces.one(ROUTE)
    assert root.attributes["http.response.status_code"] == 409
    assert root.attributes["contextproto.error.code"] == "snapshot_already_answered"
    assert root.attributes["gen_ai.conversation.id"] == s.id  # a refusal is the session's too
    assert root.status.status_code is StatusCode.UNSET  # the client's error, not the server's
    assert traces.children(root) == []


def test_with_tracing_off_a_turn_records_nothing(host, traces):
    telemetry.configure(None)
    s = host()
    _memory_turn(s)
    assert traces.spans() == []
