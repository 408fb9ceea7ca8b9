"""The `openai-responses` adapter (contract §4.5, §21): a projection as a Responses API request.

The system prompt is `instructions`; every other message is one or more `input` items in view
order: user and derived messages are `message` items (`input_text` / `input_image` parts for
the user role, text for the assistant's), an answer is its reasoning items as the
model gave them (OpenAI's `{"type": "reasoning", …}` content parts, `encrypted_content`
included: this adapter is the only one that sends them back, contract §4.5), then its text as
an assistant message, then its call as a `function_call` (a custom tool's as a
`custom_tool_call` with its text input); a result is a `function_call_output` /
`custom_tool_call_output`, its images kept as `input_image` parts.

Tools are function tools (`strict: false`: protocol and host schemas are not written for
strict mode) and the client's custom tools as custom tools; a request with tools asks for one
call per answer (`parallel_tool_calls: false`). The service keeps the conversation, so the
provider keeps nothing (`store: false`) and returns reasoning as encrypted content to send
back (`include`). With prompt caching on, `prompt_cache_key` as `openai-chat` does.

Byte-stable prefixes: keys in a fixed order, tools in the order given, one unit per item; an
append-only turn repeats the previous request's items (tests/protocol/test_prefix_stability.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol import json_texts
from contextproto.protocol.adapter_base import (
    OPENAI_PARALLEL_TOOL_CALLS,
    PROVIDER_OPENAI_RESPONSES,
    ROLE_SYSTEM,
    AdaptedRequest,
    AdaptOptions,
    image_url,
    text_of,
)
from contextproto.protocol.content_parts import (
    has_image,
    is_image_part,
    is_reasoning_part,
    is_text_part,
)
from contextproto.protocol.custom_tools import call_input_text, custom_names, is_custom
from contextproto.protocol.messages import (
    ANSWER_KINDS,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    Arguments,
    ModelMessage,
)
from contextproto.protocol.projection import Projection

INCLUDE = ["reasoning.encrypted_content"]
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


def reasoning_input(part: Mapping[str, Any]) -> dict[str, Any]:
    """A stored reasoning part as the input item OpenAI gave it as (same id, summary and
    encrypted content: the content is bound to them)."""
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": part.get("id"),
        "summary": part.get("summary") or [],
    }
    if part.get("content"):
        item["content"] = part["content"]
    if isinstance(part.get("encryptedContent"), str):
        item["encrypted_content"] = part["encryptedContent"]
    return item


def _input_parts(content: Any) -> list[dict[str, Any]]:
    """A user-role content as input parts: text and images, nothing else."""
    if not isinstance(content, list):
        return [{"type": "input_text", "text": text_of(content)}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if is_image_part(part):
            parts.append({"type": "input_image", "image_url": image_url(part), "detail": "auto"})
        elif is_text_part(part):
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
    return parts or [{"type": "input_text", "text": ""}]


def _assistant_message(text: str) -> dict[str, Any]:
    # An input message with text content (the API's "easy input message"): an output message
    # item would need an id and a status the service has no business inventing.
    return {"type": "message", "role": ROLE_ASSISTANT, "content": text}


def _arguments_text(arguments: Arguments | None) -> str:
    # As openai-chat sends them: the provider's own text when stored as written.
    if isinstance(arguments, str):
        return arguments
    return json_texts.plain(arguments or {})


def _answer_items(
    message: ModelMessage, custom: frozenset[str], notes: list[str]
) -> list[dict[str, Any]]:
    """An answer's items: its reasoning, its text, its call."""
    content = message.content
    items = (
        [reasoning_input(p) for p in content if is_reasoning_part(p)]
        if isinstance(content, list)
        else []
    )
    text = text_of(content)
    if has_image(content):
        notes.append(
            f"openai-responses: image parts of the assistant's {message.kind} at "
            f"{message.tool_call_id or 'its answer'} were left out (assistant messages carry "
            "no images)"
        )
    if message.kind != KIND_TOOL_CALL:
        # Every answer stays a message, even one that only thought (a reasoning item must be
        # followed by the item it led to).
        return [*items, _assistant_message(text)]
    if text:
        items.append(_assistant_message(text))
    name = str(message.tool_name)
    if name in custom:
        items.append(
            {
                "type": "custom_tool_call",
                "call_id": message.tool_call_id,
                "name": name,
                "input": call_input_text(message.arguments),
            }
        )
    else:
        items.append(
            {
                "type": "function_call",
                "call_id": message.tool_call_id,
                "name": name,
                "arguments": _arguments_text(message.arguments),
            }
        )
    return items


