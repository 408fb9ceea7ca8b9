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

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from contextproto.errors import ApplicationError, NotFound
from contextproto.protocol import catalog
from contextproto.protocol import errors as planning_codes
from contextproto.protocol import maintenance as planning
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key
from sessions_app import selectors
from sessions_app.models import MaintenanceJob, Session
from sessions_app.services.state import kv_apply_locked, session_lock

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
            keep_tail_tokens=math.ceil(max_tokens * settings.MAINTENANCE_TAIL_SHARE),
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


# ---------------------------------------------------------------- the built-in worker


@dataclass(frozen=True)
class ExecuteOutcome:
    status: str
    retry_in: int | None = None
    reason: str = ""


class JobFailed(Exception):
    """The job cannot succeed (bad maintainer answer, no maintainer, provider refusal)."""


def _claim(job_id: UUID | str) -> MaintenanceJob | None:
    """Take the job if it is queued, or running with an expired lease; count the attempt."""
    from django.conf import settings

    now = timezone.now()
    with transaction.atomic():
        job = MaintenanceJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status not in MaintenanceJob.ACTIVE_STATUSES:
            return None
        if (
            job.status == MaintenanceJob.Status.RUNNING
            and job.lease_until
            and job.lease_until > now
        ):
            return None  # another worker holds it; a duplicate delivery does nothing
        if job.attempts >= settings.MAINTENANCE_MAX_ATTEMPTS:
            job.status = MaintenanceJob.Status.FAILED
            job.finished_at = now
            job.reason = f"gave up after {job.attempts} attempts; last: {job.reason}"
            _record(job, "failed", reason="attempts exhausted")
            job.save()
            return None
        job.attempts += 1
        job.status = MaintenanceJob.Status.RUNNING
        job.lease_until = now + timezone.timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS)
        _record(job, "claimed", attempt=job.attempts)
        job.save()
        return job


def _requeue(job: MaintenanceJob, reason: str) -> ExecuteOutcome:
    from django.conf import settings

    delay = min(settings.MAINTENANCE_RETRY_BASE_SECONDS * 2 ** (job.attempts - 1), 300)
    job.status = MaintenanceJob.Status.QUEUED
    job.lease_until = None
    job.not_before = timezone.now() + timezone.timedelta(seconds=delay)
    job.reason = reason
    _record(job, "requeued", reason=reason, retryIn=delay)
    job.save()
    return ExecuteOutcome(status="queued", retry_in=delay, reason=reason)


def _finish(job: MaintenanceJob, status: str, reason: str) -> ExecuteOutcome:
    job.status = status
    job.finished_at = timezone.now()
    job.lease_until = None
    job.reason = reason
    _record(job, status, reason=reason)
    job.save()
    return ExecuteOutcome(status=status, reason=reason)


def maintenance_execute(*, job_id: UUID | str) -> ExecuteOutcome:
    """Run one attempt of a built-in job: plan, read pages, summarise, commit.

    Safe to call again after a crash at any point: only the fenced commit writes state, and
    a job that is already finished (or leased by a live worker) is left alone.
    """
    from sessions_app.providers import ProviderError

    job = _claim(job_id)
    if job is None:
        return ExecuteOutcome(status="skipped")
    try:
        plan = maintenance_plan(job=job)
    except ApplicationError as exc:
        if exc.code == planning_codes.MAINTENANCE_NOTHING_TO_COMPRESS:
            return _finish(job, MaintenanceJob.Status.REJECTED, exc.message)
        return _requeue(job, f"{exc.code}: {exc.message}")
    try:
        pages = [maintenance_page(job=job, page=n)[0] for n in range(plan.page_count)]
        text = _summarise(job, plan, pages)
        maintenance_commit(job=job, checkpoint=text)
    except ApplicationError as exc:
        job.refresh_from_db()
        if exc.code == STATE_CHANGED:
            return _requeue(job, exc.message)
        return _finish(job, MaintenanceJob.Status.FAILED, f"{exc.code}: {exc.message}")
    except JobFailed as exc:
        job.refresh_from_db()
        return _finish(job, MaintenanceJob.Status.FAILED, str(exc))
    except ProviderError as exc:
        job.refresh_from_db()
        if exc.retryable:
            return _requeue(job, f"{exc.code}: {exc}")
        return _finish(job, MaintenanceJob.Status.FAILED, f"{exc.code}: {exc}")
    return ExecuteOutcome(status="committed")


def _maintainer_version(session: Session):
    from agents.models import AgentVersion

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
    if wire_format == "anthropic-messages":
        system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
        rest = [m for m in prompt if m["role"] != "system"]
        return {"system": system, "messages": rest}
    return {"messages": prompt}


def _summarise(
    job: MaintenanceJob, plan: planning.MaintenancePlan, pages: list[list[RawMessage]]
) -> str:
    """Ask the maintainer model for the checkpoint; one shorter retry if it is too long."""
    from sessions_app.providers import provider_for

    session = Session.objects.select_related("agent_version").get(pk=job.session_id)
    maintainer = _maintainer_version(session)
    try:
        protocol = catalog.get_version(
            session.agent_version.context_protocol_id,
            session.agent_version.context_protocol_version,
        )
    except ProtocolError as exc:
        raise JobFailed(f"protocol_unknown_on_worker: {exc.message}") from exc
    limit = {**protocol.defaults, **(session.agent_version.options or {})}[
        "checkpointMaxCharacters"
    ]
    goal = selectors.kv_values(session.id, [f"window/{job.window_id}"]).get(
        f"window/{job.window_id}", {}
    )
    provider = provider_for(maintainer.model_provider, maintainer.model_config or {})
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
        job.save(update_fields=["summarizer_usage", "updated_at"])
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
    """Re-enqueue jobs stuck between commit and publish, or held by a dead worker."""
    from django.conf import settings

    from sessions_app.tasks import maintenance_job_run

    now = timezone.now()
    stale_queued = now - timezone.timedelta(seconds=settings.MAINTENANCE_SWEEP_SECONDS)
    jobs = MaintenanceJob.objects.filter(external=False).filter(
        Q(status=MaintenanceJob.Status.QUEUED, updated_at__lt=stale_queued)
        | Q(status=MaintenanceJob.Status.QUEUED, not_before__lte=now)
        | Q(status=MaintenanceJob.Status.RUNNING, lease_until__lt=now)
    )[:500]
    ids = [str(job.id) for job in jobs]
    for job_id in ids:
        maintenance_job_run.delay(job_id)
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
