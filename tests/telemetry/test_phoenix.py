"""Our traces in a real Arize Phoenix (contract §22, issue 41), read back through its own API.

One Phoenix for the module (it takes ~15 s to start); each test sends a session's traffic
through the service with tracing pointed at Phoenix's OTLP/HTTP endpoint, then reads the
spans back (`GET /v1/projects/default/spans`) and checks the tree, the attributes, token
counts equal to the session's recorded usage, `gen_ai.conversation.id` equal to the
session's id, and contents only when opted in.

Each path is one test over the same helpers (`_send`, `_read`, `_assert_session_spans`):
the turns endpoint and an MCP call now; the gateway conversation (a protocol call and a
client-tool round trip) is one more test of the same shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from contextproto import telemetry
from contextproto.telemetry.setup import otlp_queue
from tests.api.turn_bodies import MEMORY, openai_completion, turn
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
