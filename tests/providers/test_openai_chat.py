"""OpenAI Chat Completions provider against a local server speaking the API's shape."""

from __future__ import annotations

import json

import pytest

from sessions_app.providers import ProviderError, ToolCallRequest
from sessions_app.providers.base import CallOptions
from sessions_app.providers.openai_chat import OpenAIChatProvider
from tests.providers.engine_requests import adapted
from tests.providers.servers import OPENAI_TOOL_CALL_REPLY, FakeAPI
from tests.providers.shapes import openai_chat_problems

KEY = "sk-test-123"


def _provider(api_url: str, **config) -> OpenAIChatProvider:
    return OpenAIChatProvider(
        {"baseUrl": f"{api_url}/v1", "apiKeyEnv": "TEST_OPENAI_KEY", **config}
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)


def test_request_as_sent_matches_the_chat_completions_shape(openai_api: FakeAPI) -> None:
    request = adapted("openai-chat")
    _provider(openai_api.url).complete(request.body, model="gpt-test", max_output_tokens=256)

    sent = openai_api.last
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"].startswith("application/json")
    body = sent.body
    assert openai_chat_problems(body) == []
    assert body["model"] == "gpt-test"
    assert body["messages"] == request.body["messages"]  # the adapter body, unchanged
    assert body["tools"] == request.body["tools"]
    assert body["max_completion_tokens"] == 256
    assert "max_tokens" not in body
    # One tool call per answer (contract §4.5), as the adapter asked.
    assert body["parallel_tool_calls"] is False
    assert set(body) == {
        "model",
        "messages",
        "tools",
        "parallel_tool_calls",
        "max_completion_tokens",
    }


def test_the_text_beside_a_call_is_sent_and_thinking_is_not(openai_api: FakeAPI) -> None:
    _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    messages = openai_api.last.body["messages"]
    first_call = next(m for m in messages if m.get("tool_calls"))
    assert first_call["content"] == "First I look the customer up."
    assert "customer record has the budget" not in json.dumps(messages)


def test_a_request_without_tools_sends_no_parallel_tool_calls(openai_api: FakeAPI) -> None:
    body = adapted("openai-chat").body
    del body["tools"], body["parallel_tool_calls"]
    _provider(openai_api.url).complete(body, model="gpt-test")
    assert "parallel_tool_calls" not in openai_api.last.body


def test_the_body_is_posted_as_built(openai_api: FakeAPI) -> None:
    # Every field the adapter or a gateway client sets reaches the server as it was built
    # (the provider posts the body; no SDK transform in between).
    request = {
        **adapted("openai-chat").body,
        "parallel_tool_calls": False,
        "prompt_cache_key": "session-1",
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "tool_choice": "auto",
        "max_completion_tokens": 99,
    }
    _provider(openai_api.url).complete(request, model="gpt-test")
    assert openai_api.last.body == {"model": "gpt-test", **request}


def test_without_a_key_no_authorization_header_is_sent(openai_api: FakeAPI) -> None:
    OpenAIChatProvider(
        {"baseUrl": f"{openai_api.url}/v1"}, CallOptions(api_key=None, require_key=False)
    ).complete({"messages": [{"role": "user", "content": "hi"}]}, model="m")
    assert "authorization" not in openai_api.last.headers


def test_sent_history_pairs_each_tool_message_with_its_call(openai_api: FakeAPI) -> None:
    _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    messages = openai_api.last.body["messages"]
    assert messages[0]["role"] == "system"
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            issuer = messages[i - 1]
            assert issuer["role"] == "assistant"
            assert [c["id"] for c in issuer["tool_calls"]] == [message["tool_call_id"]]
            arguments = issuer["tool_calls"][0]["function"]["arguments"]
            assert isinstance(arguments, str) and isinstance(json.loads(arguments), dict)
    assert "Zürich" in json.dumps(messages, ensure_ascii=False)


