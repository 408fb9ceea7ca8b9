"""Prefix compression jobs (SPEC §6), fenced by the frozen revision and the source hash.

A job freezes (R, W, C, B, hash). Every page read and the commit re-check that the session
is still at revision R; the commit also recomputes the hash, then writes `checkpoint/W` and
`coveredThrough/W = B` in one KV transaction. Any change rejects the page or commit with a
recorded reason; the built-in worker re-plans with bounded retries.

Who may write a job row: a built-in worker holds a short lease with a token, renewed by a
helper thread while it works; every write it makes requires that token, so a worker whose
lease was taken over can neither overwrite the row nor commit. An external maintainer's job
has no token; it expires after MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS without a request.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto import nodes
from contextproto.errors import (
    MAINTAINER_NOT_BOUND,
    MAINTENANCE_BUSY,
    MAINTENANCE_JOB_FINISHED,
    MAINTENANCE_NOT_PLANNED,
    MAINTENANCE_PAGE_OUT_OF_RANGE,
    MAINTENANCE_STATE_CHANGED,
    ApplicationError,
    NotFound,
)
from contextproto.ids import parse_uuid
from contextproto.protocol import errors as planning_codes
from contextproto.protocol import maintenance as planning
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key
from sessions_app import providers, selectors
from sessions_app.models import MaintenanceJob, Session
from sessions_app.store import hooks
from sessions_app.store.state import kv_apply_locked, session_lock

ACTIVE = MaintenanceJob.ACTIVE_STATUSES


class LeaseLost(ApplicationError):
    """The job row is no longer the caller's: finished, expired, or taken over by a worker."""

    def __init__(self, job: MaintenanceJob, message: str = "") -> None:
        super().__init__(
            MAINTENANCE_JOB_FINISHED,
            message
            or "The maintenance job is no longer active (finished, expired, or taken over by "
            "another worker); plan again.",
            {"jobId": str(job.id)},
        )


@dataclass(frozen=True)
class Frozen:
    session: Session
    revision: int
    covered: int
    checkpoint: str
    upper_bound: int


def _freeze(session_id: UUID | str, window_id: str) -> Frozen:
    with transaction.atomic():
        session = session_lock(session_id)
        kv = selectors.kv_values(session.id, [covered_key(window_id), checkpoint_key(window_id)])
        return Frozen(
            session=session,
            revision=session.state_revision,
            covered=int(kv.get(covered_key(window_id), 0) or 0),
            checkpoint=str(kv.get(checkpoint_key(window_id), "") or ""),
            upper_bound=session.last_index,
        )


def _record(job: MaintenanceJob, event: str, **data: Any) -> None:
    job.history = [*job.history, {"at": timezone.now().isoformat(), "event": event, **data}][-50:]


_HELD = object()


def _save_fenced(job: MaintenanceJob, fields: Iterable[str], *, held: Any = _HELD) -> None:
    """Write `fields` of `job` only while the caller still holds the job; else raise LeaseLost.

    The holder is the attempt whose lease token is `held` (default: the token on `job`) for
    a built-in worker, and the external maintainer (no token) of a job that has not expired.
    One conditional UPDATE: nothing else in the row is touched, so the attempt count and
    the attempt log written by a later claim can never be overwritten by a stale worker.
    """
    token = job.lease_token if held is _HELD else held
    now = timezone.now()
    rows = MaintenanceJob.objects.filter(pk=job.pk, status__in=ACTIVE, lease_token=token)
    if job.external:
        rows = rows.filter(updated_at__gte=now - _external_ttl())
    if rows.update(**{name: getattr(job, name) for name in fields}, updated_at=now) != 1:
        raise LeaseLost(job)
    job.updated_at = now


# ---------------------------------------------------------------- external jobs expire


def _external_ttl() -> timezone.timedelta:
    return timezone.timedelta(seconds=settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS)


def _is_stale(job: MaintenanceJob, now: datetime) -> bool:
    return job.external and job.status in ACTIVE and job.updated_at < now - _external_ttl()


