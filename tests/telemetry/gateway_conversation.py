"""The gateway conversation the trace tests send (test_gateway_traces.py, test_phoenix.py): a
scripted helper that makes a protocol call and calls the client's tool, then answers."""

from __future__ import annotations

from typing import Any

from agents.services import application_create
from tests.gateway.conftest import PROMPT, Gateway

ROOT = "POST /gateway/openai/v1/chat/completions"
LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
NOTE = {"name": "context_task_memory_set", "arguments": {"purpose": "p", "memory": "Oslo"}}
STEPS = [
    {"text": "Noting it.", "toolCalls": [NOTE], "usage": {"inputTokens": 300, "outputTokens": 20}},
    {
        "toolCalls": [{"name": "lookup", "arguments": {"city": "Oslo"}}],
        "usage": {"inputTokens": 320, "outputTokens": 10},
    },
    {"text": "Sunny in Oslo.", "usage": {"inputTokens": 350, "outputTokens": 6}},
]


def gateway_on_helper(make_version: Any) -> tuple[Gateway, str]:
    """A new Application's gateway (its key) on a scripted helper playing STEPS."""
    application, key = application_create(name="Traced Co")
    make_version(
        application,
        name="helper",
        provider="scripted",
        model_config={"steps": STEPS, "wireFormat": "openai-chat"},
        system_prompt=PROMPT,
    )
    return Gateway(key), key


def converse(gateway: Gateway, **headers: str) -> tuple[str, list[Any]]:
    """The conversation: a protocol call and a client-tool call, then the tool's result and the
    answer. Returns the session and the two replies."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = gateway.openai(
        {"model": "helper", "tools": [LOOKUP], "messages": messages}, headers=headers
    )
    assert first.status_code == 200, first.content
    call = first.json()["choices"][0]["message"]
    messages += [
        call,
        {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "sunny"},
    ]
    second = gateway.openai({"model": "helper", "tools": [LOOKUP], "messages": messages})
    assert second.status_code == 200, second.content
    return first["X-Contextproto-Session"], [first, second]
