"""A host's model answer in one call (contract §5.2a `POST sessions/{id}/turns/`).

What a host loop did in three to five requests (write the text, each call, report the usage,
dispatch the protocol call, write the `single_tool_call_per_turn` results itself) is one:
the answer is written by the one commit of a model's turn (`turn_commit.turn_commit_locked`,
as the built-in runtime writes its own), its protocol calls are dispatched in order as the runtime
dispatches them, and the usage is recorded last by `turn_usage_record`, so a maintenance job
it queues cannot make this turn's own call stale.

Replay-safe: a `HostTurn` row per snapshot records the body's hash and where the answer went,
in the transaction that writes the answer. The same body again rebuilds the response from the
log and the stored receipts (and finishes what a request that died after the answer left
undone: its dispatches, its usage); another body for that snapshot is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict
from uuid import UUID

from django.db import transaction
from django.db.models import F

from contextproto.errors import (
    INVALID_REQUEST,
    SNAPSHOT_ALREADY_ANSWERED,
    SNAPSHOT_NOT_FOUND,
    USAGE_ALREADY_REPORTED,
    ApplicationError,
)
from contextproto.ids import canonical_uuid
from contextproto.parsers import check_storable
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    ROLE_ASSISTANT,
    Arguments,
    RawMessage,
    RawMessageWire,
)
from contextproto.protocol.model_answers import ModelAnswer
from contextproto.usage import report_problems, tokens_of
from sessions_app.models import HostTurn, Message, ProjectionSnapshot, Run, Session
from sessions_app.reads import raw_log
from sessions_app.services.answers import AnswerCall
from sessions_app.services.dispatch import Receipt, ReceiptWire, tool_dispatch
from sessions_app.services.turn_commit import TurnCommitted, turn_commit_locked
from sessions_app.services.usage import snapshot_tokens, turn_usage_record
from sessions_app.store.state import session_lock


class HostCallWire(TypedDict):
    toolCallId: str
    toolName: str
    arguments: Arguments


class TurnWire(TypedDict):
    """The answer of `POST sessions/{id}/turns/` (contract §5.2a)."""

    messages: list[RawMessageWire]
    receipt: ReceiptWire | None
    hostCall: HostCallWire | None
    runStatus: str | None
    replayed: bool


@dataclass(frozen=True)
class TurnRecorded:
    """What a turn wrote: its messages in log order (the answer, the service's results, the
    dispatched results), the receipt of its first call when that is a protocol call, the call
    the host runs now, the run's status after the turn."""

    messages: tuple[RawMessage, ...]
    receipt: Receipt | None
    host_call: RawMessage | None
    run_status: str | None
    replayed: bool

    def to_wire(self) -> TurnWire:
        call = self.host_call
        return {
            "messages": [m.to_wire() for m in self.messages],
            "receipt": self.receipt.to_wire() if self.receipt is not None else None,
            "hostCall": (
                {
                    "toolCallId": call.tool_call_id or "",
                    "toolName": call.tool_name or "",
                    "arguments": call.arguments if call.arguments is not None else {},
                }
                if call is not None
                else None
            ),
            "runStatus": self.run_status,
            "replayed": self.replayed,
        }


def turn_record(
    *,
    session_id: UUID | str,
    snapshot_id: str,
    answer: ModelAnswer,
    usage: Mapping[str, int] | None,
    request: Mapping[str, Any],
) -> TurnRecorded:
    """Record `answer`, generated from the session's view `snapshot_id`, once.

    `usage` holds §15's counts (JSON integers >= 0, checked by the caller), or None when
    neither the host nor the reply reported any; `request` is the body as sent (`answer`,
    `usage`), whose hash tells a replay from another answer.

    Refuses before anything is written: arguments no database can store (the parser's
    codes, naming the field), inconsistent usage counts (400 `invalid_request`), a snapshot
    that is not the session's (400 `snapshot_not_found`), a snapshot answered already with
    another body or through `messages/` (409 `snapshot_already_answered`), usage other than
    the snapshot's reported one (409 `usage_already_reported`). Locks the session, then the
    snapshot row: the answer, the service's results, the dispatch of its protocol calls, the
    usage (last), the turn's count and its HostTurn commit together (`turn_commit_locked`; a
    concurrent duplicate waits, then replays).
    """
    for call in answer.calls:
        if isinstance(call.arguments, dict):
            # Parsed from the provider's text: what the body parser checks for JSON objects.
            check_storable(call.arguments, call.field)
    if usage is not None:
        problems = report_problems(usage)
        if problems:
            first = problems[0]
            raise ApplicationError(
                INVALID_REQUEST,
                f"usage.{first['field']}: {first['message']}",
                {"errors": [{**p, "field": f"usage.{p['field']}"} for p in problems]},
            )
    request_hash = hashlib.sha256(
        json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    ).hexdigest()
    with transaction.atomic():
        session = session_lock(session_id)
        snapshot = _snapshot_locked(session, snapshot_id)
        turn = HostTurn.objects.filter(session=session, snapshot_id=snapshot.id).first()
        if turn is None:
            turn, committed = _write(session, snapshot, answer, usage, request_hash)
            return _outcome(turn, committed.answer.messages, list(committed.receipts))
        if turn.request_hash != request_hash:
            raise _answered(snapshot, f"turn #{turn.first_index}-#{turn.last_index}")
    # A replay: the stored receipts (a turn recorded before its dispatch and usage shared its
    # commit may still lack them: this finishes it).
    receipts = [
        tool_dispatch(session_id=turn.session_id, tool_call_id=call_id)
        for call_id in turn.protocol_calls
    ]
    if usage is not None:
        _usage_record(snapshot.id, usage)
    return _outcome(turn, None, receipts)


