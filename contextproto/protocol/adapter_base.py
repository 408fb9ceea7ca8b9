"""What every provider adapter shares (contract §4.5): the wire formats a view is adapted
for, the adapted request, and the text of a message's content."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contextproto.protocol.content_parts import part_text


class WireFormat(StrEnum):
    """The request/response format a model speaks (the API's `provider` field).

    The one definition of the names: a wire format is not a vendor (`model.provider`
    names the vendor; a scripted model may speak any of these).
    """

    NEUTRAL = "neutral"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC_MESSAGES = "anthropic-messages"


PROVIDER_NEUTRAL = WireFormat.NEUTRAL
PROVIDER_OPENAI_CHAT = WireFormat.OPENAI_CHAT
PROVIDER_ANTHROPIC_MESSAGES = WireFormat.ANTHROPIC_MESSAGES
PROVIDERS: tuple[str, ...] = tuple(WireFormat)

ROLE_SYSTEM = "system"


@dataclass(frozen=True)
class AdaptedRequest:
    """A provider request body plus the notes on what adaptation changed."""

    provider: str
    body: dict[str, Any]
    notes: tuple[str, ...]


def _text_of(content: object) -> str:
    """The text parts of `content` joined by new lines: no thinking, image or other part."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for p in content if (text := part_text(p)) is not None)
    return "" if content is None else str(content)
