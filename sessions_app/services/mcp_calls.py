"""MCP's `tools/call` (contract §13): record a protocol call framed by the state its client saw,
and dispatch it, under one session lock and in one transaction.

A call carries its `Frame`, the revision R and upper bound U it acts on, recorded on the
tool_call row (`Message.frozen_revision`, `frozen_upper_bound`) and shown with it; the
dispatcher reads it there, so no view is built or stored for an MCP call.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import transaction

from agents.selectors import protocol_of
from contextproto.errors import (
    NOT_A_PROTOCOL_TOOL,
    STATE_REVISION_INVALID,
    STATE_STALE,
    TOOL_CALL_ID_REUSED,
    ApplicationError,
)
from contextproto.protocol import catalog
from contextproto.protocol.messages import KIND_TOOL_CALL, ROLE_ASSISTANT, Frame
from sessions_app.models import Message, ProjectionSnapshot, Session
from sessions_app.reads.raw_log import call_and_answer
from sessions_app.services.dispatch import Receipt, tool_dispatch_locked
from sessions_app.services.messages import NewMessage, message_write_locked
from sessions_app.store.codec import raw_from_row
from sessions_app.store.state import session_lock

# How many of a session's newest frames (stored views, framed calls) a call at an older
# revision looks through: bounded, so a call's cost does not grow with the session.
FRAME_LOOKBACK = 64


def tool_call_record_and_dispatch(
    *,
    session_id: UUID | str,
    tool_call_id: str,
    tool_name: str,
    arguments: Any,
    state_revision: int | None = None,
) -> Receipt:
    """Record a protocol tool call framed by the state its caller saw, then dispatch it once.

    For callers that hold no snapshot id of their own (MCP `tools/call`, contract §13). The
    recorded call carries its frame (R, U):

    * no `state_revision`, or the current one: the current revision and upper bound (the
      state at the call);
    * an older revision: the newest frame at that revision among the session's last
      FRAME_LOOKBACK stored views and framed calls, so a mutating tool gets the correctable
      `context_state_stale` receipt as over HTTP. With none, a mutating call is refused
      with the same code before anything is written, and a read is framed at the current
      state (reads are not fenced);
    * a revision ahead of the session: 400 `state_revision_invalid`.

    Then the dispatcher runs it like any other call, so receipts, stale state, the window
    guard and one call per turn all hold. The same toolCallId again with the same tool and
    arguments replays its receipt whatever the revision is now; with others it is 409
    `tool_call_id_reused`. One session lock, one transaction; no view is stored.
    """
    if tool_name not in catalog.PROTOCOL_TOOL_NAMES:
        raise ApplicationError(
            NOT_A_PROTOCOL_TOOL,
            f"{tool_name} is not a protocol tool; only context_* tools are served here.",
            {"toolName": tool_name},
        )
    with transaction.atomic():
        session = session_lock(session_id)
        recorded, answer = call_and_answer(session.id, tool_call_id)
        if recorded is not None:
            if recorded.tool_name != tool_name or recorded.arguments != arguments:
                raise ApplicationError(
                    TOOL_CALL_ID_REUSED,
                    f"toolCallId {tool_call_id} was already used for another call "
                    f"({recorded.tool_name}); use a new id for a new call.",
                    {"toolCallId": tool_call_id, "toolName": recorded.tool_name},
                )
            return tool_dispatch_locked(session, tool_call_id, found=(recorded, answer))
        frame, snapshot_id = _frame_of_call(session, tool_name, state_revision)
        row = message_write_locked(
            session,
            NewMessage(
                role=ROLE_ASSISTANT,
                kind=KIND_TOOL_CALL,
                content="",
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                arguments=arguments,
                snapshot_id=snapshot_id,
                frame=frame,
            ),
            host=True,
        )
        return tool_dispatch_locked(session, tool_call_id, found=(raw_from_row(row), None))


def _frame_of_call(
    session: Session, tool_name: str, state_revision: int | None
) -> tuple[Frame, UUID | None]:
    """The frame a new call at `state_revision` acts on, and the stored view it came from,
    if any (see the caller).

    Called under the session lock, so the current revision and upper bound cannot move. At
    the current state nothing is read; at an older revision the newest frames are read
    (two bounded statements).
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
    if state_revision is None or state_revision == current:
        return Frame(current, bound), None
    seen = _newest_frame_at(session, state_revision)
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
    return Frame(current, bound), None


def _newest_frame_at(session: Session, revision: int) -> tuple[Frame, UUID | None] | None:
    """The newest frame at `revision` among the last FRAME_LOOKBACK stored views and the
    last FRAME_LOOKBACK framed calls: the highest upper bound (a session's bound only grows),
    a stored view winning a tie so the call names it."""
    views = (
        ProjectionSnapshot.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values_list("revision", "upper_bound", "id")[:FRAME_LOOKBACK]
    )
    calls = (
        Message.objects.filter(session=session, frozen_revision__isnull=False)
        .order_by("-index")
        .values_list("frozen_revision", "frozen_upper_bound")[:FRAME_LOOKBACK]
    )
    found: list[tuple[int, int, UUID | None]] = [
        (u, 1, sid) for r, u, sid in views if r == revision
    ]
    found += [(u, 0, None) for r, u in calls if r == revision and u is not None]
    if not found:
        return None
    upper_bound, _view_first, snapshot_id = max(found, key=lambda f: (f[0], f[1]))
    return Frame(revision, upper_bound), snapshot_id
