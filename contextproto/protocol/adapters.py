"""Provider adapters (contract §4.5): turn a Projection into one provider's request body.

An adapter may only change shape, never meaning, unless it says so: every change
of meaning (a reorder the provider demands, a prefill, a dropped part) is written
to `notes`, which the caller stores in the projection snapshot.

Prompt caching (contract §8; the setting is prompt_cache.py's). Sources, read in 2026:
Anthropic "Prompt caching" (platform.claude.com/docs/en/build-with-claude/prompt-caching)
and OpenAI "Prompt caching" (developers.openai.com/api/docs/guides/prompt-caching).
With `prompt_cache` mode `auto`:
* `anthropic-messages` marks at most four `cache_control` breakpoints (adapter_anthropic.py
  says where and why). Every marker has the version's TTL, so the guide's rule that longer
  TTLs come first always holds. Changing the tools invalidates everything, the system
  prompt everything after it: both come first and stay byte-identical between turns.
* `openai-chat` adds `prompt_cache_key` (the caller's per-session key): OpenAI caches
  automatically from 1024 tokens and routes by the prompt's first tokens combined with
  the key, so a conversation's turns reach a machine that holds its prefix.
Without `prompt_cache` (or mode `off`) the bodies carry no cache hints at all.

An answer is shown as the model gave it (contract §4.5): the text a model wrote beside its tool
call (the `tool_call` message's content) is the `content` beside `tool_calls` on OpenAI and
text blocks before the `tool_use` block on Anthropic; Anthropic's thinking blocks go back
to `anthropic-messages` unchanged, first in their assistant turn, and never carry a cache
breakpoint (the API refuses one there); `openai-chat` leaves them out. Every request that
carries tools asks for one tool call per answer, the same way every turn: OpenAI
`parallel_tool_calls: false`, Anthropic `tool_choice: {"type": "auto",
"disable_parallel_tool_use": true}` (a changed tool_choice would cost Anthropic's cached
messages).

The modules: adapter_base.py (the wire formats, the adapted request), this one (openai-chat and
`adapt`, the entry point, which also names what the others define), adapter_anthropic.py,
responses_adapter.py (openai-responses: the only adapter that sends OpenAI reasoning items
back, with their encrypted content).

Byte-stable prefixes: when a turn only appends raw messages to an unchanged state, each
body equals the previous turn's up to the first appended message (markers aside): tools
in the order given, JSON keys in a fixed order, system and header text unchanged
(tests/protocol/test_prefix_stability.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from contextproto.protocol import errors, json_texts
from contextproto.protocol.adapter_anthropic import adapt_anthropic
from contextproto.protocol.adapter_base import (
    OPENAI_APIS,
    OPENAI_PARALLEL_TOOL_CALLS,
    PROVIDER_ANTHROPIC_MESSAGES,
    PROVIDER_NEUTRAL,
    PROVIDER_OPENAI_CHAT,
    PROVIDER_OPENAI_RESPONSES,
    PROVIDERS,
    ROLE_SYSTEM,
    AdaptedRequest,
    Adapter,
    AdaptOptions,
    WireFormat,
    image_url,
    text_of,
)
from contextproto.protocol.content_parts import has_image, is_image_part, is_text_part
from contextproto.protocol.custom_tools import (
    KIND_CUSTOM,
    call_input_text,
    chat_format,
    custom_names,
    is_custom,
)
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    Arguments,
    ModelMessage,
)
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import PROMPT_CACHE_OFF, PromptCache
from contextproto.protocol.responses_adapter import adapt_responses

# The names callers import from here, wherever they are defined.
__all__ = [
    "ADAPTERS",
    "OPENAI_APIS",
    "OPENAI_PARALLEL_TOOL_CALLS",
    "PROVIDERS",
    "PROVIDER_ANTHROPIC_MESSAGES",
    "PROVIDER_NEUTRAL",
    "PROVIDER_OPENAI_CHAT",
    "PROVIDER_OPENAI_RESPONSES",
    "AdaptOptions",
    "AdaptedRequest",
    "WireFormat",
    "adapt",
]

# Between the texts of two calls of one OpenAI assistant message (see adapt_openai_chat).
CALL_TEXT_SEPARATOR = "\n\n"


# --------------------------------------------------------------------------- openai-chat


def _openai_content(content: Any) -> Any:
    """Text and image parts only: Anthropic's thinking parts mean nothing to Chat Completions."""
    if not isinstance(content, list):
        return text_of(content)
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if is_image_part(part):
            parts.append({"type": "image_url", "image_url": {"url": image_url(part)}})
        elif is_text_part(part):
            parts.append({"type": "text", "text": part.get("text", "")})
    # An answer that only thought: an empty list is refused, an empty string is a message.
    return parts if parts else ""


