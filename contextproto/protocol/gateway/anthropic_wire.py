"""Anthropic Messages as a gateway client speaks it (contract §14).

Requests as the official SDK sends them (`client.messages.create(...)`), `message` replies
it parses, the event grammar its stream helper reads to the same message (`message_start`
… `message_stop`), and its error shape `{"type": "error", "error": {…}}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from contextproto.protocol.content_parts import is_text_part
from contextproto.protocol.gateway.transcript import Call, Item
from contextproto.protocol.gateway.wire import (
    FINISH_LENGTH,
    FINISH_TOOL_CALLS,
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

REQUEST_FIELDS = frozenset({"model", "messages", "system", "tools", "stream"})
FORWARDED_FIELDS = frozenset(
    {"max_tokens", "temperature", "top_p", "stop_sequences", "tool_choice", "thinking"}
)
# Messages of this role (mid-conversation system messages) are system text, not transcript
# messages, as OpenAI's system messages are (contract §14).
SYSTEM_ROLE = "system"
# Blocks a client may send back that carry nothing of the transcript (a model's thinking is
# not part of a reply the gateway sends).
SKIPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})
STOP_REASONS: dict[str, str] = {FINISH_TOOL_CALLS: "tool_use", FINISH_LENGTH: "max_tokens"}
STOP_LIMIT = 16


def parse_request(body: Any) -> GatewayRequest:
    """Read a Messages request body; raise WireError naming what to fix."""
    body = require_object(body, "body")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WireError(INVALID_REQUEST, "model must be a string.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError(
            INVALID_REQUEST, "messages must be a non-empty array of messages.", "messages"
        )
    system = [_system(body.get("system"), "system")]
    items: list[Item] = []
    for position, raw in enumerate(messages):
        where = f"messages[{position}]"
        message = require_object(raw, where)
        role = message.get("role")
        if role == ROLE_USER:
            items.extend(_user(message.get("content"), f"{where}.content", position))
        elif role == ROLE_ASSISTANT:
            items.append(_assistant(message.get("content"), f"{where}.content", position))
        elif role == SYSTEM_ROLE:
            # A mid-conversation system message (Claude Code sends its environment so):
            # system text like an OpenAI system message, wherever it stands (contract §14).
            system.append(_system(message.get("content"), f"{where}.content"))
        else:
            raise WireError(
                INVALID_REQUEST,
                f"{where}.role must be user, assistant or system (got {role!r}).",
                f"{where}.role",
            )
    tools = _tools(body.get("tools"))
    stop = string_list(body.get("stop_sequences"), "stop_sequences", limit=STOP_LIMIT)
    parameters = Parameters(
        max_tokens=optional_int(body, "max_tokens", minimum=1),
        temperature=optional_number(body, "temperature", 0, 1),
        top_p=optional_number(body, "top_p", 0, 1),
        stop=stop,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        thinking=_thinking(body.get("thinking")),
    )
    return GatewayRequest(
        format=ClientFormat.ANTHROPIC,
        model=model,
        system="\n\n".join(text for text in system if text),
        items=tuple(items),
        tools=tools,
        parameters=parameters,
        stream=optional_bool(body, "stream"),
        include_usage=True,
        ignored=tuple(sorted(k for k in body if k not in REQUEST_FIELDS | FORWARDED_FIELDS)),
    )


def _thinking(raw: Any) -> dict[str, Any] | None:
    """The client's `thinking` as sent (an Anthropic upstream gets it; contract §19)."""
    if raw is None:
        return None
    return dict(require_object(raw, "thinking"))


def _system(raw: Any, where: str) -> str:
    """System text at `where` (the `system` field or a system message's content): a string,
    or its text blocks joined by a blank line."""
    if raw is None or isinstance(raw, str):
        return raw or ""
    if isinstance(raw, list):
        texts = []
        for n, block in enumerate(raw):
            block = require_object(block, f"{where}[{n}]")
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise WireError(
                    INVALID_REQUEST, f"{where}[{n}] must be a text block.", f"{where}[{n}]"
                )
            if block["text"]:
                texts.append(block["text"])
        return "\n\n".join(texts)
    raise WireError(INVALID_REQUEST, f"{where} must be a string or an array of text blocks.", where)


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise WireError(
            INVALID_REQUEST, f"{where} must be a string or an array of content blocks.", where
        )
    return [require_object(block, f"{where}[{n}]") for n, block in enumerate(content)]


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        media, data = source.get("media_type"), source.get("data")
        if isinstance(media, str) and isinstance(data, str):
            return {"type": "image", "mediaType": media, "data": data}
    if isinstance(source, dict) and source.get("type") == "url":
        url = source.get("url")
        if isinstance(url, str) and url:
            return data_url_image(url)
    raise WireError(
        INVALID_REQUEST,
        f"{where}.source must be {{type: base64, media_type, data}} or {{type: url, url}}.",
        where,
    )


