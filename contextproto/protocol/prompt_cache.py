"""Prompt caching settings (contract §8): `model.promptCache`, its schema, and the session's key.

An AgentVersion says whether the adapters mark the request for the provider's prompt cache
(`mode`: `auto` | `off`) and, on Anthropic, how long an entry lives (`ttl`: `5m` | `1h`).
`{}` means the defaults. The admin generates its fields from PROMPT_CACHE_SCHEMA, publish
checks a stored value with `validate_prompt_cache`, and the adapters take a `PromptCache`.

What the providers document (read in 2026; where the adapters use it, see adapters.py):
* Anthropic, "Prompt caching" (platform.claude.com/docs/en/build-with-claude/prompt-caching):
  a `cache_control: {"type": "ephemeral"}` breakpoint on a tool, a system text block or a
  message content block caches the prefix up to it; `ttl` `"5m"` (default, writes 1.25x the
  input price) or `"1h"` (writes 2x); reads cost 0.1x and refresh the entry. A breakpoint
  only looks back about 20 blocks for an entry written earlier. Below a model's minimum
  (1024 to 4096 tokens depending on the model) nothing is cached and nothing fails.
* OpenAI, "Prompt caching" (developers.openai.com/api/docs/guides/prompt-caching): caching
  is automatic from 1024 tokens; requests are routed by a hash of the prompt's first
  tokens combined with `prompt_cache_key`; keep each prefix-and-key combination below about
  15 requests per minute, so a key per conversation is the recommended granularity.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .errors import (
    PROMPT_CACHE_INVALID_VALUE,
    PROMPT_CACHE_NOT_OBJECT,
    PROMPT_CACHE_UNKNOWN_KEY,
    ProtocolError,
)
from .jsonschema_check import check_value, json_type_name
from .vocabulary import JSON_SCHEMA_DIALECT

MODE_AUTO = "auto"
MODE_OFF = "off"
MODES = (MODE_AUTO, MODE_OFF)
TTL_5M = "5m"
TTL_1H = "1h"
TTLS = (TTL_5M, TTL_1H)

PROMPT_CACHE_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "title": "Prompt cache",
    "type": "object",
    "properties": {
        "mode": {
            "type": "string",
            "title": "Prompt caching",
            "description": (
                "auto: mark the stable start of every request for the provider's prompt cache "
                "(Anthropic cache_control breakpoints on the tools, the system prompt and the "
                "history; an OpenAI prompt_cache_key per session). off: send no cache hints."
            ),
            "enum": list(MODES),
            "default": MODE_AUTO,
        },
        "ttl": {
            "type": "string",
            "title": "Cache lifetime (Anthropic)",
            "description": (
                "How long Anthropic keeps a cached prefix after its last use. 1h costs twice the "
                "input price to write (5m: 1.25 times); worth it when turns are minutes apart."
            ),
            "enum": list(TTLS),
            "default": TTL_5M,
        },
    },
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PromptCache:
    """The prompt-cache setting the adapters apply to one request."""

    mode: str = MODE_AUTO
    ttl: str = TTL_5M

    @property
    def enabled(self) -> bool:
        return self.mode == MODE_AUTO

    def to_wire(self) -> PromptCacheWire:
        return {"mode": self.mode, "ttl": self.ttl}

    @classmethod
    def from_config(cls, value: object) -> PromptCache:
        """The setting a stored `model.promptCache` means ({} = the defaults).

        Raises ProtocolError (the first problem's code, every problem in `details.errors`)
        for a value publish would refuse; published versions never hold one.
        """
        checked = validate_prompt_cache(value)
        if checked.normalized is None:
            first = checked.errors[0]
            raise ProtocolError(first["code"], first["message"], {"errors": checked.errors})
        return cls(**checked.normalized)


PROMPT_CACHE_OFF = PromptCache(mode=MODE_OFF)
PROMPT_CACHE_DEFAULTS: dict[str, str] = {
    name: prop["default"] for name, prop in PROMPT_CACHE_SCHEMA["properties"].items()
}


class PromptCacheErrorWire(TypedDict):
    """One problem of a `model.promptCache` value."""

    key: str | None  # None: the value as a whole (not an object)
    code: str
    message: str


class PromptCacheWire(TypedDict):
    mode: str
    ttl: str


@dataclass(frozen=True)
class PromptCacheValidation:
    """Every problem of a `model.promptCache` value at once, or its normalized form."""

    normalized: dict[str, str] | None
    errors: list[PromptCacheErrorWire] = field(default_factory=list)


def validate_prompt_cache(value: object) -> PromptCacheValidation:
    """Check a `model.promptCache` value; when valid, `normalized` holds every key."""
    if not isinstance(value, dict):
        return PromptCacheValidation(
            None,
            [
                {
                    "key": None,
                    "code": PROMPT_CACHE_NOT_OBJECT,
                    "message": "model.promptCache must be a JSON object ({} means the defaults "
                    f'{{"mode": "auto", "ttl": "5m"}}), not {json_type_name(value)}.',
                }
            ],
        )
    properties: dict[str, Any] = PROMPT_CACHE_SCHEMA["properties"]
    errors: list[PromptCacheErrorWire] = []
    for name, schema in properties.items():
        if name in value:
            problem = check_value(schema, value[name])
            if problem is not None:
                errors.append(
                    {
                        "key": name,
                        "code": PROMPT_CACHE_INVALID_VALUE,
                        "message": f"model.promptCache.{name} {problem.message}.",
                    }
                )
    known = ", ".join(properties)
    for key in sorted((k for k in value if k not in properties), key=str):
        errors.append(
            {
                "key": str(key),
                "code": PROMPT_CACHE_UNKNOWN_KEY,
                "message": f"model.promptCache has no key {key!s}; known keys: {known}.",
            }
        )
    if errors:
        return PromptCacheValidation(None, errors)
    normalized = {name: value.get(name, PROMPT_CACHE_DEFAULTS[name]) for name in properties}
    return PromptCacheValidation(normalized)


def effective_prompt_cache(value: object) -> object:
    """What a stored value means, for display: the defaults overlaid by what is stored.

    A draft may hold an invalid value; it is shown as stored (merged when it is an object)
    so the operator sees what publish will refuse.
    """
    if isinstance(value, dict):
        return {**PROMPT_CACHE_DEFAULTS, **value}
    return value


def session_cache_key(session_id: str) -> str:
    """The OpenAI `prompt_cache_key` of a session: stable for its life, one per session.

    A hash, not the id: the provider only needs a stable bucket, and our identifiers stay
    ours. Short (35 characters) and free of anything secret.
    """
    digest = hashlib.sha256(f"contextproto-session:{session_id}".encode()).hexdigest()
    return "cp-" + digest[:32]
