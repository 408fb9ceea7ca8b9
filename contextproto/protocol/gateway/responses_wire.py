"""The OpenAI Responses API as a gateway client speaks it (contract §21).

Requests as the official SDK (`client.responses.create(...)`), Codex CLI, the Agents SDK and
the Vercel AI SDK send them; the `response` object, stream events and error shape they read
are in responses_render.py and responses_stream.py.

Reading `input` onto the transcript (contract §14, §21): a user message is a user item;
`instructions` and system/developer messages are the client's system text wherever they
stand; the assistant's output items that follow one another (reasoning, messages, function and
custom tool calls) are one reply, as the gateway sent them in one response; a
`function_call_output` / `custom_tool_call_output` is a tool result. A custom tool's call and
its input are the call `{"input": text}` of a custom client tool (custom_tools.py). A
`compaction` item stands for the transcript through the point it names (`GatewayRequest
.compaction`); Codex's `compaction_trigger`, last, asks for one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.content_parts import PART_REASONING
from contextproto.protocol.custom_tools import (
    CUSTOM_INPUT_SCHEMA,
    KIND_CUSTOM,
    KIND_FUNCTION,
    custom_arguments,
)
from contextproto.protocol.gateway import openai_wire
from contextproto.protocol.gateway.responses_render import render_reply
from contextproto.protocol.gateway.responses_stream import ResponsesStream
from contextproto.protocol.gateway.transcript import ANSWER_SEPARATOR, Call, Item
from contextproto.protocol.gateway.wire import (
    INVALID_REQUEST,
    PARAMETER_UNSUPPORTED,
    ClientFormat,
    ClientTool,
    CompactionItem,
    GatewayRequest,
    ListedModel,
    Reply,
    WireError,
    data_url_image,
    optional_bool,
    optional_int,
    optional_number,
    require_object,
)
from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER
from contextproto.protocol.parameters import Parameters, ToolChoice

# The request itself, and the fields forwarded upstream; anything else is ignored (named in
# X-Contextproto-Ignored).
REQUEST_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "stream",
        "stream_options",
        "parallel_tool_calls",
        "store",
        "include",
        "metadata",
        "prompt_cache_key",
        "previous_response_id",
        "background",
    }
)
FORWARDED_FIELDS = frozenset(
    {"max_output_tokens", "temperature", "top_p", "tool_choice", "reasoning", "text", "truncation"}
)
SYSTEM_ROLES = ("system", "developer")
ENCRYPTED_REASONING = "reasoning.encrypted_content"
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
CALL_OUTPUTS = ("function_call_output", "custom_tool_call_output")
TEXT_PARTS = ("input_text", "output_text", "text")


@dataclass
class _Reply:
    """The assistant output items read so far that make one reply."""

    position: int
    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    reasoning: list[dict[str, Any]] = field(default_factory=list)

    def item(self) -> Item:
        return Item(
            role=ROLE_ASSISTANT,
            content=ANSWER_SEPARATOR.join(t for t in self.texts if t),
            calls=tuple(self.calls),
            position=self.position,
            reasoning=tuple(self.reasoning),
        )


class _Input:
    """What `input` says: transcript items, system texts, the compaction item, the trigger."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.system: list[str] = []
        self.reply: _Reply | None = None
        self.compaction: CompactionItem | None = None
        self.trigger = False
        self.ignored: list[str] = []

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


