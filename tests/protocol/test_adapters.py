"""Provider adapters (SPEC §4.5): neutral, OpenAI Chat Completions, Anthropic Messages."""

from __future__ import annotations

import json

import pytest

from contextproto.protocol.adapters import (
    DERIVED_EDGE_MARKER,
    FALLBACK_STRIDE,
    PROVIDERS,
    adapt,
)
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import ModelMessage, ProjectionSource
from contextproto.protocol.projection import Projection, project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.protocol.prefix_stability import strip_markers

TOOLS = [
    {
        "name": "search",
        "description": "Search the web.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


def _call(call_id: str, tool: str, arguments: dict | None = None) -> ModelMessage:
    """The model's tool_call `call_id` of `tool` in a view."""
    return ModelMessage(
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id=call_id,
        tool_name=tool,
        arguments=arguments if arguments is not None else {},
    )


def _result(call_id: str, content: str) -> ModelMessage:
    """The tool_result of `call_id` in a view."""
    return ModelMessage(role="tool", kind="tool_result", content=content, tool_call_id=call_id)


def _projection(messages: list[ModelMessage], errors: frozenset[str] = frozenset()) -> Projection:
    return Projection(
        messages=tuple(messages),
        sources=tuple(ProjectionSource(derived_type="raw", session_id="s") for _ in messages),
        window_id="main",
        revision=1,
        upper_bound=len(messages),
        run_id=None,
        protocol="unified@2",
        options={},
        error_tool_call_ids=errors,
    )


def _two_parallel_calls() -> Projection:
    return _projection(
        [
            ModelMessage(role="system", kind="system", content="sys"),
            ModelMessage(role="assistant", kind="context_header", content="header"),
            ModelMessage(role="user", kind="input", content="go"),
            _call("c1", "search", {"q": "Zürich"}),
            _call("c2", "fetch"),
            ModelMessage(
                role="tool", kind="tool_result", content="r1", tool_call_id="c1", tool_name="search"
            ),
            _result("c2", "r2"),
            ModelMessage(role="assistant", kind="context_state", content="{state}"),
        ],
        errors=frozenset({"c2"}),
    )


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ProtocolError) as caught:
        adapt(_two_parallel_calls(), "gemini")
    assert caught.value.code == "provider_unknown"
    assert caught.value.details["providers"] == list(PROVIDERS)


def test_neutral_is_the_internal_list() -> None:
    projection = _two_parallel_calls()
    request = adapt(projection, "neutral", TOOLS)
    assert request.body == {"messages": [m.to_wire() for m in projection.messages], "tools": TOOLS}
    assert request.notes == ()


def test_openai_merges_consecutive_tool_calls_into_one_assistant_message() -> None:
    body = adapt(_two_parallel_calls(), "openai-chat", TOOLS).body
    messages = body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    calls = messages[3]
    assert calls["content"] is None
    assert calls["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {
                "name": "search",
                "arguments": json.dumps({"q": "Zürich"}, ensure_ascii=False),
            },
        },
        {"id": "c2", "type": "function", "function": {"name": "fetch", "arguments": "{}"}},
    ]
    assert messages[4] == {"role": "tool", "tool_call_id": "c1", "content": "r1"}
    assert messages[5] == {"role": "tool", "tool_call_id": "c2", "content": "r2"}
    assert messages[0] == {"role": "system", "content": "sys"}
    assert messages[1] == {"role": "assistant", "content": "header"}
    assert messages[6] == {"role": "assistant", "content": "{state}"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the web.",
                "parameters": TOOLS[0]["inputSchema"],
            },
        }
    ]


def test_openai_omits_tools_when_there_are_none() -> None:
    assert "tools" not in adapt(_two_parallel_calls(), "openai-chat").body