def _expire_external(rows: QuerySet[MaintenanceJob]) -> list[str]:
    """Fail the active external jobs among `rows` that saw no request for the TTL."""
    now = timezone.now()
    ttl = settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS
    expired = []
    with transaction.atomic():
        stale = rows.select_for_update().filter(
            external=True, status__in=ACTIVE, updated_at__lt=now - _external_ttl()
        )[:500]
        for job in stale:
            job.status = MaintenanceJob.Status.FAILED
            job.finished_at = now
            job.reason = (
                f"expired: the external maintainer sent no request for {ttl} s and did not "
                "commit (MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS)"
            )
            _record(job, "expired", ttlSeconds=ttl)
            job.save(update_fields=["status", "finished_at", "reason", "history", "updated_at"])
            expired.append(str(job.id))
    return expired


def _active_job(session_id: UUID | str, window_id: str) -> MaintenanceJob | None:
    """Return the window's active job, expiring it first if it is an abandoned external one."""
    rows = MaintenanceJob.objects.filter(
        session_id=session_id, window_id=window_id, status__in=ACTIVE
    )
    active = rows.first()
    if active is not None and _is_stale(active, timezone.now()):
        _expire_external(rows)
        active = rows.first()
    return active


def _ensure_active(job: MaintenanceJob) -> None:
    """Raise 409 `maintenance_job_finished` unless `job` is active (expiring it if stale)."""
    if _is_stale(job, timezone.now()):
        _expire_external(MaintenanceJob.objects.filter(pk=job.pk))
        job.refresh_from_db()
    if job.status not in ACTIVE:
        detail = f": {job.reason}" if job.reason else ""
        raise LeaseLost(job, f"The job is already {job.status}{detail}")


# ---------------------------------------------------------------- request and plan


def maintenance_request(
    *, session_id: UUID | str, window_id: str, trigger: str, external: bool = False
) -> tuple[MaintenanceJob, bool]:
    """Record a queued job for (session, window) unless one is active; return (job, created).

    At most one active job per session window (a partial unique constraint backs it); an
    external job past its TTL is expired first, so an abandoned plan never blocks the window.
    The built-in worker task is enqueued after commit. A request of the API
    (`trigger="api"`) is refused with 400 `maintainer_not_bound` when the session's version
    binds no maintainer Agent, before anything is written.
    """
    if trigger == "api":
        maintainer_bound_check(session_id=session_id)
    active = _active_job(session_id, window_id)
    if active is not None:
        return active, False
    try:
        with transaction.atomic():
            job = MaintenanceJob.objects.create(
                session_id=session_id, window_id=window_id, trigger=trigger, external=external
            )
            if not external:
                job_id = str(job.id)
                # robust: with the broker down the publish fails after the commit; the job
                # stays queued and maintenance_sweep re-enqueues it once Redis is back.
                transaction.on_commit(lambda: hooks.maintenance_job_enqueue(job_id), robust=True)
    except IntegrityError:
        job = MaintenanceJob.objects.get(
            session_id=session_id, window_id=window_id, status__in=ACTIVE
        )
        return job, False
    return job, True


def maintainer_bound_check(*, session_id: UUID | str) -> None:
    """Refuse built-in maintenance when no maintainer Agent is bound (400 maintainer_not_bound)."""
    bound = (
        Session.objects.filter(pk=session_id)
        .values_list("agent_version__maintainer_agent_id", flat=True)
        .first()
    )
    if bound is None:
        raise ApplicationError(
            MAINTAINER_NOT_BOUND,
            "No maintainer Agent is bound to this AgentVersion; bind one, or use the "
            "external maintainer endpoints (maintenance/plan/).",
        )


@dataclass(frozen=True)
class _Computed:
    plan: planning.MaintenancePlan
    tokens_before: int


