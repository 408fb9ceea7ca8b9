"""Provider adapters (contract §4.5): neutral, OpenAI Chat Completions, Anthropic Messages."""

from __future__ import annotations

import json

import pytest

from contextproto.protocol import catalog
from contextproto.protocol.adapter_anthropic import DERIVED_EDGE_MARKER, FALLBACK_STRIDE
from contextproto.protocol.adapters import PROVIDERS, adapt
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import ModelMessage, ProjectionSource
from contextproto.protocol.projection import Projection, project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.protocol.prefix_stability import strip_markers
from tests.providers.shapes import anthropic_messages_problems, openai_chat_problems

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


# --------------------------------------------------------------------------- answers as given

# (protocol, version, stateMessagePlacement): every mapping of the catalog.
MAPPINGS = [
    pytest.param("prefix", 2, None, id="prefix@2"),
    pytest.param("unified", 1, None, id="unified@1"),
    pytest.param("unified", 2, None, id="unified@2"),
    *(
        pytest.param("unified", 3, placement, id=f"unified@3-{placement}")
        for placement in catalog.STATE_MESSAGE_PLACEMENTS
    ),
    pytest.param("unified", 4, None, id="unified@4"),
]
THINKING = {"type": "thinking", "thinking": "The price list has it.", "signature": "c2lnLTE="}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
LATER_THINKING = {"type": "thinking", "thinking": "Now answer.", "signature": "c2lnLTI="}
BESIDE = "I look the price up."
ANSWER = "It costs 42."


def _answered_log() -> LogBuilder:
    """An input, an answer with thinking and text beside its call, the result, a text answer
    with thinking, and the next input: every answer is history in the view after it."""
    log = LogBuilder()
    log.input("What does it cost?")
    call = log.call(
        "lookup",
        {"q": "price"},
        call_id="c1",
        content=[THINKING, REDACTED, {"type": "text", "text": BESIDE}],
    )
    log.result(call, "42")
    log.text([LATER_THINKING, {"type": "text", "text": ANSWER}])
    log.input("Thanks. And shipping?")
    return log


def _view(log: LogBuilder, protocol: str, version: int, placement: str | None) -> Projection:
    options = {"stateMessagePlacement": placement} if placement else {}
    return project(make_input(log, protocol_id=protocol, version=version, options=options))


def _assistant_turn_with(body: dict, block_type: str) -> list[dict]:
    return next(
        m["content"]
        for m in body["messages"]
        if m["role"] == "assistant" and any(b["type"] == block_type for b in m["content"])
    )


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_later_views_show_the_text_beside_a_call_and_thinking_per_provider(
    protocol: str, version: int, placement: str | None
) -> None:
    projection = _view(_answered_log(), protocol, version, placement)
    call = next(m for m in projection.messages if m.kind == "tool_call")

    # neutral: the stored content, thinking included.
    neutral = adapt(projection, "neutral", TOOLS).body["messages"]
    assert {"role": "assistant", **call.to_wire()} in neutral
    assert call.content == [THINKING, REDACTED, {"type": "text", "text": BESIDE}]

    # openai-chat: the text beside tool_calls; no thinking anywhere.
    openai = adapt(projection, "openai-chat", TOOLS).body
    calls = next(m for m in openai["messages"] if m.get("tool_calls"))
    assert calls["content"] == BESIDE
    assert [c["id"] for c in calls["tool_calls"]] == ["c1"]
    assert {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]} in openai[
        "messages"
    ]
    sent = json.dumps(openai, ensure_ascii=False)
    assert "thinking" not in sent and "signature" not in sent and "The price list" not in sent
    assert openai_chat_problems({"model": "m", **openai}) == []

    # anthropic-messages: thinking first as stored, then the text, then the call.
    for cache in (PROMPT_CACHE_OFF, PromptCache()):
        anthropic = adapt(projection, "anthropic-messages", TOOLS, prompt_cache=cache).body
        assert strip_markers(_assistant_turn_with(anthropic, "tool_use")) == [
            THINKING,
            REDACTED,
            {"type": "text", "text": BESIDE},
            {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "price"}},
        ]
        assert strip_markers(_assistant_turn_with(anthropic, "thinking")[:1]) == [THINKING]
        answer = [
            m["content"]
            for m in anthropic["messages"]
            if m["role"] == "assistant" and m["content"][0] == LATER_THINKING
        ]
        assert strip_markers(answer) == [[LATER_THINKING, {"type": "text", "text": ANSWER}]]
        request = {"model": "m", "max_tokens": 1, **anthropic}
        assert anthropic_messages_problems(request, turn_rules=False) == []


