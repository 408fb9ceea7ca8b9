"""What a reconciled gateway request writes (contract §14): client state, run, messages.

The client's state is its system text and tools; the run is the one the request drives;
the messages are its new ones (user input, tool results, an imported history).

The caller holds the session lock (`open.open_request`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.utils import timezone

from contextproto.errors import GATEWAY_TRANSCRIPT_MISMATCH, ApplicationError
from contextproto.protocol import catalog, client_state
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.gateway.reconcile import Proceed
from contextproto.protocol.gateway.transcript import Item
from contextproto.protocol.messages import (
    KIND_INPUT,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_USER,
)
from sessions_app.models import Run, Session
from sessions_app.reads import hot_sql, raw_log
from sessions_app.services.messages import NewMessage, content_check, message_write_locked
from sessions_app.store.state import KV_DELETE, kv_apply_locked


def client_state_write(
    session: Session,
    system: str,
    tools: list[ClientToolWire],
    *,
    known: Mapping[str, Any] | None = None,
) -> None:
    """Commit the request's system text and tools when they differ (one revision). `known`:
    the client's state as this request already read it under the session's lock."""
    kv = (
        known
        if known is not None
        else client_state.read_client_kv(partial(hot_sql.kv_values, session.id))
    )
    upserts, removals = client_state.client_state_writes(kv, system, tools)
    writes: dict[str, Any] = {**upserts, **dict.fromkeys(removals, KV_DELETE)}
    if writes:
        kv_apply_locked(session, writes)


def run_for(
    session: Session, current: Run | None, outcome: Proceed, *, client_api: str, client_agent: str
) -> Run:
    """The run this request drives, claimed for it (a short lease, renewed while it waits
    on the model): a new run for new user input, else the session's `current` run (which
    a client's tool result answers, or whose turn failed and runs again). The run says which
    client API and client (User-Agent) drive it."""
    answers_current = any(i.role == ROLE_TOOL for i in outcome.new) or not outcome.new
    if current is not None and answers_current and not outcome.importing:
        run = current
    else:
        if current is not None and current.status in (
            Run.Status.QUEUED,
            Run.Status.RUNNING,
            Run.Status.EXTERNAL,
            Run.Status.WAITING_FOR_HOST_TOOL,
        ):
            Run.objects.filter(pk=current.pk).update(
                status=Run.Status.COMPLETED, finished_at=timezone.now(), lease_until=None
            )
        run = Run(session=session)
    run.status = Run.Status.RUNNING
    run.via_gateway = True
    run.client_api = client_api
    run.client_agent = client_agent
    run.error = None
    run.finished_at = None
    run.lease_until = timezone.now() + timedelta(seconds=settings.GATEWAY_LEASE_SECONDS)
    run.save()
    return run


def messages_write(session: Session, run: Run, outcome: Proceed) -> None:
    """Write the request's new messages: user input, tool results, an imported history."""
    new = list(outcome.new)
    history: list[Item] = []
    if outcome.importing:
        last_reply = max((n for n, i in enumerate(new) if i.role == ROLE_ASSISTANT), default=-1)
        history, new = new[: last_reply + 1], new[last_reply + 1 :]
    calls: dict[str, tuple[str, str]] = {}
    if history:
        earlier = Run.objects.create(
            session=session,
            status=Run.Status.COMPLETED,
            via_gateway=True,
            finished_at=timezone.now(),
        )
        for item in history:
            _write_item(session, earlier, item, calls)
    for item in new:
        _write_item(session, run, item, calls)


def _write_item(session: Session, run: Run, item: Item, calls: dict[str, tuple[str, str]]) -> None:
    where = f"messages[{item.position}]"
    if item.role == ROLE_USER:
        _content_ok(item.content, where)
        message_write_locked(
            session,
            NewMessage(
                role=ROLE_USER,
                kind=KIND_INPUT,
                content=item.content,
                run_id=run.id,
                input_run=run.id.hex,
            ),
            save_session=False,
        )
    elif item.role == ROLE_ASSISTANT:  # an imported answer
        if not item.calls:
            message_write_locked(
                session,
                NewMessage(role=ROLE_ASSISTANT, kind=KIND_TEXT, content=item.text, run_id=run.id),
                save_session=False,
            )
        for n, call in enumerate(item.calls):
            if call.name in catalog.PROTOCOL_TOOL_NAMES:
                raise ApplicationError(
                    GATEWAY_TRANSCRIPT_MISMATCH,
                    f"{where} calls {call.name}, a context protocol tool: an imported "
                    "conversation holds only your own tools' calls.",
                    {"index": item.position, "reason": "a protocol tool call"},
                )
            row = message_write_locked(
                session,
                NewMessage(
                    role=ROLE_ASSISTANT,
                    kind=KIND_TOOL_CALL,
                    content=item.text if n == 0 else "",
                    tool_call_id=call.id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    run_id=run.id,
                ),
                save_session=False,
            )
            calls[call.id] = (call.name, row.window_id)
    else:
        _content_ok(item.content, where)
        call_id = str(item.call_id)
        if call_id not in calls:
            pending, _answer = raw_log.call_and_answer(session.id, call_id)
            assert pending is not None  # reconciliation took only pending calls' results
            calls[call_id] = (str(pending.tool_name), pending.window_id)
        name, window = calls[call_id]
        message_write_locked(
            session,
            NewMessage(
                role=ROLE_TOOL,
                kind=KIND_TOOL_RESULT,
                content=item.content,
                window_id=window,
                tool_call_id=call_id,
                tool_name=name,
                is_error=item.is_error,
                run_id=run.id,
            ),
            save_session=False,
        )


def _content_ok(content: Any, where: str) -> None:
    try:
        content_check(content)
    except ApplicationError as exc:
        raise ApplicationError(exc.code, f"{where}: {exc.message}", {"field": where}) from exc
