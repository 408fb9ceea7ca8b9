"""Maintenance started from outside a request: the periodic sweep (stuck or orphaned jobs,
abandoned external plans) and the trigger after a turn whose input tokens reach the ratio.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions_app.maintenance.jobs import expire_external, maintenance_request
from sessions_app.models import MaintenanceJob, Session
from sessions_app.store import hooks


def maintenance_sweep() -> list[str]:
    """Re-enqueue jobs stuck between commit and publish, or held by a dead worker.

    Also expires abandoned external jobs. Returns the ids of the re-enqueued jobs.
    """
    expire_external(MaintenanceJob.objects.all())
    now = timezone.now()
    stale_queued = now - timedelta(seconds=settings.MAINTENANCE_SWEEP_SECONDS)
    jobs = MaintenanceJob.objects.filter(external=False).filter(
        Q(status=MaintenanceJob.Status.QUEUED, updated_at__lt=stale_queued)
        | Q(status=MaintenanceJob.Status.QUEUED, not_before__lte=now)
        | Q(status=MaintenanceJob.Status.RUNNING, lease_until__lt=now)
    )[:500]
    ids = [str(job.id) for job in jobs]
    for job_id in ids:
        hooks.maintenance_job_enqueue(job_id)
    return ids


def maintenance_trigger_after_turn(
    *, session: Session, input_tokens: int | None
) -> MaintenanceJob | None:
    """Queue maintenance of the active window when a turn's real input tokens reach the
    version's `maintenanceTriggerRatio * maxInputTokens` (contract §6); None otherwise."""
    version = session.agent_version
    if input_tokens is None or not version.max_input_tokens or version.maintainer_agent_id is None:
        return None
    if input_tokens < version.maintenance_trigger_ratio * version.max_input_tokens:
        return None
    job, created = maintenance_request(
        session_id=session.id, window_id=session.active_window, trigger="input_tokens"
    )
    return job if created else None
