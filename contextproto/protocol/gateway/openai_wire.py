"""OpenAI Chat Completions as a gateway client speaks it (contract §14).

Requests as the official SDK sends them (`client.chat.completions.create(...)`), replies it
parses (`chat.completion`), stream chunks its stream helpers read to the same message, and
its error shape `{"error": {"message", "type", "code", "details"}}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol.gateway.transcript import Call, Item
from contextproto.protocol.gateway.wire import (
    INVALID_REQUEST,
    PARAMETER_UNSUPPORTED,
    ClientFormat,
    ClientTool,
    GatewayRequest,
    ListedModel,
    Reply,
    Usage,
    WireError,
    WithoutReferences,
    data_url_image,
    dumps,
    error_type,
    optional_bool,
    optional_int,
    optional_number,
    require_object,
    string_list,
)
from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER
from contextproto.protocol.parameters import Parameters, ToolChoice

# The request itself, and the fields forwarded upstream; anything else is ignored (named in
# X-Contextproto-Ignored).
REQUEST_FIELDS = frozenset({"model", "messages", "tools", "stream", "stream_options"})
FORWARDED_FIELDS = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "tool_choice",
        "n",
        "reasoning_effort",
    }
)
SYSTEM_ROLES = ("system", "developer")
STOP_LIMIT = 4


def parse_request(body: Any) -> GatewayRequest:
    """Read a Chat Completions request body; raise WireError naming what to fix."""
    body = require_object(body, "body")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WireError(INVALID_REQUEST, "model must be a string.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(
            INVALID_REQUEST, "messages must be a non-empty array of messages.", "messages"
        )
    system: list[str] = []
    items: list[Item] = []
    for position, raw in enumerate(messages):
        where = f"messages[{position}]"
        message = require_object(raw, where)
        role = message.get("role")
        if role in SYSTEM_ROLES:
            text = _text(message.get("content"), f"{where}.content")
            if text:
                system.append(text)
        elif role == ROLE_USER:
            items.append(
                Item(
                    role=ROLE_USER,
                    content=_user_content(message.get("content"), f"{where}.content"),
                    position=position,
                )
            )
        elif role == ROLE_ASSISTANT:
            items.append(_assistant(message, where, position))
        elif role == ROLE_TOOL:
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise WireError(
                    INVALID_REQUEST, f"{where}.tool_call_id must be a non-empty string.", where
                )
            items.append(
                Item(
                    role=ROLE_TOOL,
                    content=_text(message.get("content"), f"{where}.content"),
                    call_id=call_id,
                    position=position,
                )
            )
        else:
            raise WireError(
                INVALID_REQUEST,
                f"{where}.role must be one of system, developer, user, assistant, tool "
                f"(got {role!r}).",
                f"{where}.role",
            )
    tools = _tools(body.get("tools"))
    n = body.get("n")
    if n is not None and n != 1:
        raise WireError(
            PARAMETER_UNSUPPORTED, "n must be 1: the gateway answers with one choice.", "n"
        )
    stream = optional_bool(body, "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        options = require_object(options, "stream_options")
        include_usage = optional_bool(options, "include_usage")
    max_tokens = optional_int(body, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = optional_int(body, "max_tokens", minimum=1)
    parameters = Parameters(
        max_tokens=max_tokens,
        temperature=optional_number(body, "temperature", 0, 2),
        top_p=optional_number(body, "top_p", 0, 1),
        stop=string_list(body.get("stop"), "stop", limit=STOP_LIMIT),
        seed=optional_int(body, "seed", minimum=-(2**63)),
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        reasoning=_reasoning_effort(body.get("reasoning_effort")),
    )
    return GatewayRequest(
        format=ClientFormat.OPENAI,
        model=model,
        system="\n\n".join(system),
        items=tuple(items),
        tools=tools,
        parameters=parameters,
        stream=stream,
        include_usage=include_usage and stream,
        ignored=tuple(sorted(k for k in body if k not in REQUEST_FIELDS | FORWARDED_FIELDS)),
    )


def _reasoning_effort(raw: Any) -> dict[str, Any] | None:
    """`reasoning_effort` as the one reasoning setting OpenAI's two APIs share (contract §19):
    `{"effort": …}` (an OpenAI upstream gets it in its own API's words)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise WireError(INVALID_REQUEST, "reasoning_effort must be a string.", "reasoning_effort")
    return {"effort": raw}


def _text(content: Any, where: str) -> str:
    """A content that may only hold text: a string, or text parts (concatenated)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for n, part in enumerate(content):
            part = require_object(part, f"{where}[{n}]")
            if part.get("type") not in ("text", "refusal"):
                raise WireError(
                    INVALID_REQUEST,
                    f"{where}[{n}] must be a text part (got type {part.get('type')!r}).",
                    f"{where}[{n}]",
                )
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise WireError(INVALID_REQUEST, f"{where}[{n}].text must be a string.", where)
            texts.append(text)
        return "".join(texts)
    raise WireError(INVALID_REQUEST, f"{where} must be a string or an array of parts.", where)


def _user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise WireError(
            INVALID_REQUEST, f"{where} must be a string or a non-empty array of parts.", where
        )
    parts: list[dict[str, Any]] = []
    for n, raw in enumerate(content):
        part = require_object(raw, f"{where}[{n}]")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                raise WireError(
                    INVALID_REQUEST, f"{where}[{n}].image_url.url must be a URL.", where
                )
            parts.append(data_url_image(url))
        else:
            raise WireError(
                INVALID_REQUEST,
                f"{where}[{n}]: the gateway takes text and image_url parts (got {kind!r}).",
                f"{where}[{n}]",
            )
    return parts


def _assistant(message: dict[str, Any], where: str, position: int) -> Item:
    calls = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise WireError(INVALID_REQUEST, f"{where}.tool_calls must be an array.", where)
    for n, raw in enumerate(raw_calls):
        call = require_object(raw, f"{where}.tool_calls[{n}]")
        function = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(function, dict):
            raise WireError(
                INVALID_REQUEST,
                f"{where}.tool_calls[{n}] must be a function call.",
                f"{where}.tool_calls[{n}]",
            )
        call_id, name = call.get("id"), function.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise WireError(
                INVALID_REQUEST,
                f"{where}.tool_calls[{n}] needs an id and function.name.",
                f"{where}.tool_calls[{n}]",
            )
        calls.append(
            Call(id=call_id, name=name, arguments=parse_arguments(function.get("arguments")))
        )
    return Item(
        role=ROLE_ASSISTANT,
        content=_text(message.get("content"), f"{where}.content"),
        calls=tuple(calls),
        position=position,
    )


def parse_arguments(raw: Any) -> Any:
    """OpenAI sends arguments as JSON text: parsed when it is JSON, kept as text otherwise."""
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw if raw is not None else {}


def _tools(raw: Any) -> tuple[ClientTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise WireError(INVALID_REQUEST, "tools must be an array of function tools.", "tools")
    tools = []
    for n, entry in enumerate(raw):
        where = f"tools[{n}]"
        tool = require_object(entry, where)
        function = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(function, dict):
            raise WireError(
                PARAMETER_UNSUPPORTED,
                f"{where}: the gateway takes function tools only (got type {tool.get('type')!r}).",
                where,
            )
        name = function.get("name")
        if not isinstance(name, str):
            raise WireError(INVALID_REQUEST, f"{where}.function.name must be a string.", where)
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise WireError(
                INVALID_REQUEST, f"{where}.function.description must be a string.", where
            )
        schema = function.get("parameters")
        if schema is None:
            schema = {"type": "object", "properties": {}}
        tools.append(
            ClientTool(name=name, description=description, input_schema=schema, where=where)
        )
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ClientTool, ...]) -> ToolChoice | None:
    if raw is None:
        return None
    if raw in ("auto", "none"):
        return ToolChoice(mode=raw)
    if raw == "required":
        raise WireError(
            PARAMETER_UNSUPPORTED,
            "tool_choice 'required' is not supported: the model must stay free to call a "
            "context protocol tool. Use 'auto', 'none' or one of your tools.",
            "tool_choice",
        )
    if isinstance(raw, dict) and raw.get("type") == "function":
        function = raw.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and any(t.name == name for t in tools):
            return ToolChoice(mode="tool", name=name)
        raise WireError(
            INVALID_REQUEST,
            f"tool_choice names {name!r}, which is not one of the request's tools.",
            "tool_choice",
        )
    raise WireError(
        INVALID_REQUEST,
        "tool_choice must be 'auto', 'none' or {type: 'function', function: {name}}.",
        "tool_choice",
    )


# --------------------------------------------------------------------------- replies


def _tool_call(call: Call) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": dumps(call.arguments)},
    }


def render_reply(reply: Reply) -> dict[str, Any]:
    """A `chat.completion` object."""
    message: dict[str, Any] = {"role": ROLE_ASSISTANT, "content": reply.text or None}
    if reply.call is not None:
        message["tool_calls"] = [_tool_call(reply.call)]
    message["refusal"] = None
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish}
        ],
        "usage": _usage(reply),
    }


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    }


def error_reply(status: int, code: str, message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": error_type(status),
            "code": code,
            "details": dict(details),
        }
    }


class Stream:
    """Chat completion chunks (`data: {...}` events ending `data: [DONE]`).

    Text goes out as it comes (`text`); `finish` sends the client-tool call, the finish
    reason and, with `include_usage`, the usage chunk (every other chunk then says
    `"usage": null`, as OpenAI's do).
    """

    def __init__(self, *, reply_id: str, created: int, model: str, include_usage: bool) -> None:
        self.reply_id, self.created, self.model = reply_id, created, model
        self.include_usage = include_usage

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> str:
        chunk: dict[str, Any] = {
            "id": self.reply_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = usage
        return f"data: {dumps(chunk)}\n\n"

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> str:
        return self._chunk(
            [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )

    def start(self, usage: Usage | None = None) -> str:
        return self._delta({"role": ROLE_ASSISTANT, "content": None, "refusal": None})

    def text(self, delta: str) -> str:
        return self._delta({"content": delta}) if delta else ""

    @staticmethod
    def reasoning(item: Mapping[str, Any]) -> str:
        return ""  # Chat Completions shows no reasoning items

    def finish(self, reply: Reply) -> str:
        out = ""
        if reply.call is not None:
            out += self._delta({"tool_calls": [{"index": 0, **_tool_call(reply.call)}]})
        out += self._delta({}, reply.finish)
        if self.include_usage:
            out += self._chunk([], _usage(reply))
        return out + "data: [DONE]\n\n"

    def error(self, status: int, code: str, message: str, details: Mapping[str, Any]) -> str:
        # The SDK raises APIError on a data event holding `error` (openai/_streaming.py).
        return f"data: {dumps(error_reply(status, code, message, details))}\n\n"

    @staticmethod
    def keepalive() -> str:
        return ": keepalive\n\n"

    @staticmethod
    def final(reply: Reply) -> Reply:
        return reply  # one order only: the reply is what the stream sent

    def whole(self, reply: Reply) -> str:
        """A stored reply as one stream (a replayed request that asks for a stream)."""
        return self.start() + self.text(reply.text) + self.finish(reply)


def models_list(models: Sequence[ListedModel]) -> dict[str, Any]:
    """`GET models`."""
    return {
        "object": "list",
        "data": [
            {"id": m.name, "object": "model", "created": m.created, "owned_by": m.owner}
            for m in models
        ],
    }


class ChatCompletionsWire(WithoutReferences):
    """Chat Completions as a `ClientWire` (contract §14)."""

    format = ClientFormat.OPENAI
    title = "OpenAI Chat Completions"
    max_tokens_field = "max_tokens"
    reply_id_prefix = "chatcmpl-"

    @staticmethod
    def parse(body: Any) -> GatewayRequest:
        return parse_request(body)

    @staticmethod
    def render_reply(reply: Reply, request: GatewayRequest) -> dict[str, Any]:
        return render_reply(reply)

    @staticmethod
    def encoder(request: GatewayRequest, *, reply_id: str, created: int, model: str) -> Stream:
        return Stream(
            reply_id=reply_id, created=created, model=model, include_usage=request.include_usage
        )

    @staticmethod
    def error_reply_body(
        status: int, code: str, message: str, details: Mapping[str, Any]
    ) -> dict[str, Any]:
        return error_reply(status, code, message, details)

    @staticmethod
    def models_list(models: Sequence[ListedModel]) -> dict[str, Any]:
        return models_list(models)

    @staticmethod
    def token_count(tokens: int) -> dict[str, Any]:
        # Chat Completions has no count endpoint; the gateway answers in Anthropic's words.
        return {"input_tokens": tokens}
