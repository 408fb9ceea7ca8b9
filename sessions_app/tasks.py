"""Celery tasks: they take ids, call services and own their retries (FIELD_NOTES)."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from sessions_app.tasks_archive import archive_sweep  # noqa: F401  (registers the task)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def maintenance_job_run(job_id: str) -> str:
    """One attempt of a maintenance job; a retry is scheduled as a new delivery."""
    from sessions_app.services.maintenance import maintenance_execute

    outcome = maintenance_execute(job_id=job_id)
    if outcome.retry_in is not None:
        maintenance_job_run.apply_async((job_id,), countdown=outcome.retry_in)
    return outcome.status


@shared_task(ignore_result=True)
def maintenance_sweep() -> int:
    """Periodic: re-enqueue jobs whose worker died or whose enqueue was lost."""
    from sessions_app.services.maintenance import maintenance_sweep as sweep

    return len(sweep())


@worker_ready.connect
def _sweep_on_start(**_: object) -> None:
    # A new worker picks up what a killed one left behind without waiting for beat.
    maintenance_sweep.delay()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_advance_task(run_id: str) -> str:
    """Advance a run with the built-in runtime (one worker per session at a time)."""
    from sessions_app.services.runtime import run_advance

    return run_advance(run_id=run_id)
