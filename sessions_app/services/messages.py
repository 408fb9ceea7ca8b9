"""Raw log writes: gapless MessageIndex allocation under the session row lock.

One writer, `message_write_locked(session, NewMessage(...))` (and `message_write`, which takes
the lock for it): a host's message (`host=True`) is checked and completed by contract §9.1's
rules first; the service's own messages (answers, results, inputs) are written as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Exists, F
from django.utils import timezone

from contextproto.errors import (
    ARGUMENTS_INVALID,
    BODY_TOO_DEEP,
    CONTENT_INVALID,
    INVALID_REQUEST,
    MESSAGE_KIND_INVALID,
    MESSAGE_KIND_NOT_WRITABLE,
    MESSAGE_ROLE_MISMATCH,
    PROTOCOL_TOOL_RESULT_FORBIDDEN,
    SNAPSHOT_NOT_FOUND,
    SNAPSHOT_REQUIRED,
    TOOL_CALL_ALREADY_ANSWERED,
    TOOL_CALL_DUPLICATE,
    TOOL_CALL_ID_INVALID,
    TOOL_CALL_INCOMPLETE,
    TOOL_CALL_NOT_FOUND,
    ApplicationError,
)
from contextproto.ids import canonical_uuid
from contextproto.parsers import MAX_JSON_DEPTH, check_storable
from contextproto.protocol.catalog import PROTOCOL_TOOL_NAMES
from contextproto.protocol.content_parts import (
    PART_REASONING,
    PART_REDACTED_THINKING,
    PART_THINKING,
    is_image_part,
    is_model_reasoning,
    part_text,
    part_type,
)
from contextproto.protocol.host_wire import arguments_from_text, tool_call_id_problem
from contextproto.protocol.messages import (
    ANSWER_KINDS,
    KIND_APPROVAL_FEEDBACK,
    KIND_INPUT,
    KIND_RUNTIME_INSTRUCTION,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_OF_KIND,
    Arguments,
    Frame,
    Kind,
    Role,
)
from sessions_app.models import Message, ProjectionSnapshot, Run, Session, WindowRecord
from sessions_app.reads.raw_log import call_and_answer
from sessions_app.store import hooks
from sessions_app.store.state import session_lock


@dataclass(frozen=True)
class NewMessage:
    """One message to append to a session's log (contract §3.1), as its writer has it.

    The service assigns the id and the index. An unset window is the session's active window
    (a tool result carries its call's), an unset run the session's current run. A tool_call
    names the view it was generated from (`snapshot_id`) and carries its `frame`; a host's
    call may leave the frame to its snapshot.
    """

    role: Role
    kind: Kind
    content: Any
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: Arguments | None = None
    is_error: bool | None = None
    snapshot_id: UUID | str | None = None
    frame: Frame | None = None
    window_id: str | None = None
    run_id: UUID | str | None = None
    input_run: str | None = None  # an input's RunId (N format)


def message_write(*, session_id: UUID | str, message: NewMessage, host: bool = False) -> Message:
    """`message_write_locked` in a transaction of its own, taking the session lock (a host's
    message is checked before the lock is taken); safe under any number of writers."""
    if host:
        _host_check(message)
    with transaction.atomic():
        return _write_locked(session_lock(session_id), message, host=host)


def message_write_locked(
    session: Session,
    message: NewMessage,
    *,
    host: bool = False,
    save_session: bool = True,
    written_at_revision: int | None = None,
) -> Message:
    """Append `message` with the next index of the locked session: the one writer of the log.

    Precondition: inside a transaction, `session` locked by `session_lock`.

    `host`: the message is a host's (the API, MCP) and gets the checks of contract §9.1, each
    refusal a 400: a tool_call needs a snapshot of this session (or, from MCP, a frame) and
    records its frame, the caller's else the snapshot's; assistant text may name a snapshot,
    other kinds none; a tool_result answers an unanswered call of a host tool (protocol tools
    are answered by dispatch only), joins its call's window and carries its tool name. A
    host's answer of an `external` version counts as a turn of its run, and its tool result
    wakes the run that waits for it. Without `host` the message is the service's own,
    written as given (a kind with another role is a ValueError).

    With `save_session=False` the caller saves `next_message_index` of the session row itself,
    in the same transaction. The message records the revision committed when its
    transaction began: the session's, unless the caller already applied KV in this
    transaction and passes the one before as `written_at_revision`.
    """
    if host:
        _host_check(message)
    return _write_locked(
        session,
        message,
        host=host,
        save_session=save_session,
        written_at_revision=written_at_revision,
    )


def _write_locked(
    session: Session,
    message: NewMessage,
    *,
    host: bool,
    save_session: bool = True,
    written_at_revision: int | None = None,
) -> Message:
    if host:
        message = _host_completed(session, message)
    elif ROLE_OF_KIND.get(message.kind) != message.role:
        raise ValueError(
            f"kind {message.kind!r} needs role {ROLE_OF_KIND.get(message.kind)!r}, "
            f"not {message.role!r}"
        )
    row = _row_insert(
        session, message, save_session=save_session, written_at_revision=written_at_revision
    )
    if host:
        if row.role == ROLE_ASSISTANT and session.agent_version.model_provider == "external":
            _host_turn_count(session, row)
        if row.kind == KIND_TOOL_RESULT:
            # The runtime re-queues a run that waited for this result (same transaction).
            hooks.host_tool_result_written(session_id=session.id)
    return row


def _row_insert(
    session: Session,
    message: NewMessage,
    *,
    save_session: bool,
    written_at_revision: int | None,
) -> Message:
    index = session.next_message_index
    frame = message.frame
    row = Message(
        session=session,
        index=index,
        window_id=message.window_id or session.active_window,
        role=message.role,
        kind=message.kind,
        content=message.content,
        run_id=(
            UUID(str(message.run_id)) if message.run_id is not None else session.current_run_id
        ),
        input_run=message.input_run,
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        arguments=message.arguments,
        is_error=message.is_error,
        snapshot_id=message.snapshot_id,
        created_at=timezone.now(),
        written_at_revision=(
            session.state_revision if written_at_revision is None else written_at_revision
        ),
        frozen_revision=frame.revision if frame is not None else None,
        frozen_upper_bound=frame.upper_bound if frame is not None else None,
    )
    row.save(force_insert=True)
    WindowRecord.objects.filter(session=session, window_id=row.window_id).update(
        message_count=F("message_count") + 1
    )
    session.next_message_index = index + 1
    if save_session:
        session.save(update_fields=["next_message_index"])
    return row


# The engine's kind -> role table without `input` (written through inputs/), in the order
# the refusal lists them.
HOST_WRITABLE_KINDS: dict[str, Role] = {
    kind: ROLE_OF_KIND[kind]
    for kind in (
        KIND_TEXT,
        KIND_TOOL_CALL,
        KIND_TOOL_RESULT,
        KIND_APPROVAL_FEEDBACK,
        KIND_RUNTIME_INSTRUCTION,
    )
}
# Kinds the model generates from a view: they may name it (a tool_call must).
KINDS_WITH_SNAPSHOT = (KIND_TEXT, KIND_TOOL_CALL)


def _host_check(message: NewMessage) -> None:
    """The checks of a host message that need no state (before any lock is taken)."""
    kind, role = message.kind, message.role
    if kind == KIND_INPUT:
        raise ApplicationError(
            MESSAGE_KIND_NOT_WRITABLE,
            "User input starts a run: POST it to sessions/{id}/inputs/.",
            {"field": "kind"},
        )
    if kind not in HOST_WRITABLE_KINDS:
        raise ApplicationError(
            MESSAGE_KIND_INVALID,
            f"kind must be one of {', '.join(HOST_WRITABLE_KINDS)}.",
            {"field": "kind"},
        )
    if HOST_WRITABLE_KINDS[kind] != role:
        raise ApplicationError(
            MESSAGE_ROLE_MISMATCH,
            f"kind {kind} is written with role {HOST_WRITABLE_KINDS[kind]}, not {role}.",
            {"field": "role"},
        )
    if message.snapshot_id is not None and kind not in KINDS_WITH_SNAPSHOT:
        raise ApplicationError(
            INVALID_REQUEST,
            f"snapshotId: a {kind} message takes none; only text and tool_call messages name "
            "the view they were generated from.",
            {"field": "snapshotId"},
        )
    content_check(message.content, kind=kind)


def _host_completed(session: Session, message: NewMessage) -> NewMessage:
    """A host's message checked against the session and completed as the log stores it.

    Only the host's fields count: the window, the run and a result's tool name are the
    service's to set."""
    kind = message.kind
    fields: dict[str, Any] = {}
    if kind == KIND_TOOL_CALL:
        fields = _tool_call_fields(session, message)
    elif kind == KIND_TEXT and message.snapshot_id is not None:
        fields = {"snapshot_id": _text_snapshot(session, str(message.snapshot_id))}
    elif kind == KIND_TOOL_RESULT:
        fields = _tool_result_fields(session, message.tool_call_id, message.is_error)
    elif kind == KIND_APPROVAL_FEEDBACK:
        tool_call_id = message.tool_call_id
        if not tool_call_id or not _tool_call_recorded(session, tool_call_id):
            raise ApplicationError(
                TOOL_CALL_NOT_FOUND,
                "approval_feedback needs the toolCallId of a tool_call in this session.",
                {"field": "toolCallId"},
            )
        fields = {"tool_call_id": tool_call_id}
    return NewMessage(role=message.role, kind=kind, content=message.content, **fields)


def _host_turn_count(session: Session, message: Message) -> None:
    """Count a host-driven model answer as a turn of its run (the runtime counts its own).

    An answer is an assistant message that does not follow one of the same run (its text
    and its calls are written back to back). One statement; the previous message is the
    newest of the log, hot in practice (the archive moves compressed, older ranges).
    """
    if message.run_id is None:
        return
    continued = Message.objects.filter(
        session=session, index=message.index - 1, role="assistant", run_id=message.run_id
    )
    Run.objects.filter(pk=message.run_id).exclude(Exists(continued)).update(turns=F("turns") + 1)


def _tool_call_recorded(session: Session, tool_call_id: str) -> bool:
    """Whether this session has a tool_call with this id, hot or archived."""
    call, _answer = call_and_answer(session.id, tool_call_id)
    return call is not None


# The part shapes content_check accepts, as its refusals name them.
_BASE_PARTS = "{type: text, text} or {type: image, mediaType, data|url}"
_ANSWER_PARTS = (
    "{type: text, text}, {type: image, mediaType, data|url}, "
    "{type: thinking, thinking, signature}, {type: redacted_thinking, data} or "
    "{type: reasoning, id, summary, encryptedContent?}"
)


def _base_part(part: dict[str, Any]) -> bool:
    return part_text(part) is not None or (
        is_image_part(part)
        and isinstance(part.get("mediaType"), str)
        and (isinstance(part.get("data"), str) or isinstance(part.get("url"), str))
    )


def _thinking_part(part: dict[str, Any]) -> bool:
    # Strings as Anthropic gives them (an omitted thinking text is ""); the signature is
    # checked by the provider when the block goes back. An OpenAI reasoning item: its id and
    # summary list, its encrypted content when the provider gave it (contract §3.1).
    kind = part_type(part)
    if kind == PART_THINKING:
        return isinstance(part.get("thinking"), str) and isinstance(part.get("signature"), str)
    if kind == PART_REASONING:
        encrypted = part.get("encryptedContent")
        return (
            isinstance(part.get("id"), str)
            and isinstance(part.get("summary"), list)
            and (encrypted is None or isinstance(encrypted, str))
        )
    return kind == PART_REDACTED_THINKING and isinstance(part.get("data"), str)


def content_check(content: Any, *, kind: str | None = None) -> None:
    """Refuse (400 `content_invalid`) a content that is neither text nor a list of parts.

    Parts are text and images; a model's answer (`kind` text or tool_call) may also carry
    Anthropic's thinking and redacted_thinking parts and OpenAI's reasoning items, stored as
    given (contract §2.3, §3.1). Without `kind` (a user input) the base parts only.
    """
    if isinstance(content, str):
        return
    answer = kind in ANSWER_KINDS
    if not isinstance(content, list) or not content:
        raise ApplicationError(
            CONTENT_INVALID,
            "content is a string or a non-empty list of parts ({type: text|image"
            f"{'|thinking|redacted_thinking' if answer else ''}, ...}}).",
            {"field": "content"},
        )
    for position, part in enumerate(content):
        if isinstance(part, dict) and _base_part(part):
            continue
        if answer and isinstance(part, dict) and _thinking_part(part):
            continue
        if not answer and is_model_reasoning(part):
            message = (
                f"content[{position}]: {part['type']} parts are stored only on a model's answer "
                f"(assistant text or tool_call); a {kind or 'user input'} message takes "
                f"{_BASE_PARTS}."
            )
        else:
            message = f"content[{position}] must be {_ANSWER_PARTS if answer else _BASE_PARTS}."
        raise ApplicationError(CONTENT_INVALID, message, {"field": f"content[{position}]"})


def _tool_call_fields(session: Session, message: NewMessage) -> dict[str, Any]:
    tool_call_id, tool_name, frame = message.tool_call_id, message.tool_name, message.frame
    if not tool_call_id or not tool_name:
        raise ApplicationError(
            TOOL_CALL_INCOMPLETE,
            "A tool_call needs toolCallId and toolName.",
            {"field": "toolCallId" if not tool_call_id else "toolName"},
        )
    tool_call_id_check(tool_call_id)
    arguments = arguments_to_store(message.arguments)
    snapshot_id = None if message.snapshot_id is None else str(message.snapshot_id)
    snapshot = _snapshot_of(session, snapshot_id)
    if snapshot is None and (frame is None or snapshot_id is not None):
        raise ApplicationError(
            SNAPSHOT_REQUIRED,
            "A tool_call needs the snapshotId of the projection of this session it was "
            "generated from (POST sessions/{id}/projection/ first).",
            {"field": "snapshotId"},
        )
    if _tool_call_recorded(session, tool_call_id):
        raise ApplicationError(
            TOOL_CALL_DUPLICATE,
            f"toolCallId {tool_call_id} is already recorded in this session.",
            {"field": "toolCallId"},
        )
    return {
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "arguments": arguments,
        "snapshot_id": snapshot[0] if snapshot is not None else None,
        # The caller's frame, else the snapshot's: what the dispatch of this call acts on.
        "frame": frame if frame is not None else snapshot[1] if snapshot is not None else None,
    }


def arguments_to_store(arguments: Any) -> Arguments:
    """A call's arguments as stored (contract §5.2): an object as given; JSON text of an object
    as that object; any other text as written (its dispatch answers `invalid_arguments`).

    Refuses (400 `arguments_invalid`) anything else, and a parsed object that no database
    can store (the body parser's checks: NUL, non-finite numbers, depth), naming the field.
    """
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        raise ApplicationError(
            ARGUMENTS_INVALID,
            "arguments must be a JSON object, or the JSON text the provider returned (a string).",
            {"field": "arguments"},
        )
    try:
        parsed = arguments_from_text(arguments)
    except RecursionError as exc:
        raise ApplicationError(
            BODY_TOO_DEEP,
            f"arguments: JSON text nested deeper than {MAX_JSON_DEPTH} levels; flatten it.",
            {"field": "arguments", "maxDepth": MAX_JSON_DEPTH},
        ) from exc
    if parsed is None:
        return arguments
    check_storable(parsed, "arguments")
    return parsed


def tool_call_id_check(tool_call_id: object, field: str = "toolCallId") -> None:
    """Refuse (400 `tool_call_id_invalid`) an id outside contract §5.2's rule, naming `field`."""
    problem = tool_call_id_problem(tool_call_id)
    if problem is not None:
        raise ApplicationError(
            TOOL_CALL_ID_INVALID,
            f"{field}: {problem}. Send the id as the provider made it (1-256 characters, no "
            "control characters).",
            {"field": field},
        )


def _snapshot_of(session: Session, snapshot_id: str | None) -> tuple[UUID, Frame] | None:
    """The id and the frame of this session's snapshot `snapshot_id`; None for any other or a
    malformed id."""
    wanted = canonical_uuid(snapshot_id)
    if wanted is None:
        return None
    found = (
        ProjectionSnapshot.objects.filter(session=session, id=wanted)
        .values_list("id", "revision", "upper_bound")
        .first()
    )
    return None if found is None else (found[0], Frame(found[1], found[2]))


def _text_snapshot(session: Session, snapshot_id: str) -> UUID:
    found = _snapshot_of(session, snapshot_id)
    if found is None:
        raise ApplicationError(
            SNAPSHOT_NOT_FOUND,
            f"snapshotId {snapshot_id!r} is no snapshot of this session; send the snapshotId "
            "of the projection the text was generated from, or leave it out.",
            {"field": "snapshotId"},
        )
    return found[0]


def _tool_result_fields(
    session: Session, tool_call_id: str | None, is_error: bool | None
) -> dict[str, Any]:
    call, answer = call_and_answer(session.id, tool_call_id) if tool_call_id else (None, None)
    if call is None:
        raise ApplicationError(
            TOOL_CALL_NOT_FOUND,
            "A tool_result needs the toolCallId of a tool_call recorded in this session.",
            {"field": "toolCallId"},
        )
    if call.tool_name in PROTOCOL_TOOL_NAMES:
        raise ApplicationError(
            PROTOCOL_TOOL_RESULT_FORBIDDEN,
            f"{call.tool_name} is a protocol tool: its result comes only from "
            f"POST sessions/{{id}}/tool-calls/{tool_call_id}/dispatch/.",
            {"field": "toolCallId"},
        )
    if answer is not None:
        raise ApplicationError(
            TOOL_CALL_ALREADY_ANSWERED,
            f"toolCallId {tool_call_id} already has its result.",
            {"field": "toolCallId"},
        )
    # The call's tool name, so the admin and the Message show what answered (as dispatch does).
    return {
        "tool_call_id": tool_call_id,
        "tool_name": call.tool_name,
        "is_error": bool(is_error),
        "window_id": call.window_id,
    }
