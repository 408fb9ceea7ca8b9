"""What real hosts send, taken as it comes (contract §5.2): tool call ids, arguments as JSON
text, and usage objects in a provider's own shape.

Pure functions: the HTTP API, MCP, the built-in runtime and a gateway all call them, so a
provider's id, argument text or usage object means the same thing whichever way it arrives.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any, TypedDict

from .errors import USAGE_INVALID, ProtocolError

# ---------------------------------------------------------------- tool call ids

# Providers make ids such as `call_AbC…` (OpenAI), `toolu_01…` (Anthropic), or whatever a
# framework chooses (`functions.lookup:0`, ids with `/`); 256 code points holds them all.
TOOL_CALL_ID_MAX_CHARS = 256


def tool_call_id_problem(value: object) -> str | None:
    """What is wrong with `value` as a tool call id, or None when it is one.

    An id is 1 to TOOL_CALL_ID_MAX_CHARS code points, none of Unicode category Cc (control
    characters: they cannot travel in a URL path or a log line unescaped).
    """
    if not isinstance(value, str):
        return f"a tool call id is a string, not {type(value).__name__}"
    if not 1 <= len(value) <= TOOL_CALL_ID_MAX_CHARS:
        return (
            f"a tool call id is 1 to {TOOL_CALL_ID_MAX_CHARS} characters (code points); this "
            f"one has {len(value)}"
        )
    for position, char in enumerate(value):
        if unicodedata.category(char) == "Cc":
            return (
                f"a tool call id holds no control character; this one has U+{ord(char):04X} "
                f"at position {position}"
            )
    return None


# ---------------------------------------------------------------- arguments as JSON text


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are Python's extension, not JSON: text holding them is not JSON text.
    raise ValueError(f"{name} is not JSON")


def arguments_from_text(text: str) -> dict[str, Any] | None:
    """The object that `text` (a provider's argument string) is the JSON text of, else None.

    Strict JSON: `NaN` and `Infinity` make the text not JSON. Text that parses to anything
    but an object (an array, a number, a string) is not an argument object either. A
    RecursionError (text nested beyond the decoder's stack) propagates: the caller refuses
    it like any too deep document.
    """
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def arguments_text_problem(text: str) -> str:
    """Why `text` is not the JSON text of an argument object, in words for the model."""
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return f"it is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return f"it is not valid JSON ({exc})"
    kind = "an array" if isinstance(parsed, list) else f"a {type(parsed).__name__}"
    return f"it is the JSON text of {kind}, not of an object"


# ---------------------------------------------------------------- provider usage objects


class TokenCounts(TypedDict):
    """A turn's usage in contract §8's convention: `inputTokens` counts every input token,
    cache reads and writes included."""

    inputTokens: int
    outputTokens: int
    cacheReadInputTokens: int
    cacheWriteInputTokens: int


OPENAI_FIELDS = ("prompt_tokens", "completion_tokens")
ANTHROPIC_FIELDS = ("input_tokens", "output_tokens")


def _count(usage: Mapping[str, Any], name: str, path: str, *, required: bool) -> int:
    value = usage.get(name)
    if value is None and not required:
        # The SDKs' model_dump() writes absent counts as null.
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = "missing" if name not in usage else f"{json.dumps(value)[:40]}"
        raise ProtocolError(
            USAGE_INVALID,
            f"{path}: a token count is a JSON integer >= 0 ({shown} here).",
            {"field": path},
        )
    return value


def usage_from_provider(usage: object, *, root: str = "usage") -> TokenCounts:
    """Convert a provider's usage object to contract §8's counts.

    OpenAI Chat Completions (`prompt_tokens`, `completion_tokens`,
    `prompt_tokens_details.cached_tokens`; cache writes are not reported, so 0) or Anthropic
    Messages (`input_tokens` uncached only, `output_tokens`, `cache_read_input_tokens`,
    `cache_creation_input_tokens`; the three input counts are added up). Other fields the
    SDKs report (`total_tokens`, `*_details`, `server_tool_use`, `service_tier`, …) are
    ignored. Raises ProtocolError `usage_invalid` naming the field (under `root`) for an
    object of neither shape, of both, or with a count that is not an integer >= 0, and for
    cache counts above the input.
    """
    if not isinstance(usage, Mapping):
        raise ProtocolError(
            USAGE_INVALID,
            f"{root} is the provider's usage object (a JSON object), not {type(usage).__name__}.",
            {"field": root},
        )
    openai = any(name in usage for name in OPENAI_FIELDS)
    anthropic = any(name in usage for name in ANTHROPIC_FIELDS)
    if openai == anthropic:
        raise ProtocolError(
            USAGE_INVALID,
            f"{root} must be an OpenAI usage object (prompt_tokens, completion_tokens) or an "
            "Anthropic one (input_tokens, output_tokens); this one has "
            + ("fields of both." if openai else "neither."),
            {"field": root},
        )
    if openai:
        prompt = _count(usage, "prompt_tokens", f"{root}.prompt_tokens", required=True)
        output = _count(usage, "completion_tokens", f"{root}.completion_tokens", required=True)
        details = usage.get("prompt_tokens_details")
        if details is not None and not isinstance(details, Mapping):
            raise ProtocolError(
                USAGE_INVALID,
                f"{root}.prompt_tokens_details is an object or null.",
                {"field": f"{root}.prompt_tokens_details"},
            )
        cached = (
            _count(
                details,
                "cached_tokens",
                f"{root}.prompt_tokens_details.cached_tokens",
                required=False,
            )
            if details is not None
            else 0
        )
        if cached > prompt:
            raise ProtocolError(
                USAGE_INVALID,
                f"{root}.prompt_tokens_details.cached_tokens ({cached}) is above prompt_tokens "
                f"({prompt}); cached tokens are part of the prompt.",
                {"field": f"{root}.prompt_tokens_details.cached_tokens"},
            )
        return {
            "inputTokens": prompt,
            "outputTokens": output,
            "cacheReadInputTokens": cached,
            "cacheWriteInputTokens": 0,
        }
    uncached = _count(usage, "input_tokens", f"{root}.input_tokens", required=True)
    output = _count(usage, "output_tokens", f"{root}.output_tokens", required=True)
    read = _count(
        usage, "cache_read_input_tokens", f"{root}.cache_read_input_tokens", required=False
    )
    written = _count(
        usage, "cache_creation_input_tokens", f"{root}.cache_creation_input_tokens", required=False
    )
    return {
        "inputTokens": uncached + read + written,
        "outputTokens": output,
        "cacheReadInputTokens": read,
        "cacheWriteInputTokens": written,
    }
