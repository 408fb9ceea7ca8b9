"""The scripted model: steps by index, expectations, exhaustion, deterministic usage."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path

import pytest

from contextproto.protocol import adapters
from contextproto.protocol import tokens as protocol_tokens
from contextproto.protocol.projection import project
from sessions_app.providers import ProviderError, ToolCallRequest, base
from sessions_app.providers.scripted import ScriptedProvider, validate_script
from tests.protocol.logbuilder import LogBuilder, make_input
from tests.providers.engine_requests import adapted, history_projection

DOC = Path(__file__).resolve().parents[2] / "docs" / "scripted-model.md"

SCRIPT = {
    "steps": [
        {"text": "first"},
        {
            "toolCalls": [
                {"name": "context_window_open", "arguments": {"purpose": "p"}},
                {"name": "lookup", "arguments": {}},
            ]
        },
        {
            "text": "third",
            "toolCalls": [{"id": "given_id", "name": "lookup"}],
            "usage": {"inputTokens": 10, "outputTokens": 2},
        },
    ]
}


def _neutral() -> dict:
    return adapted("neutral").body


def _error(provider: ScriptedProvider, request: dict, step: int) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        provider.complete(request, model="script", step=step)
    return caught.value


def test_steps_are_played_by_the_step_index() -> None:
    provider = ScriptedProvider(SCRIPT)
    request = _neutral()
    assert provider.complete(request, model="s", step=1).tool_calls[0].name == (
        "context_window_open"
    )
    assert provider.complete(request, model="s", step=0).text == "first"
    assert provider.complete(request, model="s", step=2).text == "third"


def test_the_same_step_gives_the_same_reply_across_instances() -> None:
    # A retried turn, possibly in another worker process, builds a new provider.
    request = _neutral()
    first = ScriptedProvider(SCRIPT).complete(request, model="s", step=1)
    again = ScriptedProvider(json.loads(json.dumps(SCRIPT))).complete(request, model="s", step=1)
    assert first == again


def test_tool_call_ids_are_given_or_deterministic() -> None:
    provider = ScriptedProvider(SCRIPT)
    second = provider.complete(_neutral(), model="s", step=1)
    assert second.tool_calls == (
        ToolCallRequest(id="script_2_1", name="context_window_open", arguments={"purpose": "p"}),
        ToolCallRequest(id="script_2_2", name="lookup", arguments={}),
    )
    assert second.text is None
    assert second.stop_reason == "tool_calls"
    third = provider.complete(_neutral(), model="s", step=2)
    assert [c.id for c in third.tool_calls] == ["given_id"]
    assert third.tool_calls[0].arguments == {}


def test_an_exhausted_script_is_an_error() -> None:
    error = _error(ScriptedProvider(SCRIPT), _neutral(), 3)
    assert error.code == "script_exhausted"
    assert error.message == "the script has 3 steps; step 4 was requested"
    assert error.retryable is False


@pytest.mark.parametrize("step", [None, -1, True, "1"])
def test_a_missing_step_is_an_error_not_a_guess(step) -> None:
    error = _error(ScriptedProvider(SCRIPT), _neutral(), step)
    assert error.code == "script_step_required"


def test_estimated_usage_is_deterministic_and_labelled() -> None:
    provider = ScriptedProvider(SCRIPT)
    request = _neutral()
    reply = provider.complete(request, model="s", step=1)
    serialized = json.dumps(request, sort_keys=True, ensure_ascii=False)
    calls = json.dumps(
        [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        sort_keys=True,
        ensure_ascii=False,
    )
    assert reply.usage == {
        "inputTokens": math.ceil(len(serialized) / 4),
        "outputTokens": math.ceil(len(calls) / 4),
        "estimated": True,
    }
    assert provider.complete(json.loads(json.dumps(request)), model="s", step=1).usage == (
        reply.usage
    )
    text_reply = provider.complete(request, model="s", step=0)
    assert text_reply.usage["outputTokens"] == math.ceil(len("first") / 4)
    assert text_reply.stop_reason == "end_turn"


def test_a_bigger_view_costs_more_estimated_tokens() -> None:
    provider = ScriptedProvider(SCRIPT)
    small = provider.complete({"messages": [{"role": "user", "content": "hi"}]}, model="s", step=0)
    big = provider.complete(_neutral(), model="s", step=0)
    assert big.usage["inputTokens"] > small.usage["inputTokens"]


def test_a_steps_own_usage_is_reported_as_is() -> None:
    reply = ScriptedProvider(SCRIPT).complete(_neutral(), model="s", step=2)
    assert reply.usage == {"inputTokens": 10, "outputTokens": 2}


def test_fixed_token_mode() -> None:
    script = {
        "tokens": {"mode": "fixed", "inputPerTurn": 500, "outputPerTurn": 20},
        "steps": [{"text": "a"}, {"text": "b", "usage": {"inputTokens": 7}}],
    }
    provider = ScriptedProvider(script)
    assert provider.complete(_neutral(), model="s", step=0).usage == {
        "inputTokens": 500,
        "outputTokens": 20,
    }
    assert provider.complete(_neutral(), model="s", step=1).usage == {
        "inputTokens": 7,
        "outputTokens": 20,
    }


def test_expectations_pass_on_a_real_engine_request() -> None:
    script = {
        "steps": [
            {
                "expect": {
                    "contains": ["Prepare a quote for ACME in Zürich", "call_lookup1"],
                    "notContains": ["window beta"],
                    "lastRole": "assistant",
                    "lastMessageKind": "context_state",
                    "messageCount": {"min": 5, "max": 20},
                },
                "text": "ok",
            }
        ]
    }
    assert ScriptedProvider(script).complete(_neutral(), model="s", step=0).text == "ok"


@pytest.mark.parametrize(
    ("expect", "what", "seen_in_message"),
    [
        ({"contains": ["budget is now 9000"]}, "contains", "context_state"),
        ({"notContains": ["Zürich"]}, "notContains", "Zürich"),
        ({"lastRole": "user"}, "lastRole", "'assistant'"),
        ({"lastMessageKind": "tool_result"}, "lastMessageKind", "'context_state'"),
        ({"messageCount": {"max": 3}}, "messageCount", "saw 9"),
    ],
)
def test_a_failed_expectation_names_the_step_and_what_was_seen(
    expect: dict, what: str, seen_in_message: str
) -> None:
    script = {"steps": [{"text": "a"}, {"expect": expect, "text": "b"}]}
    error = _error(ScriptedProvider(script), _neutral(), 1)
    assert error.code == "script_expectation_failed"
    assert error.message.startswith("script step 2 of 2: ")
    assert seen_in_message in error.message
    assert error.details["step"] == 2
    assert error.details["expectation"] == what


def test_kind_expectations_explain_formats_without_kinds() -> None:
    script = {
        "wireFormat": "openai-chat",
        "steps": [{"expect": {"lastMessageKind": "context_state"}, "text": "x"}],
    }
    provider = ScriptedProvider(script)
    assert provider.wire_format == "openai-chat"
    error = _error(provider, adapted("openai-chat").body, 0)
    assert "has no message kinds; use lastRole" in error.message


def test_wire_format_defaults_to_neutral() -> None:
    assert ScriptedProvider(SCRIPT).wire_format == "neutral"


@pytest.mark.parametrize(
    ("script", "where"),
    [
        ({}, "script.steps"),
        ({"steps": []}, "script.steps"),
        ({"steps": [{"text": "x"}], "wireFormat": "gemini"}, "script.wireFormat"),
        ({"steps": [{"text": "x"}], "stepz": []}, "script"),
        ({"steps": [{}]}, "steps[0]"),
        ({"steps": [{"text": "x", "expect": {"contain": ["a"]}}]}, "steps[0].expect"),
        ({"steps": [{"text": "x", "expect": {"contains": "a"}}]}, "steps[0].expect.contains"),
        ({"steps": [{"toolCalls": [{"arguments": {}}]}]}, "steps[0].toolCalls[0].name"),
        (
            {"steps": [{"toolCalls": [{"name": "f", "arguments": "{}"}]}]},
            "steps[0].toolCalls[0].arguments",
        ),
        ({"steps": [{"text": "x", "usage": {"inputTokens": -1}}]}, "steps[0].usage"),
        ({"steps": [{"text": "x"}], "tokens": {"mode": "fixed"}}, "script.tokens"),
        (
            {"steps": [{"text": "x", "expect": {"messageCount": {}}}]},
            "steps[0].expect.messageCount",
        ),
    ],
)
def test_a_malformed_script_is_refused_naming_the_bad_part(script: dict, where: str) -> None:
    with pytest.raises(ProviderError) as caught:
        ScriptedProvider(script)
    assert caught.value.code == "script_invalid"
    assert caught.value.details["where"] == where


def _doc_example() -> dict:
    block = re.search(r"```json\n(.*?)\n```", DOC.read_text(), re.S)
    assert block, "docs/scripted-model.md has no JSON example"
    return json.loads(block.group(1))


def test_the_documented_example_is_a_valid_script_that_plays() -> None:
    script = _doc_example()
    validate_script(script)
    provider = ScriptedProvider(script)
    first = provider.complete(_neutral(), model="s", step=0)
    assert first.tool_calls[0].id == "script_1_1"
    assert first.usage["estimated"] is True

    alpha = adapted_in_window("alpha")
    second = provider.complete(alpha, model="s", step=1)
    assert second.tool_calls[0].id == "call_memory_1"
    assert second.usage == {"inputTokens": 1800, "outputTokens": 40}
    assert provider.complete(alpha, model="s", step=2).text == "The quote is ready: 11 800 CHF."
    assert _error(provider, alpha, 3).code == "script_exhausted"
    # Step 2's expectation really checks the window: the main-window view fails it.
    assert _error(provider, _neutral(), 1).code == "script_expectation_failed"


def adapted_in_window(window: str) -> dict:
    log = LogBuilder(window=window)
    log.input("Prepare a quote for ACME")
    log.text("Working on it.")
    return adapters.adapt(project(make_input(log, window=window)), "neutral").body


def test_history_projection_has_the_tool_work_the_tests_rely_on() -> None:
    kinds = [m.kind for m in history_projection().messages]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 2


def test_the_providers_estimate_is_the_engines() -> None:
    # One chars/4 estimator (contextproto/protocol/tokens.py); base keeps its names for it.
    assert base.estimate_tokens is protocol_tokens.text_tokens
    assert base.canonical_json is protocol_tokens.canonical_json


def test_a_responses_script_checks_the_input_items_and_streams_its_reasoning_first() -> None:
    script = {
        "wireFormat": "openai-responses",
        "steps": [
            {
                "expect": {"lastRole": "assistant", "messageCount": {"min": 5}},
                "reasoning": [{"summary": "Price first.", "encryptedContent": "gAAAA-1"}],
                "text": "It costs 42.",
            }
        ],
    }
    provider = ScriptedProvider(script)
    body = adapted("openai-responses").body
    reply = provider.complete(body, model="s", step=0)
    part = {
        "type": "reasoning",
        "id": "rs_script_1_1",
        "summary": [{"type": "summary_text", "text": "Price first."}],
        "encryptedContent": "gAAAA-1",
    }
    assert reply.thinking == (part,)

    async def pieces() -> list:
        return [p async for p in provider.astream(body, model="s", step=0)]

    streamed = asyncio.run(pieces())
    assert streamed[:2] == [base.ReasoningChunk(part), base.TextChunk("It costs 42.")]
    bad = {"steps": [{"text": "x", "reasoning": [{"summary": ""}]}]}
    with pytest.raises(ProviderError) as refused:
        validate_script(bad)
    assert "steps[0].reasoning[0]" in refused.value.message
