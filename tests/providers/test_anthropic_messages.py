"""Anthropic Messages provider against a local server speaking the API's shape."""

from __future__ import annotations

import json

import pytest

from sessions_app.providers import ProviderError, ToolCallRequest
from sessions_app.providers.anthropic_messages import AnthropicMessagesProvider
from tests.providers.engine_requests import THINKING, adapted
from tests.providers.servers import ANTHROPIC_TOOL_USE_REPLY, FakeAPI
from tests.providers.shapes import anthropic_messages_problems

KEY = "sk-ant-test-123"


def _provider(api_url: str, **config) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(
        {"baseUrl": api_url, "apiKeyEnv": "TEST_ANTHROPIC_KEY", **config}
    )


def _reply(**changes) -> dict:
    body = json.loads(json.dumps(ANTHROPIC_TOOL_USE_REPLY))
    body.update(changes)
    return body


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", KEY)


def test_request_as_sent_matches_the_messages_shape(anthropic_api: FakeAPI) -> None:
    request = adapted("anthropic-messages")
    _provider(anthropic_api.url).complete(request.body, model="claude-test")

    sent = anthropic_api.last
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY  # the documented header
    assert sent.headers["authorization"] == f"Bearer {KEY}"  # what the 2.x SDK sends
    assert sent.headers["anthropic-version"]  # the SDK pins the API version
    body = sent.body
    # The turn rules are checked (and currently fail) in the test below.
    assert anthropic_messages_problems(body, turn_rules=False) == []
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 4096
    assert body["system"] == request.body["system"]  # top level, not a message
    assert all(m["role"] in ("user", "assistant") for m in body["messages"])
    assert body["messages"] == request.body["messages"]  # the adapter body, unchanged
    assert body["tools"] == request.body["tools"]
    # One tool call per answer (contract §4.5), as the adapter asked.
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert set(body) == {"model", "max_tokens", "system", "messages", "tools", "tool_choice"}


def test_an_answer_goes_back_with_its_thinking_and_text_before_its_call(
    anthropic_api: FakeAPI,
) -> None:
    _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    answer = next(
        m for m in anthropic_api.last.body["messages"] if m["content"][-1]["type"] == "tool_use"
    )
    assert answer["content"][:2] == [
        THINKING,
        {"type": "text", "text": "First I look the customer up."},
    ]


def test_a_request_without_tools_sends_no_tool_choice(anthropic_api: FakeAPI) -> None:
    body = adapted("anthropic-messages").body
    del body["tools"], body["tool_choice"]
    _provider(anthropic_api.url).complete(body, model="c")
    assert "tool_choice" not in anthropic_api.last.body and "tools" not in anthropic_api.last.body


def test_sent_tool_results_answer_the_tool_use_right_before_them(
    anthropic_api: FakeAPI,
) -> None:
    _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    messages = anthropic_api.last.body["messages"]
    results = 0
    for i, message in enumerate(messages):
        for block in message["content"]:
            if block["type"] != "tool_result":
                continue
            results += 1
            assert message["role"] == "user"
            previous = messages[i - 1]
            assert previous["role"] == "assistant"
            uses = [b["id"] for b in previous["content"] if b["type"] == "tool_use"]
            assert block["tool_use_id"] in uses
    assert results == 2
    error_flags = [
        b["is_error"] for m in messages for b in m["content"] if b["type"] == "tool_result"
    ]
    assert error_flags == [False, True]


def test_sent_conversation_starts_and_ends_with_a_user_turn(anthropic_api: FakeAPI) -> None:
    _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    assert anthropic_messages_problems(anthropic_api.last.body) == []


def test_the_checker_catches_misplaced_tool_results() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "t1"},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]},
        ],
    }
    problems = anthropic_messages_problems(body)
    assert any("must begin with tool_result blocks" in p for p in problems)
    assert any("two user messages in a row" in p for p in problems)
    assert any("'t9'" in p for p in problems)


def test_tool_use_reply_is_parsed(anthropic_api: FakeAPI) -> None:
    reply = _provider(anthropic_api.url).complete(
        adapted("anthropic-messages").body, model="claude-test"
    )
    assert reply.text == "Opening a window for the quote."
    assert reply.tool_calls == (
        ToolCallRequest(
            id="toolu_1",
            name="context_window_open",
            arguments={"purpose": "x", "windowId": "alpha", "goal": "prepare the quote"},
        ),
    )
    assert reply.usage == {"inputTokens": 321, "outputTokens": 9, "uncachedInputTokens": 321}
    assert reply.stop_reason == "tool_use"
    assert json.loads(json.dumps(reply.raw))["id"] == "msg_1"


def test_cache_tokens_count_into_the_prompt_size(anthropic_api: FakeAPI) -> None:
    anthropic_api.answer(
        200,
        _reply(
            content=[{"type": "text", "text": "Done"}, {"type": "text", "text": " here."}],
            stop_reason="end_turn",
            usage={
                "input_tokens": 50,
                "output_tokens": 5,
                "cache_creation_input_tokens": 200,
                "cache_read_input_tokens": 1000,
            },
        ),
    )
    reply = _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    assert reply.text == "Done here."
    assert reply.tool_calls == ()
    assert reply.stop_reason == "end_turn"
    assert reply.usage == {
        "inputTokens": 1250,
        "outputTokens": 5,
        "uncachedInputTokens": 50,
        "cacheWriteInputTokens": 200,
        "cacheReadInputTokens": 1000,
    }


