"""Celery tasks: they take ids, call services and own their retries (docs/decisions.md,
"Celery: late acks, a task re-queued when its worker is lost")."""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.signals import worker_ready

from sessions_app import maintenance
from sessions_app.maintenance import body_sweeps
from sessions_app.services import runtime
from sessions_app.tasks_archive import archive_sweep  # noqa: F401  (registers the task)

job_log = logging.getLogger("contextproto.jobs")


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def maintenance_job_run(job_id: str) -> str:
    """One attempt of a maintenance job; a retry is scheduled as a new delivery."""
    started = time.perf_counter()
    outcome = maintenance.maintenance_execute(job_id=job_id)
    job_log.info(
        "job=maintenance jobId=%s outcome=%s ms=%.1f reason=%s",
        job_id,
        outcome.status,
        (time.perf_counter() - started) * 1000,
        outcome.reason or "-",
    )
    if outcome.retry_in is not None:
        maintenance_job_run.apply_async((job_id,), countdown=outcome.retry_in)
    return outcome.status


@shared_task(ignore_result=True)
def maintenance_sweep() -> int:
    """Periodic: re-enqueue jobs whose worker died or whose enqueue was lost."""
    return len(maintenance.maintenance_sweep())


@shared_task(ignore_result=True)
def run_sweep() -> int:
    """Periodic: re-enqueue runs whose worker died or whose enqueue was lost."""
    return len(runtime.run_sweep())


@shared_task(ignore_result=True)
def snapshot_body_sweep() -> int:
    """Periodic: write the bodies a dead process left unwritten (rebuilt from the state at
    R), drop the bodies older than SNAPSHOT_BODY_RETENTION_DAYS."""
    swept = body_sweeps.snapshot_body_sweep()
    job_log.info(
        "job=snapshot_body_sweep rebuilt=%d lost=%d dropped=%d",
        swept.rebuilt,
        swept.lost,
        swept.dropped,
    )
    return swept.rebuilt + swept.dropped


@worker_ready.connect
def _sweep_on_start(**_: object) -> None:
    # A new worker picks up what a killed one left behind without waiting for beat.
    maintenance_sweep.delay()
    run_sweep.delay()
    snapshot_body_sweep.delay()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_advance_task(run_id: str) -> str:
    """Advance a run with the built-in runtime (one worker per session at a time)."""
    started = time.perf_counter()
    outcome = runtime.run_advance(run_id=run_id)
    job_log.info(
        "job=run_advance runId=%s outcome=%s ms=%.1f",
        run_id,
        outcome,
        (time.perf_counter() - started) * 1000,
    )
    return outcome


def run_advance_enqueue(run_id: str, countdown: int | None = None) -> None:
    """Queue `run_advance_task` for `run_id` (installed as `hooks.run_advance_enqueue`)."""
    if countdown is None:
        run_advance_task.delay(run_id)
    else:
        run_advance_task.apply_async((run_id,), countdown=countdown)


def maintenance_job_enqueue(job_id: str) -> None:
    """Queue one attempt of a maintenance job (installed as `hooks.maintenance_job_enqueue`)."""
    maintenance_job_run.delay(job_id)