def parse_request(body: Any) -> GatewayRequest:
    """Read a `POST responses` body; raise WireError naming what to fix."""
    body = require_object(body, "body")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise WireError(INVALID_REQUEST, "model must be a string.", "model")
    if optional_bool(body, "background"):
        raise WireError(
            PARAMETER_UNSUPPORTED,
            "background: true is not supported: the gateway answers while the request is open "
            "(use stream: true for long answers).",
            "background",
        )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise WireError(INVALID_REQUEST, "instructions must be a string.", "instructions")
    read = _Input()
    if instructions:
        read.system.append(instructions)
    _read_input(body.get("input"), read)
    tools, hosted = _tools(body.get("tools"))
    ignored = {k for k in body if k not in REQUEST_FIELDS | FORWARDED_FIELDS}
    ignored.update(read.ignored)
    text_format, text_ignored = _text(body.get("text"))
    ignored.update(text_ignored)
    truncation = body.get("truncation")
    if truncation not in (None, "auto", "disabled"):
        raise WireError(INVALID_REQUEST, "truncation must be auto or disabled.", "truncation")
    if truncation == "auto":
        # The session's own maintenance keeps the view in budget; nothing is dropped upstream.
        ignored.add("truncation")
    reasoning = body.get("reasoning")
    if reasoning is not None:
        reasoning = dict(require_object(reasoning, "reasoning"))
    include = _strings(body.get("include"), "include")
    parameters = Parameters(
        max_tokens=optional_int(body, "max_output_tokens", minimum=1),
        temperature=optional_number(body, "temperature", 0, 2),
        top_p=optional_number(body, "top_p", 0, 1),
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        reasoning=reasoning,
        text_format=text_format,
        truncation="disabled" if truncation == "disabled" else None,
        hosted_tools=hosted,
    )
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise WireError(
            INVALID_REQUEST, "previous_response_id must be a response id.", "previous_response_id"
        )
    metadata = body.get("metadata")
    if metadata is not None:
        require_object(metadata, "metadata")
    store = body.get("store")
    if store is not None and not isinstance(store, bool):
        raise WireError(INVALID_REQUEST, "store must be true or false.", "store")
    stream = optional_bool(body, "stream")
    return GatewayRequest(
        format=ClientFormat.RESPONSES,
        model=model,
        system="\n\n".join(text for text in read.system if text),
        items=tuple(read.items),
        tools=tools,
        parameters=parameters,
        stream=stream,
        include_usage=True,
        ignored=tuple(sorted(ignored)),
        previous_response_id=previous,
        store=store is not False,
        include_encrypted_reasoning=ENCRYPTED_REASONING in include,
        compaction=read.compaction,
        compaction_trigger=read.trigger,
        echo=_echo(body, store is not False),
    )


def _echo(body: Mapping[str, Any], store: bool) -> dict[str, Any]:
    """The fields a response repeats, as the client sent them (absent: OpenAI's default)."""
    echo = {
        key: body[key]
        for key in (
            "instructions",
            "max_output_tokens",
            "metadata",
            "parallel_tool_calls",
            "previous_response_id",
            "reasoning",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_p",
            "truncation",
        )
        if body.get(key) is not None
    }
    echo["store"] = store
    return echo


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(INVALID_REQUEST, f"{where} must be a list of strings.", where)
    return tuple(value)


# --------------------------------------------------------------------------- input


def _read_input(raw: Any, read: _Input) -> None:
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
        elif kind == "item_reference":
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
                "custom_tool_call, custom_tool_call_output, reasoning and compaction items "
                f"(got {kind!r}).",
                f"{where}.type",
            )
    read.close()


def _message(item: Mapping[str, Any], where: str, position: int, read: _Input) -> None:
    role = item.get("role")
    content = item.get("content")
    if role in SYSTEM_ROLES:
        text = _text_only(content, f"{where}.content")
        if text:
            read.system.append(text)
    elif role == ROLE_USER:
        read.add(Item(role=ROLE_USER, content=_user_content(content, where), position=position))
    elif role == ROLE_ASSISTANT:
        read.replying(position).texts.append(_text_only(content, f"{where}.content"))
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


# --------------------------------------------------------------------------- tools


