"""Prefix compression jobs (SPEC §6), fenced by the frozen revision and the source hash.

A job freezes (R, W, C, B, hash). Every page read and the commit re-check that the session
is still at revision R; the commit also recomputes the hash, then writes `checkpoint/W` and
`coveredThrough/W = B` in one KV transaction. Any change rejects the page or commit with a
recorded reason; the built-in worker re-plans with bounded retries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from contextproto.errors import ApplicationError, NotFound
from contextproto.protocol import catalog
from contextproto.protocol import maintenance as planning
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key
from sessions_app import selectors
from sessions_app.models import MaintenanceJob, Session
from sessions_app.services.state import kv_apply_locked, session_lock

# Share of maxInputTokens left uncompressed at the recent end of the window (SPEC §6).
TAIL_SHARE = 0.25
STATE_CHANGED = "maintenance_state_changed"


@dataclass(frozen=True)
class Frozen:
    session: Session
    revision: int
    covered: int
    checkpoint: str
    upper_bound: int


def _options(session: Session) -> dict[str, Any]:
    version = session.agent_version
    protocol = catalog.get_version(version.context_protocol_id, version.context_protocol_version)
    return {**protocol.defaults, **(version.options or {})}


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


def maintenance_request(
    *, session_id: UUID | str, window_id: str, trigger: str, external: bool = False
) -> tuple[MaintenanceJob, bool]:
    """Record a queued job for (session, window) unless one is active; return (job, created).

    At most one active job per session window (a partial unique constraint backs it). The
    built-in worker task is enqueued after commit.
    """
    active = MaintenanceJob.objects.filter(
        session_id=session_id, window_id=window_id, status__in=MaintenanceJob.ACTIVE_STATUSES
    ).first()
    if active is not None:
        return active, False
    try:
        with transaction.atomic():
            job = MaintenanceJob.objects.create(
                session_id=session_id, window_id=window_id, trigger=trigger, external=external
            )
            if not external:
                from sessions_app.tasks import maintenance_job_run

                job_id = str(job.id)
                transaction.on_commit(lambda: maintenance_job_run.delay(job_id))
    except IntegrityError:
        job = MaintenanceJob.objects.get(
            session_id=session_id, window_id=window_id, status__in=MaintenanceJob.ACTIVE_STATUSES
        )
        return job, False
    return job, True


def maintenance_plan(
    *, job: MaintenanceJob, through_index: int | None = None
) -> planning.MaintenancePlan:
    """Freeze (R, W, C, B, hash) for `job` and store them on it.

    Raises `maintenance_boundary_invalid` / `maintenance_nothing_to_compress` (400).
    """
    frozen = _freeze(job.session_id, job.window_id)
    session = frozen.session
    options = _options(session)
    messages = selectors.log_window(session.id, job.window_id, frozen.covered, frozen.upper_bound)
    folds = selectors.folds_of_window_above(session.id, job.window_id, frozen.covered)
    max_tokens = session.agent_version.max_input_tokens or 8000
    try:
        plan = planning.plan_maintenance(
            window_id=job.window_id,
            frozen_revision=frozen.revision,
            window_messages=messages,
            covered_through=frozen.covered,
            previous_checkpoint=frozen.checkpoint,
            folds=folds,
            page_size=options["pageSize"],
            keep_tail_tokens=math.ceil(max_tokens * TAIL_SHARE),
            requested_through=through_index,
        )
    except ProtocolError as exc:
        _record(job, "plan_refused", code=exc.code, message=exc.message)
        job.reason = f"{exc.code}: {exc.message}"
        job.save(update_fields=["history", "reason", "updated_at"])
        raise ApplicationError.from_protocol(exc) from exc
    job.frozen_revision = plan.frozen_revision
    job.from_index = plan.covered_through + 1
    job.through_index = plan.through_index
    job.source_hash = plan.source_hash
    job.page_count = plan.page_count
    job.pages_read = 0
    job.tokens_before = sum(planning.estimate_tokens(m) for m in messages)
    _record(
        job,
        "planned",
        revision=plan.frozen_revision,
        throughIndex=plan.through_index,
        blockedBy=list(plan.blocked_by),
    )
    if plan.blocked_by:
        job.reason = f"compressed up to a blocker: {list(plan.blocked_by)}"
    job.save()
    return plan


def _reject(job: MaintenanceJob, where: str, current: int) -> ApplicationError:
    reason = (
        f"state revision moved from {job.frozen_revision} to {current} before the {where}; "
        "the job must re-plan"
    )
    _record(job, "rejected", where=where, currentRevision=current)
    job.reason = reason
    job.save(update_fields=["history", "reason", "updated_at"])
    return ApplicationError(
        STATE_CHANGED,
        reason,
        {"frozenRevision": job.frozen_revision, "currentRevision": current},
        status=409,
    )


def _covered_messages(job: MaintenanceJob, covered: int) -> list[RawMessage]:
    return selectors.log_window(job.session_id, job.window_id, covered, job.through_index)


def maintenance_page(*, job: MaintenanceJob, page: int) -> tuple[list[RawMessage], int]:
    """Page `page` (from 0) of the job's raw range, if the revision is still the frozen one."""
    if job.frozen_revision is None:
        raise ApplicationError("maintenance_not_planned", "Plan the job before reading pages.")
    current = Session.objects.values_list("state_revision", flat=True).get(pk=job.session_id)
    if current != job.frozen_revision:
        raise _reject(job, f"read of page {page}", current)
    if not 0 <= page < job.page_count:
        raise ApplicationError(
            "maintenance_page_out_of_range",
            f"page must be between 0 and {job.page_count - 1}.",
            {"pageCount": job.page_count},
            status=404,
        )
    size = _options(Session.objects.get(pk=job.session_id))["pageSize"]
    rows = selectors.log_window(
        job.session_id, job.window_id, job.from_index - 1, job.through_index
    )[page * size : (page + 1) * size]
    job.pages_read = max(job.pages_read, page + 1)
    _record(job, "page", page=page)
    job.save(update_fields=["pages_read", "history", "updated_at"])
    return rows, job.page_count