def test_the_checker_catches_a_tool_message_without_its_call() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": {"a": 1}},
                    }
                ],
            },
        ],
    }
    problems = openai_chat_problems(body)
    assert any("does not follow an assistant message" in p for p in problems)
    assert any("arguments must be a JSON string" in p for p in problems)
    assert any("have no tool message" in p for p in problems)


def test_tool_call_reply_is_parsed(openai_api: FakeAPI) -> None:
    reply = _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    assert reply.text is None
    assert reply.tool_calls == (
        ToolCallRequest(id="call_1", name="context_window_open", arguments={"purpose": "x"}),
    )
    assert reply.usage == {"inputTokens": 123, "outputTokens": 7}
    assert reply.stop_reason == "tool_calls"
    assert reply.notes == ()
    assert json.loads(json.dumps(reply.raw))["id"] == "chatcmpl-1"


def test_text_reply_with_cached_and_reasoning_tokens(openai_api: FakeAPI) -> None:
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    body["choices"][0]["message"] = {"role": "assistant", "content": "Quote ready: 9000 CHF."}
    body["choices"][0]["finish_reason"] = "stop"
    body["usage"] = {
        "prompt_tokens": 2000,
        "completion_tokens": 40,
        "total_tokens": 2040,
        "prompt_tokens_details": {"cached_tokens": 1536},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    openai_api.answer(200, body)
    reply = _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    assert reply.text == "Quote ready: 9000 CHF."
    assert reply.tool_calls == ()
    assert reply.stop_reason == "stop"
    assert reply.usage == {
        "inputTokens": 2000,
        "outputTokens": 40,
        "cacheReadInputTokens": 1536,  # part of inputTokens, as OpenAI counts
        "reasoningTokens": 12,
    }


def test_null_prompt_token_details_mean_no_cache_reads(openai_api: FakeAPI) -> None:
    # Some compatible servers answer `prompt_tokens_details: null`.
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    body["usage"] = {
        "prompt_tokens": 900,
        "completion_tokens": 4,
        "total_tokens": 904,
        "prompt_tokens_details": None,
    }
    openai_api.answer(200, body)
    reply = _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    assert reply.usage == {"inputTokens": 900, "outputTokens": 4}


def test_unparsable_arguments_are_kept_raw_and_noted(openai_api: FakeAPI) -> None:
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"purpose": '
    openai_api.answer(200, body)
    reply = _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    assert reply.tool_calls[0].arguments == '{"purpose": '
    assert any("call_1" in note and "not a JSON object" in note for note in reply.notes)


def test_missing_usage_is_estimated_and_labelled(openai_api: FakeAPI) -> None:
    body = json.loads(json.dumps(OPENAI_TOOL_CALL_REPLY))
    del body["usage"]
    openai_api.answer(200, body)
    request = adapted("openai-chat").body
    reply = _provider(openai_api.url).complete(request, model="gpt-test")
    assert reply.usage["estimated"] is True
    assert reply.usage["inputTokens"] > 0


def test_tools_are_omitted_when_the_request_has_none(openai_api: FakeAPI) -> None:
    request = {"messages": [{"role": "user", "content": "hi"}]}
    _provider(openai_api.url).complete(request, model="gpt-test")
    assert "tools" not in openai_api.last.body
    assert "max_completion_tokens" not in openai_api.last.body


def test_max_tokens_param_for_older_compatible_servers(openai_api: FakeAPI) -> None:
    provider = _provider(openai_api.url, maxTokensParam="max_tokens", maxOutputTokens=64)
    provider.complete({"messages": [{"role": "user", "content": "hi"}]}, model="m")
    assert openai_api.last.body["max_tokens"] == 64
    assert "max_completion_tokens" not in openai_api.last.body


def test_settings_give_base_url_and_key(openai_api: FakeAPI, settings) -> None:
    settings.OPENAI_BASE_URL = f"{openai_api.url}/v1"
    settings.OPENAI_API_KEY = "sk-from-settings"
    OpenAIChatProvider({}).complete({"messages": [{"role": "user", "content": "hi"}]}, model="m")
    assert openai_api.last.headers["authorization"] == "Bearer sk-from-settings"


def test_config_overrides_the_settings(openai_api: FakeAPI, settings, closed_port_url: str) -> None:
    settings.OPENAI_BASE_URL = f"{closed_port_url}/v1"
    settings.OPENAI_API_KEY = "sk-from-settings"
    _provider(openai_api.url).complete({"messages": [{"role": "user", "content": "hi"}]}, model="m")
    assert openai_api.last.headers["authorization"] == f"Bearer {KEY}"


def test_no_key_is_a_configuration_error(settings) -> None:
    settings.OPENAI_API_KEY = None
    with pytest.raises(ProviderError) as caught:
        OpenAIChatProvider({"baseUrl": "http://127.0.0.1:9/v1"})
    assert caught.value.code == "provider_not_configured"
    assert "OPENAI_API_KEY" in caught.value.message


def test_api_key_env_that_is_unset_is_a_configuration_error() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIChatProvider({"apiKeyEnv": "NO_SUCH_VARIABLE_SET"})
    assert caught.value.code == "provider_not_configured"
    assert "NO_SUCH_VARIABLE_SET" in caught.value.message


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (500, "provider_unavailable", True),
        (503, "provider_unavailable", True),
        (429, "provider_rate_limited", True),
        (400, "provider_request_rejected", False),
        (401, "provider_request_rejected", False),
        (404, "provider_request_rejected", False),
    ],
)
def test_http_errors_are_mapped(
    openai_api: FakeAPI, status: int, code: str, retryable: bool
) -> None:
    message = f"something about status {status}"
    openai_api.answer(
        status,
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "bad_thing",
            }
        },
        headers={"retry-after": "3", "x-request-id": "req_42"},
    )
    with pytest.raises(ProviderError) as caught:
        _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    error = caught.value
    assert (error.code, error.retryable) == (code, retryable)
    assert message in error.message
    assert f"HTTP {status}" in error.message
    assert error.details["status"] == status
    assert error.details["requestId"] == "req_42"
    assert error.details["retryAfterSeconds"] == 3.0
    assert len(openai_api.received) == 1  # max_retries=0: the SDK did not retry


