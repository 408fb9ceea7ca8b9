"""Prompt caching on the wire (contract §8): what the official SDKs send, for every mapping.

Requests are built by the real engine (log -> projection -> adapter) and sent through the
`anthropic` and `openai` SDKs to a local recording endpoint; the assertions read the body
the endpoint received.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextproto.protocol import adapters, catalog
from contextproto.protocol.adapter_anthropic import (
    DERIVED_EDGE_MARKER,
    FALLBACK_DISTANCE,
    FALLBACK_STRIDE,
)
from contextproto.protocol.derived_texts import HEADER_LEAD, STATE_LEAD
from contextproto.protocol.projection import Projection, project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache, session_cache_key
from sessions_app.providers.anthropic_messages import AnthropicMessagesProvider
from sessions_app.providers.openai_chat import OpenAIChatProvider
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.providers.servers import FakeAPI
from tests.providers.shapes import anthropic_messages_problems, openai_chat_problems

MAPPINGS = [
    pytest.param("prefix", 2, None, id="prefix@2"),
    pytest.param("unified", 1, None, id="unified@1"),
    pytest.param("unified", 2, None, id="unified@2"),
    *(
        pytest.param("unified", 3, placement, id=f"unified@3-{placement}")
        for placement in catalog.STATE_MESSAGE_PLACEMENTS
    ),
]
HOST_TOOL = {
    "name": "lookup",
    "description": "Look up a price.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
}
KEY_ENV = "TEST_CACHE_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-cache")


def _projection(protocol: str, version: int, placement: str | None, ending: str) -> Projection:
    """A run with more history blocks than Anthropic's lookback: an input, 14 host calls
    (one folded on unified protocols) and, with ending "text", a final assistant answer."""
    log = LogBuilder(window="main")
    log.input("Prepare a quote for ACME in Zürich")
    for n in range(14):
        call = log.call("lookup", {"q": f"item {n}"})
        log.result(call, f"price {n}: {100 + n}")
    if ending == "text":
        log.text("The quote is ready.")
    folds = [] if protocol == "prefix" else [log.fold("main", 4, 5, "looked up item 1")]
    options = {"stateMessagePlacement": placement} if placement else {}
    return project(
        make_input(log, protocol_id=protocol, version=version, folds=folds, options=options)
    )


def _tools(protocol: str, version: int) -> list[dict[str, Any]]:
    return [*catalog.get_version(protocol, version).tools.values(), HOST_TOOL]


def _send_anthropic(api: FakeAPI, body: dict[str, Any]) -> dict[str, Any]:
    AnthropicMessagesProvider({"baseUrl": api.url, "apiKeyEnv": KEY_ENV}).complete(
        body, model="claude-test"
    )
    return api.last.body


def _derived(text: str) -> bool:
    if text.startswith(DERIVED_EDGE_MARKER):
        return True
    return text.startswith((HEADER_LEAD, STATE_LEAD))


def _markers(body: dict[str, Any]) -> list[tuple]:
    """Every cache_control on the wire: ("tool", i), ("system", i), ("block", message, block,
    position), with position counting every message block from the start."""
    found: list[tuple] = []
    found += [("tool", i) for i, t in enumerate(body.get("tools") or ()) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        found += [("system", i) for i, b in enumerate(system) if "cache_control" in b]
    position = 0
    for m, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"]):
            if "cache_control" in block:
                found.append(("block", m, b, position))
            position += 1
    return found


def _anchorable(body: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(message, block, position) of the blocks a breakpoint may go on: history, not a
    prefill (blocks of a last assistant message)."""
    messages = body["messages"]
    out = []
    position = 0
    for m, message in enumerate(messages):
        prefill = m == len(messages) - 1 and message["role"] == "assistant"
        for b, block in enumerate(message["content"]):
            derived = block["type"] == "text" and _derived(block["text"])
            if not derived and not prefill:
                out.append((m, b, position))
            position += 1
    return out


