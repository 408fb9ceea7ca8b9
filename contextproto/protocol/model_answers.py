"""One model answer, read from what a provider's SDK returned (contract §5.2a, §4.5).

Four shapes: an OpenAI `chat.completion`, its `choices[0].message`, an Anthropic `message`,
or the neutral `{content, toolCalls: [{id, name, arguments}]}`. Each becomes the same
`ModelAnswer`: the text, the thinking blocks as given, the calls (arguments as an object,
or the provider's text as written when it is no JSON object), the provider's usage object
and the stop reason.

Two readers share the rules. A host's answer (`answer_from_host`) is read strictly: a
malformed field is refused with a ProtocolError naming it, because the host can fix it. The
built-in runtime reads the model's reply leniently (`read_openai_message`,
`read_anthropic_content` with `strict=False`): a model's answer cannot be refused, so what is
missing gets a stand-in and a note. What the model itself got wrong (arguments that are no
JSON object) is kept as written in both: the dispatch answers it with `invalid_arguments`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import (
    ANSWER_INVALID,
    ANSWER_SHAPE_UNKNOWN,
    TOOL_CALL_ID_INVALID,
    ProtocolError,
)
from .host_wire import arguments_from_text, tool_call_id_problem

SHAPE_OPENAI_COMPLETION = "openai-chat-completion"
SHAPE_OPENAI_MESSAGE = "openai-chat-message"
SHAPE_ANTHROPIC_MESSAGE = "anthropic-message"
SHAPE_NEUTRAL = "neutral"
NEUTRAL_FIELDS = ("content", "toolCalls")
NEUTRAL_CALL_FIELDS = ("id", "name", "arguments")
THINKING_BLOCKS = ("thinking", "redacted_thinking")
# What a message row holds of a call's tool name (Message.tool_name); tool names are 1-64.
NAME_MAX_CHARS = 128
SHAPES_IN_WORDS = (
    "an OpenAI chat.completion, its choices[0].message, an Anthropic message (type: "
    '"message"), or {content, toolCalls: [{id, name, arguments}]}'
)


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


@dataclass(frozen=True)
class ModelAnswer:
    """A host's answer in one shape whatever it came as.

    `usage` is the provider's usage object as the reply carried it (None when the shape has
    none: a bare message, the neutral form, or a reply without usage); `usage_field` names
    where it was. `stop_reason` in the provider's words.
    """

    shape: str
    text: str | None
    calls: tuple[AnswerCall, ...]
    thinking: tuple[dict[str, Any], ...] = ()
    usage: Mapping[str, Any] | None = None
    usage_field: str = ""
    stop_reason: str | None = None
    notes: tuple[str, ...] = ()


class _Reading:
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
            f"string), not {_type_name(raw)}.",
        )
        self.notes.append(_not_an_object(call_id))
        return json.dumps(raw)


def _not_an_object(call_id: str) -> str:
    return f"tool call {call_id}: arguments are not a JSON object; kept as written"


def _type_name(value: Any) -> str:
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


def _text_of_parts(parts: list[Any], where: str, reading: _Reading) -> str:
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

    A `function` call's arguments are the model's JSON text; a `custom` tool's call keeps
    its free-form input text (noted). Content given as parts is joined.
    """
    reading = _Reading(strict=strict)
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
        if strict and kind != "custom":
            reading.problem(f"{at}.type", f'"function" or "custom", not {json.dumps(kind)[:40]}.')
        # e.g. a `custom` tool: free-form input, no JSON arguments.
        body = call.get(kind) if isinstance(kind, str) else None
        body = body if isinstance(body, Mapping) else {}
        name = reading.name(body.get("name"), f"{at}.{kind}.name")
        raw_input = body.get("input")
        if strict and not isinstance(raw_input, str):
            reading.problem(f"{at}.{kind}.input", "the custom tool's input text.")
        arguments = raw_input if isinstance(raw_input, str) else json.dumps(raw_input)
        reading.notes.append(f"tool call {call_id}: type {kind!r} kept as its text input")
        calls.append(AnswerCall(call_id, name, arguments, f"{at}.{kind}.input"))
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
    reading = _Reading(strict=strict)
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
                _thinking_check(block, at)
            thinking.append(dict(block))
        else:
            reading.notes.append(f"anthropic: content block {n} of type {kind!r} was not used")
    return AnswerParts(
        text="".join(texts) or None,
        calls=tuple(calls),
        thinking=tuple(thinking),
        notes=tuple(reading.notes),
    )


