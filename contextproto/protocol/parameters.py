"""Forwarded request fields (a gateway client's) in each wire format's words (contract §14).

The client's `max_tokens`, `temperature`, `top_p`, `stop`, `seed` and `tool_choice` go to
every upstream call of its request, whichever API the upstream speaks: they are merged into
the adapter's body, which the snapshot stores as the request sent. `tool_choice` keeps
asking for one call per answer (contract §4.5) unless it says `none`.

A Responses client's own (contract §21): `reasoning`, `text.format`, `truncation` and its
hosted tools go to an `openai-responses` upstream as they are; within the OpenAI family a
Chat Completions upstream gets `reasoning_effort` and `response_format` for the first two.
What an upstream's API cannot carry is named by `unused_fields`, for the gateway's
`X-Contextproto-Ignored`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from contextproto.protocol.custom_tools import KIND_CUSTOM


@dataclass(frozen=True)
class ToolChoice:
    """`auto`, `none`, or one client tool by `name` (contract §14: `required`/`any` refused)."""

    mode: Literal["auto", "none", "tool"]
    name: str | None = None


@dataclass(frozen=True)
class Parameters:
    """The request fields forwarded to every upstream call of the request (contract §14).

    `reasoning` (the Responses `reasoning` object), `text_format` (its `text.format`),
    `truncation` (`"disabled"`) and `hosted_tools` (its hosted tool definitions, as sent) are
    a Responses client's (contract §21)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    reasoning: Mapping[str, Any] | None = None
    text_format: Mapping[str, Any] | None = None
    truncation: str | None = None
    hosted_tools: tuple[Mapping[str, Any], ...] = ()
    # An Anthropic client's `thinking` (forwarded to an Anthropic upstream only; OpenAI's
    # `reasoning_effort` and `reasoning` travel as `reasoning`, to OpenAI's APIs only).
    thinking: Mapping[str, Any] | None = None

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
        if self.reasoning is not None:
            out["reasoning"] = dict(self.reasoning)
        if self.text_format is not None:
            out["textFormat"] = dict(self.text_format)
        if self.truncation is not None:
            out["truncation"] = self.truncation
        if self.hosted_tools:
            out["hostedTools"] = [dict(t) for t in self.hosted_tools]
        if self.thinking is not None:
            out["thinking"] = dict(self.thinking)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Parameters:
        data = data or {}
        choice = data.get("toolChoice")
        reasoning, text_format = data.get("reasoning"), data.get("textFormat")
        thinking = data.get("thinking")
        return cls(
            max_tokens=data.get("maxTokens"),
            temperature=data.get("temperature"),
            top_p=data.get("topP"),
            stop=tuple(data.get("stop") or ()),
            seed=data.get("seed"),
            tool_choice=ToolChoice(mode=choice["mode"], name=choice.get("name"))
            if isinstance(choice, Mapping)
            else None,
            reasoning=dict(reasoning) if isinstance(reasoning, Mapping) else None,
            text_format=dict(text_format) if isinstance(text_format, Mapping) else None,
            truncation=data.get("truncation"),
            hosted_tools=tuple(dict(t) for t in data.get("hostedTools") or ()),
            thinking=dict(thinking)
            if isinstance(thinking := data.get("thinking"), Mapping)
            else None,
        )


OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC_MESSAGES = "anthropic-messages"


def _tool_kind(body: Mapping[str, Any], name: str | None) -> str:
    """The kind (`function`, `custom`) of the body's tool `name`, in the body's own words."""
    for tool in body.get("tools") or ():
        if not isinstance(tool, Mapping):
            continue
        if tool.get("name") == name or (
            isinstance(tool.get(tool.get("type", "")), Mapping)
            and tool[tool["type"]].get("name") == name
        ):
            return str(tool.get("type") or "function")
    return "function"


def _openai_choice(choice: ToolChoice, body: Mapping[str, Any]) -> Any:
    if choice.mode == "tool":
        if _tool_kind(body, choice.name) == KIND_CUSTOM:
            return {"type": KIND_CUSTOM, "custom": {"name": choice.name}}
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _responses_choice(choice: ToolChoice, body: Mapping[str, Any]) -> Any:
    if choice.mode == "tool":
        return {"type": _tool_kind(body, choice.name), "name": choice.name}
    return choice.mode


