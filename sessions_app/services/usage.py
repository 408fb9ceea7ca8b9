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

from contextproto.errors import ApplicationError, NotFound
from sessions_app.models import MaintenanceJob, ProjectionSnapshot
from sessions_app.services.runtime import turn_usage_record

USAGE_ALREADY_REPORTED = "usage_already_reported"


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
    try:
        wanted = UUID(str(snapshot_id))
    except ValueError as exc:
        raise NotFound("Snapshot") from exc
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
            status=409,
        )
    job = turn_usage_record(snapshot=snapshot, usage=usage)
    return UsageReport(snapshot, replayed=False, maintenance_job=job)