def _thinking_check(block: Mapping[str, Any], where: str) -> None:
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


# ---------------------------------------------------------------- a host's answer


def answer_shape(answer: object) -> str | None:
    """Which of the four shapes `answer` is, by the fields each has; None for none."""
    if not isinstance(answer, Mapping):
        return None
    if "choices" in answer:
        return SHAPE_OPENAI_COMPLETION
    if answer.get("type") == "message":
        return SHAPE_ANTHROPIC_MESSAGE
    if answer.get("role") == "assistant" and "toolCalls" not in answer:
        return SHAPE_OPENAI_MESSAGE
    if "toolCalls" in answer or ("content" in answer and set(answer) <= set(NEUTRAL_FIELDS)):
        return SHAPE_NEUTRAL
    return None


def answer_from_host(answer: object, *, root: str = "answer") -> ModelAnswer:
    """Read a host's model answer in any of the four shapes (module docstring).

    Raises ProtocolError: `answer_shape_unknown` for none of the shapes;
    `answer_invalid` naming the field for a malformed one, and for an answer with neither
    text nor a call; `tool_call_id_invalid` for an id outside the rule (contract §5.2). An
    OpenAI refusal (`refusal`, no content) is the answer's text. Other fields the SDKs
    write are ignored.
    """
    shape = answer_shape(answer)
    if shape is None or not isinstance(answer, Mapping):
        got = "an object with other fields" if isinstance(answer, Mapping) else _type_name(answer)
        raise ProtocolError(
            ANSWER_SHAPE_UNKNOWN,
            f"{root} is the model's answer as the provider's SDK returned it: {SHAPES_IN_WORDS}"
            f"; got {got}.",
            {"field": root, "shapes": [*_SHAPES]},
        )
    if shape == SHAPE_OPENAI_COMPLETION:
        found = _openai_completion(answer, root)
    elif shape == SHAPE_OPENAI_MESSAGE:
        found = _openai_message(answer, root, shape)
    elif shape == SHAPE_ANTHROPIC_MESSAGE:
        found = _anthropic_message(answer, root)
    else:
        found = _neutral(answer, root)
    if not found.calls and not (found.text and found.text.strip()):
        where = {
            SHAPE_OPENAI_COMPLETION: f"{root}.choices[0].message.content",
            SHAPE_OPENAI_MESSAGE: f"{root}.content",
            SHAPE_ANTHROPIC_MESSAGE: f"{root}.content",
            SHAPE_NEUTRAL: f"{root}.content",
        }[shape]
        raise ProtocolError(
            ANSWER_INVALID,
            f"{where}: the answer has neither text nor a tool call; send the model's answer "
            "as it came (an empty answer is no turn).",
            {"field": where},
        )
    return found


_SHAPES = (SHAPE_OPENAI_COMPLETION, SHAPE_OPENAI_MESSAGE, SHAPE_ANTHROPIC_MESSAGE, SHAPE_NEUTRAL)


def _usage_of(answer: Mapping[str, Any], root: str) -> Mapping[str, Any] | None:
    usage = answer.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise ProtocolError(
            ANSWER_INVALID,
            f"{root}.usage: the provider's usage object, or null.",
            {"field": f"{root}.usage"},
        )
    return usage


def _openai_completion(answer: Mapping[str, Any], root: str) -> ModelAnswer:
    kind = answer.get("object")
    if kind not in (None, "chat.completion"):
        raise ProtocolError(
            ANSWER_SHAPE_UNKNOWN,
            f"{root}.object: a chat.completion, not {json.dumps(kind)[:60]}; a streamed answer "
            "is sent once assembled (the SDK's stream helpers return the completion).",
            {"field": f"{root}.object", "shapes": [*_SHAPES]},
        )
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ProtocolError(
            ANSWER_INVALID,
            f"{root}.choices: a list whose first choice holds the answer's message.",
            {"field": f"{root}.choices"},
        )
    choice = choices[0]
    where = f"{root}.choices[0].message"
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise ProtocolError(
            ANSWER_INVALID, f"{where}: the answer's message, an object.", {"field": where}
        )
    inner = _openai_message(message, where, SHAPE_OPENAI_COMPLETION)
    finish = choice.get("finish_reason")
    return ModelAnswer(
        shape=SHAPE_OPENAI_COMPLETION,
        text=inner.text,
        calls=inner.calls,
        usage=_usage_of(answer, root),
        usage_field=f"{root}.usage",
        stop_reason=finish if isinstance(finish, str) else None,
        notes=inner.notes,
    )


