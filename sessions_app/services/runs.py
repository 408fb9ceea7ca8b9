"""Runs: a new user input starts a run (contract §12 `POST sessions/{id}/inputs/`).

The run's bookkeeping lives here, below the runtime that advances it: the busy check, and
queueing the runtime after commit (through `hooks.run_advance_enqueue`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from contextproto.errors import SESSION_BUSY, ApplicationError
from contextproto.protocol.messages import KIND_INPUT, ROLE_USER, RawMessage
from sessions_app.models import Message, Run, Session
from sessions_app.providers.base import RUNNABLE_PROVIDERS
from sessions_app.services import client_writes
from sessions_app.services.messages import NewMessage, content_check, message_write_locked
from sessions_app.store import hooks
from sessions_app.store.state import session_lock

ACTIVE_RUN_STATUSES = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_FOR_HOST_TOOL)

# Set by a caller that advances its runs itself (the demo, the experiment harness): a
# context variable, not a settings override, so it stays in this thread/task and touches
# no global configuration.
_DRIVEN_HERE: ContextVar[bool] = ContextVar("runs_driven_here", default=False)


@contextmanager
def runs_driven_here() -> Iterator[None]:
    """Inside this block runs are advanced by the caller, never enqueued for a worker."""
    token = _DRIVEN_HERE.set(True)
    try:
        yield
    finally:
        _DRIVEN_HERE.reset(token)


def autostart() -> bool:
    """Whether a queued run goes to a worker: RUNTIME_AUTOSTART, unless the caller drives it."""
    return bool(settings.RUNTIME_AUTOSTART) and not _DRIVEN_HERE.get()


def run_start(*, session_id: UUID | str, content: Any) -> tuple[Run, Message]:
    """Start a new run with `content` as its input message, in the active window.

    For an `external` model the previous run is closed: the host drives the session and a
    new input always begins the next unit of work. For a model the service runs itself, an
    input while a run is active is refused with `session_busy` (409); otherwise the run is
    queued for the runtime after commit (docs/decisions.md).
    """
    with transaction.atomic():
        session = session_lock(session_id)
        provider = session.agent_version.model_provider
        if provider in RUNNABLE_PROVIDERS:
            session_busy_check(session)
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
        message = message_write_locked(
            session,
            NewMessage(
                role=ROLE_USER,
                kind=KIND_INPUT,
                content=content,
                run_id=run.id,
                input_run=run.id.hex,
            ),
        )
        if provider in RUNNABLE_PROVIDERS:
            run_enqueue(run)
        return run, message


def run_start_once(
    *, session_id: UUID | str, content: Any, client_message_id: str | None
) -> tuple[RawMessage, bool]:
    """Start a run with `content` once per client message id; return (input, replayed).

    The content is checked (400 `content_invalid`) before the client message id is looked
    up, so a bad body is refused, never replayed or reported as a reused id; then
    `client_writes.write_once` replays a retry or runs `run_start`.
    """
    content_check(content)
    return client_writes.write_once(
        session_id=session_id,
        client_message_id=client_message_id,
        request={"kind": "input", "content": content},
        write=lambda: run_start(session_id=session_id, content=content)[1],
    )


def run_enqueue(run: Run) -> None:
    """Advance `run` in a worker once the current transaction commits."""
    if not autostart():
        return  # the caller (the demo driver, a test) advances runs itself
    run_id = str(run.id)
    transaction.on_commit(lambda: hooks.run_advance_enqueue(run_id))


def session_busy_check(session: Session) -> None:
    """Refuse new input while the built-in runtime works on the session (409 session_busy)."""
    run = session.current_run
    if run is not None and run.status in ACTIVE_RUN_STATUSES:
        raise ApplicationError(
            SESSION_BUSY,
            f"Run {run.id.hex} is {run.status}; send the next input when it has finished "
            "(or write the pending host tool result first).",
            {"runId": run.id.hex, "runStatus": run.status},
        )
