"""The built-in maintenance worker: claims a job with a short lease and a token, renews it
from a heartbeat thread while it works, plans, reads the pages, asks the summariser and
commits; a lost lease stops it, a transient failure re-queues the job with a back-off.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from contextproto import telemetry
from contextproto.errors import (
    MAINTENANCE_STATE_CHANGED,
    ApplicationError,
)
from contextproto.protocol import errors as planning_codes
from sessions_app import nodes, providers
from sessions_app.maintenance.jobs import (
    ACTIVE,
    JobFailed,
    LeaseLost,
    end_attempt,
    maintenance_commit,
    maintenance_page,
    maintenance_plan,
    record_event,
    save_fenced,
)
from sessions_app.maintenance.summariser import summarise
from sessions_app.models import MaintenanceJob, Session
from sessions_app.reads import trace_facts

# ---------------------------------------------------------------- the built-in worker


@dataclass(frozen=True)
class ExecuteOutcome:
    status: str
    retry_in: int | None = None
    reason: str = ""


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _lease_delta() -> timedelta:
    return timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS)


def _claim(job_id: UUID | str) -> MaintenanceJob | None:
    """Take a built-in job if it is queued, or running with an expired lease; count the attempt.

    Under the job's row lock: the attempt gets a fresh lease token (the fence of all its
    later writes), and an earlier attempt still marked running is closed as `lease_expired`.
    """
    now = timezone.now()
    with transaction.atomic():
        job = MaintenanceJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.external or job.status not in ACTIVE:
            return None
        if (
            job.status == MaintenanceJob.Status.RUNNING
            and job.lease_until
            and job.lease_until > now
        ):
            return None  # another worker holds it; a duplicate delivery does nothing
        end_attempt(job, "lease_expired", "the worker stopped renewing its lease")
        fields = ["status", "lease_until", "lease_token", "attempt_log", "history", "updated_at"]
        if job.attempts >= settings.MAINTENANCE_MAX_ATTEMPTS:
            job.status = MaintenanceJob.Status.FAILED
            job.finished_at = now
            job.lease_until = None
            job.lease_token = None
            job.reason = f"gave up after {job.attempts} attempts; last: {job.reason}"
            record_event(job, "failed", reason="attempts exhausted")
            job.save(update_fields=[*fields, "finished_at", "reason"])
            return None
        worker = _worker_name()
        job.attempts += 1
        job.status = MaintenanceJob.Status.RUNNING
        job.lease_until = now + _lease_delta()
        job.lease_token = uuid.uuid4()
        job.attempt_log = [
            *job.attempt_log,
            {
                "attempt": job.attempts,
                "worker": worker,
                "startedAt": now.isoformat(),
                "endedAt": None,
                "outcome": "running",
            },
        ]
        record_event(job, "claimed", attempt=job.attempts, worker=worker)
        job.save(update_fields=[*fields, "attempts"])
        return job


def maintenance_lease_renew(*, job_id: UUID | str, token: UUID) -> bool:
    """Extend the lease of the attempt holding `token`; False once it no longer holds the job."""
    return (
        MaintenanceJob.objects.filter(
            pk=job_id, status=MaintenanceJob.Status.RUNNING, lease_token=token
        ).update(lease_until=timezone.now() + _lease_delta())
        == 1
    )


class _Heartbeat:
    """Renew a running attempt's lease from a helper thread until the attempt ends.

    The model call can outlast any short lease, so renewal runs beside it rather than
    between steps. It stops when the renewal fails (the fence: another worker took the job)
    and after the task time limit, so a hung worker cannot hold a job forever. The first
    renewal comes a third of a lease in, so quick attempts never touch the database here.
    """

    def __init__(self, job: MaintenanceJob) -> None:
        # Started right after a claim, which sets the token.
        assert job.lease_token is not None
        self.job_id = job.pk
        self.token = job.lease_token
        self.every = max(settings.MAINTENANCE_LEASE_SECONDS / 3, 0.1)
        self.until = time.monotonic() + settings.CELERY_TASK_TIME_LIMIT
        self.stopped = threading.Event()
        self.lost = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"maintenance-lease-{job.pk}", daemon=True
        )

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self.every) and time.monotonic() < self.until:
                if not maintenance_lease_renew(job_id=self.job_id, token=self.token):
                    self.lost.set()
                    return
        finally:
            connection.close()  # this thread's own connection


def _requeue(job: MaintenanceJob, reason: str) -> ExecuteOutcome:
    delay = min(settings.MAINTENANCE_RETRY_BASE_SECONDS * 2 ** (job.attempts - 1), 300)
    held = job.lease_token
    job.status = MaintenanceJob.Status.QUEUED
    job.lease_until = None
    job.lease_token = None
    job.not_before = timezone.now() + timedelta(seconds=delay)
    job.reason = reason
    end_attempt(job, "requeued", reason)
    record_event(job, "requeued", reason=reason, retryIn=delay)
    save_fenced(
        job,
        ["status", "lease_until", "lease_token", "not_before", "reason", "attempt_log", "history"],
        held=held,
    )
    return ExecuteOutcome(status="queued", retry_in=delay, reason=reason)


def _finish(job: MaintenanceJob, status: str, reason: str) -> ExecuteOutcome:
    held = job.lease_token
    job.status = status
    job.finished_at = timezone.now()
    job.lease_until = None
    job.lease_token = None
    job.reason = reason
    end_attempt(job, status, reason)
    record_event(job, status, reason=reason)
    save_fenced(
        job,
        ["status", "finished_at", "lease_until", "lease_token", "reason", "attempt_log", "history"],
        held=held,
    )
    return ExecuteOutcome(status=status, reason=reason)


def maintenance_execute(*, job_id: UUID | str) -> ExecuteOutcome:
    """Run one attempt of a built-in job: plan, read pages, summarise, commit.

    Safe to call again after a crash at any point: only the fenced commit writes state, and
    a job that is already finished (or leased by a live worker) is left alone. The lease is
    renewed while the attempt runs; an attempt that lost it stops at its next write
    (`lease_lost`) and leaves the row to the worker that took it over.
    """
    job = _claim(job_id)
    if job is None:
        return ExecuteOutcome(status="skipped")
    # One trace per attempt (contract §22): the job's root span; the summariser's model
    # calls are its `invoke_agent` / `chat` spans.
    facts = trace_facts.session_facts_of(job.session_id)
    with telemetry.job_span(
        f"maintenance {job.window_id}",
        facts.at(window_id=job.window_id) if facts else None,
        attributes=job_attributes(job),
    ) as span:
        outcome = _execute(job)
        span.set_attributes(
            {**job_attributes(job), "contextproto.maintenance.outcome": outcome.status}
        )
        if outcome.status == MaintenanceJob.Status.FAILED:
            telemetry.fail(span, "maintenance_failed")
    return outcome


def job_attributes(job: MaintenanceJob) -> dict[str, str | int]:
    """What a job's span says of it: id, trigger, attempt, the range and its tokens."""
    found: dict[str, str | int] = {
        "contextproto.maintenance.job.id": str(job.id),
        "contextproto.maintenance.trigger": job.trigger,
        "contextproto.maintenance.attempt": job.attempts,
    }
    for name, value in (
        ("from_index", job.from_index),
        ("through_index", job.through_index),
        ("tokens_before", job.tokens_before),
        ("tokens_after", job.tokens_after),
    ):
        if value is not None:
            found[f"contextproto.maintenance.{name}"] = value
    return found


