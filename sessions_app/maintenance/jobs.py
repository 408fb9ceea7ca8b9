"""Prefix compression jobs (contract §6), fenced by the frozen revision and the source hash.

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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.selectors import effective_options
from contextproto.errors import (
    MAINTAINER_NOT_BOUND,
    MAINTENANCE_BUSY,
    MAINTENANCE_JOB_FINISHED,
    MAINTENANCE_NOT_PLANNED,
    MAINTENANCE_PAGE_OUT_OF_RANGE,
    MAINTENANCE_STATE_CHANGED,
    ApplicationError,
)
from contextproto.protocol import checkpoints
from contextproto.protocol import maintenance as planning
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key
from contextproto.protocol.tokens import message_tokens, text_tokens
from sessions_app.models import MaintenanceJob, Session
from sessions_app.reads import raw_log
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
        kv = raw_log.kv_values(session.id, [covered_key(window_id), checkpoint_key(window_id)])
        return Frozen(
            session=session,
            revision=session.state_revision,
            covered=int(kv.get(covered_key(window_id), 0) or 0),
            checkpoint=str(kv.get(checkpoint_key(window_id), "") or ""),
            upper_bound=session.last_index,
        )


def record_event(job: MaintenanceJob, event: str, **data: Any) -> None:
    job.history = [*job.history, {"at": timezone.now().isoformat(), "event": event, **data}][-50:]


_HELD = object()


def save_fenced(job: MaintenanceJob, fields: Iterable[str], *, held: Any = _HELD) -> None:
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


def _external_ttl() -> timedelta:
    return timedelta(seconds=settings.MAINTENANCE_EXTERNAL_JOB_TTL_SECONDS)


def _is_stale(job: MaintenanceJob, now: datetime) -> bool:
    return job.external and job.status in ACTIVE and job.updated_at < now - _external_ttl()


def expire_external(rows: QuerySet[MaintenanceJob]) -> list[str]:
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
            record_event(job, "expired", ttlSeconds=ttl)
            job.save(update_fields=["status", "finished_at", "reason", "history", "updated_at"])
            expired.append(str(job.id))
    return expired


def active_job(session_id: UUID | str, window_id: str) -> MaintenanceJob | None:
    """Return the window's active job, expiring it first if it is an abandoned external one."""
    rows = MaintenanceJob.objects.filter(
        session_id=session_id, window_id=window_id, status__in=ACTIVE
    )
    active = rows.first()
    if active is not None and _is_stale(active, timezone.now()):
        expire_external(rows)
        active = rows.first()
    return active


def _ensure_active(job: MaintenanceJob) -> None:
    """Raise 409 `maintenance_job_finished` unless `job` is active (expiring it if stale)."""
    if _is_stale(job, timezone.now()):
        expire_external(MaintenanceJob.objects.filter(pk=job.pk))
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
    active = active_job(session_id, window_id)
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


def compute_plan(session_id: UUID | str, window_id: str, through_index: int | None) -> _Computed:
    """Freeze (R, W, C, B, hash) for the window; raises the planner's ProtocolError."""
    frozen = _freeze(session_id, window_id)
    session = frozen.session
    options = effective_options(session.agent_version)
    messages = raw_log.log_window(session.id, window_id, frozen.covered, frozen.upper_bound)
    folds = raw_log.folds_of_window_above(session.id, window_id, frozen.covered)
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
    return _Computed(plan, sum(message_tokens(m) for m in messages))


