"""The Responses API's objects (contract §21): a reply as a `response`, its output items, the
`input_items` list and the compaction answers.

Everything is a pure function of its arguments: output item ids are made from the reply id
and the item's place in `output` (`output_item_id`), so the streamed events and the whole
object carry the same ids, and a stored reply renders byte for byte the same.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol.content_parts import PART_IMAGE, PART_TEXT, part_type
from contextproto.protocol.custom_tools import KIND_CUSTOM, call_input_text
from contextproto.protocol.gateway.transcript import Call, Item
from contextproto.protocol.gateway.wire import (
    FINISH_LENGTH,
    INVALID_REQUEST,
    GatewayRequest,
    Reply,
    Usage,
    WireError,
    dumps,
)
from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER

# Output item id prefixes, as OpenAI spells them.
MESSAGE_PREFIX = "msg_"
FUNCTION_CALL_PREFIX = "fc_"
CUSTOM_CALL_PREFIX = "ctc_"
REASONING_PREFIX = "rs_"
COMPACTION_PREFIX = "cmp_"
FUNCTION_OUTPUT_PREFIX = "fco_"
CUSTOM_OUTPUT_PREFIX = "ctco_"
REPLY_PREFIX = "resp_"

# What OpenAI echoes for a field the request left out (its reference's defaults).
ECHO_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
}

INPUT_ITEMS_ORDERS = ("asc", "desc")
INPUT_ITEMS_MAX = 100
INPUT_ITEMS_DEFAULT = 20


def output_item_id(reply_id: str, prefix: str, position: int) -> str:
    """The id of the output item at `position` of reply `reply_id` (deterministic)."""
    return f"{prefix}{reply_id.removeprefix(REPLY_PREFIX)}{position:04x}"


OUTPUT_PREFIXES = (
    MESSAGE_PREFIX,
    FUNCTION_CALL_PREFIX,
    CUSTOM_CALL_PREFIX,
    REASONING_PREFIX,
    COMPACTION_PREFIX,
)
_ITEM_ID = re.compile(r"([0-9a-f]{32})[0-9a-f]{4}")


def reply_of_item(item_id: str) -> str | None:
    """The reply whose output holds the item `item_id` (`output_item_id`'s inverse), or None
    for an id the gateway never gave an output item."""
    for prefix in OUTPUT_PREFIXES:
        if item_id.startswith(prefix):
            found = _ITEM_ID.fullmatch(item_id.removeprefix(prefix))
            return REPLY_PREFIX + found.group(1) if found else None
    return None


def echoed(request: GatewayRequest) -> dict[str, Any]:
    """The request fields a response repeats, in OpenAI's order, defaults filled in."""
    return {key: request.echo.get(key, default) for key, default in ECHO_DEFAULTS.items()}


# --------------------------------------------------------------------------- output items


def reasoning_item(part: Mapping[str, Any], item_id: str, *, encrypted: bool) -> dict[str, Any]:
    """A stored reasoning part (or a Responses reasoning item) as an output item: its summary
    (and content), `encrypted_content` only when the request's `include` asks for it."""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [dict(s) for s in part.get("summary") or () if isinstance(s, Mapping)],
    }
    content = part.get("content")
    if isinstance(content, list) and content:
        item["content"] = [dict(c) for c in content if isinstance(c, Mapping)]
    token = part.get("encryptedContent", part.get("encrypted_content"))
    if encrypted and isinstance(token, str):
        item["encrypted_content"] = token
    return item


def message_item(text: str, item_id: str, *, status: str = "completed") -> dict[str, Any]:
    content = [output_text(text)] if status == "completed" else []
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "content": content,
        "role": ROLE_ASSISTANT,
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "text": text}


def is_custom_call(call: Call, request: GatewayRequest | None) -> bool:
    """A call goes out as a custom tool call when it is one, or when the request declares its
    tool as custom (a call read off the log before its kind was known)."""
    if call.kind == KIND_CUSTOM:
        return True
    return request is not None and any(
        t.name == call.name and t.kind == KIND_CUSTOM for t in request.tools
    )


def call_item(
    call: Call, reply_id: str, position: int, *, custom: bool, done: bool = True
) -> dict[str, Any]:
    """A client-tool call as a `function_call` or `custom_tool_call` output item (its
    arguments or input empty while it streams, `done` false)."""
    status = "completed" if done else "in_progress"
    if custom:
        return {
            "id": output_item_id(reply_id, CUSTOM_CALL_PREFIX, position),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.id,
            "name": call.name,
            "input": call_input_text(call.arguments) if done else "",
        }
    return {
        "id": output_item_id(reply_id, FUNCTION_CALL_PREFIX, position),
        "type": "function_call",
        "status": status,
        "arguments": arguments_text(call.arguments) if done else "",
        "call_id": call.id,
        "name": call.name,
    }