def _parts(blocks: list[dict[str, Any]], where: str, *, results: bool) -> list[dict[str, Any]]:
    """Text and image blocks as neutral parts (empty text dropped)."""
    parts = []
    for n, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"]:
                parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append(_image(block, f"{where}[{n}]"))
        else:
            allowed = "text, image and tool_result" if results else "text and image"
            raise WireError(
                INVALID_REQUEST,
                f"{where}[{n}]: the gateway takes {allowed} blocks here (got {kind!r}).",
                f"{where}[{n}]",
            )
    return parts


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text alone as a string (what a text block means), anything else as parts."""
    if all(is_text_part(p) for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _user(content: Any, where: str, position: int) -> list[Item]:
    """A user message: each tool_result block an item of its own, then the rest (if any)."""
    blocks = _blocks(content, where)
    items: list[Item] = []
    rest: list[dict[str, Any]] = []
    for n, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            rest.append(block)
            continue
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise WireError(
                INVALID_REQUEST, f"{where}[{n}].tool_use_id must be a non-empty string.", where
            )
        result = block.get("content")
        result_parts = (
            []
            if result is None
            else _parts(
                _blocks(result, f"{where}[{n}].content"), f"{where}[{n}].content", results=False
            )
        )
        is_error = block.get("is_error", False)
        items.append(
            Item(
                role=ROLE_TOOL,
                content=_content(result_parts),
                call_id=call_id,
                is_error=is_error is True,
                position=position,
            )
        )
    if rest or not items:
        parts = _parts(rest, where, results=True)
        items.append(Item(role=ROLE_USER, content=_content(parts), position=position))
    return items


def _assistant(content: Any, where: str, position: int) -> Item:
    texts: list[str] = []
    calls: list[Call] = []
    for n, block in enumerate(_blocks(content, where)):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                raise WireError(
                    INVALID_REQUEST, f"{where}[{n}] needs an id and a name.", f"{where}[{n}]"
                )
            arguments = block.get("input")
            calls.append(
                Call(id=call_id, name=name, arguments={} if arguments is None else arguments)
            )
        elif kind in SKIPPED_BLOCKS:
            continue
        else:
            raise WireError(
                INVALID_REQUEST,
                f"{where}[{n}]: the gateway takes text and tool_use blocks in assistant "
                f"messages (got {kind!r}).",
                f"{where}[{n}]",
            )
    return Item(role=ROLE_ASSISTANT, content="".join(texts), calls=tuple(calls), position=position)


def _tools(raw: Any) -> tuple[ClientTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise WireError(INVALID_REQUEST, "tools must be an array of tools.", "tools")
    tools = []
    for n, entry in enumerate(raw):
        where = f"tools[{n}]"
        tool = require_object(entry, where)
        if tool.get("type", "custom") not in ("custom", None):
            raise WireError(
                PARAMETER_UNSUPPORTED,
                f"{where}: the gateway takes custom tools only (got type {tool.get('type')!r}); "
                "server tools run at the provider, outside the session's log.",
                where,
            )
        name = tool.get("name")
        if not isinstance(name, str):
            raise WireError(INVALID_REQUEST, f"{where}.name must be a string.", where)
        description = tool.get("description") or ""
        if not isinstance(description, str):
            raise WireError(INVALID_REQUEST, f"{where}.description must be a string.", where)
        schema = tool.get("input_schema")
        if schema is None:
            raise WireError(INVALID_REQUEST, f"{where}.input_schema is required.", where)
        tools.append(
            ClientTool(name=name, description=description, input_schema=schema, where=where)
        )
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ClientTool, ...]) -> ToolChoice | None:
    if raw is None:
        return None
    choice = require_object(raw, "tool_choice")
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return ToolChoice(mode=kind)
    if kind == "any":
        raise WireError(
            PARAMETER_UNSUPPORTED,
            "tool_choice 'any' is not supported: the model must stay free to call a context "
            "protocol tool. Use 'auto', 'none' or one of your tools.",
            "tool_choice",
        )
    if kind == "tool":
        name = choice.get("name")
        if isinstance(name, str) and any(t.name == name for t in tools):
            return ToolChoice(mode="tool", name=name)
        raise WireError(
            INVALID_REQUEST,
            f"tool_choice names {name!r}, which is not one of the request's tools.",
            "tool_choice",
        )
    raise WireError(
        INVALID_REQUEST, "tool_choice.type must be auto, none, any or tool.", "tool_choice"
    )


# --------------------------------------------------------------------------- replies


def stop_reason(finish: str) -> str:
    return STOP_REASONS.get(finish, "end_turn")


def _usage(reply: Reply) -> dict[str, int]:
    return _usage_counts(reply.usage)


def _usage_counts(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.uncached_input,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


def _content_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    if reply.call is not None:
        blocks.append(
            {
                "type": "tool_use",
                "id": reply.call.id,
                "name": reply.call.name,
                "input": reply.call.arguments,
            }
        )
    return blocks


def render_reply(reply: Reply) -> dict[str, Any]:
    """A Messages `message` object."""
    return {
        "id": reply.id,
        "type": "message",
        "role": ROLE_ASSISTANT,
        "model": reply.model,
        "content": _content_blocks(reply),
        "stop_reason": stop_reason(reply.finish),
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def error_reply(status: int, code: str, message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": error_type(status),
            "message": message,
            "code": code,
            "details": dict(details),
        },
    }


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {dumps(data)}\n\n"


class Stream:
    """Messages stream events: `message_start`, content blocks, `message_delta`,
    `message_stop`; `ping` keeps a connection alive while the model works."""

    def __init__(self, *, reply_id: str, model: str) -> None:
        self.reply_id, self.model = reply_id, model
        self.text_open = False
        self.blocks = 0

    def start(self, usage: Usage) -> str:
        """`message_start` with the usage known so far."""
        counts = _usage_counts(usage)
        return _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.reply_id,
                    "type": "message",
                    "role": ROLE_ASSISTANT,
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**counts, "output_tokens": 0},
                },
            },
        )

    def text(self, delta: str) -> str:
        if not delta:
            return ""
        out = ""
        if not self.text_open:
            self.text_open = True
            out += _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": self.blocks,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        return out + _event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": self.blocks,
                "delta": {"type": "text_delta", "text": delta},
            },
        )

    @staticmethod
    def reasoning(item: Mapping[str, Any]) -> str:
        return ""  # Messages shows no OpenAI reasoning items

    def finish(self, reply: Reply) -> str:
        out = ""
        if self.text_open:
            out += _event(
                "content_block_stop", {"type": "content_block_stop", "index": self.blocks}
            )
            self.text_open = False
            self.blocks += 1
        if reply.call is not None:
            out += _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": self.blocks,
                    "content_block": {
                        "type": "tool_use",
                        "id": reply.call.id,
                        "name": reply.call.name,
                        "input": {},
                    },
                },
            )
            out += _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.blocks,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": dumps(reply.call.arguments),
                    },
                },
            )
            out += _event(
                "content_block_stop", {"type": "content_block_stop", "index": self.blocks}
            )
            self.blocks += 1
        out += _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply.finish), "stop_sequence": None},
                # Cumulative totals: the SDK's accumulator overwrites with them.
                "usage": _usage(reply),
            },
        )
        return out + _event("message_stop", {"type": "message_stop"})

    @staticmethod
    def error(status: int, code: str, message: str, details: Mapping[str, Any]) -> str:
        return _event("error", error_reply(status, code, message, details))

    @staticmethod
    def keepalive() -> str:
        return _event("ping", {"type": "ping"})

    @staticmethod
    def final(reply: Reply) -> Reply:
        return reply  # one order only: the reply is what the stream sent

    def whole(self, reply: Reply) -> str:
        """A stored reply as one stream (a replayed request that asks for a stream)."""
        return self.start(reply.usage) + self.text(reply.text) + self.finish(reply)


def models_list(models: Sequence[ListedModel]) -> dict[str, Any]:
    """`GET v1/models`: one page."""
    data = [
        {
            "type": "model",
            "id": m.name,
            "display_name": m.name,
            "created_at": datetime.fromtimestamp(m.created, UTC).isoformat().replace("+00:00", "Z"),
        }
        for m in models
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


class MessagesWire(WithoutReferences):
    """Anthropic Messages as a `ClientWire` (contract §14)."""

    format = ClientFormat.ANTHROPIC
    title = "Anthropic Messages"
    max_tokens_field = "max_tokens"
    reply_id_prefix = "msg_"

    @staticmethod
    def parse(body: Any) -> GatewayRequest:
        return parse_request(body)

    @staticmethod
    def render_reply(reply: Reply, request: GatewayRequest) -> dict[str, Any]:
        return render_reply(reply)

    @staticmethod
    def encoder(request: GatewayRequest, *, reply_id: str, created: int, model: str) -> Stream:
        return Stream(reply_id=reply_id, model=model)

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
        return {"input_tokens": tokens}
