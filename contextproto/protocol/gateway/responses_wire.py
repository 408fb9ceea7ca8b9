"""The OpenAI Responses API as a gateway client speaks it (contract §21).

Requests as the official SDK (`client.responses.create(...)`), Codex CLI, the Agents SDK and
the Vercel AI SDK send them; the `response` object, stream events and error shape they read
are in responses_render.py and responses_stream.py.

`instructions` and the input's system and developer messages are the client's system text;
the input becomes the transcript items as responses_input.py reads it; function and custom
tools are the client's tools, any other tool type a hosted tool (forwarded to a Responses
upstream, named ignored otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol.custom_tools import (
    CUSTOM_INPUT_SCHEMA,
    KIND_CUSTOM,
    KIND_FUNCTION,
)
from contextproto.protocol.gateway import openai_wire
from contextproto.protocol.gateway.responses_input import (
    ReadInput,
    read_input,
    referenced_replies,
    with_references,
)
from contextproto.protocol.gateway.responses_render import render_reply
from contextproto.protocol.gateway.responses_stream import ResponsesStream
from contextproto.protocol.gateway.wire import (
    INVALID_REQUEST,
    PARAMETER_UNSUPPORTED,
    ClientFormat,
    ClientTool,
    GatewayRequest,
    ListedModel,
    Reply,
    WireError,
    optional_bool,
    optional_int,
    optional_number,
    require_object,
)
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
ENCRYPTED_REASONING = "reasoning.encrypted_content"
NAMESPACE = "namespace"
DEFAULT_NAMESPACE = "functions"


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
    read = ReadInput()
    if instructions:
        read.system.append(instructions)
    previous_named = isinstance(body.get("previous_response_id"), str)
    if body.get("input") is not None or not previous_named:
        # With `previous_response_id` the input may be left out (what it names is the input:
        # a `responses/compact` of the conversation so far, as the Agents SDK sends it).
        read_input(body.get("input"), read)
    tools, hosted = _tools(_declared(body.get("tools"), "tools") + read.tools)
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


# --------------------------------------------------------------------------- tools


def _declared(raw: Any, field: str) -> list[tuple[str, Any]]:
    """The tools of a `tools` array, each with where it stands."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise WireError(INVALID_REQUEST, f"{field} must be an array of tools.", field)
    return [(f"{field}[{n}]", tool) for n, tool in enumerate(raw)]


def _tools(
    declared: list[tuple[str, Any]],
) -> tuple[tuple[ClientTool, ...], tuple[dict[str, Any], ...]]:
    """(client tools, hosted tools): function and custom tools are the client's, and so are
    those of the `functions` namespace (the default one, where Codex's code mode puts its
    tools); any other type is a hosted tool, forwarded to a Responses upstream (contract §21)."""
    tools: list[ClientTool] = []
    hosted: list[dict[str, Any]] = []
    for where, entry in declared:
        tool = require_object(entry, where)
        kind = tool.get("type")
        if kind == NAMESPACE and tool.get("name") == DEFAULT_NAMESPACE:
            inner, inner_hosted = _tools(_declared(tool.get("tools"), f"{where}.tools"))
            tools.extend(inner)
            hosted.extend(inner_hosted)
        elif kind == KIND_FUNCTION:
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
    title = "OpenAI Responses"
    max_tokens_field = "max_output_tokens"
    reply_id_prefix = "resp_"

    @staticmethod
    def parse(body: Any) -> GatewayRequest:
        return parse_request(body)

    @staticmethod
    def referenced_replies(body: Any) -> tuple[str, ...]:
        return referenced_replies(body)

    @staticmethod
    def with_references(body: Any, replies: Sequence[Mapping[str, Any]]) -> Any:
        return with_references(body, replies)

    @staticmethod
    def render_reply(reply: Reply, request: GatewayRequest) -> dict[str, Any]:
        return render_reply(reply, request)

    @staticmethod
    def encoder(
        request: GatewayRequest, *, reply_id: str, created: int, model: str
    ) -> ResponsesStream:
        return ResponsesStream(request, reply_id=reply_id, created=created, model=model)

    @staticmethod
    def error_reply_body(
        status: int, code: str, message: str, details: Mapping[str, Any]
    ) -> dict[str, Any]:
        return openai_wire.error_reply(status, code, message, details)

    @staticmethod
    def models_list(models: Sequence[ListedModel]) -> dict[str, Any]:
        return openai_wire.models_list(models)

    @staticmethod
    def token_count(tokens: int) -> dict[str, Any]:
        return {"object": "response.input_tokens", "input_tokens": tokens}