def arguments_text(arguments: Any) -> str:
    """A function call's arguments as OpenAI sends them: JSON text (text kept as written)."""
    return arguments if isinstance(arguments, str) else dumps(arguments)


def compaction_item(reply_id: str, token: str, position: int = 0) -> dict[str, Any]:
    """The one `compaction` item of a compaction answer."""
    return {
        "id": output_item_id(reply_id, COMPACTION_PREFIX, position),
        "type": "compaction",
        "encrypted_content": token,
    }


def output_of(reply: Reply, request: GatewayRequest | None) -> list[dict[str, Any]]:
    """The reply's `output` (contract §21): its reasoning items (the first `message_at` before
    the message), the message when there is text, then the client-tool call; or the one
    compaction item of a compaction answer."""
    if reply.compaction is not None:
        return [compaction_item(reply.id, reply.compaction)]
    encrypted = request is not None and request.include_encrypted_reasoning
    split = len(reply.reasoning) if reply.message_at is None else reply.message_at
    output: list[dict[str, Any]] = []

    def add_reasoning(parts: Sequence[Mapping[str, Any]]) -> None:
        for part in parts:
            item_id = output_item_id(reply.id, REASONING_PREFIX, len(output))
            output.append(reasoning_item(part, item_id, encrypted=encrypted))

    add_reasoning(reply.reasoning[:split])
    if reply.text:
        output.append(
            message_item(reply.text, output_item_id(reply.id, MESSAGE_PREFIX, len(output)))
        )
    add_reasoning(reply.reasoning[split:])
    if reply.call is not None:
        custom = is_custom_call(reply.call, request)
        output.append(call_item(reply.call, reply.id, len(output), custom=custom))
    return output


# --------------------------------------------------------------------------- the response


def usage_object(usage: Usage) -> dict[str, Any]:
    """`usage` in the Responses API's words (input tokens include the cached ones)."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def response_object(
    *,
    reply_id: str,
    created: int,
    model: str,
    request: GatewayRequest | None,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    completed: int | None = None,
    incomplete: str | None = None,
    error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A `response` object in OpenAI's key order, the request's fields echoed."""
    echo = echoed(request) if request is not None else dict(ECHO_DEFAULTS)
    response: dict[str, Any] = {
        "id": reply_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": completed,
        "error": dict(error) if error is not None else None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": echo["instructions"],
        "max_output_tokens": echo["max_output_tokens"],
        "model": model,
        "output": output,
        "parallel_tool_calls": echo["parallel_tool_calls"],
        "previous_response_id": echo["previous_response_id"],
        "reasoning": echo["reasoning"],
        "store": echo["store"],
        "temperature": echo["temperature"],
        "text": echo["text"],
        "tool_choice": echo["tool_choice"],
        "tools": echo["tools"],
        "top_p": echo["top_p"],
        "truncation": echo["truncation"],
        "usage": usage_object(usage) if usage is not None else None,
        "metadata": echo["metadata"],
    }
    return response


def render_reply(reply: Reply, request: GatewayRequest | None) -> dict[str, Any]:
    """The `response` object of a finished reply: `completed`, or `incomplete` with
    `incomplete_details.reason = max_output_tokens` when the model stopped at its limit."""
    incomplete = reply.finish == FINISH_LENGTH and reply.compaction is None
    return response_object(
        reply_id=reply.id,
        created=reply.created,
        model=reply.model,
        request=request,
        status="incomplete" if incomplete else "completed",
        output=output_of(reply, request),
        usage=reply.usage,
        completed=reply.completed if reply.completed is not None else reply.created,
        incomplete="max_output_tokens" if incomplete else None,
    )