def _compute_plan(session_id: UUID | str, window_id: str, through_index: int | None) -> _Computed:
    """Freeze (R, W, C, B, hash) for the window; raises the planner's ProtocolError."""
    frozen = _freeze(session_id, window_id)
    session = frozen.session
    options = effective_options(session.agent_version)
    messages = selectors.log_window(session.id, window_id, frozen.covered, frozen.upper_bound)
    folds = selectors.folds_of_window_above(session.id, window_id, frozen.covered)
    max_tokens = session.agent_version.max_input_tokens or 8000
    plan = planning.plan_maintenance(
        window_id=window_id,
        frozen_revision=frozen.revision,
        window_messages=messages,
        covered_through=frozen.covered,
        previous_checkpoint=frozen.checkpoint,
        folds=folds,
        page_size=options["pageSize"],
        keep_tail_tokens=math.ceil(max_tokens * settings.MAINTENANCE_TAIL_SHARE),
        requested_through=through_index,
    )
    return _Computed(plan, sum(planning.estimate_tokens(m) for m in messages))


def _store_plan(job: MaintenanceJob, computed: _Computed) -> None:
    plan = computed.plan
    job.frozen_revision = plan.frozen_revision
    job.from_index = plan.covered_through + 1
    job.through_index = plan.through_index
    job.source_hash = plan.source_hash
    job.page_count = plan.page_count
    job.pages_read = 0
    job.tokens_before = computed.tokens_before
    _record(
        job,
        "planned",
        revision=plan.frozen_revision,
        throughIndex=plan.through_index,
        blockedBy=list(plan.blocked_by),
    )
    # A new plan replaces the reason of an earlier rejection: it no longer applies.
    job.reason = f"compressed up to a blocker: {list(plan.blocked_by)}" if plan.blocked_by else ""
    _save_fenced(
        job,
        [
            "frozen_revision",
            "from_index",
            "through_index",
            "source_hash",
            "page_count",
            "pages_read",
            "tokens_before",
            "history",
            "reason",
        ],
    )


def _refuse(job: MaintenanceJob, exc: ProtocolError) -> None:
    _record(job, "plan_refused", code=exc.code, message=exc.message)
    job.reason = f"{exc.code}: {exc.message}"
    _save_fenced(job, ["history", "reason"])


def maintenance_plan(
    *, job: MaintenanceJob, through_index: int | None = None
) -> planning.MaintenancePlan:
    """Freeze (R, W, C, B, hash) for `job` and store them on it.

    Raises `maintenance_boundary_invalid` / `maintenance_nothing_to_compress` (400), and
    LeaseLost (409) when the caller no longer holds the job.
    """
    try:
        computed = _compute_plan(job.session_id, job.window_id, through_index)
    except ProtocolError as exc:
        _refuse(job, exc)
        raise ApplicationError.from_protocol(exc) from exc
    _store_plan(job, computed)
    return computed.plan


def maintenance_external_plan(
    *, session_id: UUID | str, window_id: str, through_index: int | None = None
) -> tuple[MaintenanceJob, planning.MaintenancePlan]:
    """Plan the window for an external maintainer; return (job, plan).

    Re-plans the window's active external job, or records a new one only once the plan is
    valid: a refused plan (400 `maintenance_boundary_invalid` /
    `maintenance_nothing_to_compress`) writes no job, so it cannot block later requests.
    Raises 409 `maintenance_busy` while the built-in maintainer works on the window.
    """
    active = _active_job(session_id, window_id)
    if active is not None and not active.external:
        raise _busy(active)
    try:
        computed = _compute_plan(session_id, window_id, through_index)
    except ProtocolError as exc:
        if active is not None:
            try:
                _refuse(active, exc)
            except LeaseLost:
                pass  # it expired or finished meanwhile; the refusal itself still stands
        raise ApplicationError.from_protocol(exc) from exc
    job, _created = maintenance_request(
        session_id=session_id, window_id=window_id, trigger="external", external=True
    )
    if not job.external:
        raise _busy(job)
    _store_plan(job, computed)
    return job, computed.plan


def _busy(job: MaintenanceJob) -> ApplicationError:
    return ApplicationError(
        MAINTENANCE_BUSY,
        "The built-in maintainer is working on this window; try again later.",
        {"jobId": str(job.id)},
    )


