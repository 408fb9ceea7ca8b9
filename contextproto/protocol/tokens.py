"""The engine's token estimate: characters / 4, rounded up. Deterministic, not a tokenizer.

One estimator, `text_tokens`, over two measures of a value:

* `json_tokens(value)`: the characters of `canonical_json(value)` (sorted keys, non-ASCII as
  written, json.dumps' own `", "` and `": "` separators). Views, requests and tool schemas
  are measured so: the capacity check and its protected sizes, the view's context pressure,
  usage estimated when a provider reports none, the admin's token breakdown.
* `message_tokens(message)`: what the maintenance planner counts of one raw message: its
  text, a tool call's name and compact JSON arguments, 256 per image. It plans a boundary
  from the log's content, not from a view's wire shape.

Each figure is pinned by tests and by recorded plans, so the two measures stay as they were
(docs/decisions.md). Reports that need a closer count use cl100k_base in the project's
`contextproto/tokens.py`, whose fallback is this estimator.
"""

from __future__ import annotations

from contextproto.protocol import json_texts
from contextproto.protocol.content_parts import compact_json, is_image_part, is_text_part
from contextproto.protocol.messages import KIND_TOOL_CALL, RawMessage

CHARS_PER_TOKEN = 4
IMAGE_TOKEN_ESTIMATE = 256


def chars_tokens(chars: int) -> int:
    """ceil(chars / 4): the estimate of `chars` characters."""
    return -(-chars // CHARS_PER_TOKEN)


def text_tokens(text: str) -> int:
    """The estimate of `text`."""
    return chars_tokens(len(text))


def canonical_json(value: object) -> str:
    """The JSON text a value is measured (and a script's expectation matched) on."""
    return json_texts.canonical(value)


def json_tokens(value: object) -> int:
    """The estimate of `value`'s canonical JSON."""
    return text_tokens(canonical_json(value))


def message_tokens(message: RawMessage) -> int:
    """The maintenance planner's estimate of one message.

    ceil(characters / 4) over the text content (plus the tool name and the compact JSON of
    the arguments for a tool call; non-text, non-image parts count by their JSON), and 256
    per image part. Deterministic, so the same log always plans the same boundary.
    """
    chars = 0
    images = 0
    content = message.content
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        for part in content:
            if is_image_part(part):
                images += 1
            elif is_text_part(part):
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else len(compact_json(text))
            else:
                chars += len(json_texts.canonical_any(part))
    if message.kind == KIND_TOOL_CALL:
        chars += len(message.tool_name or "")
        chars += len(compact_json(message.arguments if message.arguments is not None else {}))
    return chars_tokens(chars) + images * IMAGE_TOKEN_ESTIMATE
