"""What every provider adapter shares (contract §4.5): the wire formats a view is adapted
for, the adapted request, and how a content reads as text or an image as a URL.

Its own module so each adapter module (adapters.py, adapter_anthropic.py,
responses_adapter.py) imports it and adapters.py dispatches to them all without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contextproto.protocol.content_parts import part_text
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache


class WireFormat(StrEnum):
    """The request/response format a model speaks (the API's `provider` field).

    The one definition of the names: a wire format is not a vendor (`model.provider`
    names the vendor; a scripted model may speak any of these).
    """

    NEUTRAL = "neutral"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    OPENAI_RESPONSES = "openai-responses"


PROVIDER_NEUTRAL = WireFormat.NEUTRAL
PROVIDER_OPENAI_CHAT = WireFormat.OPENAI_CHAT
PROVIDER_ANTHROPIC_MESSAGES = WireFormat.ANTHROPIC_MESSAGES
PROVIDER_OPENAI_RESPONSES = WireFormat.OPENAI_RESPONSES
PROVIDERS: tuple[str, ...] = tuple(WireFormat)

# The OpenAI API an `openai` version's `model.config.api` names, and the wire format it speaks
# (contract §4.5); the first is the default.
OPENAI_APIS: dict[str, WireFormat] = {
    "chat": WireFormat.OPENAI_CHAT,
    "responses": WireFormat.OPENAI_RESPONSES,
}

ROLE_SYSTEM = "system"

# The `parallel_tool_calls` of every OpenAI request with tools (contract §4.5).
OPENAI_PARALLEL_TOOL_CALLS = False


@dataclass(frozen=True)
class AdaptedRequest:
    """A provider request body plus the notes on what adaptation changed."""

    provider: str
    body: dict[str, Any]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class AdaptOptions:
    """What a version says about its requests beyond the view: whether the model accepts an
    assistant prefill (Anthropic), its prompt-cache setting and the session's cache key
    (adapters.py's docstring). An adapter reads what its API has a word for."""

    assistant_prefill: bool = False
    prompt_cache: PromptCache = PROMPT_CACHE_OFF
    cache_key: str | None = None


# One wire format's adapter: the view and its tools as that API's request body. adapters.py
# holds one per WireFormat and is the only place that chooses among them.
Adapter = Callable[[Projection, Sequence[Mapping[str, Any]], AdaptOptions], AdaptedRequest]


def text_of(content: object) -> str:
    """The text parts of `content` joined by new lines: no thinking, image or other part."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for p in content if (text := part_text(p)) is not None)
    return "" if content is None else str(content)


_text_of = text_of  # the name the adapter modules import


def image_url(part: dict[str, Any]) -> str:
    """An image part as a URL: its own, or a `data:` URL of its inline data."""
    if part.get("url"):
        return str(part["url"])
    return f"data:{part.get('mediaType', 'application/octet-stream')};base64,{part.get('data', '')}"