def error_object(code: str, message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    """A failed response's `error`: this service's code and message (and its details)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = dict(details)
    return error


# --------------------------------------------------------------------------- input_items


def _input_parts(content: Any) -> list[dict[str, Any]]:
    """A user message's content as Responses input parts (text and images)."""
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part_type(part)
        if kind == PART_TEXT and isinstance(part.get("text"), str):
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == PART_IMAGE:
            url = part.get("url") or (
                f"data:{part.get('mediaType') or 'application/octet-stream'};base64,"
                f"{part.get('data') or ''}"
            )
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return parts


def _tool_output(content: Any) -> Any:
    """A tool result's content as a `*_call_output`'s `output`: its text, or its parts."""
    if isinstance(content, str):
        return content
    parts = _input_parts(content)
    if all(p["type"] == "input_text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def user_message_item(item: Item, item_id: str | None = None) -> dict[str, Any]:
    """A user transcript item as an input `message` item."""
    message: dict[str, Any] = {"type": "message", "role": ROLE_USER}
    if item_id is not None:
        message = {"id": item_id, **message, "status": "completed"}
    message["content"] = _input_parts(item.content)
    return message


class _ItemIds:
    """The ids of the Responses items one transcript item becomes: made from the scope (the
    session), the item's place in the log and its place among them, so a message has the same
    id in every list that shows it."""

    def __init__(self, scope: str, position: int) -> None:
        self.scope, self.position, self.count = scope, position, 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        key = f"{self.scope}/{self.position}/{self.count}"
        return prefix + hashlib.sha256(key.encode()).hexdigest()[:40]


def transcript_items(
    items: Sequence[Item], *, scope: str, custom_tools: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Transcript items as Responses items, each with an id made from `scope` (the session) and
    its place in the log, so a message has the same id in every list that shows it."""
    custom_calls = {
        c.id for i in items for c in i.calls if c.kind == KIND_CUSTOM or c.name in custom_tools
    }
    out: list[dict[str, Any]] = []
    for item in items:
        next_id = _ItemIds(scope, item.position)
        if item.role == ROLE_USER:
            out.append(user_message_item(item, next_id(MESSAGE_PREFIX)))
        elif item.role == ROLE_TOOL:
            custom = item.call_id in custom_calls
            prefix = CUSTOM_OUTPUT_PREFIX if custom else FUNCTION_OUTPUT_PREFIX
            out.append(
                {
                    "id": next_id(prefix),
                    "type": "custom_tool_call_output" if custom else "function_call_output",
                    "call_id": item.call_id,
                    "output": _tool_output(item.content),
                    "status": "completed",
                }
            )
        else:
            for part in item.reasoning:
                out.append(reasoning_item(part, next_id(REASONING_PREFIX), encrypted=False))
            if item.text:
                out.append(message_item(item.text, next_id(MESSAGE_PREFIX)))
            for call in item.calls:
                custom = call.id in custom_calls
                call_out = call_item(call, "", 0, custom=custom)
                call_out["id"] = next_id(CUSTOM_CALL_PREFIX if custom else FUNCTION_CALL_PREFIX)
                out.append(call_out)
    return out


def input_items_page(
    items: Sequence[Item],
    *,
    scope: str,
    order: str = "desc",
    after: str | None = None,
    limit: int = INPUT_ITEMS_DEFAULT,
    custom_tools: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """`GET responses/{id}/input_items` (contract §21): the items that formed a response's
    input, in OpenAI's list shape. `items` are the transcript before the response's output
    (oldest first); `after` an item id of this list (the page starts after it, in `order`).
    Raises WireError `invalid_request` for an order, limit or `after` the list cannot take."""
    if order not in INPUT_ITEMS_ORDERS:
        raise WireError(INVALID_REQUEST, "order must be asc or desc.", "order")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= INPUT_ITEMS_MAX:
        raise WireError(
            INVALID_REQUEST, f"limit must be an integer from 1 to {INPUT_ITEMS_MAX}.", "limit"
        )
    listed = transcript_items(items, scope=scope, custom_tools=custom_tools)
    if order == "desc":
        listed.reverse()
    start = 0
    if after is not None:
        ids = [entry["id"] for entry in listed]
        if after not in ids:
            raise WireError(
                INVALID_REQUEST, f"after names no item of this list: {after!r}.", "after"
            )
        start = ids.index(after) + 1
    page = listed[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(listed),
    }


# --------------------------------------------------------------------------- compaction


def compacted_response(
    *,
    reply_id: str,
    created: int,
    request: GatewayRequest,
    token: str,
    input_tokens: int = 0,
) -> dict[str, Any]:
    """The answer of `POST responses/compact` (contract §21): the input's user messages, then
    one `compaction` item standing for the transcript through them; no model call, so no
    output tokens."""
    users = [user_message_item(item) for item in request.items if item.role == ROLE_USER]
    return {
        "id": reply_id,
        "object": "response.compaction",
        "created_at": created,
        "output": [*users, compaction_item(reply_id, token, len(users))],
        "usage": usage_object(Usage(input_tokens=input_tokens)),
    }
