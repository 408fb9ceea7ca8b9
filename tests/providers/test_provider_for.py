"""Building a provider from an AgentVersion's model settings."""

from __future__ import annotations

import socket

import pytest

from sessions_app.providers import ModelProvider, ProviderError, provider_for
from sessions_app.providers.anthropic_messages import AnthropicMessagesProvider
from sessions_app.providers.openai_chat import OpenAIChatProvider
from sessions_app.providers.scripted import ScriptedProvider


@pytest.fixture
def keys(settings) -> None:
    settings.OPENAI_API_KEY = "sk-o"
    settings.ANTHROPIC_API_KEY = "sk-a"


def test_scripted_takes_the_model_config_as_its_script() -> None:
    provider = provider_for(
        "scripted", {"wireFormat": "anthropic-messages", "steps": [{"text": "hi"}]}
    )
    assert isinstance(provider, ScriptedProvider)
    assert provider.wire_format == "anthropic-messages"
    assert isinstance(provider, ModelProvider)


@pytest.mark.parametrize(
    ("name", "cls", "wire_format"),
    [
        ("openai", OpenAIChatProvider, "openai-chat"),
        ("anthropic", AnthropicMessagesProvider, "anthropic-messages"),
    ],
)
def test_real_providers_say_which_adapter_body_they_consume(keys, name, cls, wire_format) -> None:
    provider = provider_for(name, {})
    assert isinstance(provider, cls)
    assert provider.wire_format == wire_format
    assert isinstance(provider, ModelProvider)


def test_real_providers_default_to_the_official_endpoints(keys) -> None:
    assert provider_for("openai", None).connection.base_url == "https://api.openai.com/v1"
    assert provider_for("anthropic", {}).connection.base_url == "https://api.anthropic.com"
    assert provider_for("openai", {}).connection.timeout == 60.0


def test_external_is_not_runnable() -> None:
    with pytest.raises(ProviderError) as caught:
        provider_for("external", {})
    assert caught.value.code == "provider_not_runnable"


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ProviderError) as caught:
        provider_for("gemini", {})
    assert caught.value.code == "provider_unknown"
    assert "gemini" in caught.value.message


def test_a_bad_timeout_is_a_configuration_error(keys) -> None:
    with pytest.raises(ProviderError) as caught:
        provider_for("anthropic", {"timeoutSeconds": 0})
    assert caught.value.code == "provider_not_configured"


def test_an_empty_scripted_config_is_an_invalid_script() -> None:
    with pytest.raises(ProviderError) as caught:
        provider_for("scripted", {})
    assert caught.value.code == "script_invalid"


def test_provider_tests_cannot_reach_the_internet() -> None:
    with pytest.raises(AssertionError, match="tried to reach"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)