def _reject(
    job: MaintenanceJob, where: str, current: int, *, source_hash: str | None = None
) -> ApplicationError:
    """Record and return the 409 for a moved revision or, at the same revision, a changed hash.

    The reason names what changed: an operator reading "revision moved from 7 to 7" could
    not tell a corrupted or re-archived source from a concurrent write.
    """
    details: dict[str, Any] = {"frozenRevision": job.frozen_revision, "currentRevision": current}
    if current != job.frozen_revision:
        changed = "revision"
        what = f"state revision moved from {job.frozen_revision} to {current}"
    else:
        changed = "sourceHash"
        what = (
            f"source hash changed at the same revision {current} (planned "
            f"{job.source_hash[:12]}…, now {(source_hash or '')[:12]}…): the previous "
            "checkpoint or the raw messages of the range differ from the plan"
        )
        details.update(frozenSourceHash=job.source_hash, currentSourceHash=source_hash)
    details["changed"] = changed
    reason = f"{what} before the {where}; the job must re-plan"
    _record(job, "rejected", where=where, currentRevision=current, changed=changed)
    job.reason = reason
    _save_fenced(job, ["history", "reason"])
    return ApplicationError(MAINTENANCE_STATE_CHANGED, reason, details)


def _covered_messages(job: MaintenanceJob, covered: int) -> list[RawMessage]:
    return selectors.log_window(job.session_id, job.window_id, covered, job.through_index)


def _source_now(job: MaintenanceJob) -> tuple[str, list[RawMessage]]:
    """The hash of the job's source as it is now, and the raw messages it covers."""
    kv = selectors.kv_values(
        job.session_id, [covered_key(job.window_id), checkpoint_key(job.window_id)]
    )
    covered = int(kv.get(covered_key(job.window_id), 0) or 0)
    messages = _covered_messages(job, covered)
    checkpoint = str(kv.get(checkpoint_key(job.window_id), ""))
    return planning.source_hash(checkpoint, messages), messages


def maintenance_page(*, job: MaintenanceJob, page: int) -> tuple[list[RawMessage], int]:
    """Page `page` (from 0) of the job's raw range, if the revision and source hash are still
    the frozen ones (SPEC §6: every page read re-checks both).

    Raises 409 `maintenance_state_changed` (the reason says which changed) and 409
    `maintenance_job_finished` once the job is no longer the caller's.
    """
    if job.frozen_revision is None:
        raise ApplicationError(MAINTENANCE_NOT_PLANNED, "Plan the job before reading pages.")
    _ensure_active(job)
    current = Session.objects.values_list("state_revision", flat=True).get(pk=job.session_id)
    if current != job.frozen_revision:
        raise _reject(job, f"read of page {page}", current)
    if not 0 <= page < job.page_count:
        raise ApplicationError(
            MAINTENANCE_PAGE_OUT_OF_RANGE,
            f"page must be between 0 and {job.page_count - 1}.",
            {"pageCount": job.page_count},
        )
    # The page is cut from the same rows the hash is computed on: the check costs no
    # extra read of the range, and the page served is exactly the source checked.
    digest, source = _source_now(job)
    if digest != job.source_hash:
        raise _reject(job, f"read of page {page}", current, source_hash=digest)
    size = effective_options(Session.objects.get(pk=job.session_id).agent_version)["pageSize"]
    rows = source[page * size : (page + 1) * size]
    job.pages_read = max(job.pages_read, page + 1)
    _record(job, "page", page=page)
    _save_fenced(job, ["pages_read", "history"])
    return rows, job.page_count


