"""Forwarded request fields (a gateway client's) in each wire format's words (contract §14).

The client's `max_tokens`, `temperature`, `top_p`, `stop`, `seed` and `tool_choice` go to
every upstream call of its request, whichever API the upstream speaks: they are merged into
the adapter's body, which the snapshot stores as the request sent. `tool_choice` keeps
asking for one call per answer (contract §4.5) unless it says `none`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class ToolChoice:
    """`auto`, `none`, or one client tool by `name` (contract §14: `required`/`any` refused)."""

    mode: Literal["auto", "none", "tool"]
    name: str | None = None


@dataclass(frozen=True)
class Parameters:
    """The request fields forwarded to every upstream call of the request (contract §14)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    tool_choice: ToolChoice | None = None

    def to_json(self) -> dict[str, Any]:
        """The set fields, camelCase, as a snapshot records what the request forwarded."""
        out: dict[str, Any] = {}
        if self.max_tokens is not None:
            out["maxTokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.top_p is not None:
            out["topP"] = self.top_p
        if self.stop:
            out["stop"] = list(self.stop)
        if self.seed is not None:
            out["seed"] = self.seed
        if self.tool_choice is not None:
            choice: dict[str, Any] = {"mode": self.tool_choice.mode}
            if self.tool_choice.name is not None:
                choice["name"] = self.tool_choice.name
            out["toolChoice"] = choice
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Parameters:
        data = data or {}
        choice = data.get("toolChoice")
        return cls(
            max_tokens=data.get("maxTokens"),
            temperature=data.get("temperature"),
            top_p=data.get("topP"),
            stop=tuple(data.get("stop") or ()),
            seed=data.get("seed"),
            tool_choice=ToolChoice(mode=choice["mode"], name=choice.get("name"))
            if isinstance(choice, Mapping)
            else None,
        )


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
