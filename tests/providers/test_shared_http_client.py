"""The providers' one HTTP client per process (sessions_app/providers/base.SharedHttpClient).

Every model call builds its SDK client (key, base URL, timeout) over the same HTTP client:
no CA bundle loaded per call, keep-alive connections reused, and nothing of a call's key
kept in the shared part.
"""

from __future__ import annotations

import os

import pytest

from sessions_app.providers import ProviderError
from sessions_app.providers.anthropic_messages import AnthropicMessagesProvider
from sessions_app.providers.base import CallOptions, SharedHttpClient
from sessions_app.providers.openai_chat import OpenAIChatProvider
from tests.providers.servers import FakeAPI

HI = {"messages": [{"role": "user", "content": "hi"}]}


def _openai(api: FakeAPI, key: str, **config) -> OpenAIChatProvider:
    return OpenAIChatProvider(
        {"baseUrl": f"{api.url}/v1", **config}, CallOptions(api_key=key, require_key=False)
    )


def test_calls_share_one_connection_and_keep_their_own_keys(openai_api: FakeAPI) -> None:
    _openai(openai_api, "sk-first").complete(HI, model="m")
    _openai(openai_api, "sk-second").complete(HI, model="m")
    assert [r.headers["authorization"] for r in openai_api.received] == [
        "Bearer sk-first",
        "Bearer sk-second",
    ]
    assert len(openai_api.connections) == 1  # the second call reused the first's connection


def test_anthropic_calls_share_one_connection(anthropic_api: FakeAPI) -> None:
    for key in ("sk-ant-first", "sk-ant-second"):
        AnthropicMessagesProvider(
            {"baseUrl": anthropic_api.url}, CallOptions(api_key=key, require_key=False)
        ).complete(HI, model="claude-test")
    assert [r.headers["x-api-key"] for r in anthropic_api.received] == [
        "sk-ant-first",
        "sk-ant-second",
    ]
    assert len(anthropic_api.connections) == 1


def test_each_call_keeps_its_own_timeout(openai_api: FakeAPI) -> None:
    openai_api.answer(200, {}, delay=1.0)
    with pytest.raises(ProviderError) as caught:
        _openai(openai_api, "sk-x", timeoutSeconds=0.2).complete(HI, model="m")
    assert caught.value.details["reason"] == "timeout"
    _openai(openai_api, "sk-x", timeoutSeconds=5).complete(HI, model="m")  # the default answer


def test_a_forked_child_or_a_closed_client_gets_a_new_one(monkeypatch) -> None:
    made: list[object] = []

    class Client:
        is_closed = False

    def factory() -> Client:
        made.append(Client())
        return made[-1]

    shared = SharedHttpClient(factory)
    first = shared.get()
    assert shared.get() is first
    first.is_closed = True
    second = shared.get()
    assert second is not first
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    assert shared.get() is not second
    assert len(made) == 3