def _openai_keep_results_adjacent(out: list[dict[str, Any]], notes: list[str]) -> None:
    """Move tool messages up to the assistant message that issued their calls.

    Chat Completions refuses any message between an assistant `tool_calls` message
    and its `tool` messages, while the log may hold one (e.g. approval feedback).
    """
    i = 0
    while i < len(out):
        message = out[i]
        if not message.get("tool_calls"):
            i += 1
            continue
        needed = {c["id"] for c in message["tool_calls"]}
        results: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        j = i + 1
        while needed and j < len(out):
            candidate = out[j]
            if candidate["role"] == ROLE_TOOL and candidate.get("tool_call_id") in needed:
                results.append(candidate)
                needed.discard(candidate["tool_call_id"])
            else:
                others.append(candidate)
            j += 1
        if results and others:
            ids = ", ".join(c["id"] for c in message["tool_calls"])
            notes.append(
                f"openai-chat: {len(others)} message(s) between tool call(s) {ids} and their "
                "results were moved after the results (Chat Completions requires tool messages "
                "right after the call)"
            )
        out[i + 1 : j] = results + others
        i += 1 + len(results)


def _openai_arguments(arguments: Arguments | None) -> str:
    """The `arguments` string of an OpenAI call: the provider's own text when it was stored
    as written (not the JSON text of an object), else the object as JSON."""
    if isinstance(arguments, str):
        return arguments
    return json_texts.plain(arguments or {})


def _openai_call(message: ModelMessage, custom: frozenset[str]) -> dict[str, Any]:
    """A call as Chat Completions has it: a function call, or a custom tool's call with its
    text input (contextproto/protocol/custom_tools.py)."""
    if str(message.tool_name) in custom:
        return {
            "id": message.tool_call_id,
            "type": KIND_CUSTOM,
            "custom": {"name": message.tool_name, "input": call_input_text(message.arguments)},
        }
    return {
        "id": message.tool_call_id,
        "type": "function",
        "function": {
            "name": message.tool_name,
            "arguments": _openai_arguments(message.arguments),
        },
    }


