"""A session's transcript (contract §14): what a client that keeps every reply holds.

The transcript is the client's own messages (user text and images, its tool results) and
the gateway's replies as they were sent; never protocol tool calls or their results. It is
not stored: it is read off the log, so a session written through the HTTP API has one too.

Reading it off the log:
* a user message (`input`, `approval_feedback`, `runtime_instruction`) is a user item;
* a tool result is the client's when it answers a call that is not a protocol tool and the
  service did not write it (a result the service writes for a call the model got wrong,
  `single_tool_call_per_turn` and the like, names the view of the answer it belongs to in
  `snapshotId`; a client's result never does);
* the assistant messages between two client messages form one *reply*: its text is the text
  of every answer joined by a blank line (thinking blocks aside), its calls the client
  calls the service did not answer itself. A reply exists only once its last answer ended
  the request (text alone, or a call handed to the client); the answers of a request that
  failed half way are not part of the transcript, and join the next reply of that request.

Items compare by `key`: same role; same text (absent, null and "" are equal, a string equals
text parts whose concatenation it is); same calls (ids, names, arguments as JSON values);
same tool results (call id and content).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol.content_parts import (
    PART_IMAGE,
    PART_TEXT,
    is_reasoning_part,
    part_type,
)
from contextproto.protocol.custom_tools import KIND_CUSTOM, KIND_FUNCTION
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_USER,
    Content,
    RawMessage,
    Role,
)

# Between the texts of two answers of one reply (contract §14: "joined by a blank line").
ANSWER_SEPARATOR = "\n\n"


def _json_value(value: Any) -> Any:
    """`value` with integral floats as ints, so 1 and 1.0 compare equal (JSON has one number)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def arguments_value(arguments: Any) -> Any:
    """A call's arguments as a JSON value: JSON text (OpenAI's wire form) is parsed first.

    Text that is not JSON stays the text itself, so it compares equal only to itself.
    """
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def canonical_arguments(arguments: Any) -> str:
    return json.dumps(
        _json_value(arguments_value(arguments)),
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def content_segments(content: object) -> tuple[tuple[str, ...], ...]:
    """The comparable form of a content: text runs (adjacent text parts concatenated) and
    images; other parts (thinking blocks) do not count, empty text disappears."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (("text", content),) if content else ()
    if not isinstance(content, list):
        return (("json", json.dumps(content, sort_keys=True)),)
    segments: list[tuple[str, ...]] = []
    for part in content:
        kind = part_type(part)
        if kind == PART_TEXT:
            text = part.get("text")
            if not isinstance(text, str) or not text:
                continue
            if segments and segments[-1][0] == "text":
                segments[-1] = ("text", segments[-1][1] + text)
            else:
                segments.append(("text", text))
        elif kind == PART_IMAGE:
            source = part.get("data") or part.get("url") or ""
            segments.append(("image", str(part.get("mediaType") or ""), str(source)))
    return tuple(segments)


def text_of(content: object) -> str:
    """The text parts of a content, concatenated (thinking and images left out)."""
    return "".join(s[1] for s in content_segments(content) if s[0] == "text")


@dataclass(frozen=True, slots=True)
class Call:
    """A call of one of the client's tools, as the client saw it.

    `kind` `custom`: a free-form tool's call (contract §21), its arguments `{"input": text}`
    (contextproto/protocol/custom_tools.py); the kind does not enter the comparison, the
    arguments do.
    """

    id: str
    name: str
    arguments: Any
    kind: str = KIND_FUNCTION

    def key(self) -> tuple[str, str, str]:
        return (self.id, self.name, canonical_arguments(self.arguments))


@dataclass(frozen=True)
class Item:
    """One message of a transcript: a user message, a reply, or a tool result.

    `content` is what the message carries (a reply's: its text); `position` says where it
    came from: the index in the request's `messages` (a client's item) or the MessageIndex
    of its first message (an item read off the log). `reasoning`: a reply's OpenAI reasoning
    items (content parts `{"type": "reasoning", "id", "summary", …}`), the ones its answers
    stored or the ones a Responses client sent before it; they belong to the reply and do not
    enter its `key` (a client that leaves them out resends the same reply). `message_at`: how
    many of them come before the reply's text in a Responses `output` (None: all of them).
    """

    role: Role
    content: Content = ""
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    is_error: bool = False
    position: int = 0
    reasoning: tuple[dict[str, Any], ...] = ()
    message_at: int | None = None
    key: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.role == ROLE_ASSISTANT:
            key: tuple[Any, ...] = (
                ROLE_ASSISTANT,
                text_of(self.content),
                tuple(c.key() for c in self.calls),
            )
        elif self.role == ROLE_TOOL:
            key = (ROLE_TOOL, self.call_id, content_segments(self.content))
        else:
            key = (ROLE_USER, content_segments(self.content))
        object.__setattr__(self, "key", key)

    @property
    def text(self) -> str:
        return text_of(self.content)


# --------------------------------------------------------------------------- the log


@dataclass(frozen=True)
class LogTranscript:
    """The transcript of a stretch of the log that ends at the log's end.

    `items` in log order; `pending_calls` the client calls of the last reply still waiting
    for their results; `open_answers` the assistant messages (and the protocol results
    between them) written after the last client message that do not make a reply yet.
    """

    items: tuple[Item, ...]
    pending_calls: tuple[str, ...]
    open_answers: tuple[RawMessage, ...]

    @property
    def ends_with_client_message(self) -> bool:
        return bool(self.items) and self.items[-1].role != ROLE_ASSISTANT


def is_client_message(message: RawMessage, protocol_tools: frozenset[str]) -> bool:
    """Whether `message` is one the client wrote (a user message, or its own tool result)."""
    if message.role == ROLE_USER:
        return True
    return (
        message.kind == KIND_TOOL_RESULT
        and message.tool_name not in protocol_tools
        and message.snapshot_id is None
    )


def _client_item(message: RawMessage) -> Item:
    if message.role == ROLE_USER:
        return Item(role=ROLE_USER, content=message.content, position=message.index)
    return Item(
        role=ROLE_TOOL,
        content=message.content,
        call_id=message.tool_call_id,
        is_error=bool(message.is_error),
        position=message.index,
    )


def _answers(group: Sequence[RawMessage]) -> list[list[RawMessage]]:
    """The answers of a group: maximal runs of consecutive assistant messages."""
    answers: list[list[RawMessage]] = []
    previous_assistant = False
    for message in group:
        if message.role == ROLE_ASSISTANT:
            if not previous_assistant:
                answers.append([])
            answers[-1].append(message)
        previous_assistant = message.role == ROLE_ASSISTANT
    return answers


def reply_of(
    group: Sequence[RawMessage],
    protocol_tools: frozenset[str],
    service_answered: set[str],
    custom_tools: frozenset[str] = frozenset(),
) -> Item | None:
    """The reply the assistant messages `group` make, or None while they make none.

    A reply ends with an answer that ended its request: one without calls, or one holding a
    call handed to the client (not a protocol tool, not answered by the service). Calls of
    `custom_tools` (the client's free-form tools) are `custom` calls; the reasoning items of
    every answer are the reply's, in order.
    """
    answers = _answers(group)
    if not answers:
        return None

    def handed(message: RawMessage) -> bool:
        return (
            message.kind == KIND_TOOL_CALL
            and message.tool_name not in protocol_tools
            and message.tool_call_id not in service_answered
        )

    last = answers[-1]
    ended = all(m.kind != KIND_TOOL_CALL for m in last) or any(handed(m) for m in last)
    if not ended:
        return None
    texts = [text_of(m.content) for answer in answers for m in answer]
    calls = tuple(
        Call(
            id=str(m.tool_call_id),
            name=str(m.tool_name),
            arguments=m.arguments,
            kind=KIND_CUSTOM if m.tool_name in custom_tools else KIND_FUNCTION,
        )
        for answer in answers
        for m in answer
        if handed(m)
    )
    # A Responses answer's reasoning precedes its text: the reasoning of the answers through
    # the first one that wrote text comes before the reply's message, the later ones after it.
    reasoning: list[dict[str, Any]] = []
    message_at: int | None = None
    for answer in answers:
        reasoning.extend(reasoning_of(m.content for m in answer))
        if message_at is None and any(text_of(m.content) for m in answer):
            message_at = len(reasoning)
    return Item(
        role=ROLE_ASSISTANT,
        content=ANSWER_SEPARATOR.join(t for t in texts if t),
        calls=calls,
        position=answers[0][0].index,
        reasoning=tuple(reasoning),
        message_at=message_at if message_at is not None and message_at < len(reasoning) else None,
    )


def reasoning_of(contents: Iterable[object]) -> tuple[dict[str, Any], ...]:
    """The OpenAI reasoning parts of answer contents, in order."""
    return tuple(
        dict(part)
        for content in contents
        if isinstance(content, list)
        for part in content
        if is_reasoning_part(part)
    )


def transcript_of_log(
    messages: Sequence[RawMessage],
    protocol_tools: frozenset[str],
    *,
    from_start: bool,
    custom_tools: frozenset[str] = frozenset(),
) -> LogTranscript:
    """Read the transcript off `messages`, a stretch of the log that ends at its end.

    Unless the stretch starts at the log's start (`from_start`), assistant messages before
    its first client message belong to a reply that began earlier and are skipped. Calls of
    `custom_tools` are `custom` calls (how a Responses client is shown them).
    """
    service_answered = {
        str(m.tool_call_id)
        for m in messages
        if m.kind == KIND_TOOL_RESULT and m.snapshot_id is not None
    }
    answered = {str(m.tool_call_id) for m in messages if m.kind == KIND_TOOL_RESULT}
    items: list[Item] = []
    group: list[RawMessage] = []
    started = from_start
    for message in messages:
        if is_client_message(message, protocol_tools):
            reply = (
                reply_of(group, protocol_tools, service_answered, custom_tools) if started else None
            )
            if reply is not None:
                items.append(reply)
            group = []
            started = True
            items.append(_client_item(message))
        else:
            group.append(message)
    reply = reply_of(group, protocol_tools, service_answered, custom_tools) if started else None
    pending: tuple[str, ...] = ()
    if reply is not None:
        items.append(reply)
        pending = tuple(c.id for c in reply.calls if c.id not in answered)
        group = []
    return LogTranscript(items=tuple(items), pending_calls=pending, open_answers=tuple(group))


def open_text(answers: Iterable[RawMessage]) -> str:
    """The text the answers of an unfinished reply already hold (what a reply would start with)."""
    texts = [text_of(m.content) for m in answers if m.role == ROLE_ASSISTANT]
    return ANSWER_SEPARATOR.join(t for t in texts if t)