def test_openai_keeps_one_message_per_answer_and_joins_a_later_calls_text() -> None:
    log = LogBuilder()
    log.input("go")
    first = log.call("lookup", call_id="c1", content=[THINKING, {"type": "text", "text": "One."}])
    second = log.call("fetch", call_id="c2", content="Two.")
    third = log.call("fetch", call_id="c3")
    for call_id in (first, second, third):
        log.result(call_id, "r")
    request = adapt(project(make_input(log)), "openai-chat", TOOLS)
    calls = [m for m in request.body["messages"] if m.get("tool_calls")]
    assert len(calls) == 1
    assert calls[0]["content"] == "One.\n\nTwo."
    assert [c["id"] for c in calls[0]["tool_calls"]] == ["c1", "c2", "c3"]
    assert any("tool call c2 joins the content" in n for n in request.notes)
    # A later call's text is the content when the first call has none.
    log = LogBuilder()
    log.input("go")
    for n, content in enumerate(("", "Only the second.")):
        log.call("lookup", call_id=f"c{n}", content=content)
    for n in range(2):
        log.result(f"c{n}", "r")
    body = adapt(project(make_input(log)), "openai-chat", TOOLS).body
    assert next(m for m in body["messages"] if m.get("tool_calls"))["content"] == (
        "Only the second."
    )


def test_a_call_without_text_is_sent_as_before() -> None:
    body = adapt(_two_parallel_calls(), "openai-chat", TOOLS).body
    assert body["messages"][3]["content"] is None
    blocks = adapt(_two_parallel_calls(), "anthropic-messages", TOOLS).body["messages"][1]
    assert [b["type"] for b in blocks["content"]] == ["tool_use", "tool_use"]


def test_an_answer_that_only_thought_is_still_a_valid_message_for_each_provider() -> None:
    log = LogBuilder()
    log.input("go")
    call = log.call("lookup", call_id="c1", content=[REDACTED])
    log.result(call, "r")
    log.text([THINKING])
    log.text([LATER_THINKING, {"type": "text", "text": ""}])
    log.input("next")
    projection = project(make_input(log))

    openai = adapt(projection, "openai-chat", TOOLS).body
    assistant = [m for m in openai["messages"] if m["role"] == "assistant"][1:]  # header first
    assert assistant[0]["content"] is None
    assert [c["id"] for c in assistant[0]["tool_calls"]] == ["c1"]
    # An empty parts list is refused by Chat Completions; an empty string is a message.
    assert [m["content"] for m in assistant[1:3]] == ["", [{"type": "text", "text": ""}]]
    assert openai_chat_problems({"model": "m", **openai}) == []

    anthropic = adapt(projection, "anthropic-messages", TOOLS).body
    turns = [m["content"] for m in anthropic["messages"] if m["role"] == "assistant"]
    # The two thinking-only answers merge into one assistant turn; no empty text is sent.
    assert turns == [
        [REDACTED, {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "x"}}],
        [THINKING, LATER_THINKING],
    ]
    request = {"model": "m", "max_tokens": 1, **anthropic}
    assert anthropic_messages_problems(request) == []


