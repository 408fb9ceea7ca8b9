"""The `openai-responses` adapter (contract §4.5, §21) for every protocol version, and where
OpenAI reasoning items and custom tools go on each wire format."""

from __future__ import annotations

import json

import pytest

from contextproto.protocol import catalog
from contextproto.protocol.adapters import PROVIDERS, adapt
from contextproto.protocol.custom_tools import CUSTOM_INPUT_SCHEMA
from contextproto.protocol.messages import ModelMessage, ProjectionSource
from contextproto.protocol.projection import Projection, project
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.providers.responses_shapes import openai_responses_problems
from tests.providers.shapes import anthropic_messages_problems, openai_chat_problems

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
REASONING = {
    "type": "reasoning",
    "id": "rs_0a1b2c",
    "summary": [{"type": "summary_text", "text": "The price list has it."}],
    "encryptedContent": "gAAAAABo-opaque-1",
}
LATER = {"type": "reasoning", "id": "rs_3d4e5f", "summary": [], "encryptedContent": "gAAAAB-2"}
THINKING = {"type": "thinking", "thinking": "Hm.", "signature": "c2lnLTE="}
TOOLS = [
    {
        "name": "lookup",
        "description": "Look it up.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
    {
        "name": "apply_patch",
        "description": "Edit files.",
        "inputSchema": CUSTOM_INPUT_SCHEMA,
        "kind": "custom",
        "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
    },
]
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"


def _log() -> LogBuilder:
    """An answer that reasoned and wrote text beside its call, the result; a custom tool's
    call with reasoning, its result; a text answer that reasoned; the next input."""
    log = LogBuilder()
    log.input("What does it cost?")
    call = log.call(
        "lookup",
        {"q": "price"},
        call_id="c1",
        content=[REASONING, {"type": "text", "text": "I look the price up."}],
    )
    log.result(call, "42")
    patch = log.call("apply_patch", {"input": PATCH}, call_id="c2", content=[LATER])
    log.result(patch, "Done!")
    log.text([{**LATER, "id": "rs_last"}, {"type": "text", "text": "It costs 42."}])
    log.input("Thanks. And shipping?")
    return log


def _view(protocol: str, version: int, placement: str | None) -> Projection:
    options = {"stateMessagePlacement": placement} if placement else {}
    return project(make_input(_log(), protocol_id=protocol, version=version, options=options))


def _tools(protocol: str, version: int) -> list[dict]:
    return [*catalog.get_version(protocol, version).tools.values(), *TOOLS]


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_reasoning_goes_back_unchanged_before_its_answer_on_the_responses_api_only(
    protocol: str, version: int, placement: str | None
) -> None:
    projection = _view(protocol, version, placement)
    tools = _tools(protocol, version)
    body = adapt(
        projection, "openai-responses", tools, prompt_cache=PromptCache(), cache_key="k"
    ).body
    assert openai_responses_problems({"model": "m", **body}) == []
    items = body["input"]
    first = items.index(
        {
            "type": "reasoning",
            "id": "rs_0a1b2c",
            "summary": REASONING["summary"],
            "encrypted_content": "gAAAAABo-opaque-1",
        }
    )
    # The answer as given: its reasoning, the text beside the call, the call.
    assert items[first + 1] == {
        "type": "message",
        "role": "assistant",
        "content": "I look the price up.",
    }
    assert items[first + 2] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"q": "price"}',
    }
    assert items[first + 3] == {"type": "function_call_output", "call_id": "c1", "output": "42"}
    # The custom tool's call and result, its text input as the model wrote it.
    assert items[first + 4 : first + 7] == [
        {"type": "reasoning", "id": "rs_3d4e5f", "summary": [], "encrypted_content": "gAAAAB-2"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"},
    ]
    assert items[first + 7]["id"] == "rs_last"
    assert items[first + 8] == {"type": "message", "role": "assistant", "content": "It costs 42."}
    # Anthropic's thinking never goes to OpenAI, whichever API.
    assert "signature" not in json.dumps(body)
    # Neither API of another provider, nor Chat Completions, ever sees a reasoning item.
    for other in ("openai-chat", "anthropic-messages"):
        sent = json.dumps(adapt(projection, other, tools).body)
        assert "gAAAA" not in sent and "rs_0a1b2c" not in sent, other
    assert (
        openai_chat_problems({"model": "m", **adapt(projection, "openai-chat", tools).body}) == []
    )
    anthropic = {
        "model": "m",
        "max_tokens": 1,
        **adapt(projection, "anthropic-messages", tools).body,
    }
    assert anthropic_messages_problems(anthropic, turn_rules=False) == []


@pytest.mark.parametrize(("protocol", "version", "placement"), MAPPINGS)
def test_the_responses_request_keeps_every_message_asks_for_one_call_and_stores_nothing(
    protocol: str, version: int, placement: str | None
) -> None:
    projection = _view(protocol, version, placement)
    tools = _tools(protocol, version)
    for cache in (PROMPT_CACHE_OFF, PromptCache()):
        body = adapt(projection, "openai-responses", tools, prompt_cache=cache, cache_key="k").body
        assert list(body) == [
            "instructions",
            "input",
            "tools",
            "parallel_tool_calls",
            *(["prompt_cache_key"] if cache.enabled else []),
            "store",
            "include",
        ]
        assert body["parallel_tool_calls"] is False and body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body.get("prompt_cache_key") == ("k" if cache.enabled else None)
    # The system prompt is the instructions; every other view message is in the input.
    assert body["instructions"] == projection.messages[0].content
    texts = json.dumps(body["input"], ensure_ascii=False)
    for message in projection.messages[1:]:
        if message.kind in ("context_header", "context_state"):
            assert json.dumps(message.content, ensure_ascii=False)[1:-1] in texts
    # Function tools are not strict (protocol schemas are not written for strict mode); the
    # client's custom tool is a custom tool with its grammar.
    definitions = {t["name"]: t for t in body["tools"]}
    assert definitions["lookup"] == {
        "type": "function",
        "name": "lookup",
        "description": "Look it up.",
        "parameters": TOOLS[0]["inputSchema"],
        "strict": False,
    }
    assert definitions["apply_patch"] == {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files.",
        "format": TOOLS[1]["format"],
    }
    # Without tools, no parallel_tool_calls (OpenAI refuses it).
    assert "parallel_tool_calls" not in adapt(projection, "openai-responses", []).body


def test_a_custom_tool_on_chat_completions_and_on_anthropic() -> None:
    projection = project(make_input(_log()))
    chat = adapt(projection, "openai-chat", TOOLS).body
    assert chat["tools"][1] == {
        "type": "custom",
        "custom": {
            "name": "apply_patch",
            "description": "Edit files.",
            "format": {
                "type": "grammar",
                "grammar": {"definition": 'start: "*** Begin Patch"', "syntax": "lark"},
            },
        },
    }
    calls = [c for m in chat["messages"] for c in m.get("tool_calls") or ()]
    assert calls[1] == {
        "id": "c2",
        "type": "custom",
        "custom": {"name": "apply_patch", "input": PATCH},
    }
    anthropic = adapt(projection, "anthropic-messages", TOOLS).body
    tool = anthropic["tools"][1]
    assert tool["input_schema"] == CUSTOM_INPUT_SCHEMA
    assert tool["description"].startswith("Edit files.\n\nIts one argument, `input`")
    assert 'start: "*** Begin Patch"' in tool["description"]
    uses = [b for m in anthropic["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert uses[1]["input"] == {"input": PATCH}


def test_thinking_only_goes_to_anthropic_and_user_content_keeps_its_images() -> None:
    log = LogBuilder()
    log.input(
        [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "mediaType": "image/png", "data": "AAAA"},
        ]
    )
    call = log.call("lookup", {"q": "x"}, call_id="c1", content=[THINKING])
    log.result(
        call, [{"type": "text", "text": "a chart"}, {"type": "image", "url": "https://x/y.png"}]
    )
    body = adapt(project(make_input(log)), "openai-responses", TOOLS).body
    assert openai_responses_problems({"model": "m", **body}) == []
    assert "signature" not in json.dumps(body)
    user = next(i for i in body["input"] if i.get("role") == "user" and len(i["content"]) == 2)
    assert user["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,AAAA",
        "detail": "auto",
    }
    output = next(i for i in body["input"] if i["type"] == "function_call_output")["output"]
    assert output == [
        {"type": "input_text", "text": "a chart"},
        {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
    ]


def test_an_item_between_a_call_and_its_output_moves_after_it_and_is_noted() -> None:
    messages = (
        ModelMessage(role="system", kind="system", content="sys"),
        ModelMessage(
            role="assistant",
            kind="tool_call",
            content="",
            tool_call_id="c1",
            tool_name="deploy",
            arguments={},
        ),
        ModelMessage(role="user", kind="approval_feedback", content="approved"),
        ModelMessage(role="tool", kind="tool_result", content="done", tool_call_id="c1"),
    )
    projection = Projection(
        messages=messages,
        sources=tuple(ProjectionSource(derived_type="raw", session_id="s") for _ in messages),
        window_id="main",
        revision=1,
        upper_bound=3,
        run_id=None,
        protocol="unified@2",
        options={},
    )
    request = adapt(projection, "openai-responses")
    assert [i["type"] for i in request.body["input"]] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    assert any("moved after the outputs" in n for n in request.notes)
    assert openai_responses_problems({"model": "m", **request.body}) == []


def test_every_wire_format_is_a_provider_of_the_projection() -> None:
    assert "openai-responses" in PROVIDERS
