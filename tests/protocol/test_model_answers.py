"""Reading a model answer in the four shapes a host sends (contract §5.2a): no database."""

from __future__ import annotations

import pytest

from contextproto.protocol.answer_parts import read_anthropic_content, read_openai_message
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.model_answers import (
    SHAPE_ANTHROPIC_MESSAGE,
    SHAPE_NEUTRAL,
    SHAPE_OPENAI_COMPLETION,
    SHAPE_OPENAI_MESSAGE,
    answer_from_host,
)

# As `ChatCompletion.model_dump()` gives it (openai 2.x), trimmed of nulls that do not matter.
OPENAI_MESSAGE = {
    "content": "Let me note that.",
    "refusal": None,
    "role": "assistant",
    "annotations": [],
    "audio": None,
    "function_call": None,
    "tool_calls": [
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "context_task_memory_set", "arguments": '{"memory": "x"}'},
        }
    ],
}
OPENAI_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4.1",
    "choices": [
        {"index": 0, "message": OPENAI_MESSAGE, "finish_reason": "tool_calls", "logprobs": None}
    ],
    "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
}
THINKING = {"type": "thinking", "thinking": "The user wants a note.", "signature": "sig=="}
ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        THINKING,
        {"type": "text", "text": "Let me note that.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90},
}
NEUTRAL = {
    "content": "Let me note that.",
    "toolCalls": [{"id": "c1", "name": "lookup", "arguments": {"q": "x"}}],
}


@pytest.mark.parametrize(
    "answer, shape, usage, stop",
    [
        (OPENAI_COMPLETION, SHAPE_OPENAI_COMPLETION, OPENAI_COMPLETION["usage"], "tool_calls"),
        (OPENAI_MESSAGE, SHAPE_OPENAI_MESSAGE, None, None),
        (ANTHROPIC_MESSAGE, SHAPE_ANTHROPIC_MESSAGE, ANTHROPIC_MESSAGE["usage"], "tool_use"),
        (NEUTRAL, SHAPE_NEUTRAL, None, None),
    ],
    ids=["openai-completion", "openai-message", "anthropic-message", "neutral"],
)
def test_each_shape_reads_as_text_calls_usage_and_stop_reason(answer, shape, usage, stop):
    found = answer_from_host(answer)
    assert found.shape == shape
    assert found.text == "Let me note that."
    assert len(found.calls) == 1 and found.calls[0].arguments in ({"memory": "x"}, {"q": "x"})
    assert found.usage == usage and found.stop_reason == stop


def test_anthropic_thinking_blocks_are_kept_as_given():
    found = answer_from_host(ANTHROPIC_MESSAGE)
    assert found.thinking == (THINKING,)
    assert found.calls[0].id == "toolu_1" and found.calls[0].field == "answer.content[2].input"


def test_arguments_text_that_is_no_object_is_kept_as_written():
    bad = {"content": None, "toolCalls": [{"id": "c1", "name": "lookup", "arguments": "{q: 1"}]}
    found = answer_from_host(bad)
    assert found.calls[0].arguments == "{q: 1"
    assert found.notes == ("tool call c1: arguments are not a JSON object; kept as written",)
    # Strict JSON: NaN is not JSON text, so the text stays as written too.
    nan = {"content": None, "toolCalls": [{"id": "c1", "name": "t", "arguments": '{"a": NaN}'}]}
    assert answer_from_host(nan).calls[0].arguments == '{"a": NaN}'


def test_an_openai_refusal_is_the_answers_text():
    refused = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    assert answer_from_host(refused).text == "I can't help with that."


def test_blocks_of_other_types_are_left_out_with_a_note():
    answer = {
        "type": "message",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "Found it."},
        ],
    }
    found = answer_from_host(answer)
    assert found.text == "Found it." and found.calls == ()
    assert found.notes == ("anthropic: content block 0 of type 'server_tool_use' was not used",)


@pytest.mark.parametrize(
    "answer, code, field",
    [
        ("hello", "answer_shape_unknown", "answer"),
        ({"text": "hello"}, "answer_shape_unknown", "answer"),
        (
            {"object": "chat.completion.chunk", "choices": []},
            "answer_shape_unknown",
            "answer.object",
        ),
        ({"choices": []}, "answer_invalid", "answer.choices"),
        ({"choices": [{"message": "hi"}]}, "answer_invalid", "answer.choices[0].message"),
        (
            {"choices": [{"message": {"role": "assistant", "content": ""}}]},
            "answer_invalid",
            "answer.choices[0].message.content",
        ),
        (
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]},
            "tool_call_id_invalid",
            "answer.tool_calls[0].id",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "t", "arguments": 5}}],
            },
            "answer_invalid",
            "answer.tool_calls[0].function.arguments",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            "answer_invalid",
            "answer.tool_calls[0].function.name",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
            },
            "answer_invalid",
            "answer.content[0]",
        ),
        ({"type": "message", "content": "hi"}, "answer_invalid", "answer.content"),
        (
            {"type": "message", "content": [{"type": "thinking", "thinking": "x"}]},
            "answer_invalid",
            "answer.content[0].signature",
        ),
        (
            {"type": "message", "content": [{"type": "tool_use", "id": "a\nb", "name": "x"}]},
            "tool_call_id_invalid",
            "answer.content[0].id",
        ),
        ({"type": "message", "content": [THINKING]}, "answer_invalid", "answer.content"),
        (
            {"content": "hi", "toolCalls": [{"id": "c"}]},
            "answer_invalid",
            "answer.toolCalls[0].name",
        ),
        (
            {"content": "hi", "toolCalls": [{"id": "c", "name": "t", "args": {}}]},
            "answer_invalid",
            "answer.toolCalls[0].args",
        ),
        ({"content": 5}, "answer_invalid", "answer.content"),
        (
            {"content": None, "toolCalls": [{"id": "c", "name": "t" * 129}]},
            "answer_invalid",
            "answer.toolCalls[0].name",
        ),
        ({"content": "  "}, "answer_invalid", "answer.content"),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_field(answer, code, field):
    with pytest.raises(ProtocolError) as refused:
        answer_from_host(answer)
    assert (refused.value.code, refused.value.details["field"]) == (code, field)
    assert refused.value.message.startswith(field)


def test_the_runtimes_reading_never_refuses_and_says_what_it_changed():
    message = {
        "content": [{"type": "text", "text": "a"}, {"text": "b"}],
        "tool_calls": [
            {"function": {"name": "t", "arguments": "oops"}},
            {"type": "custom", "custom": {"name": "shell", "input": "ls"}},
        ],
    }
    read = read_openai_message(message, where="choices[0].message", strict=False)
    assert read.text == "ab"
    assert [(c.id, c.name, c.arguments) for c in read.calls] == [
        ("call_missing_id_1", "t", "oops"),
        # A custom tool's call: its text input as the one argument of a custom tool.
        ("call_missing_id_2", "shell", {"input": "ls"}),
    ]
    assert read.notes == (
        "tool call call_missing_id_1: arguments are not a JSON object; kept as written",
    )
    blocks = [{"type": "tool_use", "name": "t", "input": None}, "junk"]
    read = read_anthropic_content(blocks, where="content", strict=False)
    assert [(c.id, c.arguments) for c in read.calls] == [("toolu_missing_id_0", {})]
    assert read.notes == ("anthropic: content block 1 of type None was not used",)
