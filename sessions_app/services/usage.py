"""Provider usage reported by an external host for one turn (SPEC §6 trigger, §9).

The built-in runtime records the usage of the turns it drives itself; a host that calls the
model on its own reports it here, and the same `turn_usage_record` stores it and decides
whether maintenance is due, so both kinds of sessions compress at the same threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction

from contextproto.errors import USAGE_ALREADY_REPORTED, ApplicationError, NotFound
from contextproto.ids import parse_uuid
from sessions_app.models import MaintenanceJob, ProjectionSnapshot, Session
from sessions_app.services.maintenance import maintenance_trigger_after_turn


def turn_usage_record(
    *, snapshot: ProjectionSnapshot, usage: dict[str, Any] | None, raw: Any = None
) -> MaintenanceJob | None:
    """Store the provider-reported usage on the turn's snapshot; trigger maintenance (§6).

    The one path for usage, whoever called the model: the built-in runtime, or an external
    host through `snapshots/{id}/usage/`. Returns the maintenance job it queued, if any.
    """
    snapshot.usage = dict(usage or {})
    snapshot.save(update_fields=["usage"])
    session = Session.objects.select_related("agent_version").get(pk=snapshot.session_id)
    tokens = snapshot.usage.get("inputTokens")
    return maintenance_trigger_after_turn(session=session, input_tokens=tokens)


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

    Idempotent per snapshot: the same usage again is a replay (nothing written, no trigger);
    different usage for a snapshot that already has one is refused (409
    `usage_already_reported`), so a turn is never counted twice. Locks the snapshot row, so
    two concurrent reports serialise. Raises NotFound for a snapshot of another session.
    The maintenance task it may queue is enqueued after commit.
    """
    wanted = parse_uuid(snapshot_id, "Snapshot")
    snapshot = (
        ProjectionSnapshot.objects.select_for_update()
        .filter(session_id=session_id, id=wanted)
        .first()
    )
    if snapshot is None:
        raise NotFound("Snapshot")
    if snapshot.usage:
        if snapshot.usage == usage:
            return UsageReport(snapshot, replayed=True, maintenance_job=None)
        raise ApplicationError(
            USAGE_ALREADY_REPORTED,
            "This snapshot's usage was already reported with other values; a turn's usage is "
            "recorded once. Project again for the next turn and report on that snapshot.",
            {"snapshotId": str(snapshot.id), "usage": snapshot.usage},
        )
    job = turn_usage_record(snapshot=snapshot, usage=usage)
    return UsageReport(snapshot, replayed=False, maintenance_job=job)
