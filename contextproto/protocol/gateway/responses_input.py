"""A Responses request's `input` read onto the transcript (contract §14, §21).

A user message is a user item; system and developer messages are the client's system text
wherever they stand; the assistant's output items that follow one another (reasoning,
messages, function and custom tool calls) are one reply, as the gateway sent them in one
response, the reasoning items belonging to it; a `function_call_output` /
`custom_tool_call_output` is a tool result. A custom tool's call is the call `{"input": text}`
of a custom client tool (custom_tools.py). A `compaction` item stands for the transcript
through the point it names; Codex's `compaction_trigger`, last, asks for one. Items a hosted
tool produced at the provider are left out and named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.content_parts import PART_REASONING
from contextproto.protocol.custom_tools import KIND_CUSTOM, custom_arguments
from contextproto.protocol.gateway import openai_wire
from contextproto.protocol.gateway.responses_render import reply_of_item
from contextproto.protocol.gateway.transcript import ANSWER_SEPARATOR, Call, Item
from contextproto.protocol.gateway.wire import (
    INVALID_REQUEST,
    PARAMETER_UNSUPPORTED,
    CompactionItem,
    WireError,
    data_url_image,
    require_object,
)
from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER

SYSTEM_ROLES = ("system", "developer")
# Items a hosted tool produced at the provider: nothing of the transcript, left out and named.
HOSTED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
    }
)
COMPACTION_TYPES = ("compaction", "compaction_summary")  # Codex reads both names
TRIGGER = "compaction_trigger"
# An earlier output item sent back by its id (the Vercel AI SDK's `openai()`).
ITEM_REFERENCE = "item_reference"
# Codex's default model ("code mode") declares its tools in an input item, not in `tools`.
ADDITIONAL_TOOLS = "additional_tools"
CALL_OUTPUTS = ("function_call_output", "custom_tool_call_output")
TEXT_PARTS = ("input_text", "output_text", "text")


@dataclass
class _Reply:
    """The assistant output items read so far that make one reply."""

    position: int
    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    message_at: int | None = None  # reasoning items before the first text

    def text(self, text: str) -> None:
        if text and self.message_at is None:
            self.message_at = len(self.reasoning)
        self.texts.append(text)

    def item(self) -> Item:
        before = self.message_at
        return Item(
            role=ROLE_ASSISTANT,
            content=ANSWER_SEPARATOR.join(t for t in self.texts if t),
            calls=tuple(self.calls),
            position=self.position,
            reasoning=tuple(self.reasoning),
            message_at=before if before is not None and before < len(self.reasoning) else None,
        )


class ReadInput:
    """What `input` says: transcript items, system texts, the compaction item, the trigger,
    and the items left out (named in X-Contextproto-Ignored)."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.system: list[str] = []
        self.reply: _Reply | None = None
        self.compaction: CompactionItem | None = None
        self.trigger = False
        self.ignored: list[str] = []
        # Tools declared inside `input` (Codex's `additional_tools` item), with where they were.
        self.tools: list[tuple[str, Any]] = []

    def replying(self, position: int) -> _Reply:
        if self.reply is None:
            self.reply = _Reply(position)
        return self.reply

    def close(self) -> None:
        if self.reply is not None:
            self.items.append(self.reply.item())
            self.reply = None

    def add(self, item: Item) -> None:
        self.close()
        self.items.append(item)