def store_plan(job: MaintenanceJob, computed: _Computed) -> None:
    plan = computed.plan
    job.frozen_revision = plan.frozen_revision
    job.from_index = plan.covered_through + 1
    job.through_index = plan.through_index
    job.source_hash = plan.source_hash
    job.page_count = plan.page_count
    job.pages_read = 0
    job.tokens_before = computed.tokens_before
    record_event(
        job,
        "planned",
        revision=plan.frozen_revision,
        throughIndex=plan.through_index,
        blockedBy=list(plan.blocked_by),
    )
    # A new plan replaces the reason of an earlier rejection: it no longer applies.
    job.reason = f"compressed up to a blocker: {list(plan.blocked_by)}" if plan.blocked_by else ""
    save_fenced(
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


def refuse(job: MaintenanceJob, exc: ProtocolError) -> None:
    record_event(job, "plan_refused", code=exc.code, message=exc.message)
    job.reason = f"{exc.code}: {exc.message}"
    save_fenced(job, ["history", "reason"])


def maintenance_plan(
    *, job: MaintenanceJob, through_index: int | None = None
) -> planning.MaintenancePlan:
    """Freeze (R, W, C, B, hash) for `job` and store them on it.

    Raises `maintenance_boundary_invalid` / `maintenance_nothing_to_compress` (400), and
    LeaseLost (409) when the caller no longer holds the job.
    """
    try:
        computed = compute_plan(job.session_id, job.window_id, through_index)
    except ProtocolError as exc:
        refuse(job, exc)
        raise ApplicationError.from_protocol(exc) from exc
    store_plan(job, computed)
    return computed.plan


def busy(job: MaintenanceJob) -> ApplicationError:
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
    record_event(job, "rejected", where=where, currentRevision=current, changed=changed)
    job.reason = reason
    save_fenced(job, ["history", "reason"])
    return ApplicationError(MAINTENANCE_STATE_CHANGED, reason, details)


def _planned_through(job: MaintenanceJob) -> int:
    """B of a planned job (a plan sets it with the frozen revision)."""
    if job.through_index is None:
        raise ApplicationError(MAINTENANCE_NOT_PLANNED, "Plan the job first.")
    return job.through_index


def _covered_messages(job: MaintenanceJob, covered: int) -> list[RawMessage]:
    return raw_log.log_window(job.session_id, job.window_id, covered, _planned_through(job))


def _source_now(job: MaintenanceJob) -> tuple[str, list[RawMessage]]:
    """The hash of the job's source as it is now, and the raw messages it covers."""
    kv = raw_log.kv_values(
        job.session_id, [covered_key(job.window_id), checkpoint_key(job.window_id)]
    )
    covered = int(kv.get(covered_key(job.window_id), 0) or 0)
    messages = _covered_messages(job, covered)
    checkpoint = str(kv.get(checkpoint_key(job.window_id), ""))
    return checkpoints.source_hash(checkpoint, messages), messages


def maintenance_page(*, job: MaintenanceJob, page: int) -> tuple[list[RawMessage], int]:
    """Page `page` (from 0) of the job's raw range, if the revision and source hash are still
    the frozen ones (contract §6: every page read re-checks both).

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
    record_event(job, "page", page=page)
    save_fenced(job, ["pages_read", "history"])
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
            text = checkpoints.validate_checkpoint(checkpoint, options["checkpointMaxCharacters"])
        except ProtocolError as exc:
            raise ApplicationError.from_protocol(exc) from exc
        if session.state_revision != job.frozen_revision:
            current = session.state_revision
            transaction.set_rollback(True)
        else:
            current = None
        digest: str | None = None
        if current is None:
            kv = raw_log.kv_values(
                session.id, [covered_key(job.window_id), checkpoint_key(job.window_id)]
            )
            covered = int(kv.get(covered_key(job.window_id), 0) or 0)
            messages = _covered_messages(job, covered)
            digest = checkpoints.source_hash(
                str(kv.get(checkpoint_key(job.window_id), "")), messages
            )
            if digest != job.source_hash or _planned_through(job) <= covered:
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
            job.tokens_after = text_tokens(text)
            job.lease_until = None
            job.lease_token = None
            end_attempt(job, "committed")
            record_event(job, "committed", revision=revision, coveredThrough=job.through_index)
            # Same transaction as the KV write: LeaseLost here rolls the checkpoint back, so
            # a worker that lost its lease never commits, and a job never commits twice.
            save_fenced(
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
            return revision, _planned_through(job)
    raise _reject(job, "commit", current, source_hash=digest)


class JobFailed(Exception):
    """The job cannot succeed (bad maintainer answer, no maintainer, provider refusal)."""


def end_attempt(job: MaintenanceJob, outcome: str, reason: str = "") -> None:
    """Close the open entry of the attempt log with its outcome (no-op without one)."""
    if not job.attempt_log or job.attempt_log[-1].get("outcome") != "running":
        return
    entry = {**job.attempt_log[-1], "endedAt": timezone.now().isoformat(), "outcome": outcome}
    if reason:
        entry["reason"] = reason[:500]
    job.attempt_log = [*job.attempt_log[:-1], entry]
