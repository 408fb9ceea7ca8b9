"""Our traces in a real Arize Phoenix (contract §22, issue 41), read back through its own API.

One Phoenix for the module (it takes ~15 s to start); each test sends a session's traffic
through the service with tracing pointed at Phoenix's OTLP/HTTP endpoint, then reads the
spans back (`GET /v1/projects/default/spans`) and checks the tree, the attributes, token
counts equal to the session's recorded usage, `gen_ai.conversation.id` equal to the
session's id, and contents only when opted in.

Each path is one test over the same helpers (`_read`, `_assert_session_spans`): the turns
endpoint, an MCP call, and a gateway conversation (a protocol call and a client-tool round
trip, gateway_conversation.py's).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from django.test import Client as DjangoClient

from contextproto import telemetry
from contextproto.telemetry.setup import otlp_queue
from tests.api.turn_bodies import MEMORY, openai_completion, turn
from tests.telemetry.gateway_conversation import ROOT as GATEWAY_ROOT
from tests.telemetry.gateway_conversation import converse
from tests.telemetry.phoenix import Phoenix, Span, children, named, one
from tests.telemetry.test_mcp_traces import _call as mcp_call

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[Phoenix]:
    server = Phoenix(tmp_path_factory.mktemp("phoenix")).start()
    yield server
    server.stop()


@pytest.fixture
def to_phoenix(phoenix) -> Iterator[Callable[..., None]]:
    """Point this process's tracing at Phoenix (contents off unless asked); off afterwards."""

    def point(*, content: bool = False) -> None:
        telemetry.configure(lambda: otlp_queue(phoenix.traces_endpoint), capture_content=content)

    point()
    yield point
    telemetry.configure(None)


def _read(phoenix: Phoenix, session_id: str, expected: int) -> list[Span]:
    """Every span of every trace that names the session, once Phoenix has `expected`."""
    assert telemetry.flush()  # sent now, not at the queue's next tick
    deadline = time.monotonic() + 30
    while True:
        named_session = phoenix.spans(attribute=[f"gen_ai.conversation.id:{session_id}"])
        traces = sorted({s["context"]["trace_id"] for s in named_session})
        found = phoenix.spans(trace_id=traces) if traces else []
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.3)  # Phoenix writes what it received in the background


def _assert_session_spans(spans: list[Span], session_id: str) -> None:
    """What every span of a session's trace says, as Phoenix stored it."""
    for span in spans:
        attributes = span["attributes"]
        assert attributes["gen_ai.conversation.id"] == session_id, span["name"]
        assert attributes["session.id"] == session_id, span["name"]
        assert attributes["contextproto.protocol.id"] == "unified", span["name"]


def _send_turns(s, count: int) -> list[dict]:
    """`count` host turns through the turns endpoint, each a protocol call; their views."""
    views = []
    for n in range(count):
        view = s.project("openai-chat")
        answer = openai_completion(
            f"Noting it ({n}).", (f"call_T{n}", "context_task_memory_set", MEMORY)
        )
        turn(s, {"snapshotId": view["snapshotId"], "answer": answer})
        views.append(view)
    return views


def test_turns_endpoint_traces_in_phoenix(host, phoenix, to_phoenix):
    s = host()
    _send_turns(s, 2)

    spans = _read(phoenix, s.id, expected=2 * 5)

    _assert_session_spans(spans, s.id)
    roots = [x for x in spans if x["parent_id"] is None]
    assert [r["name"] for r in roots] == ["POST /api/v1/sessions/{session_id}/turns/"] * 2
    assert {r["attributes"]["http.response.status_code"] for r in roots} == {201}
    for root in roots:
        trace = [x for x in spans if x["context"]["trace_id"] == root["context"]["trace_id"]]
        agent = one(trace, "invoke_agent ")
        assert agent["span_kind"] == "AGENT" and children(trace, root) == [agent["name"]]
        assert children(trace, agent) == [
            "context_view unified@2",
            "chat gpt-4.1-2025-04-14",
            "execute_tool context_task_memory_set",
        ]
        assert one(trace, "chat ")["span_kind"] == "LLM"
        assert one(trace, "execute_tool ")["span_kind"] == "TOOL"
        assert one(trace, "execute_tool ")["attributes"]["contextproto.tool.outcome"] == "ok"
    # The tokens Phoenix holds are the session's recorded usage, turn for turn.
    usage = s.client.get(s.path()).json()["usage"]
    chats = named(spans, "chat ")
    assert (
        sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats) == (usage["inputTokens"])
    )
    assert (
        sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in chats) == (usage["outputTokens"])
    )
    assert sum(c["attributes"]["llm.token_count.prompt"] for c in chats) == usage["inputTokens"]
    assert (
        sum(c["attributes"]["gen_ai.usage.cache_read.input_tokens"] for c in chats)
        == (usage["cacheReadInputTokens"])
    )
    # Contents are not opted in: neither ours nor Phoenix's rendering of them.
    for span in spans:
        assert not any(
            k.startswith(("gen_ai.input.", "gen_ai.output.", "llm.input_messages"))
            or k == "gen_ai.system_instructions"
            for k in span["attributes"]
        ), span["name"]


