"""Model providers the built-in runtime drives (contract §7): scripted, OpenAI (Chat Completions,
or the Responses API with `model.config.api: "responses"`), Anthropic.

The registry: `provider_for(provider, config)` builds one from an AgentVersion's model
settings. The provider modules import `base` and nothing of this package, so the graph is
one-way (`__init__` -> each provider -> `base`). The SDK-backed modules are imported only
when such a provider is asked for: importing an SDK costs a web process time and memory it
never needs when no version of it names that vendor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contextproto.errors import PROVIDER_NOT_CONFIGURED, PROVIDER_NOT_RUNNABLE, PROVIDER_UNKNOWN
from contextproto.protocol.adapters import OPENAI_APIS, WireFormat
from sessions_app.providers.base import (
    RUNNABLE_PROVIDERS,
    CallOptions,
    ModelProvider,
    ModelReply,
    ProviderError,
    ToolCallRequest,
)
from sessions_app.providers.scripted import ScriptedProvider

__all__ = [
    "CallOptions",
    "ModelProvider",
    "ModelReply",
    "ProviderError",
    "ToolCallRequest",
    "provider_for",
]


def _openai(config: dict[str, Any], options: CallOptions | None) -> ModelProvider:
    api = config.get("api") or next(iter(OPENAI_APIS))
    if OPENAI_APIS.get(api) == WireFormat.OPENAI_RESPONSES:
        from sessions_app.providers.openai_responses import (  # lazy SDK import
            OpenAIResponsesProvider,
        )

        return OpenAIResponsesProvider(config, options)
    if api not in OPENAI_APIS:
        raise ProviderError(
            PROVIDER_NOT_CONFIGURED,
            f"openai: model.config.api must be one of {', '.join(OPENAI_APIS)} (got {api!r}).",
            details={"api": api},
        )
    from sessions_app.providers.openai_chat import OpenAIChatProvider  # lazy SDK import

    return OpenAIChatProvider(config, options)


def _scripted(config: dict[str, Any], options: CallOptions | None) -> ModelProvider:
    return ScriptedProvider(config, timeout=options.timeout if options else None)


def _anthropic(config: dict[str, Any], options: CallOptions | None) -> ModelProvider:
    from sessions_app.providers.anthropic_messages import (  # lazy SDK import
        AnthropicMessagesProvider,
    )

    return AnthropicMessagesProvider(config, options)


_FACTORIES: dict[str, Callable[[dict[str, Any], CallOptions | None], ModelProvider]] = {
    "scripted": _scripted,
    "openai": _openai,
    "anthropic": _anthropic,
}


def provider_for(
    provider: str, config: Mapping[str, Any] | None, options: CallOptions | None = None
) -> ModelProvider:
    """Build the provider an AgentVersion names (`model.provider` plus its config); a
    gateway request adds its `options` (the client's upstream key, its timeout).

    Raises ProviderError `provider_not_runnable` for `external` (a host drives the
    session), `provider_unknown` for any other unknown name, and `script_invalid` for a
    malformed script.
    """
    factory = _FACTORIES.get(provider)
    if factory is not None:
        return factory(dict(config or {}), options)
    if provider == "external":
        raise ProviderError(
            PROVIDER_NOT_RUNNABLE,
            "provider 'external' is driven by a host through the API; the service cannot call it.",
            details={"provider": provider},
        )
    raise ProviderError(
        PROVIDER_UNKNOWN,
        f"unknown model provider {provider!r}; use one of {', '.join(RUNNABLE_PROVIDERS)} "
        "(or 'external').",
        details={"provider": provider, "providers": [*RUNNABLE_PROVIDERS, "external"]},
    )