def maintenance_commit(*, job: MaintenanceJob, checkpoint: object) -> tuple[int, int]:
    """Commit the checkpoint fenced by revision and hash; return (revision, coveredThrough).

    Raises 409 `maintenance_state_changed` when the state moved, 400 `checkpoint_too_long` /
    `checkpoint_empty` for a bad text. Nothing is written on refusal.
    """
    if job.frozen_revision is None:
        raise ApplicationError("maintenance_not_planned", "Plan the job before committing.")
    if job.status not in MaintenanceJob.ACTIVE_STATUSES:
        raise ApplicationError(
            "maintenance_job_finished", f"The job is already {job.status}.", status=409
        )
    with transaction.atomic():
        session = session_lock(job.session_id)
        options = _options(session)
        try:
            text = planning.validate_checkpoint(checkpoint, options["checkpointMaxCharacters"])
        except ProtocolError as exc:
            raise ApplicationError.from_protocol(exc) from exc
        if session.state_revision != job.frozen_revision:
            current = session.state_revision
            transaction.set_rollback(True)
        else:
            current = None
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
            job.status = MaintenanceJob.Status.COMMITTED
            job.finished_at = timezone.now()
            job.tokens_after = math.ceil(len(text) / 4)
            _record(job, "committed", revision=revision, coveredThrough=job.through_index)
            job.save()
            return revision, job.through_index
    raise _reject(job, "commit", current)


def job_for(session: Session, window_id: str, job_id: Any) -> MaintenanceJob:
    try:
        wanted = UUID(str(job_id))
    except ValueError as exc:
        raise NotFound("Maintenance job") from exc
    job = MaintenanceJob.objects.filter(session=session, window_id=window_id, id=wanted).first()
    if job is None:
        raise NotFound("Maintenance job")
    return job
