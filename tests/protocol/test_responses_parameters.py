"""A Responses client's forwarded fields (contract §21) in each upstream API's words, what each
API cannot carry (for X-Contextproto-Ignored), and their record in a snapshot."""

from __future__ import annotations

from contextproto.protocol.gateway.responses_wire import parse_request
from contextproto.protocol.parameters import (
    Parameters,
    ToolChoice,
    unused_fields,
    with_parameters,
)

SCHEMA = {"type": "json_schema", "name": "quote", "schema": {"type": "object"}, "strict": True}
RESPONSES_BODY = {
    "input": [],
    "tools": [
        {"type": "function", "name": "lookup", "parameters": {}, "strict": False},
        {"type": "custom", "name": "apply_patch"},
    ],
    "parallel_tool_calls": False,
}
CHAT_BODY = {
    "messages": [],
    "tools": [
        {"type": "function", "function": {"name": "lookup"}},
        {"type": "custom", "custom": {"name": "apply_patch"}},
    ],
    "parallel_tool_calls": False,
}


def _parameters() -> Parameters:
    return parse_request(
        {
            "input": "x",
            "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "web_search"}],
            "tool_choice": {"type": "custom", "name": "apply_patch"},
            "max_output_tokens": 500,
            "temperature": 0.2,
            "top_p": 0.9,
            "reasoning": {"effort": "high", "summary": "auto"},
            "text": {"format": SCHEMA},
            "truncation": "disabled",
        }
    ).parameters


def test_a_responses_upstream_gets_the_fields_as_the_client_sent_them() -> None:
    body = with_parameters(RESPONSES_BODY, "openai-responses", _parameters())
    assert body == {
        **RESPONSES_BODY,
        "tools": [*RESPONSES_BODY["tools"], {"type": "web_search"}],
        "max_output_tokens": 500,
        "temperature": 0.2,
        "top_p": 0.9,
        "tool_choice": {"type": "custom", "name": "apply_patch"},
        "reasoning": {"effort": "high", "summary": "auto"},
        "text": {"format": SCHEMA},
        "truncation": "disabled",
    }
    # A function tool chosen by name, in the Responses API's flat words.
    choice = Parameters(tool_choice=ToolChoice(mode="tool", name="lookup"))
    assert with_parameters(RESPONSES_BODY, "openai-responses", choice)["tool_choice"] == {
        "type": "function",
        "name": "lookup",
    }
    # A Chat client's stop and seed have no field on the Responses API: named, not sent.
    chat = Parameters(stop=("END",), seed=7, max_tokens=9)
    assert "stop" not in with_parameters(RESPONSES_BODY, "openai-responses", chat)
    assert unused_fields(chat, "openai-responses") == ("stop", "seed")


def test_within_openai_a_chat_upstream_gets_reasoning_effort_and_response_format() -> None:
    body = with_parameters(CHAT_BODY, "openai-chat", _parameters())
    assert body["reasoning_effort"] == "high"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "quote", "schema": {"type": "object"}, "strict": True},
    }
    assert body["tool_choice"] == {"type": "custom", "custom": {"name": "apply_patch"}}
    assert body["max_completion_tokens"] == 500 and "tools" in body
    assert [t["type"] for t in body["tools"]] == ["function", "custom"]  # no hosted tool
    assert unused_fields(_parameters(), "openai-chat") == ("tools.web_search",)


def test_an_anthropic_upstream_names_what_it_cannot_carry() -> None:
    body = with_parameters({"messages": []}, "anthropic-messages", _parameters())
    assert body == {"messages": [], "max_tokens": 500}
    assert unused_fields(_parameters(), "anthropic-messages") == (
        "reasoning",
        "text.format",
        "tools.web_search",
    )
    # A scripted model ignoring a field does not make it ignored (contract §14); hosted tools
    # go to a Responses upstream only, so a neutral body leaves them unused.
    assert unused_fields(_parameters(), "neutral") == ("tools.web_search",)
    assert unused_fields(Parameters(reasoning={"effort": "low"}), "neutral") == ()
    assert unused_fields(Parameters(text_format={"type": "text"}), "anthropic-messages") == ()


def test_the_snapshot_record_reads_back_the_same_parameters() -> None:
    parameters = _parameters()
    recorded = parameters.to_json()
    assert recorded["hostedTools"] == [{"type": "web_search"}]
    assert recorded["textFormat"] == SCHEMA and recorded["truncation"] == "disabled"
    assert Parameters.from_json(recorded) == parameters
    # A Chat client's parameters are recorded as they always were.
    assert Parameters(max_tokens=5, seed=1).to_json() == {"maxTokens": 5, "seed": 1}