def maintenance_commit(*, job: MaintenanceJob, checkpoint: object) -> tuple[int, int]:
    """Commit the checkpoint fenced by revision and hash; return (revision, coveredThrough).

    Raises 409 `maintenance_state_changed` when the state moved, 400 `checkpoint_too_long` /
    `checkpoint_empty` for a bad text, 409 `maintenance_job_finished` when the job is no
    longer the caller's (finished, expired, or its lease taken over). Nothing is written on
    refusal.
    """
    if job.frozen_revision is None:
        raise ApplicationError(MAINTENANCE_NOT_PLANNED, "Plan the job before committing.")
    _ensure_active(job)
    with transaction.atomic():
        session = session_lock(job.session_id)
        options = effective_options(session.agent_version)
        try:
            text = planning.validate_checkpoint(checkpoint, options["checkpointMaxCharacters"])
        except ProtocolError as exc:
            raise ApplicationError.from_protocol(exc) from exc
        if session.state_revision != job.frozen_revision:
            current = session.state_revision
            transaction.set_rollback(True)
        else:
            current = None
        digest: str | None = None
        if current is None:
            kv = selectors.kv_values(
                session.id, [covered_key(job.window_id), checkpoint_key(job.window_id)]
            )
            covered = int(kv.get(covered_key(job.window_id), 0) or 0)
            messages = _covered_messages(job, covered)
            digest = planning.source_hash(str(kv.get(checkpoint_key(job.window_id), "")), messages)
            if digest != job.source_hash or job.through_index <= covered:
                current = session.state_revision
        if current is None:
            revision = kv_apply_locked(
                session,
                {
                    checkpoint_key(job.window_id): text,
                    covered_key(job.window_id): job.through_index,
                },
            )
            held = job.lease_token
            job.status = MaintenanceJob.Status.COMMITTED
            job.finished_at = timezone.now()
            job.tokens_after = math.ceil(len(text) / 4)
            job.lease_until = None
            job.lease_token = None
            _end_attempt(job, "committed")
            _record(job, "committed", revision=revision, coveredThrough=job.through_index)
            # Same transaction as the KV write: LeaseLost here rolls the checkpoint back, so
            # a worker that lost its lease never commits, and a job never commits twice.
            _save_fenced(
                job,
                [
                    "status",
                    "finished_at",
                    "tokens_after",
                    "lease_until",
                    "lease_token",
                    "attempt_log",
                    "history",
                ],
                held=held,
            )
            return revision, job.through_index
    raise _reject(job, "commit", current, source_hash=digest)


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


# ---------------------------------------------------------------- the built-in worker


@dataclass(frozen=True)
class ExecuteOutcome:
    status: str
    retry_in: int | None = None
    reason: str = ""


class JobFailed(Exception):
    """The job cannot succeed (bad maintainer answer, no maintainer, provider refusal)."""


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _lease_delta() -> timezone.timedelta:
    return timezone.timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS)


