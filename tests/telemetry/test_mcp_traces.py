"""An MCP `tools/call` over HTTP as a trace (contract §22): the MCP SDK's `tools/call` server
span, our `execute_tool` under it with the receipt's outcome, both naming the session; a
caller's `traceparent` header continued."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tests.api.test_mcp_http import call_body, headers, request, tool_result
from tests.telemetry.test_turn_traces import CALLER_SPAN, CALLER_TRACE

pytestmark = pytest.mark.django_db(transaction=True)


def _call(key: str, tool: str, arguments: dict, **extra: str) -> dict:
    body = call_body("2025-11-25", tool, arguments, {"toolCallId": f"mcp_{tool}"})
    status, _headers, answer, _seconds = request(
        "POST", content=body, headers={**headers(key), **extra}
    )
    return tool_result(status, answer)


def test_a_tool_call_is_the_sdks_server_span_with_our_execute_tool_under_it(api_session, traces):
    s = api_session(version=2)
    s.input("start")

    result = _call(
        s.client.key,
        "context_task_memory_set",
        {"purpose": "p", "memory": "m"},
        traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
    )

    assert result["success"] is True
    server = traces.one("tools/call context_task_memory_set")
    assert server.kind is SpanKind.SERVER
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.conversation.id"] == s.id
    # The caller's trace, from its HTTP header.
    assert format(server.context.trace_id, "032x") == CALLER_TRACE
    assert server.parent is not None and format(server.parent.span_id, "016x") == CALLER_SPAN
    tool = traces.one("execute_tool ")
    assert tool.parent is not None and tool.parent.span_id == server.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "context_task_memory_set"
    assert tool.attributes["gen_ai.tool.call.id"] == "mcp_context_task_memory_set"
    assert tool.attributes["gen_ai.conversation.id"] == s.id
    assert tool.attributes["contextproto.tool.outcome"] == "ok"
    assert tool.attributes["contextproto.window.id"] == "main"
    assert "gen_ai.tool.call.arguments" not in tool.attributes


def test_a_refused_call_names_its_code_and_contents_come_only_when_opted_in(api_session, traces):
    s = api_session(version=2)
    s.input("start")
    traces.capture(content=True)

    arguments = {"purpose": "p", "memory": "m", "expectedWindowId": "nowhere"}
    result = _call(s.client.key, "context_window_memory_set", arguments)

    assert result["error"]["code"] == "context_window_mismatch"
    tool = traces.one("execute_tool ")
    assert tool.attributes["error.type"] == "context_window_mismatch"
    assert tool.attributes["contextproto.tool.outcome"] == "context_window_mismatch"
    assert tool.status.status_code is StatusCode.ERROR
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == arguments
    assert traces.one("tools/call ").parent is None  # no caller trace: a trace of its own
    for span in traces.spans():
        assert s.client.key not in json.dumps(dict(span.attributes), default=str)