def _execute(job: MaintenanceJob) -> ExecuteOutcome:
    try:
        missing = _protocol_missing(job)
        if missing is not None:
            # Failed at once, never re-queued (contract §3): a skewed deploy shows up as a job
            # failing with the missing version, not as work drifting between catalogs.
            return _finish(job, MaintenanceJob.Status.FAILED, missing)
        with _Heartbeat(job):
            return _attempt(job)
    except LeaseLost as exc:
        return ExecuteOutcome(status="lease_lost", reason=exc.message)


def _protocol_missing(job: MaintenanceJob) -> str | None:
    """Return `protocol_unknown_on_worker: …` if this worker lacks the job's protocol, else None."""
    protocol_id, version = (
        Session.objects.filter(pk=job.session_id)
        .values_list(
            "agent_version__context_protocol_id", "agent_version__context_protocol_version"
        )
        .get()
    )
    try:
        nodes.require_protocol(protocol_id, version)
    except ApplicationError as exc:
        return f"{exc.code}: {exc.message}"
    return None


def _attempt(job: MaintenanceJob) -> ExecuteOutcome:
    try:
        plan = maintenance_plan(job=job)
    except LeaseLost:
        raise
    except ApplicationError as exc:
        if exc.code == planning_codes.MAINTENANCE_NOTHING_TO_COMPRESS:
            return _finish(job, MaintenanceJob.Status.REJECTED, exc.message)
        return _requeue(job, f"{exc.code}: {exc.message}")
    # No refresh from the database below: the in-memory row holds this attempt's token, and
    # every write is fenced by it.
    try:
        pages = [maintenance_page(job=job, page=n)[0] for n in range(plan.page_count)]
        text = summarise(job, plan, pages)
        maintenance_commit(job=job, checkpoint=text)
    except LeaseLost:
        raise
    except ApplicationError as exc:
        if exc.code == MAINTENANCE_STATE_CHANGED:
            return _requeue(job, exc.message)
        return _finish(job, MaintenanceJob.Status.FAILED, f"{exc.code}: {exc.message}")
    except JobFailed as exc:
        return _finish(job, MaintenanceJob.Status.FAILED, str(exc))
    except providers.ProviderError as exc:
        if exc.retryable:
            return _requeue(job, f"{exc.code}: {exc}")
        return _finish(job, MaintenanceJob.Status.FAILED, f"{exc.code}: {exc}")
    return ExecuteOutcome(status="committed")