def _end_attempt(job: MaintenanceJob, outcome: str, reason: str = "") -> None:
    """Close the open entry of the attempt log with its outcome (no-op without one)."""
    if not job.attempt_log or job.attempt_log[-1].get("outcome") != "running":
        return
    entry = {**job.attempt_log[-1], "endedAt": timezone.now().isoformat(), "outcome": outcome}
    if reason:
        entry["reason"] = reason[:500]
    job.attempt_log = [*job.attempt_log[:-1], entry]


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
        _end_attempt(job, "lease_expired", "the worker stopped renewing its lease")
        fields = ["status", "lease_until", "lease_token", "attempt_log", "history", "updated_at"]
        if job.attempts >= settings.MAINTENANCE_MAX_ATTEMPTS:
            job.status = MaintenanceJob.Status.FAILED
            job.finished_at = now
            job.lease_until = None
            job.lease_token = None
            job.reason = f"gave up after {job.attempts} attempts; last: {job.reason}"
            _record(job, "failed", reason="attempts exhausted")
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
        _record(job, "claimed", attempt=job.attempts, worker=worker)
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
    job.not_before = timezone.now() + timezone.timedelta(seconds=delay)
    job.reason = reason
    _end_attempt(job, "requeued", reason)
    _record(job, "requeued", reason=reason, retryIn=delay)
    _save_fenced(
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
    _end_attempt(job, status, reason)
    _record(job, status, reason=reason)
    _save_fenced(
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
    try:
        missing = _protocol_missing(job)
        if missing is not None:
            # Failed at once, never re-queued (SPEC §12): a skewed deploy shows up as a job
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
        text = _summarise(job, plan, pages)
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


def _maintainer_version(session: Session) -> AgentVersion:
    agent_id = session.agent_version.maintainer_agent_id
    if agent_id is None:
        raise JobFailed("no maintainer Agent is bound to this AgentVersion")
    version = (
        AgentVersion.objects.filter(agent_id=agent_id, status=AgentVersion.Status.PUBLISHED)
        .order_by("-number")
        .first()
    )
    if version is None:
        raise JobFailed("the bound maintainer Agent has no published version")
    return version


def _summary_request(wire_format: str, prompt: list[dict[str, str]]) -> dict[str, Any]:
    if wire_format == WireFormat.ANTHROPIC_MESSAGES:
        system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
        rest = [m for m in prompt if m["role"] != "system"]
        return {"system": system, "messages": rest}
    return {"messages": prompt}


def _summarise(
    job: MaintenanceJob, plan: planning.MaintenancePlan, pages: list[list[RawMessage]]
) -> str:
    """Ask the maintainer model for the checkpoint; one shorter retry if it is too long."""
    session = Session.objects.select_related("agent_version").get(pk=job.session_id)
    maintainer = _maintainer_version(session)
    try:
        protocol = protocol_of(session.agent_version)
    except ProtocolError as exc:
        raise JobFailed(f"protocol_unknown_on_worker: {exc.message}") from exc
    limit = effective_options(session.agent_version, protocol)["checkpointMaxCharacters"]
    goal = selectors.kv_values(session.id, [f"window/{job.window_id}"]).get(
        f"window/{job.window_id}", {}
    )
    provider = providers.provider_for(maintainer.model_provider, maintainer.model_config or {})
    prompt = planning.summariser_prompt(
        previous_checkpoint=plan.previous_checkpoint,
        pages_text=[planning.render_page_text(page) for page in pages],
        max_characters=limit,
        window_goal=str(goal.get("goal", "")) if isinstance(goal, dict) else "",
    )
    usage_total = {"inputTokens": 0, "outputTokens": 0, "calls": 0}
    for attempt in range(2):
        step = (
            MaintenanceJob.objects.filter(session_id=job.session_id).aggregate(
                n=Sum("summary_calls")
            )["n"]
            or 0
        )
        reply = provider.complete(
            _summary_request(provider.wire_format, prompt), model=maintainer.model_name, step=step
        )
        MaintenanceJob.objects.filter(pk=job.pk).update(summary_calls=F("summary_calls") + 1)
        job.summary_calls += 1
        for key in ("inputTokens", "outputTokens"):
            usage_total[key] += int(reply.usage.get(key, 0) or 0)
        usage_total["calls"] += 1
        job.summarizer_usage = usage_total
        _save_fenced(job, ["summarizer_usage"])
        answer = (reply.text or "").strip()
        if reply.tool_calls and not answer:
            raise JobFailed("the maintainer answered with a tool call instead of a checkpoint")
        try:
            return planning.validate_checkpoint(answer, limit)
        except ProtocolError as exc:
            if exc.code != "checkpoint_too_long" or attempt == 1:
                raise JobFailed(f"{exc.code}: {exc.message}") from exc
            prompt = planning.shorter_retry_prompt(prompt, answer, limit)
    raise JobFailed("unreachable")  # pragma: no cover


def maintenance_sweep() -> list[str]:
    """Re-enqueue jobs stuck between commit and publish, or held by a dead worker.

    Also expires abandoned external jobs. Returns the ids of the re-enqueued jobs.
    """
    _expire_external(MaintenanceJob.objects.all())
    now = timezone.now()
    stale_queued = now - timezone.timedelta(seconds=settings.MAINTENANCE_SWEEP_SECONDS)
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
    version's `maintenanceTriggerRatio * maxInputTokens` (SPEC §6); None otherwise."""
    version = session.agent_version
    if input_tokens is None or not version.max_input_tokens or version.maintainer_agent_id is None:
        return None
    if input_tokens < version.maintenance_trigger_ratio * version.max_input_tokens:
        return None
    job, created = maintenance_request(
        session_id=session.id, window_id=session.active_window, trigger="input_tokens"
    )
    return job if created else None
