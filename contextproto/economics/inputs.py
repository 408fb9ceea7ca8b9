"""What the cache economy report takes: a view's turns, how to rebuild and bill their requests.

A turn is a projection as the view showed it, the tools it was offered and its send time;
`request_body` rebuilds its request for a provider with the report's settings, as the
adapters build it when they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextproto.economics.linearise import SIMULATED_PROVIDERS
from contextproto.economics.prices import Prices
from contextproto.protocol.adapters import (
    PROVIDER_ANTHROPIC_MESSAGES,
    PROVIDER_OPENAI_CHAT,
    adapt,
)
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import PromptCache

# Reference models: Anthropic's minimum cacheable prefix depends on the model (1024 for
# Sonnet 4.5); OpenAI's is 1024 for every model.
DEFAULT_MODELS: Mapping[str, str] = {
    PROVIDER_OPENAI_CHAT: "gpt-4o",
    PROVIDER_ANTHROPIC_MESSAGES: "claude-sonnet-4-5",
}
# Prices relative to the input price: cache reads 0.1; Anthropic bills a 5-minute write
# 1.25x (1-hour 2x), OpenAI has no write charge (its simulated turns write nothing anyway).
RELATIVE_PRICES: Mapping[str, Prices] = {
    PROVIDER_OPENAI_CHAT: Prices(input=1.0, cache_read=0.1, cache_write=1.0, cache_write_1h=1.0),
    PROVIDER_ANTHROPIC_MESSAGES: Prices(
        input=1.0, cache_read=0.1, cache_write=1.25, cache_write_1h=2.0
    ),
}
PROVIDER_LABELS: Mapping[str, str] = {
    PROVIDER_OPENAI_CHAT: "OpenAI",
    PROVIDER_ANTHROPIC_MESSAGES: "Anthropic",
}


class CacheReportError(ValueError):
    """Turns the report cannot replay, with what to fix."""


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ViewTurn:
    """One turn: the view as projected, the tools it was offered, when it was sent.

    `tools` are `{name, description, inputSchema}` as the adapters take them; `sent_at` is
    in seconds on any clock that only moves forward; `label` names the turn (a snapshot id).
    """

    projection: Projection
    tools: tuple[Mapping[str, Any], ...] = ()
    sent_at: float = 0.0
    label: str = ""


@dataclass(frozen=True)
class EconomySettings:
    """How the requests are rebuilt and billed.

    `prompt_cache`: the hints the adapters add (default: auto, 5m; as contract §8's default).
    `cache_key`: the OpenAI `prompt_cache_key` (the session's). `min_cacheable_tokens`
    overrides the model's minimum (None: the model's, from the simulator's table).
    """

    providers: tuple[str, ...] = SIMULATED_PROVIDERS
    prompt_cache: PromptCache = field(default_factory=PromptCache)
    cache_key: str | None = None
    models: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_MODELS))
    prices: Mapping[str, Prices] = field(default_factory=lambda: dict(RELATIVE_PRICES))
    assistant_prefill: bool = False
    min_cacheable_tokens: int | None = None


def request_body(provider: str, turn: ViewTurn, settings: EconomySettings) -> dict[str, Any]:
    """The request `turn` sends to `provider`, with the settings' cache hints and key."""
    return adapt(
        turn.projection,
        provider,
        list(turn.tools),
        assistant_prefill=settings.assistant_prefill,
        prompt_cache=settings.prompt_cache,
        cache_key=settings.cache_key,
    ).body