def _openai_message(message: Mapping[str, Any], where: str, shape: str) -> ModelAnswer:
    parts = read_openai_message(message, where=where, strict=True)
    text, notes = parts.text, parts.notes
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal and not text:
        # The model declined: its words are the answer the user gets.
        text = refusal
        notes = (*notes, "openai: the model refused; its refusal is the answer's text")
    return ModelAnswer(shape=shape, text=text, calls=parts.calls, notes=notes)


def _anthropic_message(answer: Mapping[str, Any], root: str) -> ModelAnswer:
    blocks = answer.get("content")
    if not isinstance(blocks, list):
        raise ProtocolError(
            ANSWER_INVALID,
            f"{root}.content: the message's content blocks, a list.",
            {"field": f"{root}.content"},
        )
    parts = read_anthropic_content(blocks, where=f"{root}.content", strict=True)
    stop = answer.get("stop_reason")
    return ModelAnswer(
        shape=SHAPE_ANTHROPIC_MESSAGE,
        text=parts.text,
        calls=parts.calls,
        thinking=parts.thinking,
        usage=_usage_of(answer, root),
        usage_field=f"{root}.usage",
        stop_reason=stop if isinstance(stop, str) else None,
        notes=parts.notes,
    )


def _neutral(answer: Mapping[str, Any], root: str) -> ModelAnswer:
    unknown = sorted(set(answer) - set(NEUTRAL_FIELDS), key=str)
    if unknown:
        raise ProtocolError(
            ANSWER_INVALID,
            f"{root}.{unknown[0]}: unknown field of the neutral answer; it has "
            f"{', '.join(NEUTRAL_FIELDS)}.",
            {"field": f"{root}.{unknown[0]}"},
        )
    reading = _Reading(strict=True)
    content = answer.get("content")
    text: str | None = None
    thinking: list[dict[str, Any]] = []
    if isinstance(content, list):
        texts = []
        for n, part in enumerate(content):
            at = f"{root}.content[{n}]"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if isinstance(part, Mapping) and kind in THINKING_BLOCKS:
                _thinking_check(part, at)
                thinking.append(dict(part))
            elif isinstance(part, Mapping) and kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                reading.problem(
                    at,
                    'an answer\'s part is {"type": "text", "text"}, or a thinking or '
                    "redacted_thinking block as the provider gave it.",
                )
        text = "".join(texts) or None
    elif isinstance(content, str) or content is None:
        text = content or None
    else:
        reading.problem(f"{root}.content", "the answer's text, a list of parts, or null.")
    raw_calls = answer.get("toolCalls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        reading.problem(f"{root}.toolCalls", "a list of {id, name, arguments}, or null.")
    calls = []
    for n, call in enumerate(raw_calls or ()):
        at = f"{root}.toolCalls[{n}]"
        if not isinstance(call, Mapping):
            reading.problem(at, "a call is an object {id, name, arguments}.")
            continue
        extra = sorted(set(call) - set(NEUTRAL_CALL_FIELDS), key=str)
        if extra:
            reading.problem(
                f"{at}.{extra[0]}",
                f"unknown field of a call; it has {', '.join(NEUTRAL_CALL_FIELDS)}.",
            )
        call_id = reading.call_id(call.get("id"), f"{at}.id", "")
        name = reading.name(call.get("name"), f"{at}.name")
        arguments = reading.arguments(call.get("arguments"), f"{at}.arguments", call_id)
        calls.append(AnswerCall(call_id, name, arguments, f"{at}.arguments"))
    return ModelAnswer(
        shape=SHAPE_NEUTRAL,
        text=text,
        calls=tuple(calls),
        thinking=tuple(thinking),
        notes=tuple(reading.notes),
    )