def test_openai_tool_messages_follow_their_call_even_past_user_feedback() -> None:
    projection = _projection(
        [
            ModelMessage(role="system", kind="system", content="sys"),
            _call("c1", "deploy"),
            ModelMessage(role="user", kind="approval_feedback", content="approved"),
            _result("c1", "done"),
        ]
    )
    request = adapt(projection, "openai-chat")
    assert [m["role"] for m in request.body["messages"]] == ["system", "assistant", "tool", "user"]
    assert any("moved after the results" in n for n in request.notes)


def test_openai_renders_image_parts() -> None:
    projection = _projection(
        [
            ModelMessage(
                role="user",
                kind="input",
                content=[
                    {"type": "text", "text": "look"},
                    {"type": "image", "mediaType": "image/png", "data": "QUJD"},
                    {"type": "image", "url": "https://example.com/a.png"},
                ],
            ),
        ]
    )
    content = adapt(projection, "openai-chat").body["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]


def test_anthropic_separates_system_and_merges_same_role_messages() -> None:
    request = adapt(_two_parallel_calls(), "anthropic-messages", TOOLS)
    body = request.body
    assert body["system"] == "sys"
    roles = [m["role"] for m in body["messages"]]
    # header + input merge into the first user turn; the trailing state joins the results.
    assert roles == ["user", "assistant", "user"]
    assert body["messages"][0]["content"][0]["text"].endswith("header")
    assert body["messages"][0]["content"][1] == {"type": "text", "text": "go"}
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "Zürich"}},
        {"type": "tool_use", "id": "c2", "name": "fetch", "input": {}},
    ]
    assert body["messages"][2]["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "r1", "is_error": False},
        {"type": "tool_result", "tool_use_id": "c2", "content": "r2", "is_error": True},
    ]
    assert body["tools"] == [
        {
            "name": "search",
            "description": "Search the web.",
            "input_schema": TOOLS[0]["inputSchema"],
        }
    ]


def test_anthropic_sends_edge_derived_messages_as_marked_user_text() -> None:
    request = adapt(_two_parallel_calls(), "anthropic-messages")
    messages = request.body["messages"]
    assert messages[0]["role"] == "user" and messages[-1]["role"] == "user"
    first, last = messages[0]["content"][0]["text"], messages[-1]["content"][-1]["text"]
    assert first.startswith(DERIVED_EDGE_MARKER) and last == DERIVED_EDGE_MARKER + "{state}"
    assert any(
        "context_header, context_state" in n and "no user authority" in n for n in request.notes
    )
    assert not any("prefill" in n for n in request.notes)
    assert not any("first message after the system prompt" in n for n in request.notes)


def test_anthropic_keeps_a_fold_in_the_middle_as_an_assistant_turn() -> None:
    projection = _projection(
        [
            ModelMessage(role="assistant", kind="context_header", content="header"),
            ModelMessage(role="user", kind="input", content="go"),
            ModelMessage(role="assistant", kind="context_fold", content="fold summary"),
            ModelMessage(role="user", kind="input", content="more"),
        ]
    )
    roles = [m["role"] for m in adapt(projection, "anthropic-messages").body["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_anthropic_tool_results_merge_with_a_following_user_message() -> None:
    projection = _projection(
        [
            ModelMessage(role="user", kind="input", content="go"),
            _call("c1", "search"),
            _result("c1", "r1"),
            ModelMessage(role="user", kind="context_state", content="state"),
        ]
    )
    request = adapt(projection, "anthropic-messages")
    assert [m["role"] for m in request.body["messages"]] == ["user", "assistant", "user"]
    assert request.body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "r1", "is_error": False},
        {"type": "text", "text": "state"},
    ]
    assert not any("prefill" in n for n in request.notes)
    assert "system" not in request.body


def test_anthropic_puts_tool_results_first_in_their_user_turn() -> None:
    projection = _projection(
        [
            ModelMessage(role="user", kind="input", content="go"),
            _call("c1", "deploy"),
            ModelMessage(role="user", kind="approval_feedback", content="approved"),
            _result("c1", "done"),
        ]
    )
    request = adapt(projection, "anthropic-messages")
    blocks = request.body["messages"][2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]
    assert any("moved before other content" in n for n in request.notes)