def test_cache_writes_per_ttl_are_kept_beside_their_total(anthropic_api: FakeAPI) -> None:
    # The current Messages usage: cache_creation splits the writes by TTL (contract §8 prices
    # one cacheWrite, the version's TTL's price; the split stays in the stored usage).
    anthropic_api.answer(
        200,
        _reply(
            usage={
                "input_tokens": 12,
                "output_tokens": 30,
                "cache_read_input_tokens": 4096,
                "cache_creation_input_tokens": 1500,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": 0,
                    "ephemeral_1h_input_tokens": 1500,
                },
                "service_tier": "standard",
            }
        ),
    )
    reply = _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    assert reply.usage == {
        "inputTokens": 12 + 4096 + 1500,
        "outputTokens": 30,
        "uncachedInputTokens": 12,
        "cacheReadInputTokens": 4096,
        "cacheWriteInputTokens": 1500,
        "cacheWrite5mInputTokens": 0,
        "cacheWrite1hInputTokens": 1500,
    }


def test_thinking_blocks_stay_in_raw_only(anthropic_api: FakeAPI) -> None:
    anthropic_api.answer(
        200,
        _reply(
            content=[
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "context_fold_list",
                    "input": {"purpose": "look"},
                },
            ]
        ),
    )
    reply = _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    assert reply.text is None
    assert [c.id for c in reply.tool_calls] == ["toolu_2"]
    assert reply.notes == ()
    assert reply.raw["content"][0]["type"] == "thinking"


def test_max_tokens_comes_from_the_caller_then_the_config(anthropic_api: FakeAPI) -> None:
    request = {"messages": [{"role": "user", "content": "hi"}]}
    _provider(anthropic_api.url, maxOutputTokens=777).complete(request, model="c")
    assert anthropic_api.last.body["max_tokens"] == 777
    _provider(anthropic_api.url, maxOutputTokens=777).complete(
        request, model="c", max_output_tokens=55
    )
    assert anthropic_api.last.body["max_tokens"] == 55
    assert "system" not in anthropic_api.last.body
    assert "tools" not in anthropic_api.last.body


def test_settings_give_base_url_and_key(anthropic_api: FakeAPI, settings) -> None:
    settings.ANTHROPIC_BASE_URL = anthropic_api.url
    settings.ANTHROPIC_API_KEY = "sk-ant-from-settings"
    AnthropicMessagesProvider({}).complete(
        {"messages": [{"role": "user", "content": "hi"}]}, model="c"
    )
    assert anthropic_api.last.headers["x-api-key"] == "sk-ant-from-settings"
    assert anthropic_api.last.path == "/v1/messages"


def test_no_key_is_a_configuration_error(settings) -> None:
    settings.ANTHROPIC_API_KEY = None
    with pytest.raises(ProviderError) as caught:
        AnthropicMessagesProvider({"baseUrl": "http://127.0.0.1:9"})
    assert caught.value.code == "provider_not_configured"
    assert "ANTHROPIC_API_KEY" in caught.value.message


@pytest.mark.parametrize(
    ("status", "error_type", "code", "retryable"),
    [
        (500, "api_error", "provider_unavailable", True),
        (529, "overloaded_error", "provider_unavailable", True),
        (429, "rate_limit_error", "provider_rate_limited", True),
        (400, "invalid_request_error", "provider_request_rejected", False),
        (401, "authentication_error", "provider_request_rejected", False),
        (413, "request_too_large", "provider_request_rejected", False),
    ],
)
def test_http_errors_are_mapped(
    anthropic_api: FakeAPI, status: int, error_type: str, code: str, retryable: bool
) -> None:
    message = f"{error_type} happened"
    anthropic_api.answer(
        status,
        {"type": "error", "error": {"type": error_type, "message": message}},
        headers={"request-id": "req_011", "retry-after": "7"},
    )
    with pytest.raises(ProviderError) as caught:
        _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    error = caught.value
    assert (error.code, error.retryable) == (code, retryable)
    assert message in error.message
    assert error.details["status"] == status
    assert error.details["providerType"] == error_type
    assert error.details["requestId"] == "req_011"
    assert error.details["retryAfterSeconds"] == 7.0
    assert len(anthropic_api.received) == 1  # max_retries=0: the SDK did not retry


def test_bad_request_carries_the_providers_message(anthropic_api: FakeAPI) -> None:
    text = (
        "messages.3: Did not find 1 `tool_result` block(s) at the beginning of this "
        "message. Messages following `tool_use` blocks must begin with a matching number "
        "of `tool_result` blocks."
    )
    anthropic_api.answer(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    )
    with pytest.raises(ProviderError) as caught:
        _provider(anthropic_api.url).complete(adapted("anthropic-messages").body, model="c")
    assert caught.value.code == "provider_request_rejected"
    assert caught.value.retryable is False
    assert text in caught.value.message


def test_connection_refused_is_retryable_unavailable(closed_port_url: str) -> None:
    with pytest.raises(ProviderError) as caught:
        _provider(closed_port_url).complete(
            {"messages": [{"role": "user", "content": "x"}]}, model="c"
        )
    assert caught.value.code == "provider_unavailable"
    assert caught.value.retryable is True


def test_timeout_is_retryable_unavailable(anthropic_api: FakeAPI) -> None:
    anthropic_api.answer(200, ANTHROPIC_TOOL_USE_REPLY, delay=1.0)
    with pytest.raises(ProviderError) as caught:
        _provider(anthropic_api.url, timeoutSeconds=0.2).complete(
            {"messages": [{"role": "user", "content": "x"}]}, model="c"
        )
    assert caught.value.code == "provider_unavailable"
    assert caught.value.details["reason"] == "timeout"