def _chat_response_format(text_format: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Responses `text.format` as Chat Completions' `response_format` (None: plain text)."""
    kind = text_format.get("type")
    if kind == "json_schema":
        schema = {
            key: text_format[key]
            for key in ("name", "schema", "strict", "description")
            if key in text_format
        }
        return {"type": "json_schema", "json_schema": schema}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


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
    every model: those are left out for it (docs/decisions.md). What an API cannot carry is
    left out and named by `unused_fields`.
    """
    out = dict(body)
    has_tools = bool(out.get("tools"))
    if wire_format == OPENAI_RESPONSES:
        return _with_responses(out, parameters, has_tools)
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
            out["tool_choice"] = _openai_choice(parameters.tool_choice, out)
        effort = (parameters.reasoning or {}).get("effort")
        if isinstance(effort, str):
            out["reasoning_effort"] = effort
        response_format = (
            _chat_response_format(parameters.text_format) if parameters.text_format else None
        )
        if response_format is not None:
            out["response_format"] = response_format
    elif wire_format == ANTHROPIC_MESSAGES:
        if parameters.max_tokens is not None:
            out["max_tokens"] = parameters.max_tokens
        if parameters.stop:
            out["stop_sequences"] = list(parameters.stop)
        if parameters.tool_choice is not None and has_tools:
            out["tool_choice"] = _anthropic_choice(parameters.tool_choice, has_tools)
        if parameters.thinking is not None:
            out["thinking"] = dict(parameters.thinking)
    return out


def _with_responses(out: dict[str, Any], parameters: Parameters, has_tools: bool) -> dict[str, Any]:
    """The Responses API's words: `max_output_tokens`, `text.format`, the hosted tools after
    the function and custom tools (the Responses API has no `stop` nor `seed`)."""
    if parameters.max_tokens is not None:
        out["max_output_tokens"] = parameters.max_tokens
    if parameters.temperature is not None:
        out["temperature"] = parameters.temperature
    if parameters.top_p is not None:
        out["top_p"] = parameters.top_p
    if parameters.hosted_tools:
        out["tools"] = [*(out.get("tools") or ()), *(dict(t) for t in parameters.hosted_tools)]
        # One call per answer (contract §4.5), asked the same way with hosted tools alone.
        out.setdefault("parallel_tool_calls", False)
    if parameters.tool_choice is not None and (has_tools or parameters.hosted_tools):
        out["tool_choice"] = _responses_choice(parameters.tool_choice, out)
    if parameters.reasoning is not None:
        out["reasoning"] = dict(parameters.reasoning)
    if parameters.text_format is not None:
        out["text"] = {"format": dict(parameters.text_format)}
    if parameters.truncation is not None:
        out["truncation"] = parameters.truncation
    return out


def hosted_tool_names(parameters: Parameters) -> tuple[str, ...]:
    """`tools.<type>` for each hosted tool, as X-Contextproto-Ignored names them."""
    return tuple(f"tools.{t.get('type')}" for t in parameters.hosted_tools)


def unused_fields(parameters: Parameters, wire_format: str) -> tuple[str, ...]:
    """The forwarded fields an upstream speaking `wire_format` cannot carry (for the gateway's
    X-Contextproto-Ignored; contract §21): hosted tools beyond the Responses API (a scripted
    model's neutral body included: they go to a Responses upstream only), `reasoning` and a
    structured `text.format` beyond OpenAI's two APIs, `stop` and `seed` on the Responses API.
    `truncation: "disabled"` is what the other APIs do anyway. A scripted model ignoring a
    field it is sent does not make it ignored (contract §14)."""
    if wire_format not in (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC_MESSAGES):
        return hosted_tool_names(parameters)
    unused: list[str] = []
    if parameters.thinking is not None and wire_format != ANTHROPIC_MESSAGES:
        unused.append("thinking")
    if wire_format == OPENAI_RESPONSES:
        if parameters.stop:
            unused.append("stop")
        if parameters.seed is not None:
            unused.append("seed")
        return tuple(unused)
    if parameters.reasoning is not None and wire_format == ANTHROPIC_MESSAGES:
        unused.append("reasoning")
    if parameters.text_format is not None and (
        wire_format == ANTHROPIC_MESSAGES or _chat_response_format(parameters.text_format) is None
    ):
        if parameters.text_format.get("type") != "text":
            unused.append("text.format")
    unused.extend(hosted_tool_names(parameters))
    return tuple(unused)
