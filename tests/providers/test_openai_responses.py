"""The `openai` provider on the Responses API (`model.config.api: "responses"`, contract §4.5,
§21) against a local server speaking the API's shape: what it sends, how it reads the answer,
its stream, and its failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from contextproto.protocol.checkpoints import summariser_prompt
from sessions_app.maintenance.summariser import summary_request
from sessions_app.providers import ProviderError, ToolCallRequest, provider_for
from sessions_app.providers.base import ModelReply, ReasoningChunk, TextChunk
from sessions_app.providers.openai_chat import OpenAIChatProvider
from sessions_app.providers.openai_responses import OpenAIResponsesProvider
from tests.providers.engine_requests import adapted
from tests.providers.responses_shapes import openai_responses_problems
from tests.providers.servers import Answer, FakeAPI, responses_events, responses_sse, serve

KEY = "sk-test-123"
REASONING_ITEM = {
    "id": "rs_68a1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Open a window for the quote."}],
    "encrypted_content": "gAAAAABo-opaque",
}
CALL_ITEM = {
    "id": "fc_68a2",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "context_window_open",
    "arguments": '{"purpose":"x","windowId":"alpha","goal":"quote"}',
}
MESSAGE_ITEM = {
    "id": "msg_68a3",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Opening a window.", "annotations": []}],
}
USAGE = {
    "input_tokens": 2000,
    "input_tokens_details": {"cached_tokens": 1536},
    "output_tokens": 60,
    "output_tokens_details": {"reasoning_tokens": 24},
    "total_tokens": 2060,
}


def response(*output: dict[str, Any], status: str = "completed", **fields: Any) -> dict:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_767_225_600,
        "status": status,
        "model": "gpt-test",
        "output": list(output),
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE,
        **fields,
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)


@pytest.fixture
def api():
    with serve(Answer(body=response(REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM))) as api:
        yield api


def _provider(url: str, **config: Any) -> OpenAIResponsesProvider:
    provider = provider_for(
        "openai",
        {"api": "responses", "baseUrl": f"{url}/v1", "apiKeyEnv": "TEST_OPENAI_KEY", **config},
    )
    assert isinstance(provider, OpenAIResponsesProvider)
    return provider


def test_model_config_api_chooses_the_api(settings) -> None:
    settings.OPENAI_API_KEY = "sk-o"
    assert isinstance(provider_for("openai", {}), OpenAIChatProvider)
    assert isinstance(provider_for("openai", {"api": "chat"}), OpenAIChatProvider)
    responses = provider_for("openai", {"api": "responses"})
    assert responses.wire_format == "openai-responses"
    with pytest.raises(ProviderError) as refused:
        provider_for("openai", {"api": "assistants"})
    assert refused.value.code == "provider_not_configured"
    assert "chat, responses" in refused.value.message


def test_the_view_is_posted_to_responses_as_built(api: FakeAPI) -> None:
    request = adapted("openai-responses")
    _provider(api.url).complete(request.body, model="gpt-test", max_output_tokens=256)
    sent = api.last
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {"model": "gpt-test", **request.body, "max_output_tokens": 256}
    assert sent.body["store"] is False
    assert sent.body["include"] == ["reasoning.encrypted_content"]
    assert sent.body["parallel_tool_calls"] is False
    assert openai_responses_problems(sent.body) == []
    # The adapter sends no Anthropic thinking to OpenAI.
    assert "customer record has the budget" not in json.dumps(sent.body)


def test_the_answer_is_read_with_its_reasoning_kept_for_the_next_turn(api: FakeAPI) -> None:
    reply = _provider(api.url).complete(adapted("openai-responses").body, model="gpt-test")
    assert reply.text == "Opening a window."
    assert reply.tool_calls == (
        ToolCallRequest(
            id="call_1",
            name="context_window_open",
            arguments={"purpose": "x", "windowId": "alpha", "goal": "quote"},
        ),
    )
    assert reply.thinking == (
        {
            "type": "reasoning",
            "id": "rs_68a1",
            "summary": REASONING_ITEM["summary"],
            "encryptedContent": "gAAAAABo-opaque",
        },
    )
    # Contract convention: input counts the cached part; reasoning is part of the output.
    assert reply.usage == {
        "inputTokens": 2000,
        "outputTokens": 60,
        "cacheReadInputTokens": 1536,
        "reasoningTokens": 24,
    }
    assert reply.stop_reason == "tool_calls" and reply.notes == ()
    assert reply.raw["id"] == "resp_1"


def test_a_custom_tool_call_an_output_limit_and_a_hosted_tools_item(api: FakeAPI) -> None:
    patch = {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "call_id": "call_2",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** End Patch",
    }
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {}}
    api.answer(200, response(search, patch))
    reply = _provider(api.url).complete({"input": []}, model="m")
    assert reply.tool_calls == (
        ToolCallRequest("call_2", "apply_patch", {"input": "*** Begin Patch\n*** End Patch"}),
    )
    assert reply.notes == ("openai: output item 0 of type 'web_search_call' was not used",)
    cut = response(
        MESSAGE_ITEM, status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    api.answer(200, cut)
    assert _provider(api.url).complete({"input": []}, model="m").stop_reason == "length"
    api.answer(200, {**response(MESSAGE_ITEM), "usage": None})
    estimated = _provider(api.url).complete({"input": []}, model="m")
    assert estimated.usage["estimated"] is True and estimated.stop_reason == "stop"


def test_config_max_output_tokens_fills_in_and_the_body_wins(api: FakeAPI) -> None:
    provider = _provider(api.url, maxOutputTokens=64)
    provider.complete({"input": []}, model="m")
    assert api.last.body["max_output_tokens"] == 64
    provider.complete({"input": [], "max_output_tokens": 9}, model="m")
    assert api.last.body["max_output_tokens"] == 9


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (
            Answer(429, {"error": {"message": "slow down", "type": "rate_limit"}}),
            "provider_rate_limited",
        ),
        (Answer(500, {"error": {"message": "boom"}}), "provider_unavailable"),
        (Answer(400, {"error": {"message": "bad input"}}), "provider_request_rejected"),
        (Answer(200, "<html>gateway error</html>"), "provider_response_invalid"),
        (Answer(200, '{"id": "resp_1", "output": '), "provider_response_invalid"),
        (
            Answer(200, response(status="failed", error={"code": "server_error", "message": "x"})),
            "provider_unavailable",
        ),
        (Answer(200, {"id": "resp_1", "object": "response"}), "provider_response_invalid"),
    ],
)
def test_failures_map_as_the_chat_provider_maps_them(
    api: FakeAPI, answer: Answer, code: str
) -> None:
    api.queue.append(answer)
    with pytest.raises(ProviderError) as caught:
        _provider(api.url).complete({"input": []}, model="m")
    assert caught.value.code == code
    assert len(api.received) == 1  # no retry of its own


# --------------------------------------------------------------------------- streaming


def _stream(provider: OpenAIResponsesProvider, body: dict) -> list[Any]:
    async def collect() -> list[Any]:
        return [piece async for piece in provider.astream(body, model="gpt-test")]

    return asyncio.run(collect())


def test_the_stream_yields_text_and_each_reasoning_item_then_the_same_reply(api: FakeAPI) -> None:
    whole = _provider(api.url).complete({"input": []}, model="gpt-test")
    # The same response, streamed by the fake API as OpenAI streams one (its text in two).
    api.answer(200, response(REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM), chunks=2)
    pieces = _stream(_provider(api.url), {"input": []})
    assert api.last.body["stream"] is True
    assert pieces[:3] == [
        ReasoningChunk(whole.thinking[0]),
        TextChunk("Opening a"),
        TextChunk(" window."),
    ]
    last = pieces[-1]
    assert isinstance(last, ModelReply) and len(pieces) == 4
    assert (last.text, last.tool_calls, last.thinking, last.usage, last.stop_reason) == (
        whole.text,
        whole.tool_calls,
        whole.thinking,
        whole.usage,
        whole.stop_reason,
    )


def test_a_stream_whose_end_omits_the_output_is_read_from_its_done_items(api: FakeAPI) -> None:
    cut = response(
        MESSAGE_ITEM, status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    events = responses_events(cut)
    events[-1] = {**events[-1], "response": {**cut, "output": []}}
    api.answer(200, responses_sse(events))
    last = _stream(_provider(api.url), {"input": []})[-1]
    assert (last.text, last.stop_reason) == ("Opening a window.", "length")


def _failed_midway() -> str:
    events = responses_events(response(MESSAGE_ITEM))[:-1]
    error = {"code": "rate_limit_exceeded", "message": "slow"}
    events.append({"type": "response.failed", "response": response(status="failed", error=error)})
    return responses_sse(events)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_failed_midway, "provider_rate_limited"),
        (
            lambda: responses_sse(responses_events(response(MESSAGE_ITEM))[:-1]),
            "provider_response_invalid",
        ),
    ],
)
def test_a_stream_that_fails_or_stops_short_is_a_provider_error(api: FakeAPI, body, code) -> None:
    api.answer(200, body())
    with pytest.raises(ProviderError) as caught:
        _stream(_provider(api.url), {"input": []})
    assert caught.value.code == code


def test_a_maintainer_on_the_responses_api_gets_its_summary_prompt_in_its_words(
    api: FakeAPI,
) -> None:
    prompt = summariser_prompt(
        previous_checkpoint="", pages_text=["#1 user: hi"], max_characters=1000, window_goal="g"
    )
    api.answer(200, response(MESSAGE_ITEM))
    reply = _provider(api.url).complete(
        summary_request("openai-responses", prompt), model="gpt-test"
    )
    assert reply.text == "Opening a window."
    sent = api.last.body
    assert openai_responses_problems(sent) == []
    assert sent["instructions"] and all(i["role"] != "system" for i in sent["input"])
