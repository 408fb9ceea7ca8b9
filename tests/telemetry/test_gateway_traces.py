"""A gateway conversation's traces (contract §16, SPEC §22, issue 41): one trace per request,
the request's root span over the agent's, in it a `chat` span per model call with the view
and protocol tool spans beside it; a client tool's call is the client's (no span here); a
caller's `traceparent` continued; the session named on every span.

Spans in memory (the `traces` fixture); the same conversation read back from a real Phoenix is
in test_phoenix.py.
"""

from __future__ import annotations

from django.test import Client
from opentelemetry.trace import SpanKind

from sessions_app.gateway import drive
from tests.telemetry.conftest import Traces
from tests.telemetry.gateway_conversation import ROOT, converse

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def test_a_gateway_conversation_is_a_trace_per_request_with_the_agents_turns(
    gateway, traces: Traces
):
    client, key = gateway
    session, _replies = converse(client)

    roots = [s for s in traces.spans() if s.parent is None]
    assert [r.name for r in roots] == [ROOT, ROOT]
    assert all(r.kind is SpanKind.SERVER for r in roots)
    assert [r.attributes["http.response.status_code"] for r in roots] == [200, 200]
    agents = traces.named("invoke_agent ")
    assert len(agents) == 2
    # The first request: the protocol call ran here (its tool span), the client's call was
    # handed over (none); the second: the client's result, then the answer.
    assert traces.children(agents[0]) == [
        "chat test-model",
        "context_view unified@2",
        "execute_tool context_task_memory_set",
        "chat test-model",
        "context_view unified@2",
    ]
    assert traces.children(agents[1]) == ["chat test-model", "context_view unified@2"]
    for root, agent in zip(roots, agents, strict=True):
        assert traces.children(root) == [agent.name]
        assert agent.attributes["contextproto.turn.source"] == "gateway"
    for span in traces.spans():
        assert span.attributes["gen_ai.conversation.id"] == session, span.name
        assert span.attributes["session.id"] == session, span.name
    # The tokens on the chat spans are the session's recorded usage.
    usage = (
        Client()
        .get(f"/api/v1/sessions/{session}/", HTTP_AUTHORIZATION=f"Bearer {key}")
        .json()["usage"]
    )
    chats = traces.named("chat ")
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == usage["inputTokens"]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == usage["outputTokens"]
    assert usage["inputTokens"] == 300 + 320 + 350
    # Contents are not opted in.
    for span in traces.spans():
        assert not any(k.startswith(("gen_ai.input.", "gen_ai.output.")) for k in span.attributes)


def test_a_gateway_callers_traceparent_is_continued(gateway, traces: Traces):
    client, _key = gateway
    converse(client, traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
    first = next(s for s in traces.spans() if s.name == ROOT)
    assert format(first.context.trace_id, "032x") == CALLER_TRACE
    assert first.parent is not None and format(first.parent.span_id, "016x") == CALLER_SPAN
    assert first.parent.is_remote


def test_a_gateway_turn_is_described_once_its_reply_is_complete(gateway, traces, monkeypatch):
    """Describing a turn (its usage, the view's effect, the tool spans) reads what the turn
    wrote; the client does not wait for it: it runs once the reply is out, when the request's
    root span has ended (issue 41: tracing must not slow the gateway down)."""
    roots_ended: list[int] = []
    described = drive.turn_recorded

    def recorded(*args: object, **kwargs: object) -> None:
        roots_ended.append(len([s for s in traces.spans() if s.name == ROOT]))
        described(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(drive, "turn_recorded", recorded)
    converse(gateway[0])
    # The first request's two turns after its reply, the second's one after its own.
    assert roots_ended == [1, 1, 2]
    # Described late, the spans still stand where the turn happened: each request's view and
    # tool spans between its chat span's end and the next chat's start.
    chats = sorted(traces.named("chat "), key=lambda s: s.start_time or 0)
    views = sorted(traces.named("context_view "), key=lambda s: s.start_time or 0)
    assert len(chats) == len(views) == 3
    for chat, view in zip(chats, views, strict=True):
        assert view.start_time == view.end_time == chat.end_time