def test_contents_reach_phoenix_only_when_opted_in(host, phoenix, to_phoenix):
    to_phoenix(content=True)
    s = host()
    _send_turns(s, 1)

    spans = _read(phoenix, s.id, expected=5)

    chat = one(spans, "chat ")
    assert "What do 5000 units of A-100 cost?" in chat["attributes"]["gen_ai.input.messages"]
    assert "Noting it (0)." in chat["attributes"]["gen_ai.output.messages"]
    assert chat["attributes"]["llm.output_messages.0.message.role"] == "assistant"
    for span in spans:
        assert s.client.key not in str(span["attributes"]), span["name"]


def test_mcp_call_traces_in_phoenix(api_session, phoenix, to_phoenix):
    s = api_session(version=2)
    s.input("start")
    mcp_call(s.client.key, "context_task_memory_set", {"purpose": "p", "memory": "m"})

    spans = _read(phoenix, s.id, expected=2)

    _assert_session_spans(spans, s.id)
    server = one(spans, "tools/call context_task_memory_set")
    assert server["parent_id"] is None
    assert children(spans, server) == ["execute_tool context_task_memory_set"]
    tool = one(spans, "execute_tool ")
    assert tool["span_kind"] == "TOOL"
    assert tool["attributes"]["gen_ai.tool.call.id"] == "mcp_context_task_memory_set"
    assert tool["attributes"]["contextproto.tool.outcome"] == "ok"


def test_gateway_conversation_traces_in_phoenix(gateway, phoenix, to_phoenix):
    client, key = gateway
    session, _replies = converse(client)

    spans = _read(phoenix, session, expected=2 + 2 + 5 + 2)

    _assert_session_spans(spans, session)
    roots = [x for x in spans if x["parent_id"] is None]
    assert [r["name"] for r in roots] == [GATEWAY_ROOT] * 2
    assert {r["attributes"]["http.response.status_code"] for r in roots} == {200}
    first, second = sorted(roots, key=lambda r: r["start_time"])
    for root, turns in ((first, 2), (second, 1)):
        trace = [x for x in spans if x["context"]["trace_id"] == root["context"]["trace_id"]]
        agent = one(trace, "invoke_agent ")
        assert agent["span_kind"] == "AGENT" and children(trace, root) == [agent["name"]]
        assert len(named(trace, "chat ")) == turns
        assert {c["span_kind"] for c in named(trace, "chat ")} == {"LLM"}
    tool = one(spans, "execute_tool ")  # the protocol call; the client's ran at the client
    assert tool["name"] == "execute_tool context_task_memory_set"
    assert tool["attributes"]["contextproto.tool.outcome"] == "ok"
    usage = (
        DjangoClient()
        .get(f"/api/v1/sessions/{session}/", HTTP_AUTHORIZATION=f"Bearer {key}")
        .json()["usage"]
    )
    chats = named(spans, "chat ")
    assert sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats) == usage["inputTokens"]
    assert (
        sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in chats) == usage["outputTokens"]
    )
    for span in spans:
        assert not any(
            k.startswith(("gen_ai.input.", "llm.input_messages")) for k in span["attributes"]
        )
