"""The one dispatcher of protocol tools (SPEC §5.1): HTTP, the runtime and MCP call this.

Contract: for each toolCallId exactly one receipt and one tool_result message exist. The
session row lock serialises dispatches of a session, so a concurrent duplicate waits, then
finds the receipt and replays it. KV writes, the result message and the receipt commit in
one transaction or not at all; errors are receipts too.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, TypedDict
from uuid import UUID

from django.db import InterfaceError, OperationalError, transaction

from agents.selectors import effective_options, protocol_of
from contextproto import metrics
from contextproto.errors import (
    KV_KEY_LIMIT_REACHED,
    NOT_A_PROTOCOL_TOOL,
    SINGLE_TOOL_CALL_PER_TURN,
    SNAPSHOT_MISSING,
    STATE_REVISION_INVALID,
    STATE_STALE,
    TOOL_CALL_ABANDONED,
    TOOL_CALL_ALREADY_ANSWERED,
    TOOL_CALL_ANSWERED,
    TOOL_CALL_ID_REUSED,
    TOOL_INTERNAL_ERROR,
    ApplicationError,
    NotFound,
)
from contextproto.protocol import catalog, tools
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    RawMessage,
    RawMessageWire,
)
from contextproto.protocol.state import KEY_ACTIVE_WINDOW, covered_key, window_key
from contextproto.protocol.tool_results import ToolResult, tool_failure
from sessions_app.models import ProjectionSnapshot, Session, ToolReceipt
from sessions_app.reads import hot_sql
from sessions_app.reads.raw_log import call_and_answer, log_at
from sessions_app.reads.reader import DbSessionReader
from sessions_app.services.messages import message_append_locked, message_write
from sessions_app.services.projection import projection_build
from sessions_app.store import hooks
from sessions_app.store.codec import raw_from_row
from sessions_app.store.state import kv_apply_locked, session_lock

# How many of a session's newest views an MCP call looks through for its frame: bounded, so
# a call's cost does not grow with the number of views the session has stored.
FRAME_LOOKBACK = 64
# KV refusals the model cannot fix by writing less.
UNCORRECTABLE_WRITE_REFUSALS = frozenset({KV_KEY_LIMIT_REACHED})

logger = logging.getLogger(__name__)


class ReceiptWire(TypedDict):
    """The answer of a dispatch or an abandonment (SPEC §9.1), the same when replayed."""

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
        session = session_lock(session_id)
        started = time.monotonic()
        call, answer = call_and_answer(session.id, tool_call_id)
        if answer is not None:
            # No select_related: its inner join would hide a receipt whose result is archived.
            existing = ToolReceipt.objects.filter(
                session=session, tool_call_id=tool_call_id
            ).first()
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
        result_row = message_append_locked(
            session,
            role="tool",
            kind=KIND_TOOL_RESULT,
            content=json.dumps(outcome.result, ensure_ascii=False, sort_keys=True),
            window_id=call.window_id,
            run_id=call.run_id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            is_error=not outcome.result.get("success", False),
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

    A call must never be left without its receipt (SPEC §5.1: errors are receipts, each call
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
        result = tool_failure(
            exc.code,
            exc.message,
            correctable=exc.code not in UNCORRECTABLE_WRITE_REFUSALS,
            details=exc.details,
        )
    except Exception as exc:
        logger.exception(
            "tool handler failed: session=%s toolCallId=%s tool=%s",
            session.id,
            call.tool_call_id,
            call.tool_name,
        )
        session.refresh_from_db(fields=["state_revision", "active_window"])
        result = tool_failure(
            TOOL_INTERNAL_ERROR,
            f"{call.tool_name} failed inside the service ({exc.__class__.__name__}); nothing "
            "was changed. Go on without this result; the operator can find the failure in "
            "the service log by this toolCallId.",
            correctable=False,
            details={"toolCallId": call.tool_call_id},
        )
    return tools.ToolOutcome(result=result), session.state_revision


def _execute(session: Session, call: RawMessage) -> tools.ToolOutcome:
    """Run the engine handler for `call` against the frozen snapshot and current revision."""
    version = session.agent_version
    protocol = protocol_of(version)
    frame = (
        hot_sql.dispatch_frame(session.id, call.snapshot_id, call.index)
        if call.snapshot_id
        else None
    )
    if frame is None or frame.snapshot is None:
        return tools.ToolOutcome(
            result=tool_failure(
                SNAPSHOT_MISSING,
                "This call has no projection snapshot, so its frozen state is unknown.",
            ),
        )
    # SPEC §5.1: every call after the first of one model answer gets this error, whatever
    # else is wrong with it (a stale revision included): the answer's first call is the one
    # the model acts on.
    earlier = _earlier_call_of_same_answer(session, call, frame)
    if earlier is not None:
        return tools.ToolOutcome(
            result=tool_failure(
                SINGLE_TOOL_CALL_PER_TURN,
                "Only one tool call per turn is executed; this answer's first call was "
                f"{earlier}. Call this tool again in a later turn if it is still needed.",
                details={"executedToolCallId": earlier},
            ),
        )
    # A tool_call row always carries its id and name (message_write refuses one without).
    assert call.tool_call_id is not None and call.tool_name is not None
    tool_call = tools.ToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        call_index=call.index,
        call_window_id=call.window_id,
        frozen_revision=frame.snapshot[0],
        frozen_upper_bound=frame.snapshot[1],
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
    session: Session, call: RawMessage, frame: hot_sql.DispatchFrame
) -> str | None:
    """The first call of the answer `call` belongs to, when `call` is not that first call.

    Calls of one model answer are written back to back from one snapshot; a call whose
    predecessor is a tool_call of the same snapshot is a second call of that answer. The
    frame holds the predecessor (one statement with the snapshot); further steps back, rare,
    read one message each, hot or archived.
    """
    first = None
    index = call.index - 1
    previous = frame.previous if frame.previous_known else _outline_at(session.id, index)
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

    For a call the host lost or the user cancelled (SPEC §9.2): the error result
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
        result = tool_failure(
            TOOL_CALL_ABANDONED,
            message if reason is None else f"{message} Reason: {reason}",
            correctable=True,
            details={"reason": reason} if reason is not None else None,
        )
        result_row = message_append_locked(
            session,
            role="tool",
            kind=KIND_TOOL_RESULT,
            content=json.dumps(result, ensure_ascii=False, sort_keys=True),
            window_id=call.window_id,
            run_id=call.run_id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            is_error=True,
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


def tool_call_record_and_dispatch(
    *,
    session_id: UUID | str,
    tool_call_id: str,
    tool_name: str,
    arguments: Any,
    state_revision: int | None = None,
) -> Receipt:
    """Record a protocol tool call framed by the state its caller saw, then dispatch it once.

    For callers that hold no snapshot id of their own (MCP `tools/call`, SPEC §11). The
    recorded call names the view it is framed by, from which the dispatcher reads R and U:

    * no `state_revision`, or the current one: a view at the current revision and upper
      bound (the state at the call), one of the newest stored or a new one;
    * an older revision: the newest stored view at that revision, so a mutating tool gets
      the correctable `context_state_stale` receipt as over HTTP. With no such view among
      the session's last FRAME_LOOKBACK, a mutating call is refused with the same code
      before anything is written, and a read is framed at the current state (reads are
      not fenced);
    * a revision ahead of the session: 400 `state_revision_invalid`.

    Then `tool_dispatch` runs it like any other call, so receipts, stale state, the window
    guard and one call per turn all hold. The same toolCallId again with the same tool and
    arguments replays its receipt whatever the revision is now; with others it is 409
    `tool_call_id_reused`. Statements per call do not grow with the session.
    """
    if tool_name not in catalog.PROTOCOL_TOOL_NAMES:
        raise ApplicationError(
            NOT_A_PROTOCOL_TOOL,
            f"{tool_name} is not a protocol tool; only context_* tools are served here.",
            {"toolName": tool_name},
        )
    with transaction.atomic():
        session = session_lock(session_id)
        recorded, _answer = call_and_answer(session.id, tool_call_id)
        if recorded is None:
            message_write(
                session_id=session.id,
                role="assistant",
                kind=KIND_TOOL_CALL,
                content="",
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                arguments=arguments,
                snapshot_id=str(_frame_of_call(session, tool_name, state_revision)),
            )
        elif recorded.tool_name != tool_name or recorded.arguments != arguments:
            raise ApplicationError(
                TOOL_CALL_ID_REUSED,
                f"toolCallId {tool_call_id} was already used for another call "
                f"({recorded.tool_name}); use a new id for a new call.",
                {"toolCallId": tool_call_id, "toolName": recorded.tool_name},
            )
        return tool_dispatch(session_id=session.id, tool_call_id=tool_call_id)


def _frame_of_call(session: Session, tool_name: str, state_revision: int | None) -> UUID:
    """The id of the view a new call at `state_revision` is framed by (see the caller).

    Called under the session lock, so the current revision and upper bound cannot move. One
    read of the newest views; a view is built only when none of them is at the current
    (revision, upper bound), which after any earlier call means nearly always, since its
    result moved the bound.
    """
    current, bound = session.state_revision, session.last_index
    if state_revision is not None and state_revision > current:
        raise ApplicationError(
            STATE_REVISION_INVALID,
            f"_meta.stateRevision {state_revision} is ahead of the session (revision "
            f"{current} now); send the stateRevision of an earlier result, or none to act on "
            "the current state.",
            {"field": "_meta.stateRevision", "currentRevision": current},
        )
    recent = list(
        ProjectionSnapshot.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values_list("id", "revision", "upper_bound")[:FRAME_LOOKBACK]
    )
    if state_revision is not None and state_revision < current:
        seen = next((sid for sid, revision, _u in recent if revision == state_revision), None)
        if seen is not None:
            return seen
        if tool_name in protocol_of(session.agent_version).mutating_tools:
            raise ApplicationError(
                STATE_STALE,
                f"The session state changed after the state this call was made from (revision "
                f"{state_revision} then, {current} now); nothing was changed. Check the current "
                "state and call again, with a new toolCallId, if it is still needed.",
                {"currentRevision": current, "frozenRevision": state_revision},
            )
    for snapshot_id, revision, upper_bound in recent:
        if (revision, upper_bound) == (current, bound):
            return snapshot_id
    # The newest views are not at (current, bound), so no older one is: skip the cache scan.
    return projection_build(session_id=session.id, use_cache=False).id