def _tools(raw: Any) -> tuple[tuple[ClientTool, ...], tuple[dict[str, Any], ...]]:
    """(client tools, hosted tools): function and custom tools are the client's; any other
    type is a hosted tool, forwarded to a Responses upstream (contract §21)."""
    if raw is None:
        return (), ()
    if not isinstance(raw, list):
        raise WireError(INVALID_REQUEST, "tools must be an array of tools.", "tools")
    tools: list[ClientTool] = []
    hosted: list[dict[str, Any]] = []
    for n, entry in enumerate(raw):
        where = f"tools[{n}]"
        tool = require_object(entry, where)
        kind = tool.get("type")
        if kind == KIND_FUNCTION:
            # Flat as the Responses API has it; Chat's nesting under `function` is read too.
            spec = tool["function"] if isinstance(tool.get("function"), dict) else tool
            schema = spec.get("parameters")
            tools.append(
                ClientTool(
                    name=_tool_name(spec, where),
                    description=_description(spec, where),
                    input_schema=schema
                    if schema is not None
                    else {"type": "object", "properties": {}},
                    where=where,
                )
            )
        elif kind == KIND_CUSTOM:
            custom_format = tool.get("format")
            if custom_format is not None:
                custom_format = dict(require_object(custom_format, f"{where}.format"))
                if custom_format.get("type") not in ("text", "grammar"):
                    raise WireError(
                        INVALID_REQUEST, f"{where}.format.type must be text or grammar.", where
                    )
            tools.append(
                ClientTool(
                    name=_tool_name(tool, where),
                    description=_description(tool, where),
                    input_schema=dict(CUSTOM_INPUT_SCHEMA),
                    where=where,
                    kind=KIND_CUSTOM,
                    custom_format=custom_format,
                )
            )
        elif isinstance(kind, str) and kind:
            hosted.append(dict(tool))
        else:
            raise WireError(INVALID_REQUEST, f"{where}.type must be a tool type.", where)
    return tuple(tools), tuple(hosted)


def _tool_name(spec: Mapping[str, Any], where: str) -> str:
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise WireError(INVALID_REQUEST, f"{where}.name must be a non-empty string.", where)
    return name


def _description(spec: Mapping[str, Any], where: str) -> str:
    description = spec.get("description") or ""
    if not isinstance(description, str):
        raise WireError(INVALID_REQUEST, f"{where}.description must be a string.", where)
    return description


def _tool_choice(raw: Any, tools: Sequence[ClientTool]) -> ToolChoice | None:
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
    if isinstance(raw, dict) and raw.get("type") in (KIND_FUNCTION, KIND_CUSTOM):
        name = raw.get("name")
        if any(t.name == name and t.kind == raw["type"] for t in tools):
            return ToolChoice(mode="tool", name=str(name))
        raise WireError(
            INVALID_REQUEST,
            f"tool_choice names {name!r}, which is not one of the request's {raw['type']} tools.",
            "tool_choice",
        )
    raise WireError(
        PARAMETER_UNSUPPORTED,
        "tool_choice must be 'auto', 'none', {type: 'function', name} or {type: 'custom', name}; "
        "hosted and allowed_tools choices are not supported.",
        "tool_choice",
    )


def _text(raw: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """(text.format to forward, the other `text` fields, ignored)."""
    if raw is None:
        return None, []
    text = require_object(raw, "text")
    text_format = text.get("format")
    if text_format is not None:
        text_format = dict(require_object(text_format, "text.format"))
        if not isinstance(text_format.get("type"), str):
            raise WireError(INVALID_REQUEST, "text.format.type must be a string.", "text.format")
    return text_format, [f"text.{key}" for key in text if key != "format"]


# --------------------------------------------------------------------------- the wire


class ResponsesWire:
    """The Responses API as a `ClientWire` (contract §21)."""

    format = ClientFormat.RESPONSES
    reply_id_prefix = "resp_"

    @staticmethod
    def parse(body: Any) -> GatewayRequest:
        return parse_request(body)

    @staticmethod
    def render_reply(reply: Reply, request: GatewayRequest) -> dict[str, Any]:
        return render_reply(reply, request)

    @staticmethod
    def encoder(
        request: GatewayRequest, *, reply_id: str, created: int, model: str
    ) -> ResponsesStream:
        return ResponsesStream(request, reply_id=reply_id, created=created, model=model)

    @staticmethod
    def error_body(
        status: int, code: str, message: str, details: Mapping[str, Any]
    ) -> dict[str, Any]:
        return openai_wire.error_reply(status, code, message, details)

    @staticmethod
    def models_list(models: Sequence[ListedModel]) -> dict[str, Any]:
        return openai_wire.models_list(models)

    @staticmethod
    def token_count(tokens: int) -> dict[str, Any]:
        return {"object": "response.input_tokens", "input_tokens": tokens}
