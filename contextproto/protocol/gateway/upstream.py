"""A gateway request's forwarded fields in the upstream provider's words (contract §14).

The client's `max_tokens`, `temperature`, `top_p`, `stop`, `seed` and `tool_choice` go to
every upstream call of its request, whichever API the upstream speaks: they are merged into
the adapter's body, which the snapshot stores as the request sent. `tool_choice` keeps
asking for one call per answer (contract §4.5) unless it says `none`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextproto.protocol.gateway.wire import Parameters, ToolChoice

OPENAI_CHAT = "openai-chat"
ANTHROPIC_MESSAGES = "anthropic-messages"


def _openai_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _anthropic_choice(choice: ToolChoice, has_tools: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": choice.mode}
    if choice.mode == "tool":
        out["name"] = choice.name
    if choice.mode != "none" and has_tools:
        out["disable_parallel_tool_use"] = True
    return out


def with_parameters(
    body: Mapping[str, Any],
    wire_format: str,
    parameters: Parameters,
    *,
    max_tokens_key: str = "max_completion_tokens",
) -> dict[str, Any]:
    """`body` (an adapter's request) with the forwarded fields of `parameters` added.

    `neutral` bodies (the scripted model) are returned unchanged: there is no API to speak.
    OpenAI's max-tokens field is `max_tokens_key` (`max_tokens` for older compatible
    servers, as the version's model config says). Anthropic has no `seed`, and its API
    version 2026-10-21 (what the pinned SDK sends) refuses `temperature` and `top_p` on
    every model: those are left out for it (docs/decisions.md).
    """
    out = dict(body)
    has_tools = bool(out.get("tools"))
    if wire_format == OPENAI_CHAT:
        if parameters.max_tokens is not None:
            out[max_tokens_key] = parameters.max_tokens
        if parameters.temperature is not None:
            out["temperature"] = parameters.temperature
        if parameters.top_p is not None:
            out["top_p"] = parameters.top_p
        if parameters.stop:
            out["stop"] = list(parameters.stop)
        if parameters.seed is not None:
            out["seed"] = parameters.seed
        if parameters.tool_choice is not None and has_tools:
            out["tool_choice"] = _openai_choice(parameters.tool_choice)
    elif wire_format == ANTHROPIC_MESSAGES:
        if parameters.max_tokens is not None:
            out["max_tokens"] = parameters.max_tokens
        if parameters.stop:
            out["stop_sequences"] = list(parameters.stop)
        if parameters.tool_choice is not None and has_tools:
            out["tool_choice"] = _anthropic_choice(parameters.tool_choice, has_tools)
    return out