@pytest.mark.parametrize("ending", ["result", "text"])
@pytest.mark.parametrize("prefill", [False, True], ids=["no-prefill", "prefill"])
@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_anthropic_breakpoints_on_the_wire(
    anthropic_api: FakeAPI,
    protocol: str,
    version: int,
    placement: str | None,
    prefill: bool,
    ending: str,
) -> None:
    request = adapters.adapt(
        _projection(protocol, version, placement, ending),
        "anthropic-messages",
        _tools(protocol, version),
        assistant_prefill=prefill,
        prompt_cache=PromptCache(),
    )
    sent = _send_anthropic(anthropic_api, request.body)

    # The SDK sends the adapter's body as built, markers included.
    assert sent["system"] == request.body["system"]
    assert sent["messages"] == request.body["messages"]
    assert sent["tools"] == request.body["tools"]
    assert anthropic_messages_problems(sent, turn_rules=False) == []
    markers = _markers(sent)
    assert 1 <= len(markers) <= 4
    assert all(
        m == {"type": "ephemeral"}
        for m in [t.get("cache_control") for t in sent["tools"]]
        + [b.get("cache_control") for b in sent["system"]]
        if m is not None
    )
    # One on the last tool, one on the system prompt (sent as text blocks).
    assert [m for m in markers if m[0] == "tool"] == [("tool", len(sent["tools"]) - 1)]
    assert isinstance(sent["system"], list) and sent["system"][-1]["type"] == "text"
    assert [m for m in markers if m[0] == "system"] == [("system", len(sent["system"]) - 1)]
    assert sent["system"][0]["text"].startswith("You are an agent.")

    # On the history: never on a derived header or state (as user text or not), never on a
    # prefill; the last one on the last history block, the fallback 12-15 blocks before it.
    blocks = [m for m in markers if m[0] == "block"]
    anchorable = _anchorable(sent)
    assert {m[1:] for m in blocks} <= set(anchorable)
    last = anchorable[-1]
    assert blocks[-1][1:] == last
    assert len(blocks) == 2
    fallback = blocks[0][3]
    target = (last[2] - FALLBACK_DISTANCE) // FALLBACK_STRIDE * FALLBACK_STRIDE
    assert fallback == max(p for _m, _b, p in anchorable if p <= target)
    assert last[2] - 16 < fallback <= last[2] - FALLBACK_DISTANCE

    messages = sent["messages"]
    state_blocks = [
        (m, b)
        for m, message in enumerate(messages)
        for b, block in enumerate(message["content"])
        if block["type"] == "text" and STATE_LEAD in block["text"]
    ]
    assert len(state_blocks) == (0 if protocol == "prefix" or version == 1 else 1)
    for m, b in state_blocks:
        assert "cache_control" not in messages[m]["content"][b]
    if messages[-1]["role"] == "assistant":
        assert prefill or ending == "text"
        assert not any("cache_control" in block for block in messages[-1]["content"])


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_anthropic_one_hour_ttl_is_on_every_marker(
    anthropic_api: FakeAPI, protocol: str, version: int, placement: str | None
) -> None:
    body = adapters.adapt(
        _projection(protocol, version, placement, "result"),
        "anthropic-messages",
        _tools(protocol, version),
        prompt_cache=PromptCache(ttl="1h"),
    ).body
    sent = _send_anthropic(anthropic_api, body)
    text = json.dumps(sent)
    assert text.count('"cache_control"') == 4
    assert text.count('"cache_control": {"type": "ephemeral", "ttl": "1h"}') == 4


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
@pytest.mark.parametrize("cache", [PROMPT_CACHE_OFF, None], ids=["mode-off", "default-call"])
def test_anthropic_without_caching_sends_no_marker(
    anthropic_api: FakeAPI,
    protocol: str,
    version: int,
    placement: str | None,
    cache: PromptCache | None,
) -> None:
    projection = _projection(protocol, version, placement, "result")
    tools = _tools(protocol, version)
    options = {} if cache is None else {"prompt_cache": cache}
    sent = _send_anthropic(
        anthropic_api, adapters.adapt(projection, "anthropic-messages", tools, **options).body
    )
    assert "cache_control" not in json.dumps(sent)
    assert isinstance(sent["system"], str) and sent["system"].startswith("You are an agent.")


def test_a_short_view_gets_no_fallback(anthropic_api: FakeAPI) -> None:
    log = LogBuilder(window="main")
    log.input("hi")
    log.exchange("lookup")
    body = adapters.adapt(
        project(make_input(log)), "anthropic-messages", [HOST_TOOL], prompt_cache=PromptCache()
    ).body
    sent = _send_anthropic(anthropic_api, body)
    # header + input | tool_use | tool_result + state: the tail on the result only.
    assert [m for m in _markers(sent) if m[0] == "block"] == [("block", 2, 0, 3)]
    assert len(_markers(sent)) == 3


def _send_openai(api: FakeAPI, body: dict[str, Any]) -> dict[str, Any]:
    OpenAIChatProvider({"baseUrl": f"{api.url}/v1", "apiKeyEnv": KEY_ENV}).complete(
        body, model="gpt-test"
    )
    return api.last.body


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_openai_prompt_cache_key_on_the_wire(
    openai_api: FakeAPI, protocol: str, version: int, placement: str | None
) -> None:
    key = session_cache_key("5b7c5d1e-0000-4000-8000-000000000001")
    projection = _projection(protocol, version, placement, "result")
    body = adapters.adapt(
        projection,
        "openai-chat",
        _tools(protocol, version),
        prompt_cache=PromptCache(),
        cache_key=key,
    ).body
    sent = _send_openai(openai_api, body)
    assert openai_chat_problems(sent) == []
    assert sent["prompt_cache_key"] == key
    assert sent["messages"] == body["messages"] and sent["tools"] == body["tools"]
    assert "cache_control" not in json.dumps(sent)

    for options in ({"prompt_cache": PROMPT_CACHE_OFF, "cache_key": key}, {"cache_key": key}):
        quiet = adapters.adapt(projection, "openai-chat", _tools(protocol, version), **options)
        assert "prompt_cache_key" not in _send_openai(openai_api, quiet.body)