def _openai_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A view tool as a Chat Completions tool: a function, or a client's custom tool as
    Chat's own custom tool (its grammar in Chat's words)."""
    if is_custom(tool):
        custom: dict[str, Any] = {"name": tool["name"], "description": tool.get("description", "")}
        grammar = chat_format(tool.get("format"))
        if grammar is not None:
            custom["format"] = grammar
        return {"type": KIND_CUSTOM, "custom": custom}
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("inputSchema") or {"type": "object"},
        },
    }


def adapt_openai_chat(
    projection: Projection, tools: Sequence[Mapping[str, Any]], options: AdaptOptions
) -> AdaptedRequest:
    """The view as a Chat Completions request body."""
    notes: list[str] = []
    out: list[dict[str, Any]] = []
    custom = custom_names(tools)
    for message in projection.messages:
        if message.role == ROLE_SYSTEM:
            out.append({"role": ROLE_SYSTEM, "content": text_of(message.content)})
        elif message.kind == KIND_TOOL_CALL:
            call = _openai_call(message, custom)
            # The text the model wrote beside its call (text parts only; thinking is left
            # out, and Chat Completions takes no images from the assistant).
            text = text_of(message.content)
            if has_image(message.content):
                notes.append(
                    f"openai-chat: image parts beside tool call {message.tool_call_id} were "
                    "left out (assistant messages carry no images)"
                )
            # Consecutive calls become one assistant message: OpenAI expects the tool
            # messages right after the single message that issued the calls.
            if out and out[-1]["role"] == ROLE_ASSISTANT and out[-1].get("tool_calls"):
                merged_into = out[-1]
                merged_into["tool_calls"].append(call)
                if text:
                    # Only an answer's first call carries its text by convention; a later
                    # call's text joins it, after a blank line (docs/decisions.md).
                    before = merged_into["content"]
                    merged_into["content"] = (
                        text if not before else before + CALL_TEXT_SEPARATOR + text
                    )
                    notes.append(
                        f"openai-chat: the text beside tool call {message.tool_call_id} joins the "
                        "content of the assistant message that carries the calls before it "
                        "(one message holds every call of an answer)"
                    )
            else:
                out.append({"role": ROLE_ASSISTANT, "content": text or None, "tool_calls": [call]})
        elif message.kind == KIND_TOOL_RESULT:
            if has_image(message.content):
                notes.append(
                    f"openai-chat: image parts of the result of {message.tool_call_id} were "
                    "sent as text only (tool messages carry no images)"
                )
            out.append(
                {
                    "role": ROLE_TOOL,
                    "tool_call_id": message.tool_call_id,
                    "content": text_of(message.content),
                }
            )
        else:
            out.append({"role": message.role, "content": _openai_content(message.content)})
    _openai_keep_results_adjacent(out, notes)

    body: dict[str, Any] = {"messages": out}
    if tools:
        body["tools"] = [_openai_tool(t) for t in tools]
        # Only the first call of an answer is executed (contract §5.6): ask for one.
        body["parallel_tool_calls"] = OPENAI_PARALLEL_TOOL_CALLS
    if options.prompt_cache.enabled and options.cache_key:
        body["prompt_cache_key"] = options.cache_key
    return AdaptedRequest(provider=PROVIDER_OPENAI_CHAT, body=body, notes=tuple(notes))


# --------------------------------------------------------------------------- entry point


def _adapt_neutral(
    projection: Projection, tools: Sequence[Mapping[str, Any]], options: AdaptOptions
) -> AdaptedRequest:
    """The view as the API lists it, for the scripted model: no API to speak, no hints."""
    body = {"messages": [m.to_wire() for m in projection.messages], "tools": list(tools)}
    return AdaptedRequest(provider=PROVIDER_NEUTRAL, body=body, notes=())


# The one place that chooses an adapter by wire format (tests/protocol/test_adapter_seam.py).
ADAPTERS: Mapping[str, Adapter] = MappingProxyType(
    {
        PROVIDER_NEUTRAL: _adapt_neutral,
        PROVIDER_OPENAI_CHAT: adapt_openai_chat,
        PROVIDER_ANTHROPIC_MESSAGES: adapt_anthropic,
        PROVIDER_OPENAI_RESPONSES: adapt_responses,
    }
)


def adapt(
    projection: Projection,
    provider: str,
    tools: Sequence[Mapping[str, Any]] = (),
    *,
    assistant_prefill: bool = False,
    prompt_cache: PromptCache = PROMPT_CACHE_OFF,
    cache_key: str | None = None,
) -> AdaptedRequest:
    """Render `projection` (and tools `{name, description, inputSchema}`) for `provider`.

    `assistant_prefill`: the model accepts a trailing assistant turn (an Anthropic prefill),
    so derived messages after the history keep the assistant role (noted as a prefill)
    instead of travelling as marked user text. Other providers ignore it.
    `prompt_cache` (default: off, no cache hints) and `cache_key` (the session's OpenAI
    `prompt_cache_key`): see the module docstring. `neutral` ignores both.
    Raises ProtocolError `provider_unknown` for a provider not in PROVIDERS.
    """
    adapter = ADAPTERS.get(provider)
    if adapter is None:
        raise ProtocolError(
            errors.PROVIDER_UNKNOWN,
            f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}.",
            {"provider": provider, "providers": list(PROVIDERS)},
        )
    options = AdaptOptions(
        assistant_prefill=assistant_prefill, prompt_cache=prompt_cache, cache_key=cache_key
    )
    return adapter(projection, tools, options)
