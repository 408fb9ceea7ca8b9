"""The external maintainer's API (contract §6, §12.1): plan a job for a host that writes the
checkpoint itself, and find a job of a session window by id. Pages and the commit are the
shared ones of `jobs`.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from contextproto.errors import (
    ApplicationError,
    NotFound,
)
from contextproto.ids import parse_uuid
from contextproto.protocol import maintenance as planning
from contextproto.protocol.errors import ProtocolError
from sessions_app.maintenance.jobs import (
    LeaseLost,
    active_job,
    busy,
    compute_plan,
    maintenance_request,
    refuse,
    store_plan,
)
from sessions_app.models import MaintenanceJob, Session


def maintenance_external_plan(
    *, session_id: UUID | str, window_id: str, through_index: int | None = None
) -> tuple[MaintenanceJob, planning.MaintenancePlan]:
    """Plan the window for an external maintainer; return (job, plan).

    Re-plans the window's active external job, or records a new one only once the plan is
    valid: a refused plan (400 `maintenance_boundary_invalid` /
    `maintenance_nothing_to_compress`) writes no job, so it cannot block later requests.
    Raises 409 `maintenance_busy` while the built-in maintainer works on the window.
    """
    active = active_job(session_id, window_id)
    if active is not None and not active.external:
        raise busy(active)
    try:
        computed = compute_plan(session_id, window_id, through_index)
    except ProtocolError as exc:
        if active is not None:
            try:
                refuse(active, exc)
            except LeaseLost:
                pass  # it expired or finished meanwhile; the refusal itself still stands
        raise ApplicationError.from_protocol(exc) from exc
    job, _created = maintenance_request(
        session_id=session_id, window_id=window_id, trigger="external", external=True
    )
    if not job.external:
        raise busy(job)
    store_plan(job, computed)
    return job, computed.plan


def job_for(session: Session, window_id: str, job_id: Any) -> MaintenanceJob:
    """Return the external maintainer's job `job_id` of this window; 404 for any other."""
    wanted = parse_uuid(job_id, "Maintenance job")
    # Built-in jobs belong to their worker's lease: the external endpoints never touch them.
    job = MaintenanceJob.objects.filter(
        session=session, window_id=window_id, id=wanted, external=True
    ).first()
    if job is None:
        raise NotFound("Maintenance job")
    return job
