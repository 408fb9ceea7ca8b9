"""Our messages in the GenAI semantic conventions' shapes (contract §22): pure functions.

`gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions` are JSON
text on spans (the conventions' advice while structured attributes are not supported on
spans): lists of `{"role", "parts": [...]}` with `text`, `tool_call`, `tool_call_response`
and `reasoning` parts. A view message (the neutral wire shape, contract §12.1) maps to one
of them; an image is a text part naming it (its bytes are not telemetry).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextproto.protocol.content_parts import (
    PART_REDACTED_THINKING,
    PART_THINKING,
    content_text,
    part_text,
    part_type,
)
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT

# gen_ai.provider.name's well-known values, by our wire formats and model providers.
_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "anthropic-messages": "anthropic",
}


def provider_name(model_provider: str | None, wire_format: str | None = None) -> str:
    """`gen_ai.provider.name`: the vendor the model answers for.

    The version's model provider when it is a vendor; for a host's own model (`external`)
    the wire format the view was adapted to; otherwise our own name (`scripted`), or
    `_OTHER`, the conventions' value for an unknown provider.
    """
    for candidate in (model_provider, wire_format):
        if candidate in _PROVIDERS:
            return _PROVIDERS[candidate]
    if model_provider and model_provider != "external":
        return f"contextproto.{model_provider}"
    return "_OTHER"


def _parts(content: object) -> list[dict[str, Any]]:
    """A message content's parts in the conventions' shapes."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    if not isinstance(content, list):
        return [{"type": "text", "content": content_text(content)}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part_type(part)
        text = part_text(part)
        if text is not None:
            parts.append({"type": "text", "content": text})
        elif kind == PART_THINKING and isinstance(part.get("thinking"), str):
            parts.append({"type": "reasoning", "content": part["thinking"]})
        elif kind in (PART_REDACTED_THINKING, "reasoning"):
            parts.append({"type": "reasoning", "content": "[redacted]"})
        else:  # an image names itself (`[image image/png]`); another part is its JSON
            parts.append({"type": "text", "content": content_text([part])})
    return parts


def _tool_call_part(call_id: object, name: object, arguments: object) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def input_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One view message (neutral wire shape) as a `gen_ai.input.messages` entry."""
    kind = message.get("kind")
    role = str(message.get("role") or "user")
    if kind == KIND_TOOL_RESULT:
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("toolCallId"),
                    "result": content_text(message.get("content")),
                }
            ],
        }
    parts = _parts(message.get("content"))
    if kind == KIND_TOOL_CALL:
        parts.append(
            _tool_call_part(
                message.get("toolCallId"), message.get("toolName"), message.get("arguments")
            )
        )
    return {"role": role, "parts": parts}


def view_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system instructions, input messages) of a view: its system message's parts apart."""
    system: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    for message in messages:
        if message.get("kind") == "system":
            system.extend(_parts(message.get("content")))
        else:
            inputs.append(input_message(message))
    return system, inputs


def output_message(
    text: str | None,
    calls: Iterable[tuple[str, str, object]] = (),
    *,
    thinking: Iterable[Mapping[str, Any]] = (),
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A model answer as a `gen_ai.output.messages` entry: reasoning, text, then each
    `(id, name, arguments)` call."""
    parts = _parts(list(thinking)) if thinking else []
    if text:
        parts.append({"type": "text", "content": text})
    parts.extend(_tool_call_part(*call) for call in calls)
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason or "stop"}


def as_json(value: object) -> str:
    """The JSON text an attribute carries (non-ASCII kept, compact)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