def test_anthropic_renders_images_as_base64_or_url_sources() -> None:
    projection = _projection(
        [
            ModelMessage(
                role="user",
                kind="input",
                content=[
                    {"type": "image", "mediaType": "image/png", "data": "QUJD"},
                    {"type": "image", "url": "https://example.com/a.png"},
                ],
            ),
        ]
    )
    blocks = adapt(projection, "anthropic-messages").body["messages"][0]["content"]
    assert blocks == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    ]


def test_adapting_a_real_projection_keeps_every_message() -> None:
    log = LogBuilder(window="a")
    log.input("hi")
    call = log.call("search")
    log.result(call, "found", is_error=True)
    projection = project(
        make_input(log, window="a", version=3, options={"stateMessagePlacement": "trailing_user"})
    )
    openai = adapt(projection, "openai-chat").body["messages"]
    assert [m["role"] for m in openai] == [
        "system",
        "assistant",
        "user",
        "assistant",
        "tool",
        "user",
    ]
    anthropic = adapt(projection, "anthropic-messages")
    assert anthropic.body["messages"][-1]["content"][0]["is_error"] is True
    assert not any("prefill" in n for n in anthropic.notes)


# --------------------------------------------------------------------------- prompt caching


def _blocks_with_markers(body: dict) -> list[tuple[str, dict]]:
    return [
        (message["role"], block)
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]


def test_the_default_call_and_mode_off_add_no_cache_hints() -> None:
    projection = _two_parallel_calls()
    for provider in PROVIDERS:
        plain = adapt(projection, provider, TOOLS)
        off = adapt(projection, provider, TOOLS, prompt_cache=PROMPT_CACHE_OFF, cache_key="k")
        assert plain == off
        assert "cache_control" not in json.dumps(plain.body)
        assert "prompt_cache_key" not in plain.body
    # Caching changes no message of the neutral list.
    assert adapt(projection, "neutral", TOOLS, prompt_cache=PromptCache(), cache_key="k") == (
        adapt(projection, "neutral", TOOLS)
    )


def test_anthropic_marks_the_last_tool_the_system_and_the_last_history_block() -> None:
    tools = [*TOOLS, {"name": "fetch", "description": "Fetch.", "inputSchema": {}}]
    body = adapt(
        _two_parallel_calls(), "anthropic-messages", tools, prompt_cache=PromptCache()
    ).body
    assert body["system"] == [
        {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}
    ]
    assert ["cache_control" in t for t in body["tools"]] == [False, True]
    # The trailing state travels as marked user text in the results' message: the marker
    # is on the last result, not on the state.
    assert _blocks_with_markers(body) == [
        (
            "user",
            {
                "type": "tool_result",
                "tool_use_id": "c2",
                "content": "r2",
                "is_error": True,
                "cache_control": {"type": "ephemeral"},
            },
        )
    ]
    # Everything else is as without caching.
    plain = adapt(_two_parallel_calls(), "anthropic-messages", tools).body
    assert strip_markers(body["messages"]) == plain["messages"]
    assert strip_markers(body["tools"]) == plain["tools"]


