"""The one dispatcher of protocol tools (contract §5.2): HTTP, the runtime and MCP call this.

Contract: for each toolCallId exactly one receipt and one tool_result message exist. The
session row lock serialises dispatches of a session, so a concurrent duplicate waits, then
finds the receipt and replays it. KV writes, the result message and the receipt commit in
one transaction or not at all; errors are receipts too. A call acts on its `Frame`, the
(revision, upper bound) recorded on it when it was written (services/mcp_calls.py writes
MCP's calls and dispatches them under the same lock with `tool_dispatch_locked`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TypedDict
from uuid import UUID

from django.db import InterfaceError, OperationalError, transaction

from agents.selectors import effective_options, protocol_of
from contextproto import metrics
from contextproto.errors import (
    NOT_A_PROTOCOL_TOOL,
    SINGLE_TOOL_CALL_PER_TURN,
    SNAPSHOT_MISSING,
    TOOL_CALL_ABANDONED,
    TOOL_CALL_ALREADY_ANSWERED,
    TOOL_CALL_ANSWERED,
    TOOL_INTERNAL_ERROR,
    ApplicationError,
    NotFound,
    tool_error,
)
from contextproto.protocol import catalog, tools
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_TOOL,
    RawMessage,
    RawMessageWire,
)
from contextproto.protocol.state import KEY_ACTIVE_WINDOW, covered_key, window_key
from contextproto.protocol.tool_results import ToolResult
from sessions_app.models import Session, ToolReceipt
from sessions_app.reads import hot_sql
from sessions_app.reads.raw_log import call_and_answer, log_at
from sessions_app.reads.reader import DbSessionReader
from sessions_app.services.messages import NewMessage, message_write_locked
from sessions_app.store import hooks
from sessions_app.store.codec import raw_from_row
from sessions_app.store.state import kv_apply_locked, session_lock

logger = logging.getLogger(__name__)


class ReceiptWire(TypedDict):
    """The answer of a dispatch or an abandonment (contract §12.1), the same when replayed."""

    toolCallId: str
    replayed: bool
    stateRevision: int
    result: ToolResult
    resultMessage: RawMessageWire


@dataclass(frozen=True)
class Receipt:
    tool_call_id: str
    replayed: bool
    state_revision: int
    result: ToolResult
    result_message: RawMessage
    effects: tuple[tuple[str, dict], ...] = ()

    def to_wire(self) -> ReceiptWire:
        return {
            "toolCallId": self.tool_call_id,
            "replayed": self.replayed,
            "stateRevision": self.state_revision,
            "result": self.result,
            "resultMessage": self.result_message.to_wire(),
        }


def tool_dispatch(*, session_id: UUID | str, tool_call_id: str) -> Receipt:
    """Execute the protocol tool call `tool_call_id` once; replay its receipt afterwards.

    Raises NotFound for a call that is not in this session, and `not_a_protocol_tool` (400)
    for a host tool. Everything the model got wrong is an error result, not an exception.
    Statements on the first dispatch: the session lock, one read of the call and its
    answer, the handler's reads, its writes, the result, the receipt, one session update.
    """
    with transaction.atomic():
        return tool_dispatch_locked(session_lock(session_id), tool_call_id)


def tool_dispatch_locked(
    session: Session,
    tool_call_id: str,
    *,
    found: tuple[RawMessage | None, RawMessage | None] | None = None,
) -> Receipt:
    """`tool_dispatch` inside the caller's transaction, `session` locked by `session_lock`.

    For a caller that wrote the call in this transaction (MCP): `found` is the call (with its
    frame) and its answer as it read them, so neither is read again.
    """
    started = time.monotonic()
    call, answer = found if found is not None else call_and_answer(session.id, tool_call_id)
    if answer is not None:
        # No select_related: its inner join would hide a receipt whose result is archived.
        existing = ToolReceipt.objects.filter(session=session, tool_call_id=tool_call_id).first()
        if existing is not None:
            metrics.REPLAYS.inc()
            return Receipt(
                tool_call_id=tool_call_id,
                replayed=True,
                state_revision=existing.state_revision,
                result=existing.result,
                result_message=answer,
            )
    if call is None:
        raise NotFound("Tool call", {"toolCallId": tool_call_id})
    if call.tool_name not in catalog.PROTOCOL_TOOL_NAMES:
        raise ApplicationError(
            NOT_A_PROTOCOL_TOOL,
            f"{call.tool_name} is a host tool: execute it yourself and write its result "
            "with POST sessions/{id}/messages/.",
            {"toolCallId": tool_call_id, "toolName": call.tool_name},
        )
    if answer is not None:
        raise ApplicationError(
            TOOL_CALL_ALREADY_ANSWERED,
            f"toolCallId {tool_call_id} already has a result.",
            {"toolCallId": tool_call_id},
        )
    revision_before = session.state_revision
    outcome, revision = _execute_and_apply(session, call)
    result_row = message_write_locked(
        session,
        NewMessage(
            role=ROLE_TOOL,
            kind=KIND_TOOL_RESULT,
            content=json.dumps(outcome.result, ensure_ascii=False, sort_keys=True),
            window_id=call.window_id,
            run_id=call.run_id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            is_error=not outcome.result.get("success", False),
        ),
        save_session=False,
        # The result commits with the handler's KV writes: it was written "at" the
        # revision before them (the state a fork before this message starts from).
        written_at_revision=revision_before,
    )
    # One update of the session row for the revision, the active window and the index.
    session.save(update_fields=["state_revision", "active_window", "next_message_index"])
    ToolReceipt.objects.create(
        session=session,
        tool_call_id=tool_call_id,
        tool_name=call.tool_name,
        result=outcome.result,
        success=bool(outcome.result.get("success")),
        state_revision=revision,
        result_message=result_row,
        duration_ms=round((time.monotonic() - started) * 1000),
    )
    result, tool_name = outcome.result, call.tool_name
    transaction.on_commit(lambda: metrics.dispatch_outcome(tool_name, result))
    effects = tuple(outcome.effects)
    if effects:
        transaction.on_commit(lambda: _perform_effects(session.id, effects))
    return Receipt(
        tool_call_id=tool_call_id,
        replayed=False,
        state_revision=revision,
        result=outcome.result,
        result_message=raw_from_row(result_row),
        effects=effects,
    )


def _execute_and_apply(session: Session, call: RawMessage) -> tuple[tools.ToolOutcome, int]:
    """Run the handler and apply its KV writes; any failure becomes an error result.

    A call must never be left without its receipt (contract §5.2: errors are receipts, each call
    gets exactly one result): an open call would fail every later projection and leave the
    session stuck. The savepoint keeps the transaction usable after a database error
    raised by the handler or the write. Only a lost connection propagates: nothing was
    written then, and the caller's retry dispatches the call again.
    """
    try:
        with transaction.atomic():
            outcome = _execute(session, call)
            revision = session.state_revision
            if outcome.kv_writes:
                # The caller saves the session row once, with the next message index.
                revision = kv_apply_locked(session, outcome.kv_writes, save_session=False)
            return outcome, revision
    except (OperationalError, InterfaceError):
        raise
    except ApplicationError as exc:
        # A KV limit (value size, key count) refused the handler's writes.
        session.refresh_from_db(fields=["state_revision", "active_window"])
        result = tool_error(exc.code, exc.message, exc.details)
    except Exception as exc:
        logger.exception(
            "tool handler failed: session=%s toolCallId=%s tool=%s",
            session.id,
            call.tool_call_id,
            call.tool_name,
        )
        session.refresh_from_db(fields=["state_revision", "active_window"])
        result = tool_error(
            TOOL_INTERNAL_ERROR,
            f"{call.tool_name} failed inside the service ({exc.__class__.__name__}); nothing "
            "was changed. Go on without this result; the operator can find the failure in "
            "the service log by this toolCallId.",
            {"toolCallId": call.tool_call_id},
        )
    return tools.ToolOutcome(result=result), session.state_revision


def _execute(session: Session, call: RawMessage) -> tools.ToolOutcome:
    """Run the engine handler for `call` against its frame and the current revision.

    The frame is the one recorded on the call, else (a call written before calls recorded
    theirs) its snapshot's; one statement reads that with the message before the call, which
    only a call naming a snapshot needs (the calls of one answer share their snapshot).
    """
    version = session.agent_version
    protocol = protocol_of(version)
    around = None
    if call.frame is None or call.snapshot_id is not None:
        around = hot_sql.dispatch_frame(session.id, call.snapshot_id, call.index)
    frame = call.frame or (around.snapshot if around is not None else None)
    if frame is None:
        return tools.ToolOutcome(
            result=tool_error(
                SNAPSHOT_MISSING,
                "This call has no projection snapshot, so its frozen state is unknown.",
            ),
        )
    # contract §5.2: every call after the first of one model answer gets this error, whatever
    # else is wrong with it (a stale revision included): the answer's first call is the one
    # the model acts on.
    earlier = _earlier_call_of_same_answer(session, call, around) if around is not None else None
    if earlier is not None:
        return tools.ToolOutcome(
            result=tool_error(
                SINGLE_TOOL_CALL_PER_TURN,
                "Only one tool call per turn is executed; this answer's first call was "
                f"{earlier}. Call this tool again in a later turn if it is still needed.",
                {"executedToolCallId": earlier},
            ),
        )
    # A tool_call row always carries its id and name (a host write refuses one without).
    assert call.tool_call_id is not None and call.tool_name is not None
    tool_call = tools.ToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        call_index=call.index,
        call_window_id=call.window_id,
        frame=frame,
    )
    context = tools.ToolContext(
        version=protocol,
        options=effective_options(version, protocol),
        current_revision=session.state_revision,
        maintainer_bound=version.maintainer_agent_id is not None,
    )
    # The handlers' first KV read also brings the keys nearly every one reads.
    active = session.active_window
    reader = DbSessionReader(
        session.id, prefetch=(KEY_ACTIVE_WINDOW, window_key(active), covered_key(active))
    )
    return tools.dispatch(tool_call, context, reader)


def _earlier_call_of_same_answer(
    session: Session, call: RawMessage, around: hot_sql.DispatchFrame
) -> str | None:
    """The first call of the answer `call` belongs to, when `call` is not that first call.

    Calls of one model answer are written back to back from one snapshot; a call whose
    predecessor is a tool_call of the same snapshot is a second call of that answer.
    `around` holds the predecessor (one statement with the snapshot); further steps back, rare,
    read one message each, hot or archived.
    """
    if call.snapshot_id is None:
        return None  # a call framed without a view (MCP) is an answer of its own
    first = None
    index = call.index - 1
    previous = around.previous if around.previous_known else _outline_at(session.id, index)
    while index > 0 and previous is not None:
        kind, tool_call_id, snapshot_id = previous
        if kind != KIND_TOOL_CALL or snapshot_id != call.snapshot_id:
            break
        first = tool_call_id
        index -= 1
        previous = _outline_at(session.id, index)
    return first


def _outline_at(session_id: UUID, index: int) -> tuple[str, str | None, str | None] | None:
    message = log_at(session_id, index) if index > 0 else None
    return None if message is None else (message.kind, message.tool_call_id, message.snapshot_id)


def _perform_effects(session_id: UUID, effects: tuple[tuple[str, dict], ...]) -> None:
    for name, payload in effects:
        if name == "queue_maintenance":
            hooks.maintenance_request(
                session_id=session_id, window_id=payload["windowId"], trigger="tool"
            )


def tool_call_abandon(
    *, session_id: UUID | str, tool_call_id: str, reason: str | None = None
) -> Receipt:
    """Answer a call that will never get its result with the error `tool_call_abandoned`.

    For a call the host lost or the user cancelled (contract §5.3a): the error result
    `{"success": false, "error": {"code": "tool_call_abandoned", "message", "correctable":
    true}}` is written in the call's window and run, so the session projects again. A host
    tool's call gets it as a host result would be written, and a built-in run waiting for it
    continues (the same hook). A protocol tool's call also gets its receipt, so a later
    dispatch replays the abandonment instead of running the tool: exactly one result per
    call either way. Raises NotFound for an unknown call and 409 `tool_call_answered` (with
    `details.abandoned`) for one that has its result, an earlier abandonment included.
    Locks the session row; one transaction.
    """
    with transaction.atomic():
        session = session_lock(session_id)
        call, answer = call_and_answer(session.id, tool_call_id)
        if call is None:
            raise NotFound("Tool call", {"toolCallId": tool_call_id})
        if answer is not None:
            raise ApplicationError(
                TOOL_CALL_ANSWERED,
                f"toolCallId {tool_call_id} already has its result (message #{answer.index}); "
                "there is nothing to abandon.",
                {
                    "toolCallId": tool_call_id,
                    "resultIndex": answer.index,
                    "abandoned": _is_abandonment(answer),
                },
            )
        message = (
            f"The result of this {call.tool_name} call was abandoned by the host and will "
            "never arrive; nothing is known about its effect. Call the tool again if it is "
            "still needed."
        )
        result = tool_error(
            TOOL_CALL_ABANDONED,
            message if reason is None else f"{message} Reason: {reason}",
            {"reason": reason} if reason is not None else None,
        )
        result_row = message_write_locked(
            session,
            NewMessage(
                role=ROLE_TOOL,
                kind=KIND_TOOL_RESULT,
                content=json.dumps(result, ensure_ascii=False, sort_keys=True),
                window_id=call.window_id,
                run_id=call.run_id,
                tool_call_id=tool_call_id,
                tool_name=call.tool_name,
                is_error=True,
            ),
        )
        if call.tool_name in catalog.PROTOCOL_TOOL_NAMES:
            ToolReceipt.objects.create(
                session=session,
                tool_call_id=tool_call_id,
                tool_name=call.tool_name or "",
                result=result,
                success=False,
                state_revision=session.state_revision,
                result_message=result_row,
                duration_ms=0,
            )
        # A built-in run waiting for this call goes on, as after any host result.
        hooks.host_tool_result_written(session_id=session.id)
        return Receipt(
            tool_call_id=tool_call_id,
            replayed=False,
            state_revision=session.state_revision,
            result=result,
            result_message=raw_from_row(result_row),
        )


def _is_abandonment(answer: RawMessage) -> bool:
    """Whether a result message is an abandonment (its content is the abandoned error)."""
    try:
        body = json.loads(answer.content) if isinstance(answer.content, str) else None
    except ValueError:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == TOOL_CALL_ABANDONED
