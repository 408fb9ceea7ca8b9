"""Open a gateway request (contract §14): everything before its first model call, in ONE commit.

The session is found (or started) and locked; a live driver holding it answers 409
`session_busy`, or, when that driver serves a request identical to this one, `InFlight` (the
edge waits for it and opens again, to get its reply as a replay). The request's messages are
reconciled with the session's transcript: a retry of the last reply is answered from storage
(`Finished`); a request that does not continue the session is refused; otherwise the client's
state, the request's input, its run (claimed with a short lease), its `running` record and
the first turn's view are written, and commit together (`Opened`).

Exactly once: the session row lock serialises requests of a session, and the current run is
read after the lock is taken (a new statement, so it sees what the request before this one
committed; a run read in the locking statement itself would be the row as it was when that
statement began, under PostgreSQL's READ COMMITTED rules, which is how two identical
requests once both ran the turn).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from contextproto import telemetry
from contextproto.errors import IDEMPOTENCY_KEY_REUSED, SESSION_BUSY, ApplicationError
from contextproto.protocol import catalog
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.gateway.reconcile import Proceed, Refusal, Replay, reconcile
from contextproto.protocol.gateway.transcript import Item, open_text
from contextproto.protocol.messages import KIND_TOOL_CALL, ROLE_ASSISTANT, RawMessage
from contextproto.telemetry import SessionFacts
from sessions_app.gateway.checks import (
    IDEMPOTENCY_WINDOW,
    RETRY_AFTER_SECONDS,
    busy,
    client_tools,
    runnable_check,
    system_check,
)
from sessions_app.gateway.events import Finished
from sessions_app.gateway.identity import locate
from sessions_app.gateway.incoming import Incoming
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.reply import rebuilt_reply, stored_reply
from sessions_app.gateway.upstream import upstream_error, upstream_for
from sessions_app.gateway.writes import client_state_write, messages_write, run_for
from sessions_app.models import GatewayExchange, ProjectionSnapshot, Run, Session
from sessions_app.nodes import require_protocol
from sessions_app.providers import ModelProvider, ProviderError
from sessions_app.reads import trace_facts
from sessions_app.reads.transcript import transcript_tail
from sessions_app.services.projection import projection_build


@dataclass(frozen=True)
class Opened:
    """A request whose input is written and whose first view is built: its turns run next.

    `session` was locked and read (with its version) once, when the request opened;
    `open_answers` are answers an earlier attempt of this reply wrote before it failed (the
    reply goes on from them) and `opening_text` their text; `recover`: whether a protocol
    call of those answers may still wait for its dispatch.
    """

    incoming: Incoming
    session: Session
    created_key: str | None
    provider: ModelProvider
    run: Run
    first_snapshot: ProjectionSnapshot
    open_answers: tuple[RawMessage, ...]
    opening_text: str
    recover: bool
    reply_id: str
    created: int
    # What every span of the request's trace says of the session (None: tracing is off).
    facts: SessionFacts | None = None


@dataclass(frozen=True)
class InFlight:
    """A request identical to this one is being served on the session: its reply will answer
    this one too (the edge waits for its record to end, then opens again)."""

    session_id: UUID
    exchange_id: UUID


def _busy_error() -> ApplicationError:
    return ApplicationError(
        SESSION_BUSY,
        "Another request (or a run) is working on this session; retry when it has answered.",
        {"retryAfterSeconds": RETRY_AFTER_SECONDS},
    )


def open_request(incoming: Incoming, record: ExchangeRecord) -> Opened | Finished | InFlight:
    """Open `incoming` (module docstring). Raises ApplicationError for a request that cannot
    be served; nothing it would have written is left then (its refusal is recorded by the
    caller). `record` learns the session as soon as it is known."""
    tools = client_tools(incoming.request)
    named = _idempotent(incoming, record)
    if isinstance(named, Finished):
        return named
    try:
        with transaction.atomic():
            return _open_locked(incoming, record, tools, named)
    except IntegrityError as exc:
        # Another request with this Idempotency-Key took it first; it is still running.
        record.session_id = None if named is None else record.session_id
        raise ApplicationError(
            SESSION_BUSY,
            "A request with this Idempotency-Key is being served; retry shortly for its reply.",
            {"retryAfterSeconds": RETRY_AFTER_SECONDS},
        ) from exc


def _idempotent(incoming: Incoming, record: ExchangeRecord) -> Finished | str | None:
    """The stored reply an Idempotency-Key names; else the session a failed request with that
    key started (its retry goes on there), if any."""
    key = incoming.idempotency_key
    if not key:
        return None
    found = (
        GatewayExchange.objects.filter(application=incoming.application, idempotency_key=key)
        .select_related("session")
        .first()
    )
    if found is None:
        return None
    if found.created_at < timezone.now() - IDEMPOTENCY_WINDOW:
        GatewayExchange.objects.filter(pk=found.pk).update(idempotency_key=None)
        return None
    if found.status == GatewayExchange.Status.RUNNING and _abandoned(found):
        # Its process died (its run's lease ran out): the key may be used again.
        GatewayExchange.objects.filter(pk=found.pk).update(
            idempotency_key=None, status=GatewayExchange.Status.FAILED
        )
        found.status = GatewayExchange.Status.FAILED
    if found.status == GatewayExchange.Status.FAILED:
        GatewayExchange.objects.filter(pk=found.pk).update(idempotency_key=None)
        same = found.request_hash == incoming.body_hash
        if same and incoming.session_key_of is None and found.session_id is not None:
            return incoming.named_session or str(found.session_id)
        return None
    record.session_id = found.session_id
    if found.request_hash != incoming.body_hash:
        raise ApplicationError(
            IDEMPOTENCY_KEY_REUSED,
            "This Idempotency-Key was used for a request with another body in the last "
            "24 hours; use a new key for a new request.",
            {"idempotencyKey": key},
        )
    if found.status != GatewayExchange.Status.REPLIED:
        raise ApplicationError(
            SESSION_BUSY,
            "The request with this Idempotency-Key is still being served; retry shortly for "
            "its reply.",
            {"retryAfterSeconds": RETRY_AFTER_SECONDS},
        )
    finished = stored_reply(found, incoming.wire, incoming.request)
    record.replay(finished, request_hash=incoming.body_hash, idempotency_key=None)
    return finished


def _abandoned(exchange: GatewayExchange) -> bool:
    """A request still marked running whose session no live request holds."""
    if exchange.session_id is None:
        return True
    run = Run.objects.filter(session_id=exchange.session_id).order_by("-created_at").first()
    return not busy(run)


def _open_locked(
    incoming: Incoming, record: ExchangeRecord, tools: list[ClientToolWire], named: str | None
) -> Opened | Finished | InFlight:
    located = locate(incoming, record, named)
    if located.replay is not None:
        return located.replay
    session, created_key = located.session, located.created_key
    if created_key is None:
        record.session_id = session.id
    version = session.agent_version
    runnable_check(version)
    system_check(version, incoming.request.system)
    require_protocol(version.context_protocol_id, version.context_protocol_version)
    try:
        provider = upstream_for(version, incoming.upstream_key)
    except ProviderError as exc:
        raise upstream_error(exc, version, incoming.upstream_key) from exc
    # Read after the lock (see the module docstring): the run as the last request left it.
    current = (
        Run.objects.filter(pk=session.current_run_id).first()
        if session.current_run_id is not None
        else None
    )
    if busy(current):
        in_flight = (
            GatewayExchange.objects.filter(
                session=session,
                status=GatewayExchange.Status.RUNNING,
                request_hash=incoming.body_hash,
            )
            .values_list("id", flat=True)
            .first()
        )
        if in_flight is not None:
            return InFlight(session_id=session.id, exchange_id=in_flight)
        raise _busy_error()
    request = incoming.request
    # What the client sent, after what its reference (a previous response, a compaction
    # item) stands for.
    sent = request.items[request.compaction.at :] if request.compaction else request.items
    client_items = (*located.implied, *sent)
    wanted = len(client_items)
    tail = transcript_tail(session.id, session.last_index, wanted=wanted + 1)
    last_reply = _last_reply(tail.transcript.items)
    if last_reply is not None and not tail.complete:
        # A retry is recognised against the transcript before the last reply: as many
        # items of it as the request has.
        tail = transcript_tail(
            session.id, session.last_index, wanted=wanted + 1, before_index=last_reply.position
        )
    items = tail.transcript.items
    before_reply = [i for i in items if i.position < last_reply.position] if last_reply else None
    outcome = reconcile(
        client_items,
        items,
        before_reply=before_reply,
        log_empty=session.last_index == 0,
        pending_calls=tail.transcript.pending_calls,
    )
    if isinstance(outcome, Replay) and last_reply is not None:
        return _replay_of(incoming, record, session, last_reply)
    if isinstance(outcome, Refusal):
        details: dict[str, Any] = {"index": outcome.index, "reason": outcome.reason}
        if outcome.tool_call_id is not None:
            details["toolCallId"] = outcome.tool_call_id
        # Computed: the reconciliation's codes are GATEWAY_* constants (registered).
        raise ApplicationError(outcome.code, outcome.message, details)
    assert isinstance(outcome, Proceed)
    client_state_write(session, request.system, tools)
    run = run_for(
        session,
        current,
        outcome,
        client_api=incoming.wire.format,
        client_agent=incoming.user_agent,
    )
    messages_write(session, run, outcome)
    open_answers: tuple[RawMessage, ...] = () if outcome.new else tail.transcript.open_answers
    session.via_gateway = True
    session.current_run = run
    session.save(update_fields=["next_message_index", "current_run", "via_gateway"])
    record.session_id = session.id
    record.opened(
        request_hash=incoming.body_hash,
        idempotency_key=incoming.idempotency_key,
        continues=request.previous_response_id or "",
        stored=request.store,
    )
    # The first turn's view, in this commit (building it cannot fail for anything the
    # model says).
    first = projection_build(
        session_id=session.id,
        provider=provider.wire_format,
        run_id=run.id.hex,
        use_cache=False,
        parameters=request.parameters,
        locked=session,
    )
    return Opened(
        incoming=incoming,
        session=session,
        created_key=created_key,
        provider=provider,
        run=run,
        first_snapshot=first,
        open_answers=open_answers,
        opening_text=open_text(open_answers),
        # An answer whose protocol call a dead driver never dispatched is among the answers
        # after the last client message; only then must the runtime look for one.
        recover=any(
            m.kind == KIND_TOOL_CALL and m.tool_name in catalog.PROTOCOL_TOOL_NAMES
            for m in open_answers
        ),
        reply_id=incoming.wire.reply_id_prefix + uuid.uuid4().hex,
        created=int(time.time()),
        facts=trace_facts.session_facts(session) if telemetry.enabled() else None,
    )


def _replay_of(
    incoming: Incoming, record: ExchangeRecord, session: Session, reply: Item
) -> Finished:
    """The session's last reply again (a retry): the body its request sent when it is
    stored, else the reply rendered anew from the log."""
    stored = (
        GatewayExchange.objects.filter(
            session=session,
            status=GatewayExchange.Status.REPLIED,
            replayed=False,
            reply_start_index=reply.position,
        )
        .order_by("-created_at")
        .first()
    )
    if stored is not None:
        finished = stored_reply(stored, incoming.wire, incoming.request)
    else:
        finished = rebuilt_reply(
            reply,
            incoming.wire,
            incoming.request,
            reply_id=incoming.wire.reply_id_prefix + uuid.uuid4().hex,
            created=int(time.time()),
            model=session.agent_version.model_name,
        )
    record.replay(
        finished, request_hash=incoming.body_hash, idempotency_key=incoming.idempotency_key
    )
    return finished


def _last_reply(items: Sequence[Item]) -> Item | None:
    """The transcript's last reply, when nothing but the client's messages follows it."""
    return next((i for i in reversed(items) if i.role == ROLE_ASSISTANT), None)