def test_anthropic_never_marks_a_prefill_or_derived_text() -> None:
    projection = _projection(
        [
            ModelMessage(role="system", kind="system", content="sys"),
            ModelMessage(role="assistant", kind="context_header", content="header"),
            ModelMessage(role="user", kind="input", content="go"),
            ModelMessage(role="assistant", kind="text", content="answer"),
            ModelMessage(role="assistant", kind="context_state", content="{state}"),
        ]
    )
    body = adapt(
        projection, "anthropic-messages", assistant_prefill=True, prompt_cache=PromptCache()
    ).body
    # The answer and the state form the prefill: the marker goes on the input.
    assert body["messages"][-1]["role"] == "assistant"
    assert _blocks_with_markers(body) == [
        ("user", {"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}})
    ]
    # Without history there is nothing to mark but the system prompt.
    bare = _projection(
        [
            ModelMessage(role="system", kind="system", content="sys"),
            ModelMessage(role="assistant", kind="context_header", content="header"),
            ModelMessage(role="assistant", kind="context_state", content="{state}"),
        ]
    )
    body = adapt(bare, "anthropic-messages", prompt_cache=PromptCache()).body
    assert _blocks_with_markers(body) == []
    assert "cache_control" in body["system"][0]


def test_anthropic_anchors_on_folds_and_later_history_types_but_not_on_edges() -> None:
    messages = [
        ModelMessage(role="assistant", kind="context_header", content="header"),
        ModelMessage(role="user", kind="input", content="go"),
        ModelMessage(role="assistant", kind="context_fold", content="fold summary"),
        _call("c1", "search"),
        ModelMessage(role="tool", kind="tool_result", content="[masked]", tool_call_id="c1"),
        ModelMessage(role="assistant", kind="context_state", content="{state}"),
    ]
    kinds = ["context_header", "raw", "context_fold", "raw", "masked", "context_state"]
    projection = Projection(
        messages=tuple(messages),
        sources=tuple(ProjectionSource(derived_type=k, session_id="s") for k in kinds),
        window_id="main",
        revision=1,
        upper_bound=3,
        run_id=None,
        protocol="unified@4",
        options={},
    )
    body = adapt(projection, "anthropic-messages", prompt_cache=PromptCache(ttl="1h")).body
    assert _blocks_with_markers(body) == [
        (
            "user",
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": "[masked]",
                "is_error": False,
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        )
    ]
    # A fold after the last raw message travels as edge text: never marked.
    trailing_fold = Projection(
        messages=tuple(messages[:3]),
        sources=tuple(ProjectionSource(derived_type=k, session_id="s") for k in kinds[:3]),
        window_id="main",
        revision=1,
        upper_bound=1,
        run_id=None,
        protocol="unified@1",
        options={},
    )
    body = adapt(trailing_fold, "anthropic-messages", prompt_cache=PromptCache()).body
    assert body["messages"][-1]["content"][-1]["text"].startswith(DERIVED_EDGE_MARKER)
    assert [b["text"] for _, b in _blocks_with_markers(body)] == ["go"]


def test_anthropic_fallback_breakpoint_is_aligned_and_stays_put_while_history_grows() -> None:
    def view(exchanges: int) -> dict:
        messages = [
            ModelMessage(role="system", kind="system", content="sys"),
            ModelMessage(role="assistant", kind="context_header", content="header"),
            ModelMessage(role="user", kind="input", content="go"),
        ]
        for n in range(exchanges):
            messages += [_call(f"c{n}", "search"), _result(f"c{n}", f"r{n}")]
        messages.append(ModelMessage(role="assistant", kind="context_state", content="{s}"))
        return adapt(_projection(messages), "anthropic-messages", prompt_cache=PromptCache()).body

    def marked_positions(body: dict) -> list[int]:
        blocks = [b for m in body["messages"] for b in m["content"]]
        return [i for i, b in enumerate(blocks) if "cache_control" in b]

    # Blocks: 0 header, 1 input, then a tool_use and a tool_result per exchange, then state.
    # Up to 7 exchanges the last history block is within 16 blocks of the start: no fallback
    # (the header at 0 is not history, and the lookback reaches the start anyway).
    assert marked_positions(view(5)) == [11]
    assert marked_positions(view(7)) == [15]
    positions = {n: marked_positions(view(n)) for n in range(8, 20)}
    for n, (fallback, tail) in positions.items():
        assert tail == 2 * n + 1
        assert fallback % FALLBACK_STRIDE == 0
        assert 12 <= tail - fallback <= 15
    # Two blocks a turn: the fallback moves every other turn only.
    fallbacks = [positions[n][0] for n in range(8, 20)]
    assert fallbacks[::2] == fallbacks[1::2] == [4, 8, 12, 16, 20, 24]
