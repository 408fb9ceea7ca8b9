"""What one assistant message holds, read from a provider's reply (contract §5.2a, §4.5).

The reading rules shared by a host's answer (protocol/model_answers.py, strict: a malformed
field is refused with a ProtocolError naming it) and the built-in runtime's providers
(`read_openai_message`, `read_anthropic_content` with `strict=False`: a model's answer cannot
be refused, so what is missing gets a stand-in and a note). What the model itself got wrong
(arguments that are no JSON object) is kept as written in both: the dispatch answers it with
`invalid_arguments`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .content_parts import PART_REASONING
from .custom_tools import KIND_CUSTOM, custom_arguments
from .errors import ANSWER_INVALID, TOOL_CALL_ID_INVALID, ProtocolError
from .host_wire import arguments_from_text, tool_call_id_problem

THINKING_BLOCKS = ("thinking", "redacted_thinking")
# What a message row holds of a call's tool name (Message.tool_name); tool names are 1-64.
NAME_MAX_CHARS = 128


@dataclass(frozen=True)
class AnswerCall:
    """A call of the answer: its id as the provider made it, the tool, the arguments.

    `arguments` is an object, or the provider's text as written when that is no JSON text
    of an object. `field` is where the arguments are in the answer (for refusals).
    """

    id: str
    name: str
    arguments: Any
    field: str


@dataclass(frozen=True)
class AnswerParts:
    """What one assistant message holds: text, thinking blocks, calls; notes on what was
    changed or left out while reading it."""

    text: str | None
    calls: tuple[AnswerCall, ...]
    thinking: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()


class AnswerReading:
    """Where problems go: refused at once (a host's answer) or noted (a model's reply)."""

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.notes: list[str] = []

    def problem(self, where: str, message: str, note: str | None = None) -> None:
        """Refuse `where` when strict; else keep `note` (if any) and go on."""
        if self.strict:
            raise ProtocolError(ANSWER_INVALID, f"{where}: {message}", {"field": where})
        if note is not None:
            self.notes.append(note)

    def call_id(self, value: Any, where: str, stand_in: str) -> str:
        if self.strict:
            problem = tool_call_id_problem(value)
            if problem is not None:
                raise ProtocolError(
                    TOOL_CALL_ID_INVALID,
                    f"{where}: {problem}. Send the id as the provider made it (1-256 "
                    "characters, no control characters).",
                    {"field": where},
                )
            return str(value)
        # The runtime's providers: a missing id gets a stand-in (answer_record replaces one
        # outside the id rule).
        return value or stand_in

    def name(self, value: Any, where: str) -> str:
        if self.strict and (not isinstance(value, str) or not 1 <= len(value) <= NAME_MAX_CHARS):
            raise ProtocolError(
                ANSWER_INVALID,
                f"{where}: the tool's name, a string of 1 to {NAME_MAX_CHARS} characters.",
                {"field": where},
            )
        return value or ""

    def arguments(self, raw: Any, where: str, call_id: str) -> Any:
        """A call's arguments as stored (contract §5.2): an object as given, JSON text of an
        object as that object, any other text as written; nothing at all is `{}`."""
        if isinstance(raw, dict):
            return raw
        if raw is None or raw == "":
            return {}
        if isinstance(raw, str):
            try:
                parsed = arguments_from_text(raw)
            except RecursionError:
                parsed = None
                self.problem(where, "JSON text nested too deeply to read; flatten it.")
            if parsed is not None:
                return parsed
            self.notes.append(_not_an_object(call_id))
            return raw
        self.problem(
            where,
            "the arguments are a JSON object, or the JSON text the provider returned (a "
            f"string), not {type_in_words(raw)}.",
        )
        self.notes.append(_not_an_object(call_id))
        return json.dumps(raw)


def _not_an_object(call_id: str) -> str:
    return f"tool call {call_id}: arguments are not a JSON object; kept as written"


def type_in_words(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _text_of_parts(parts: list[Any], where: str, reading: AnswerReading) -> str:
    texts = []
    for n, part in enumerate(parts):
        if isinstance(part, Mapping) and part.get("type", "text") == "text":
            text = part.get("text", "")
            if isinstance(text, str):
                texts.append(text)
                continue
        # Compatible servers answer with parts; only text parts carry the answer.
        reading.problem(f"{where}[{n}]", 'a part of the text is {"type": "text", "text"}.')
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts)


# ---------------------------------------------------------------- OpenAI Chat Completions


def read_openai_message(message: Mapping[str, Any], *, where: str, strict: bool) -> AnswerParts:
    """Text and calls of an OpenAI `choices[0].message` (or a compatible server's).

    A `function` call's arguments are the model's JSON text; a `custom` tool's call is the
    call of a custom tool, its free-form input text as `{"input": text}` (custom_tools.py).
    Content given as parts is joined.
    """
    reading = AnswerReading(strict=strict)
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        reading.problem(f"{where}.tool_calls", "a list of tool calls, or null.")
        raw_calls = None
    calls = []
    for n, call in enumerate(raw_calls or (), start=1):
        at = f"{where}.tool_calls[{n - 1}]"
        if not isinstance(call, Mapping):
            reading.problem(at, "a tool call is an object {id, type, function}.")
            call = {}
        call_id = reading.call_id(call.get("id"), f"{at}.id", f"call_missing_id_{n}")
        kind = call.get("type", "function")
        if kind == "function":
            function = call.get("function")
            if strict and not isinstance(function, Mapping):
                reading.problem(f"{at}.function", "an object {name, arguments}.")
            function = function or {}
            name = reading.name(function.get("name"), f"{at}.function.name")
            arguments = reading.arguments(
                function.get("arguments"), f"{at}.function.arguments", call_id
            )
            calls.append(AnswerCall(call_id, name, arguments, f"{at}.function.arguments"))
            continue
        if strict and kind != KIND_CUSTOM:
            reading.problem(f"{at}.type", f'"function" or "custom", not {json.dumps(kind)[:40]}.')
        # A `custom` tool: free-form input, no JSON arguments.
        body = call.get(kind) if isinstance(kind, str) else None
        body = body if isinstance(body, Mapping) else {}
        name = reading.name(body.get("name"), f"{at}.{kind}.name")
        raw_input = body.get("input")
        if strict and not isinstance(raw_input, str):
            reading.problem(f"{at}.{kind}.input", "the custom tool's input text.")
        written = raw_input if isinstance(raw_input, str) else json.dumps(raw_input)
        if kind != KIND_CUSTOM:
            reading.notes.append(f"tool call {call_id}: type {kind!r} kept as its text input")
        calls.append(AnswerCall(call_id, name, custom_arguments(written), f"{at}.{kind}.input"))
    content = message.get("content")
    text: str | None
    if isinstance(content, list):
        text = _text_of_parts(content, f"{where}.content", reading) or None
    elif content is None or isinstance(content, str):
        text = content or None
    else:
        reading.problem(f"{where}.content", "the answer's text, a list of text parts, or null.")
        text = None
    return AnswerParts(text=text, calls=tuple(calls), notes=tuple(reading.notes))


# ---------------------------------------------------------------- Anthropic Messages


def read_anthropic_content(blocks: list[Any], *, where: str, strict: bool) -> AnswerParts:
    """Text, thinking blocks and calls of an Anthropic message's `content` blocks.

    Text blocks split by citations belong together: joined without a separator. Thinking and
    redacted_thinking blocks are kept as given (Anthropic wants them back unchanged, §4.5);
    blocks of other types (server tools, their results) are left out, noted.
    """
    reading = AnswerReading(strict=strict)
    texts: list[str] = []
    thinking: list[dict[str, Any]] = []
    calls: list[AnswerCall] = []
    for n, block in enumerate(blocks):
        at = f"{where}[{n}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping) or not isinstance(kind, str):
            reading.problem(at, 'a content block is an object with a "type".')
            reading.notes.append(f"anthropic: content block {n} of type {kind!r} was not used")
            continue
        if kind == "text":
            text = block.get("text")
            if strict and not isinstance(text, str):
                reading.problem(f"{at}.text", "a text block's text, a string.")
            texts.append(text or "")
        elif kind == "tool_use":
            call_id = reading.call_id(block.get("id"), f"{at}.id", f"toolu_missing_id_{n}")
            name = reading.name(block.get("name"), f"{at}.name")
            arguments = reading.arguments(block.get("input"), f"{at}.input", call_id)
            calls.append(AnswerCall(call_id, name, arguments, f"{at}.input"))
        elif kind in THINKING_BLOCKS:
            if strict:
                check_thinking_block(block, at)
            thinking.append(dict(block))
        else:
            reading.notes.append(f"anthropic: content block {n} of type {kind!r} was not used")
    return AnswerParts(
        text="".join(texts) or None,
        calls=tuple(calls),
        thinking=tuple(thinking),
        notes=tuple(reading.notes),
    )


def check_thinking_block(block: Mapping[str, Any], where: str) -> None:
    # As Anthropic gives them (an omitted thinking text is ""); the signature is checked by
    # Anthropic when the block goes back.
    if block.get("type") == "thinking":
        for name in ("thinking", "signature"):
            if not isinstance(block.get(name), str):
                raise ProtocolError(
                    ANSWER_INVALID,
                    f"{where}.{name}: a thinking block carries its {name} as a string; send "
                    "the block as the provider returned it.",
                    {"field": f"{where}.{name}"},
                )
    elif not isinstance(block.get("data"), str):
        raise ProtocolError(
            ANSWER_INVALID,
            f"{where}.data: a redacted_thinking block carries its data as a string; send the "
            "block as the provider returned it.",
            {"field": f"{where}.data"},
        )


# ---------------------------------------------------------------- OpenAI Responses


def reasoning_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses reasoning output item as the content part an answer stores (contract §3.1):
    its id, summary, encrypted content and (from servers that give it) reasoning text."""
    part: dict[str, Any] = {
        "type": PART_REASONING,
        "id": str(item.get("id") or ""),
        "summary": [dict(s) for s in item.get("summary") or () if isinstance(s, Mapping)],
    }
    if isinstance(item.get("encrypted_content"), str):
        part["encryptedContent"] = item["encrypted_content"]
    content = item.get("content")
    if isinstance(content, list) and content:
        part["content"] = [dict(c) for c in content if isinstance(c, Mapping)]
    return part


def read_responses_output(output: list[Any], *, where: str, strict: bool) -> AnswerParts:
    """Text, reasoning items and calls of a Responses API `output`.

    Message texts are joined by a blank line (a model may write a commentary message before
    its final one); reasoning items become reasoning parts, kept with the answer; a function
    call's arguments are read as Chat's are, a custom tool's call is `{"input": text}`. Items
    a hosted tool produced at the provider (a web search) are not part of the answer: noted.
    """
    reading = AnswerReading(strict=strict)
    texts: list[str] = []
    reasoning: list[dict[str, Any]] = []
    calls: list[AnswerCall] = []
    for n, item in enumerate(output):
        at = f"{where}[{n}]"
        kind = item.get("type") if isinstance(item, Mapping) else None
        if not isinstance(item, Mapping):
            reading.problem(at, 'an output item is an object with a "type".')
            continue
        if kind == "message":
            for m, part in enumerate(item.get("content") or ()):
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    reading.notes.append(f"openai: the model refused: {part.get('refusal')}")
                else:
                    reading.problem(f"{at}.content[{m}]", "an output_text or refusal part.")
        elif kind == PART_REASONING:
            reasoning.append(reasoning_part(item))
        elif kind in ("function_call", KIND_CUSTOM + "_tool_call"):
            call_id = reading.call_id(item.get("call_id"), f"{at}.call_id", f"call_missing_id_{n}")
            name = reading.name(item.get("name"), f"{at}.name")
            if kind == "function_call":
                arguments = reading.arguments(item.get("arguments"), f"{at}.arguments", call_id)
                calls.append(AnswerCall(call_id, name, arguments, f"{at}.arguments"))
            else:
                written = item.get("input")
                if not isinstance(written, str):
                    reading.problem(f"{at}.input", "the custom tool's input text.")
                    written = json.dumps(written)
                calls.append(AnswerCall(call_id, name, custom_arguments(written), f"{at}.input"))
        else:
            reading.notes.append(f"openai: output item {n} of type {kind!r} was not used")
    return AnswerParts(
        text="\n\n".join(t for t in texts if t) or None,
        calls=tuple(calls),
        thinking=tuple(reasoning),
        notes=tuple(reading.notes),
    )