def _result_item(message: ModelMessage, custom_calls: set[str]) -> dict[str, Any]:
    content = message.content
    output: Any = text_of(content)
    if has_image(content):
        output = [p for p in _input_parts(content) if p.get("text") != ""] or output
    kind = (
        "custom_tool_call_output"
        if message.tool_call_id in custom_calls
        else "function_call_output"
    )
    return {"type": kind, "call_id": message.tool_call_id, "output": output}


def _keep_outputs_after_their_calls(items: list[dict[str, Any]], notes: list[str]) -> None:
    """Move each call's output up to the calls it answers: an item between a call and its
    output (approval feedback a host wrote) goes after the outputs, as openai-chat does."""
    i = 0
    while i < len(items):
        if items[i]["type"] not in CALL_TYPES:
            i += 1
            continue
        j = i
        needed: set[Any] = set()
        while j < len(items) and items[j]["type"] in CALL_TYPES:
            needed.add(items[j]["call_id"])
            j += 1
        outputs: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        k = j
        while needed and k < len(items):
            candidate = items[k]
            if candidate["type"] in OUTPUT_TYPES and candidate["call_id"] in needed:
                outputs.append(candidate)
                needed.discard(candidate["call_id"])
            else:
                others.append(candidate)
            k += 1
        if outputs and others:
            notes.append(
                f"openai-responses: {len(others)} item(s) between call(s) and their outputs were "
                "moved after the outputs"
            )
        items[j:k] = outputs + others
        i = j + len(outputs)


def tool_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A view tool (`{name, description, inputSchema, kind?, format?}`) as a Responses tool."""
    if is_custom(tool):
        definition: dict[str, Any] = {
            "type": "custom",
            "name": tool["name"],
            "description": tool.get("description", ""),
        }
        if tool.get("format"):
            definition["format"] = tool["format"]
        return definition
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": tool.get("inputSchema") or {"type": "object"},
        "strict": False,
    }


def adapt_responses(
    projection: Projection,
    tools: Sequence[Mapping[str, Any]],
    options: AdaptOptions,
) -> AdaptedRequest:
    """Render `projection` (and its tools) as a Responses API request body."""
    notes: list[str] = []
    instructions: list[str] = []
    custom = custom_names(tools)
    custom_calls: set[str] = set()
    items: list[dict[str, Any]] = []
    for message in projection.messages:
        if message.role == ROLE_SYSTEM:
            instructions.append(text_of(message.content))
        elif message.kind == KIND_TOOL_RESULT or message.role == ROLE_TOOL:
            items.append(_result_item(message, custom_calls))
        elif message.role == ROLE_ASSISTANT and (
            message.kind in ANSWER_KINDS or message.kind == KIND_TOOL_CALL
        ):
            if message.kind == KIND_TOOL_CALL and str(message.tool_name) in custom:
                custom_calls.add(str(message.tool_call_id))
            items.extend(_answer_items(message, custom, notes))
        elif message.role == ROLE_ASSISTANT:
            items.append(_assistant_message(text_of(message.content)))
        else:
            items.append(
                {"type": "message", "role": message.role, "content": _input_parts(message.content)}
            )
    _keep_outputs_after_their_calls(items, notes)
    body: dict[str, Any] = {}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    body["input"] = items
    if tools:
        body["tools"] = [tool_definition(t) for t in tools]
        # Only the first call of an answer is executed (contract §5.6): ask for one.
        body["parallel_tool_calls"] = OPENAI_PARALLEL_TOOL_CALLS
    if options.prompt_cache.enabled and options.cache_key:
        body["prompt_cache_key"] = options.cache_key
    body["store"] = False
    body["include"] = list(INCLUDE)
    return AdaptedRequest(provider=PROVIDER_OPENAI_RESPONSES, body=body, notes=tuple(notes))