def read_input(raw: Any, read: ReadInput) -> None:
    """Read `input` (a string or a list of items) into `read`; raise WireError naming the item."""
    if isinstance(raw, str):
        read.add(Item(role=ROLE_USER, content=raw, position=0))
        return
    if not isinstance(raw, list) or not raw:
        raise WireError(
            INVALID_REQUEST, "input must be a string or a non-empty array of items.", "input"
        )
    last = len(raw) - 1
    for position, entry in enumerate(raw):
        where = f"input[{position}]"
        item = require_object(entry, where)
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            _message(item, where, position, read)
        elif kind == PART_REASONING:
            read.replying(position).reasoning.append(_reasoning(item, where))
        elif kind == "function_call":
            read.replying(position).calls.append(_function_call(item, where))
        elif kind == "custom_tool_call":
            call_id, name = _call_names(item, where)
            text = item.get("input")
            if not isinstance(text, str):
                raise WireError(INVALID_REQUEST, f"{where}.input must be a string.", where)
            call = Call(id=call_id, name=name, arguments=custom_arguments(text), kind=KIND_CUSTOM)
            read.replying(position).calls.append(call)
        elif kind in CALL_OUTPUTS:
            read.add(_call_output(item, where, position))
        elif kind in COMPACTION_TYPES:
            token = item.get("encrypted_content")
            if not isinstance(token, str) or not token:
                raise WireError(
                    INVALID_REQUEST, f"{where}.encrypted_content must be a non-empty string.", where
                )
            read.close()
            item_id = item.get("id") if isinstance(item.get("id"), str) else None
            read.compaction = CompactionItem(token=token, at=len(read.items), item_id=item_id)
        elif kind == TRIGGER:
            if position != last:
                raise WireError(
                    INVALID_REQUEST,
                    "The compaction_trigger item must be the final input item.",
                    where,
                )
            read.close()
            read.trigger = True
        elif kind == ADDITIONAL_TOOLS:
            tools = item.get("tools")
            if not isinstance(tools, list):
                raise WireError(INVALID_REQUEST, f"{where}.tools must be an array of tools.", where)
            read.tools.extend((f"{where}.tools[{n}]", tool) for n, tool in enumerate(tools))
        elif kind == ITEM_REFERENCE:
            raise WireError(
                PARAMETER_UNSUPPORTED,
                f"{where}: item_reference is not supported; send the item itself (or continue "
                "with previous_response_id).",
                where,
            )
        elif kind in HOSTED_ITEMS:
            read.ignored.append(f"input.{kind}")
        else:
            raise WireError(
                INVALID_REQUEST,
                f"{where}.type: the gateway takes message, function_call, function_call_output, "
                "custom_tool_call, custom_tool_call_output, reasoning, compaction and "
                "additional_tools items "
                f"(got {kind!r}).",
                f"{where}.type",
            )
    read.close()


def _message(item: Mapping[str, Any], where: str, position: int, read: ReadInput) -> None:
    role = item.get("role")
    content = item.get("content")
    if role in SYSTEM_ROLES:
        text = _text_only(content, f"{where}.content")
        if text:
            read.system.append(text)
    elif role == ROLE_USER:
        read.add(Item(role=ROLE_USER, content=_user_content(content, where), position=position))
    elif role == ROLE_ASSISTANT:
        read.replying(position).text(_text_only(content, f"{where}.content"))
    else:
        raise WireError(
            INVALID_REQUEST,
            f"{where}.role must be one of user, assistant, system, developer (got {role!r}).",
            f"{where}.role",
        )


def _text_only(content: Any, where: str) -> str:
    """A content that may only hold text: a string, or text parts (concatenated)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise WireError(INVALID_REQUEST, f"{where} must be a string or an array of parts.", where)
    texts = []
    for n, raw in enumerate(content):
        part = require_object(raw, f"{where}[{n}]")
        kind = part.get("type")
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if kind not in (*TEXT_PARTS, "refusal") or not isinstance(text, str):
            raise WireError(
                INVALID_REQUEST,
                f"{where}[{n}] must be a text part (got type {kind!r}).",
                f"{where}[{n}]",
            )
        texts.append(text)
    return "".join(texts)


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    """Text and image parts as neutral parts."""
    parts: list[dict[str, Any]] = []
    for n, raw in enumerate(content):
        part = require_object(raw, f"{where}[{n}]")
        kind = part.get("type")
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                raise WireError(
                    PARAMETER_UNSUPPORTED if part.get("file_id") else INVALID_REQUEST,
                    f"{where}[{n}]: the gateway takes images by image_url (a URL or a data: "
                    "URL), not by file_id.",
                    f"{where}[{n}]",
                )
            parts.append(data_url_image(url))
        else:
            raise WireError(
                PARAMETER_UNSUPPORTED if kind == "input_file" else INVALID_REQUEST,
                f"{where}[{n}]: the gateway takes input_text and input_image parts (got {kind!r}).",
                f"{where}[{n}]",
            )
    return parts


def _user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    where = f"{where}.content"
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise WireError(
            INVALID_REQUEST, f"{where} must be a string or a non-empty array of parts.", where
        )
    return _parts(content, where)


def _reasoning(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A reasoning item as the content part the log stores (contract §3.1)."""
    summary = item.get("summary")
    if summary is None:
        summary = []
    if not isinstance(summary, list):
        raise WireError(INVALID_REQUEST, f"{where}.summary must be an array.", where)
    part: dict[str, Any] = {"type": PART_REASONING, "id": item.get("id"), "summary": summary}
    token = item.get("encrypted_content")
    if isinstance(token, str):
        part["encryptedContent"] = token
    content = item.get("content")
    if isinstance(content, list) and content:
        part["content"] = content
    return part


