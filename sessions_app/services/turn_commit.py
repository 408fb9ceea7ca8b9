"""Commit one model answer (contract §4.5, §5.1, §5.2a, §14): answer → dispatch → usage.

The one order in which a turn's answer lands, whoever called the model (the built-in
runtime, a gateway request, a host through `turns/`): the answer is written (its text, its
calls, the service's own results for calls no host will run), its protocol calls are
dispatched in order, and the usage is recorded last, so a maintenance job the usage triggers
cannot make this turn's own call stale. All of it in the caller's transaction: one commit, and
nothing of the turn when it fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextproto.protocol.messages import Frame, RawMessage
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.services.answers import AnswerCall, RecordedAnswer, answer_record_locked
from sessions_app.services.dispatch import Receipt, tool_dispatch
from sessions_app.services.usage import turn_usage_record


@dataclass(frozen=True)
class TurnCommitted:
    """What a turn's commit wrote: the answer and the receipts of its dispatched calls."""

    answer: RecordedAnswer
    receipts: tuple[Receipt, ...]

    @property
    def written(self) -> tuple[RawMessage, ...]:
        """Every message the turn wrote, in log order: the answer, the service's results, the
        dispatched results."""
        return (*self.answer.messages, *(r.result_message for r in self.receipts))


def turn_commit_locked(
    session: Session,
    *,
    snapshot: ProjectionSnapshot,
    text: str | None,
    calls: Sequence[AnswerCall],
    thinking: Sequence[Mapping[str, Any]] = (),
    usage: Mapping[str, Any] | None = None,
    raw: Any = None,
    model_latency_ms: int | None = None,
    notes: Sequence[str] = (),
    mint_handed: bool = False,
) -> TurnCommitted:
    """Write the answer generated from `snapshot`, dispatch its protocol calls, record `usage`.

    Precondition: inside the caller's transaction, `session` locked by `session_lock` (with
    its version). `usage` None records none (a host that reports it later). A call id the
    answer reused is renamed, and the snapshot's notes say so with `notes` (what reading the
    answer had to change), in the same commit.
    """
    recorded = answer_record_locked(
        session,
        snapshot_id=snapshot.id,
        text=text,
        calls=calls,
        thinking=thinking,
        frame=Frame(snapshot.revision, snapshot.upper_bound),
        mint_handed=mint_handed,
    )
    added = [*notes] + [
        f"tool call id {old!r} of the answer is taken in this session (or repeated): "
        f"recorded as {new!r}"
        for old, new in recorded.renamed.items()
    ]
    if added:
        snapshot.notes = [*(snapshot.notes or []), *added]
        ProjectionSnapshot.objects.filter(pk=snapshot.pk).update(notes=snapshot.notes)
    receipts = tuple(
        tool_dispatch(session_id=session.id, tool_call_id=call_id)
        for call_id in recorded.protocol_calls
    )
    if usage is not None:
        turn_usage_record(
            snapshot=snapshot,
            usage=dict(usage),
            raw=raw,
            model_latency_ms=model_latency_ms,
            session=session,
        )
    return TurnCommitted(answer=recorded, receipts=receipts)
