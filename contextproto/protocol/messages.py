"""Engine-side value types: raw log messages, folds, model messages and their sources.

These are the only shapes the engine and the Django layer exchange. Field names
are snake_case here; `to_wire()` renders the camelCase shapes of contract §12.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NotRequired, TypedDict

from contextproto.protocol import content_parts

# A message's content: text, or a list of JSON parts (`{"type": "text", "text": ...}`, ...).
Content = str | list[dict[str, Any]]
# A tool call's arguments: an object, or the provider's text as written when it is not the
# JSON text of an object (contract §5.2: a model's malformed JSON is recorded, not refused).
Arguments = dict[str, Any] | str


# The part types and the content's text live in content_parts; these names of them were long
# imported from here.
PART_TEXT = content_parts.PART_TEXT
PART_IMAGE = content_parts.PART_IMAGE
PART_THINKING = content_parts.PART_THINKING
PART_REDACTED_THINKING = content_parts.PART_REDACTED_THINKING
THINKING_PART_TYPES = content_parts.THINKING_PART_TYPES
content_text = content_parts.content_text
is_thinking_part = content_parts.is_thinking_part


# Roles, kinds and derived types are Literal types over plain strings: a misspelt one fails
# mypy, and at run time they are the very strings the rows, the JSON and the comparisons of
# the hot path use (StrEnum members cost those comparisons ~4% of a turn's engine time;
# docs/decisions.md).

# A message's role (contract §2.3); `system` only on a view's first message.
Role = Literal["system", "user", "assistant", "tool"]
# A raw message's kind (contract §2.3).
Kind = Literal[
    "input", "approval_feedback", "runtime_instruction", "text", "tool_call", "tool_result"
]

ROLE_SYSTEM: Final = "system"
ROLE_USER: Final = "user"
ROLE_ASSISTANT: Final = "assistant"
ROLE_TOOL: Final = "tool"

KIND_INPUT: Final = "input"
KIND_APPROVAL_FEEDBACK: Final = "approval_feedback"
KIND_RUNTIME_INSTRUCTION: Final = "runtime_instruction"
KIND_TEXT: Final = "text"
KIND_TOOL_CALL: Final = "tool_call"
KIND_TOOL_RESULT: Final = "tool_result"

# kind -> the only role it may have (contract §2.3)
ROLE_OF_KIND: dict[str, Role] = {
    KIND_INPUT: ROLE_USER,
    KIND_APPROVAL_FEEDBACK: ROLE_USER,
    KIND_RUNTIME_INSTRUCTION: ROLE_USER,
    KIND_TEXT: ROLE_ASSISTANT,
    KIND_TOOL_CALL: ROLE_ASSISTANT,
    KIND_TOOL_RESULT: ROLE_TOOL,
}
NEVER_FOLDABLE_KINDS = frozenset({KIND_INPUT, KIND_APPROVAL_FEEDBACK, KIND_RUNTIME_INSTRUCTION})
# The kinds that are a model's answer, the only ones that may carry thinking parts.
ANSWER_KINDS = frozenset({KIND_TEXT, KIND_TOOL_CALL})


# What a view message is derived from: a ProjectionSource's type (contract §4.1).
DerivedType = Literal["system", "raw", "context_header", "context_fold", "context_state", "masked"]
DERIVED_SYSTEM: Final = "system"
DERIVED_RAW: Final = "raw"
DERIVED_HEADER: Final = "context_header"
DERIVED_FOLD: Final = "context_fold"
DERIVED_STATE: Final = "context_state"
# unified@4: a tool result shown as a one-line stub (contract §9). The model message keeps the
# raw kind `tool_result` and its toolCallId, so the call stays paired; only the source says
# it is masked, and names the one original message.
DERIVED_MASKED: Final = "masked"
# A view message's kind: a raw kind, or that of a system, header, fold or state message.
ViewKind = Kind | Literal["system", "context_header", "context_fold", "context_state"]


class FrameWire(TypedDict):
    """A tool call's frame on the wire (contract §3.1, §9.1)."""

    revision: int
    upperBound: int


@dataclass(frozen=True, slots=True)
class Frame:
    """The state revision R and upper bound U a tool call was made against (contract §3.1):
    its view's, or for an MCP call the state its client saw. Its dispatch acts on them."""

    revision: int
    upper_bound: int

    def to_wire(self) -> FrameWire:
        return {"revision": self.revision, "upperBound": self.upper_bound}