def _snapshot_locked(session: Session, snapshot_id: str) -> ProjectionSnapshot:
    """The session's snapshot, its row locked (its usage is checked and set by this turn)."""
    wanted = canonical_uuid(snapshot_id)
    snapshot = (
        ProjectionSnapshot.objects.select_for_update()
        .filter(session=session, id=wanted)
        .only(
            "id",
            "upper_bound",
            "notes",
            "usage",
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_write_input_tokens",
        )
        .first()
        if wanted is not None
        else None
    )
    if snapshot is None:
        raise ApplicationError(
            SNAPSHOT_NOT_FOUND,
            f"snapshotId {snapshot_id!r} is no snapshot of this session; send the snapshotId "
            "of the projection (POST sessions/{id}/projection/) the answer was generated from.",
            {"field": "snapshotId"},
        )
    return snapshot


def _answered(snapshot: ProjectionSnapshot, where: str) -> ApplicationError:
    return ApplicationError(
        SNAPSHOT_ALREADY_ANSWERED,
        f"Snapshot {snapshot.id} already has its model answer ({where}), recorded with another "
        "body; a view is answered once. Send the same body to read that turn again, or project "
        "again (POST sessions/{id}/projection/) for the next turn.",
        {"snapshotId": str(snapshot.id)},
    )


def _write(
    session: Session,
    snapshot: ProjectionSnapshot,
    answer: ModelAnswer,
    usage: Mapping[str, int] | None,
    request_hash: str,
) -> tuple[HostTurn, TurnCommitted]:
    """Write the answer of a snapshot that has none (session locked, in its transaction)."""
    # An answer is written after its view was built, so above its bound: the hot rows there
    # (an answer the archive moved would be of a view long superseded).
    other = (
        Message.objects.filter(
            session=session,
            index__gt=snapshot.upper_bound,
            role=ROLE_ASSISTANT,
            snapshot_id=snapshot.id,
        )
        .values_list("index", flat=True)
        .first()
    )
    if other is not None:
        raise _answered(snapshot, f"message #{other} names it")
    if usage is not None and snapshot.usage and snapshot_tokens(snapshot) != tokens_of(usage):
        raise ApplicationError(
            USAGE_ALREADY_REPORTED,
            "This snapshot's usage was already reported with other values; a turn's usage is "
            "recorded once. Send the turn without usage, or with the counts reported.",
            {"snapshotId": str(snapshot.id), "usage": snapshot.usage},
        )
    # The session is locked already: the locked writer, not a second lock. The usage is
    # recorded unless the snapshot has the same counts already (checked above).
    committed = turn_commit_locked(
        session,
        snapshot=snapshot,
        text=answer.text,
        calls=[AnswerCall(c.id, c.name, c.arguments) for c in answer.calls],
        thinking=answer.thinking,
        usage=usage if usage is not None and not snapshot.usage else None,
        notes=answer.notes,
    )
    recorded = committed.answer
    first = recorded.messages[0]
    runs = Run.objects.filter(pk=UUID(first.run_id)) if first.run_id is not None else None
    if runs is not None and session.agent_version.model_provider == "external":
        # A host-written answer is a turn of its run (as message_write counts one); the
        # runtime counts its own.
        runs.update(turns=F("turns") + 1)
    handed = recorded.handed
    turn = HostTurn.objects.create(
        session=session,
        snapshot_id=snapshot.id,
        request_hash=request_hash,
        first_index=first.index,
        last_index=recorded.messages[-1].index,
        protocol_calls=list(recorded.protocol_calls),
        host_call_id=handed.tool_call_id if handed is not None else None,
        # Neither the dispatch nor the usage moves a run's status.
        run_status=runs.values_list("status", flat=True).first() if runs is not None else None,
    )
    return turn, committed


def _usage_record(snapshot_id: UUID, usage: Mapping[str, int]) -> None:
    """Record the turn's usage unless the snapshot has some (the same counts: checked before
    the answer was written; a replay finds its own)."""
    with transaction.atomic():
        # Not the view's body: the usage columns are all this reads or writes.
        snapshot = (
            ProjectionSnapshot.objects.select_for_update()
            .only("id", "session_id", "usage")
            .get(pk=snapshot_id)
        )
        if not snapshot.usage:
            turn_usage_record(snapshot=snapshot, usage=dict(usage))


def _outcome(
    turn: HostTurn, written: tuple[RawMessage, ...] | None, receipts: list[Receipt]
) -> TurnRecorded:
    """The response: from what was just written, or for a replay from the log."""
    replayed = written is None
    if written is None:
        count = turn.last_index - turn.first_index + 1
        written = tuple(
            raw_log.log_page(
                turn.session_id, window_id=None, after_index=turn.first_index - 1, limit=count
            )
        )
    by_index = {m.index: m for m in written}
    for dispatched in receipts:
        by_index.setdefault(dispatched.result_message.index, dispatched.result_message)
    messages = tuple(by_index[i] for i in sorted(by_index))
    first_call = next((m for m in written if m.kind == KIND_TOOL_CALL), None)
    receipt = next(
        (
            r
            for r in receipts
            if first_call is not None and r.tool_call_id == first_call.tool_call_id
        ),
        None,
    )
    host_call = (
        next(m for m in written if m.kind == KIND_TOOL_CALL and m.tool_call_id == turn.host_call_id)
        if turn.host_call_id is not None
        else None
    )
    return TurnRecorded(
        messages=messages,
        receipt=receipt,
        host_call=host_call,
        run_status=turn.run_status,
        replayed=replayed,
    )