def test_bad_request_carries_the_providers_message(openai_api: FakeAPI) -> None:
    text = (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'."
    )
    openai_api.answer(
        400,
        {
            "error": {
                "message": text,
                "type": "invalid_request_error",
                "param": "messages.[3].role",
                "code": None,
            }
        },
    )
    with pytest.raises(ProviderError) as caught:
        _provider(openai_api.url).complete(adapted("openai-chat").body, model="gpt-test")
    assert caught.value.code == "provider_request_rejected"
    assert caught.value.retryable is False
    assert caught.value.details["providerMessage"] == text


def test_connection_refused_is_retryable_unavailable(closed_port_url: str) -> None:
    with pytest.raises(ProviderError) as caught:
        _provider(closed_port_url).complete(
            {"messages": [{"role": "user", "content": "x"}]}, model="m"
        )
    assert caught.value.code == "provider_unavailable"
    assert caught.value.retryable is True
    assert caught.value.details["reason"] == "connection"


def test_timeout_is_retryable_unavailable(openai_api: FakeAPI) -> None:
    openai_api.answer(200, OPENAI_TOOL_CALL_REPLY, delay=1.0)
    with pytest.raises(ProviderError) as caught:
        _provider(openai_api.url, timeoutSeconds=0.2).complete(
            {"messages": [{"role": "user", "content": "x"}]}, model="m"
        )
    assert caught.value.code == "provider_unavailable"
    assert caught.value.retryable is True
    assert caught.value.details["reason"] == "timeout"


def test_a_response_without_choices_is_invalid(openai_api: FakeAPI) -> None:
    openai_api.answer(200, {"id": "x", "object": "chat.completion", "choices": []})
    with pytest.raises(ProviderError) as caught:
        _provider(openai_api.url).complete(
            {"messages": [{"role": "user", "content": "x"}]}, model="m"
        )
    assert caught.value.code == "provider_response_invalid"
    assert caught.value.retryable is False
