"""Runs: a new user input starts a run (SPEC §9 `POST sessions/{id}/inputs/`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from sessions_app.models import Message, Run
from sessions_app.services.messages import message_append_locked
from sessions_app.services.state import session_lock


def run_start(*, session_id: UUID | str, content: Any) -> tuple[Run, Message]:
    """Start a new run with `content` as its input message, in the active window.

    For an `external` model the previous run is closed: the host drives the session and a
    new input always begins the next unit of work. For a model the service runs itself, an
    input while a run is active is refused with `session_busy` (409); otherwise the run is
    queued for the runtime after commit (docs/decisions.md).
    """
    from sessions_app.services import runtime

    with transaction.atomic():
        session = session_lock(session_id)
        provider = session.agent_version.model_provider
        if provider in runtime.RUNNABLE_PROVIDERS:
            runtime.session_busy_check(session)
        if session.current_run_id is not None:
            Run.objects.filter(
                pk=session.current_run_id,
                status__in=[Run.Status.QUEUED, Run.Status.EXTERNAL],
            ).update(status=Run.Status.COMPLETED, finished_at=timezone.now())
        run = Run.objects.create(
            session=session,
            status=Run.Status.EXTERNAL if provider == "external" else Run.Status.QUEUED,
        )
        session.current_run = run
        session.save(update_fields=["current_run"])
        message = message_append_locked(
            session, role="user", kind="input", content=content, run=run, input_run=run.id.hex
        )
        if provider in runtime.RUNNABLE_PROVIDERS:
            runtime.run_enqueue(run)
        return run, message
