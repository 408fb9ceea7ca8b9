"""One model answer, read from what a provider's SDK returned (contract §5.2a, §4.5).

Four shapes: an OpenAI `chat.completion`, its `choices[0].message`, an Anthropic `message`,
or the neutral `{content, toolCalls: [{id, name, arguments}]}`. Each becomes the same
`ModelAnswer`: the text, the thinking blocks as given, the calls (arguments as an object,
or the provider's text as written when it is no JSON object), the provider's usage object
and the stop reason.

A host's answer (`answer_from_host`) is read strictly: a malformed field is refused with a
ProtocolError naming it, because the host can fix it. The message readers it shares with the
built-in runtime (which reads the model's reply leniently) are in protocol/answer_parts.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .answer_parts import (
    THINKING_BLOCKS,
    AnswerCall,
    AnswerReading,
    check_thinking_block,
    read_anthropic_content,
    read_openai_message,
    type_in_words,
)
from .errors import ANSWER_INVALID, ANSWER_SHAPE_UNKNOWN, ProtocolError

SHAPE_OPENAI_COMPLETION = "openai-chat-completion"
SHAPE_OPENAI_MESSAGE = "openai-chat-message"
SHAPE_ANTHROPIC_MESSAGE = "anthropic-message"
SHAPE_NEUTRAL = "neutral"
NEUTRAL_FIELDS = ("content", "toolCalls")
NEUTRAL_CALL_FIELDS = ("id", "name", "arguments")
SHAPES_IN_WORDS = (
    "an OpenAI chat.completion, its choices[0].message, an Anthropic message (type: "
    '"message"), or {content, toolCalls: [{id, name, arguments}]}'
)


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
        got = (
            "an object with other fields" if isinstance(answer, Mapping) else type_in_words(answer)
        )
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
    reading = AnswerReading(strict=True)
    content = answer.get("content")
    text: str | None = None
    thinking: list[dict[str, Any]] = []
    if isinstance(content, list):
        texts = []
        for n, part in enumerate(content):
            at = f"{root}.content[{n}]"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if isinstance(part, Mapping) and kind in THINKING_BLOCKS:
                check_thinking_block(part, at)
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