class RawMessageWire(TypedDict):
    """A raw message as the API shows it (contract §12.1 `messages/`); `frame` on tool calls
    only (null on other kinds, and on calls written before frames were recorded)."""

    id: str
    index: int
    windowId: str
    role: str
    kind: str
    content: Content
    runId: str | None
    inputRun: str | None
    toolCallId: str | None
    toolName: str | None
    arguments: Arguments | None
    isError: bool | None
    snapshotId: str | None
    frame: FrameWire | None
    createdAt: str | None


class FoldKV(TypedDict):
    """The value of `fold/<id>` in KV."""

    windowId: str
    firstIndex: int
    lastIndex: int
    messageIds: list[str]
    summary: str
    createdAtIndex: int


class ModelMessageWire(TypedDict):
    """A message of a view (contract §12.1 `messages[i]`); call fields only where they apply."""

    role: str
    kind: str
    content: Content
    toolCallId: NotRequired[str]
    toolName: NotRequired[str]
    arguments: NotRequired[Arguments]


class SourceWire(TypedDict):
    """Which raw messages one view message stands for (contract §12.1 `sources[i]`)."""

    derivedType: str
    foldId: str | None
    sessionId: str
    windowId: str | None
    firstIndex: int | None
    lastIndex: int | None
    messageIds: list[str]


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One immutable message of a session's log (contract §2.3)."""

    id: str
    index: int
    window_id: str
    role: Role
    kind: Kind
    content: Content
    run_id: str | None = None
    input_run: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: Arguments | None = None
    is_error: bool | None = None
    snapshot_id: str | None = None
    created_at: str | None = None
    frame: Frame | None = None  # a tool call's (contract §3.1)

    def to_wire(self) -> RawMessageWire:
        return {
            "id": self.id,
            "index": self.index,
            "windowId": self.window_id,
            "role": self.role,
            "kind": self.kind,
            "content": self.content,
            "runId": self.run_id,
            "inputRun": self.input_run,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
            "isError": self.is_error,
            "snapshotId": self.snapshot_id,
            "frame": self.frame.to_wire() if self.frame is not None else None,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Fold:
    """A fold record (`fold/<id>` in KV): a window's range replaced by the agent's summary."""

    id: str
    window_id: str
    first_index: int
    last_index: int
    message_ids: tuple[str, ...]
    summary: str
    created_at_index: int

    def to_kv(self) -> FoldKV:
        return {
            "windowId": self.window_id,
            "firstIndex": self.first_index,
            "lastIndex": self.last_index,
            "messageIds": list(self.message_ids),
            "summary": self.summary,
            "createdAtIndex": self.created_at_index,
        }

    @classmethod
    def from_kv(cls, fold_id: str, value: Mapping[str, Any]) -> Fold:
        """Read a stored `fold/<id>` value (records older than `createdAtIndex` lack it)."""
        return cls(
            id=fold_id,
            window_id=value["windowId"],
            first_index=int(value["firstIndex"]),
            last_index=int(value["lastIndex"]),
            message_ids=tuple(value["messageIds"]),
            summary=value["summary"],
            created_at_index=int(value.get("createdAtIndex", 0)),
        )


@dataclass(frozen=True, slots=True)
class ModelMessage:
    """One message of the model's view, before provider adaptation."""

    role: Role
    kind: ViewKind
    content: Content
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: Arguments | None = None

    def to_wire(self) -> ModelMessageWire:
        wire: ModelMessageWire = {"role": self.role, "kind": self.kind, "content": self.content}
        if self.tool_call_id is not None:
            wire["toolCallId"] = self.tool_call_id
        if self.tool_name is not None:
            wire["toolName"] = self.tool_name
        if self.arguments is not None:
            wire["arguments"] = self.arguments
        return wire


@dataclass(frozen=True, slots=True)
class ProjectionSource:
    """Which raw messages (if any) one model message stands for (contract §4.1)."""

    derived_type: DerivedType
    session_id: str
    window_id: str | None = None
    fold_id: str | None = None
    first_index: int | None = None
    last_index: int | None = None
    message_ids: tuple[str, ...] = field(default_factory=tuple)

    def to_wire(self) -> SourceWire:
        return {
            "derivedType": self.derived_type,
            "foldId": self.fold_id,
            "sessionId": self.session_id,
            "windowId": self.window_id,
            "firstIndex": self.first_index,
            "lastIndex": self.last_index,
            "messageIds": list(self.message_ids),
        }
