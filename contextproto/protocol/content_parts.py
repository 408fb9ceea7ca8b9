"""The parts of a message's content: their types, the predicates over them, and the content's
text.

A content is a string or a list of JSON parts (contract §2.3): `{"type": "text", "text"}`,
`{"type": "image", "mediaType", "data" | "url"}`, and on a model's answers Anthropic's
reasoning blocks exactly as it gave them, `{"type": "thinking", "thinking", "signature"}` and
`{"type": "redacted_thinking", "data"}`, and OpenAI's reasoning items (a Responses upstream's),
`{"type": "reasoning", "id", "summary", "encryptedContent"}` (contract §3.1). Every "is this
part a text / an image / thinking" question of the engine and the service is answered here, so
a part type is spelt in one place.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from contextproto.protocol import json_texts

PART_TEXT = "text"
PART_IMAGE = "image"
PART_THINKING = "thinking"
PART_REDACTED_THINKING = "redacted_thinking"
THINKING_PART_TYPES = frozenset({PART_THINKING, PART_REDACTED_THINKING})
# OpenAI's reasoning item, stored on the answer it belongs to and sent back only to the
# Responses API (contract §4.5); never text a reader or another provider sees.
PART_REASONING = "reasoning"


def part_type(part: object) -> Any:
    """A part's `type`; None when the part is not an object."""
    return part.get("type") if isinstance(part, dict) else None


def is_text_part(part: object) -> TypeGuard[dict[str, Any]]:
    """Whether `part` is a text part (whatever its `text` holds)."""
    return isinstance(part, dict) and part.get("type") == PART_TEXT


def is_image_part(part: object) -> TypeGuard[dict[str, Any]]:
    """Whether `part` is an image part."""
    return isinstance(part, dict) and part.get("type") == PART_IMAGE


def is_thinking_part(part: object) -> TypeGuard[dict[str, Any]]:
    """Whether `part` is a thinking or redacted_thinking part (contract §2.3)."""
    return isinstance(part, dict) and part.get("type") in THINKING_PART_TYPES


def is_reasoning_part(part: object) -> TypeGuard[dict[str, Any]]:
    """Whether `part` is an OpenAI reasoning item stored on an answer (contract §3.1)."""
    return isinstance(part, dict) and part.get("type") == PART_REASONING


def is_model_reasoning(part: object) -> TypeGuard[dict[str, Any]]:
    """Whether `part` is how a model reasoned (Anthropic thinking or an OpenAI reasoning item):
    stored with the answer, sent back to its own provider only, never shown as its text."""
    return is_thinking_part(part) or is_reasoning_part(part)


def reasoning_summary(part: dict[str, Any]) -> str:
    """The summary text of a reasoning part (its `summary_text` entries, one per line)."""
    summary = part.get("summary")
    if not isinstance(summary, list):
        return ""
    texts = [s.get("text") for s in summary if isinstance(s, dict)]
    return "\n".join(t for t in texts if isinstance(t, str))


def part_text(part: object) -> str | None:
    """The text of a text part whose `text` is a string; None for any other part."""
    if is_text_part(part):
        text = part.get("text")
        if isinstance(text, str):
            return text
    return None


def has_image(content: object) -> bool:
    """Whether `content` is a list of parts with at least one image."""
    return isinstance(content, list) and any(is_image_part(p) for p in content)


def content_text(content: object, *, text_only: bool = False) -> str:
    """Flatten a message content (a string or a list of parts) into text, parts on new lines.

    A text part gives its text, an image part `[image <mediaType>]`, a thinking part
    `[thinking] <its text>`, a redacted_thinking part `[redacted thinking]` and a reasoning
    part `[reasoning] <its summary>` (signatures and encrypted data mean nothing to a
    reader), any other part (or a content that is
    neither a string nor a list) its JSON with sorted keys. With `text_only`, only text
    parts count: other parts are left out, other contents give "". The maintainer's page
    text is built with the default (its prompts are pinned by tests).
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if text_only else json_texts.canonical_any(content)
    pieces: list[str] = []
    for part in content:
        kind = part_type(part)
        if kind == PART_TEXT:
            text = part.get("text")
            if isinstance(text, str):
                pieces.append(text)
            else:
                pieces.append("" if text_only else compact_json(text))
        elif text_only:
            continue
        elif kind == PART_IMAGE:
            media = part.get("mediaType")
            pieces.append(f"[image {media}]" if media else "[image]")
        elif kind == PART_THINKING and isinstance(part.get("thinking"), str):
            pieces.append(f"[thinking] {part['thinking']}")
        elif kind == PART_REDACTED_THINKING:
            pieces.append("[redacted thinking]")
        elif kind == PART_REASONING:
            summary = reasoning_summary(part)
            pieces.append(f"[reasoning] {summary}" if summary else "[reasoning]")
        else:
            pieces.append(json_texts.canonical_any(part))
    return "\n".join(pieces)


def compact_json(value: object) -> str:
    """`value` as JSON with sorted keys and no spaces: how a non-string `text` reads, and the
    spelling the maintenance planner measures a call's arguments and hashes its pages in."""
    return json_texts.canonical_compact(value)
