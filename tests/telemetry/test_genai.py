"""Our messages in the GenAI conventions' shapes, and the provider's name: table-driven."""

from __future__ import annotations

import json

import pytest

from contextproto.telemetry.genai import (
    as_json,
    input_message,
    output_message,
    provider_name,
    view_messages,
)


@pytest.mark.parametrize(
    ("model_provider", "wire_format", "expected"),
    [
        ("openai", "anthropic-messages", "openai"),  # the vendor wins over the wire
        ("anthropic", None, "anthropic"),
        ("external", "openai-chat", "openai"),  # a host's model: what its view spoke
        ("external", "anthropic-messages", "anthropic"),
        ("external", "neutral", "_OTHER"),
        ("scripted", "neutral", "contextproto.scripted"),
        (None, None, "_OTHER"),
    ],
)
def test_provider_name(model_provider, wire_format, expected):
    assert provider_name(model_provider, wire_format) == expected


CASES = [
    (
        "an input",
        {"role": "user", "kind": "input", "content": "Quote 5000 units"},
        {"role": "user", "parts": [{"type": "text", "content": "Quote 5000 units"}]},
    ),
    (
        "a call with its text",
        {
            "role": "assistant",
            "kind": "tool_call",
            "content": "Looking it up.",
            "toolCallId": "c1",
            "toolName": "lookup",
            "arguments": {"q": "A-100"},
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Looking it up."},
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "A-100"}},
            ],
        },
    ),
    (
        "a result",
        {"role": "tool", "kind": "tool_result", "content": '{"price": 12}', "toolCallId": "c1"},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c1", "result": '{"price": 12}'}],
        },
    ),
    (
        "thinking, an image and text",
        {
            "role": "assistant",
            "kind": "text",
            "content": [
                {"type": "thinking", "thinking": "Check first.", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZW5j"},
                {"type": "image", "mediaType": "image/png", "data": "iVBOR"},
                {"type": "text", "text": "Done."},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Check first."},
                {"type": "reasoning", "content": "[redacted]"},
                {"type": "text", "content": "[image image/png]"},  # never the image's bytes
                {"type": "text", "content": "Done."},
            ],
        },
    ),
    (
        "a fold",
        {"role": "assistant", "kind": "context_fold", "content": "Fold f_1: prices looked up."},
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Fold f_1: prices looked up."}],
        },
    ),
]


@pytest.mark.parametrize(("message", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_input_message(message, expected):
    assert input_message(message) == expected


def test_the_system_message_is_the_instructions_apart_from_the_history():
    system, inputs = view_messages(
        [
            {"role": "system", "kind": "system", "content": "Be brief."},
            {"role": "user", "kind": "input", "content": "Hi"},
        ]
    )
    assert system == [{"type": "text", "content": "Be brief."}]
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]


def test_an_answer_is_one_output_message_with_its_finish_reason():
    found = output_message("Sure.", [("c1", "lookup", {"q": "x"})], finish_reason="tool_calls")
    assert json.loads(as_json([found])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Sure."},
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "x"}},
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert output_message(None)["finish_reason"] == "stop" and output_message(None)["parts"] == []
