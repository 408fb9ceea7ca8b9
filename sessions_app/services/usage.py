"""Provider usage of one turn: stored by kind, priced, counted, and the §6 trigger (contract §8).

The built-in runtime records the usage of the turns it drives itself; a host that calls the
model on its own reports it here, and the same `turn_usage_record` stores it and decides
whether maintenance is due, so both kinds of sessions compress at the same threshold and
are billed by the same formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction

from contextproto import metrics
from contextproto.errors import (
    INVALID_REQUEST,
    USAGE_ALREADY_REPORTED,
    ApplicationError,
    NotFound,
)
from contextproto.ids import parse_uuid
from contextproto.usage import TokenUsage, report_problems, tokens_of, turn_cost
from sessions_app.maintenance import maintenance_trigger_after_turn
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Session

USAGE_FIELDS = [
    "usage",
    "input_tokens",
    "cache_read_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "cost",
]


def snapshot_tokens(snapshot: ProjectionSnapshot) -> TokenUsage | None:
    """The tokens by kind recorded on a snapshot; None before its usage is reported."""
    if snapshot.input_tokens is None:
        return None
    return TokenUsage(
        input_tokens=snapshot.input_tokens,
        output_tokens=snapshot.output_tokens or 0,
        cache_read_input_tokens=snapshot.cache_read_input_tokens,
        cache_write_input_tokens=snapshot.cache_write_input_tokens,
    )


def turn_usage_record(
    *,
    snapshot: ProjectionSnapshot,
    usage: dict[str, Any] | None,
    raw: Any = None,
    model_latency_ms: int | None = None,
    session: Session | None = None,
) -> MaintenanceJob | None:
    """Store the provider-reported usage on the turn's snapshot; trigger maintenance (§6).

    The one path for usage, whoever called the model: the built-in runtime, or an external
    host through `snapshots/{id}/usage/`. `usage` is kept as reported; its counts by kind
    and the turn's cost at the version's prices go to the snapshot's columns, and the
    /metrics counters move once the transaction commits. Returns the maintenance job it
    queued, if any; the trigger reads every input token, cached ones included. The built-in
    runtime also passes how long its provider call took (`model_latency_ms`), stored in the
    same update, and may pass the session (with its version) it has just locked.
    """
    if session is None:
        session = Session.objects.select_related("agent_version").get(pk=snapshot.session_id)
    tokens = tokens_of(usage)
    cost = turn_cost(tokens, session.agent_version.prices) if tokens is not None else None
    snapshot.usage = dict(usage or {})
    snapshot.input_tokens = tokens.input_tokens if tokens else None
    snapshot.cache_read_input_tokens = tokens.cache_read_input_tokens if tokens else 0
    snapshot.cache_write_input_tokens = tokens.cache_write_input_tokens if tokens else 0
    snapshot.output_tokens = tokens.output_tokens if tokens else None
    snapshot.cost = cost
    fields = USAGE_FIELDS
    if model_latency_ms is not None:
        snapshot.model_latency_ms = model_latency_ms
        fields = [*USAGE_FIELDS, "model_latency_ms"]
    snapshot.save(update_fields=fields)
    if tokens is not None:
        version_id = str(session.agent_version_id)
        transaction.on_commit(lambda: metrics.usage_recorded(version_id, tokens, cost))
    return maintenance_trigger_after_turn(session=session, input_tokens=snapshot.input_tokens)


@dataclass(frozen=True)
class UsageReport:
    snapshot: ProjectionSnapshot
    replayed: bool
    maintenance_job: MaintenanceJob | None


@transaction.atomic
def snapshot_usage_report(
    *, session_id: UUID | str, snapshot_id: Any, usage: dict[str, int]
) -> UsageReport:
    """Store `usage` on the session's snapshot once and run the maintenance trigger.

    `usage` holds JSON integers >= 0 (the view checks types); the cache counts must fit
    inside `inputTokens` and the two spellings of cache reads must agree, else 400
    `invalid_request` naming the field, before anything is read or written.
    Idempotent per snapshot: the same counts again (under either spelling) are a replay
    (nothing written, no trigger); different counts for a snapshot that already has usage
    are refused (409 `usage_already_reported`), so a turn is never counted twice. Locks the
    snapshot row, so two concurrent reports serialise. Raises NotFound for a snapshot of
    another session. The maintenance task it may queue is enqueued after commit.
    """
    problems = report_problems(usage)
    if problems:
        first = problems[0]
        raise ApplicationError(
            INVALID_REQUEST, f"{first['field']}: {first['message']}", {"errors": problems}
        )
    wanted = parse_uuid(snapshot_id, "Snapshot")
    snapshot = (
        ProjectionSnapshot.objects.select_for_update()
        .filter(session_id=session_id, id=wanted)
        .first()
    )
    if snapshot is None:
        raise NotFound("Snapshot")
    if snapshot.usage:
        if snapshot_tokens(snapshot) == tokens_of(usage):
            return UsageReport(snapshot, replayed=True, maintenance_job=None)
        raise ApplicationError(
            USAGE_ALREADY_REPORTED,
            "This snapshot's usage was already reported with other values; a turn's usage is "
            "recorded once. Project again for the next turn and report on that snapshot.",
            {"snapshotId": str(snapshot.id), "usage": snapshot.usage},
        )
    job = turn_usage_record(snapshot=snapshot, usage=usage)
    return UsageReport(snapshot, replayed=False, maintenance_job=job)