def _call_names(item: Mapping[str, Any], where: str) -> tuple[str, str]:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise WireError(INVALID_REQUEST, f"{where} needs a call_id and a name.", where)
    return call_id, name


def _function_call(item: Mapping[str, Any], where: str) -> Call:
    call_id, name = _call_names(item, where)
    arguments = item.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise WireError(INVALID_REQUEST, f"{where}.arguments must be a JSON string.", where)
    return Call(id=call_id, name=name, arguments=openai_wire.parse_arguments(arguments))


def _call_output(item: Mapping[str, Any], where: str, position: int) -> Item:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise WireError(INVALID_REQUEST, f"{where}.call_id must be a non-empty string.", where)
    output = item.get("output")
    if isinstance(output, Mapping) and isinstance(output.get("content"), str):
        output = output["content"]  # an older Codex's {content, success}
    content: str | list[dict[str, Any]]
    if output is None or isinstance(output, str):
        content = output or ""
    elif isinstance(output, list):
        parts = _parts(output, f"{where}.output")
        texts = [p["text"] for p in parts if p["type"] == "text"]
        content = "".join(texts) if len(texts) == len(parts) else parts
    else:
        raise WireError(
            INVALID_REQUEST, f"{where}.output must be a string or an array of parts.", where
        )
    return Item(role=ROLE_TOOL, content=content, call_id=call_id, position=position)


# --------------------------------------------------------------------------- item references


def _is_reference(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == ITEM_REFERENCE


def referenced_replies(body: Any) -> tuple[str, ...]:
    """The replies whose output items `body`'s `item_reference` items name (the gateway gave
    those ids: `output_item_id`), to look up before the body is read."""
    items = body.get("input") if isinstance(body, Mapping) else None
    if not isinstance(items, list):
        return ()
    found = {
        reply_of_item(item["id"])
        for item in items
        if _is_reference(item) and isinstance(item.get("id"), str)
    }
    return tuple(sorted(r for r in found if r is not None))


def with_references(body: Any, replies: Sequence[Mapping[str, Any]]) -> Any:
    """`body` with each `item_reference` replaced by the output item it names in `replies`
    (stored response objects); raise WireError naming the first it does not find there."""
    items = body.get("input") if isinstance(body, Mapping) else None
    if not isinstance(items, list) or not any(_is_reference(i) for i in items):
        return body
    outputs = {
        output["id"]: output
        for reply in replies
        for output in reply.get("output", ())
        if isinstance(output, Mapping) and "id" in output
    }
    resolved: list[Any] = []
    for position, item in enumerate(items):
        if not _is_reference(item):
            resolved.append(item)
            continue
        found = outputs.get(item.get("id"))
        if found is None:
            where = f"input[{position}].id"
            raise WireError(
                INVALID_REQUEST,
                f"input[{position}]: item_reference {item.get('id')!r} names no output item of "
                "a stored response of this Application (unknown, deleted, or made with store: "
                "false); send the item itself.",
                where,
            )
        resolved.append(found)
    return {**body, "input": resolved}