def test_anthropic_puts_thinking_first_in_a_merged_assistant_turn_and_says_so() -> None:
    log = LogBuilder()
    log.input("go")
    log.text("Let me look.")  # an earlier answer of the same assistant turn
    call = log.call("lookup", call_id="c1", content=[THINKING, {"type": "text", "text": BESIDE}])
    log.result(call, "r")
    request = adapt(project(make_input(log)), "anthropic-messages", TOOLS)
    turn = _assistant_turn_with(request.body, "tool_use")
    assert [b["type"] for b in turn] == ["thinking", "text", "text", "tool_use"]
    assert [b.get("text") for b in turn[1:3]] == ["Let me look.", BESIDE]
    assert any("were moved to the start of its assistant turn" in n for n in request.notes)
    # Thinking already first: nothing moves, nothing is noted.
    alone = adapt(project(make_input(_answered_log())), "anthropic-messages", TOOLS)
    assert not any("moved to the start" in n for n in alone.notes)


def test_user_and_tool_messages_never_send_thinking_parts() -> None:
    # Only answers may store them (the service refuses them elsewhere); an adapter that is
    # handed one anyway leaves it out rather than send a thinking block in a user turn.
    projection = _projection(
        [
            ModelMessage(
                role="user", kind="input", content=[THINKING, {"type": "text", "text": "hi"}]
            ),
            _call("c1", "search"),
            _result("c1", "r"),
        ]
    )
    for provider in ("openai-chat", "anthropic-messages"):
        body = adapt(projection, provider).body
        assert "signature" not in json.dumps(body), provider


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_requests_with_tools_ask_for_one_tool_call_per_answer(
    protocol: str, version: int, placement: str | None
) -> None:
    projection = _view(_answered_log(), protocol, version, placement)
    tools = [*catalog.get_version(protocol, version).tools.values(), *TOOLS]
    for cache in (PROMPT_CACHE_OFF, PromptCache()):
        openai = adapt(projection, "openai-chat", tools, prompt_cache=cache, cache_key="k").body
        anthropic = adapt(projection, "anthropic-messages", tools, prompt_cache=cache).body
        assert openai["parallel_tool_calls"] is False
        assert anthropic["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
        # Fixed key order: the same bytes every turn.
        assert list(openai)[:3] == ["messages", "tools", "parallel_tool_calls"]
        assert list(anthropic)[-2:] == ["tools", "tool_choice"]
    # Without tools, neither (OpenAI refuses parallel_tool_calls without tools).
    for provider in ("openai-chat", "anthropic-messages"):
        body = adapt(projection, provider, []).body
        assert "parallel_tool_calls" not in body and "tool_choice" not in body
    # neutral is the internal list: unchanged.
    assert set(adapt(projection, "neutral", tools).body) == {"messages", "tools"}


def test_no_cache_breakpoint_lands_on_a_thinking_block() -> None:
    # The last history blocks are thinking: the sliding breakpoint goes to the block before.
    log = LogBuilder()
    log.input("go")
    log.text([THINKING, REDACTED])
    body = adapt(project(make_input(log)), "anthropic-messages", prompt_cache=PromptCache()).body
    assert _blocks_with_markers(body) == [
        ("user", {"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}})
    ]

    # A long run of answers that think: the last breakpoint and the fallback both skip them.
    def view(exchanges: int) -> dict:
        log = LogBuilder()
        log.input("go")
        for n in range(exchanges):
            thinking = {**THINKING, "thinking": f"step {n}"}
            call = log.call("lookup", call_id=f"c{n}", content=[thinking, REDACTED])
            log.result(call, f"r{n}")
        return adapt(
            project(make_input(log)), "anthropic-messages", TOOLS, prompt_cache=PromptCache()
        ).body

    counts = set()
    for exchanges in range(1, 16):
        body = view(exchanges)
        marked = _blocks_with_markers(body)
        counts.add(len(marked))
        assert all(block["type"] not in ("thinking", "redacted_thinking") for _, block in marked)
        request = {"model": "m", "max_tokens": 1, **body}
        assert anthropic_messages_problems(request, turn_rules=False) == []
    assert counts == {1, 2}  # the fallback was placed too, on a block that is not thinking
