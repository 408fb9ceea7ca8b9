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
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import AgentVersion
from contextproto import telemetry
from contextproto.errors import (
    GATEWAY_NOTHING_NEW,
    IDEMPOTENCY_KEY_REUSED,
    SESSION_BUSY,
    ApplicationError,
)
from contextproto.protocol import catalog, client_state
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.gateway.compaction import sign_compaction
from contextproto.protocol.gateway.reconcile import Outcome, Proceed, Refusal, Replay, reconcile
from contextproto.protocol.gateway.side import is_side_request
from contextproto.protocol.gateway.transcript import Item, open_text
from contextproto.protocol.gateway.wire import FINISH_STOP, Reply
from contextproto.protocol.messages import KIND_TOOL_CALL, ROLE_ASSISTANT, RawMessage
from contextproto.protocol.parameters import Parameters, unused_fields
from contextproto.telemetry import SessionFacts
from sessions_app.gateway.checks import (
    IDEMPOTENCY_WINDOW,
    RETRY_AFTER_SECONDS,
    busy,
    client_tools,
    runnable_check,
    system_check,
    within_model_limit,
)
from sessions_app.gateway.events import Finished
from sessions_app.gateway.identity import Located, SideOnly, compaction_key, locate
from sessions_app.gateway.incoming import Incoming
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.reply import rebuilt_reply, render, reply_headers, stored_reply
from sessions_app.gateway.side import Side, side_of
from sessions_app.gateway.upstream import upstream_error, upstream_for
from sessions_app.gateway.writes import client_state_write, messages_write, run_for
from sessions_app.models import GatewayExchange, ProjectionSnapshot, Run, Session
from sessions_app.nodes import require_protocol
from sessions_app.providers import ModelProvider, ProviderError
from sessions_app.reads import hot_sql, trace_facts
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
    # The forwarded fields as the upstream gets them: the client's, an output limit above the
    # model's lowered (`adjusted` says so); `unused` what the upstream's API cannot carry.
    parameters: Parameters = field(default_factory=Parameters)
    adjusted: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()


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


def open_request(incoming: Incoming, record: ExchangeRecord) -> Opened | Finished | InFlight | Side:
    """Open `incoming` (module docstring). Raises ApplicationError for a request that cannot
    be served; nothing it would have written is left then (its refusal is recorded by the
    caller). `record` learns the session as soon as it is known."""
    tools = client_tools(incoming.request)
    named = _idempotent(incoming, record)
    if isinstance(named, Finished):
        return named
    try:
        with transaction.atomic():
            opened = _open_locked(incoming, record, tools, named)
            if isinstance(opened, Compacted):
                return compaction_reply(incoming, record, opened)
            return opened
    except IntegrityError as exc:
        # Another request with this Idempotency-Key took it first; it is still running.
        record.session_id = None if named is None else record.session_id
        raise ApplicationError(
            SESSION_BUSY,
            "A request with this Idempotency-Key is being served; retry shortly for its reply.",
            {"retryAfterSeconds": RETRY_AFTER_SECONDS},
        ) from exc


class _DryRun(Exception):
    """Raised inside a counting open to roll everything it wrote back."""

    def __init__(self, opened: Opened) -> None:
        super().__init__("dry run")
        self.opened = opened


@dataclass(frozen=True)
class Counted:
    """The view a request would make the model see now: its provider request, the provider
    that would get it and the version's model (contract §19 count_tokens, §21 input_tokens)."""

    request: dict[str, Any]
    provider: ModelProvider
    model: str
    version: AgentVersion
    session_id: UUID | None


def count_request(incoming: Incoming, record: ExchangeRecord) -> Counted:
    """Open `incoming` as its turn would, build the view it would send, and write nothing:
    the same refusals as the turn, then everything rolled back."""
    tools = client_tools(incoming.request)
    try:
        with transaction.atomic():
            opened = _open_locked(incoming, record, tools, None, counting=True)
            if not isinstance(opened, Opened):  # a replay, a compaction, a side request
                raise _nothing_to_count()
            raise _DryRun(opened)
    except _DryRun as dry:
        opened = dry.opened
    record.exchange_id = None  # its row was rolled back with the rest
    existed = opened.created_key is None
    return Counted(
        request=dict(opened.first_snapshot.request),
        provider=opened.provider,
        model=opened.session.agent_version.model_name,
        version=opened.session.agent_version,
        session_id=opened.session.id if existed else None,
    )


def _nothing_to_count() -> ApplicationError:
    return ApplicationError(
        GATEWAY_NOTHING_NEW,
        "The request repeats the session's last exchange: there is no new view to count. "
        "Append the next message.",
        {},
    )


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


def _side_only(incoming: Incoming, version: AgentVersion) -> Side:
    """A side request before its conversation has a session, answered by `version`."""
    runnable_check(version)
    try:
        provider = upstream_for(version, incoming.upstream_key)
    except ProviderError as exc:
        raise upstream_error(exc, version, incoming.upstream_key) from exc
    return side_of(incoming, None, provider, version)


def _open_locked(
    incoming: Incoming,
    record: ExchangeRecord,
    tools: list[ClientToolWire],
    named: str | None,
    *,
    counting: bool = False,
    compacting: bool = False,
) -> Opened | Finished | InFlight | Compacted | Side:
    located = locate(incoming, record, named, side_allowed=not (counting or compacting))
    if isinstance(located, SideOnly):
        return _side_only(incoming, located.version)
    if located.replay is not None:
        return located.replay
    session, created_key = located.session, located.created_key
    record.warning = located.warning
    if created_key is None:
        record.session_id = session.id
    version = session.agent_version
    runnable_check(version)
    require_protocol(version.context_protocol_id, version.context_protocol_version)
    try:
        provider = upstream_for(version, incoming.upstream_key)
    except ProviderError as exc:
        raise upstream_error(exc, version, incoming.upstream_key) from exc
    if located.side:
        return side_of(incoming, session, provider, version)
    client_kv = None  # the client's state as read under the session's lock, once
    if created_key is None and not counting and not compacting:
        client_kv = kv = client_state.read_client_kv(partial(hot_sql.kv_values, session.id))
        if is_side_request(incoming.request, kv):
            # A client's background request: answered apart, whatever the conversation's
            # own request in flight is doing (it takes no run).
            return side_of(incoming, session, provider, version)
    # (After: a side request's system text never meets the version's prompt.)
    system_check(version, incoming.request.system)
    # Read after the lock (see the module docstring): the run as the last request left it.
    current = (
        Run.objects.filter(pk=session.current_run_id).first()
        if session.current_run_id is not None
        else None
    )
    if busy(current) and not counting:
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
    compacting = compacting or incoming.request.compaction_trigger
    if compacting:
        return _compacted(incoming, record, located, current, outcome, tools, client_items)
    if isinstance(outcome, Replay) and last_reply is not None:
        if counting:
            raise _nothing_to_count()
        return _replay_of(incoming, record, session, last_reply)
    if isinstance(outcome, Refusal):
        details: dict[str, Any] = {"index": outcome.index, "reason": outcome.reason}
        if outcome.tool_call_id is not None:
            details["toolCallId"] = outcome.tool_call_id
        # Computed: the reconciliation's codes are GATEWAY_* constants (registered).
        raise ApplicationError(outcome.code, outcome.message, details)
    assert isinstance(outcome, Proceed)
    client_state_write(session, request.system, tools, known=client_kv)
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
    parameters, adjusted = within_model_limit(request.parameters, version, incoming.wire)
    # The first turn's view, in this commit (building it cannot fail for anything the
    # model says).
    first = projection_build(
        session_id=session.id,
        provider=provider.wire_format,
        run_id=run.id.hex,
        use_cache=False,
        parameters=parameters,
        locked=session,
        body_later=True,  # its body goes in the turn's second commit
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
        parameters=parameters,
        adjusted=adjusted,
        unused=unused_fields(parameters, provider.wire_format),
    )


@dataclass(frozen=True)
class Compacted:
    """A request answered with a compaction item (contract §21): its session (its key when
    the request started it) and the signed token standing for the log through its end."""

    session: Session
    created_key: str | None
    token: str
    through_index: int


def _compacted(
    incoming: Incoming,
    record: ExchangeRecord,
    located: Located,
    current: Run | None,
    outcome: Outcome,
    tools: list[ClientToolWire],
    client_items: Sequence[Item],
) -> Compacted:
    """Write what the request brings that the session lacks (no turn runs: the session's own
    maintenance keeps the model's view in budget), and sign the point its log has reached."""
    session = located.session
    new: tuple[Item, ...] = ()
    importing = False
    if isinstance(outcome, Proceed):
        new, importing = outcome.new, outcome.importing
    elif isinstance(outcome, Refusal):
        if outcome.code != GATEWAY_NOTHING_NEW:
            details: dict[str, Any] = {"index": outcome.index, "reason": outcome.reason}
            # Computed: the reconciliation's codes are GATEWAY_* constants (registered).
            raise ApplicationError(outcome.code, outcome.message, details)
        if session.last_index == 0:
            # A conversation brought in to be compacted may end with the model's answer.
            new, importing = tuple(client_items), True
    client_state_write(session, incoming.request.system, tools)
    if new:
        proceed = Proceed(new=new, importing=importing)
        run = run_for(
            session,
            current,
            proceed,
            client_api=incoming.wire.format,
            client_agent=incoming.user_agent,
        )
        messages_write(session, run, proceed)
        # No turn runs now: the run waits, unclaimed, for the request that continues it.
        run.status, run.lease_until = Run.Status.QUEUED, None
        run.save(update_fields=["status", "lease_until"])
        session.current_run = run
    session.via_gateway = True
    session.save(update_fields=["next_message_index", "current_run", "via_gateway"])
    record.session_id = session.id
    token = sign_compaction(
        compaction_key(), str(incoming.application.pk), str(session.id), session.last_index
    )
    return Compacted(
        session=session,
        created_key=located.created_key,
        token=token,
        through_index=session.last_index,
    )


def compact_request(incoming: Incoming, record: ExchangeRecord) -> Compacted:
    """`POST …/responses/compact` (contract §21): the request's session, what it brings
    written, and a compaction item for the log through its end, without a model call."""
    tools = client_tools(incoming.request)
    with transaction.atomic():
        done = _open_locked(incoming, record, tools, None, compacting=True)
        if isinstance(done, InFlight | Side):
            raise _busy_error()
        assert isinstance(done, Compacted), "a compaction answers a compaction"
        return done


def compaction_reply(incoming: Incoming, record: ExchangeRecord, compacted: Compacted) -> Finished:
    """Codex's `compaction_trigger` answered: one compaction item as the reply's output,
    recorded with the request like any reply (a retry gets it again)."""
    now = int(time.time())
    reply = Reply(
        id=incoming.wire.reply_id_prefix + uuid.uuid4().hex,
        created=now,
        model=compacted.session.agent_version.model_name,
        text="",
        call=None,
        finish=FINISH_STOP,
        completed=now,
        compaction=compacted.token,
    )
    body = render(incoming.wire, reply, incoming.request)
    headers = reply_headers(0, "", incoming.request)
    record.opened(
        request_hash=incoming.body_hash,
        idempotency_key=incoming.idempotency_key,
        continues=incoming.request.previous_response_id or "",
        stored=incoming.request.store,
    )
    record.write_reply(
        reply=reply.to_json(),
        reply_body=body,
        reply_headers=headers,
        reply_start_index=compacted.through_index + 1,
        reply_end_index=compacted.through_index,
        reply_id=reply.id,
        turns=0,
    )
    return Finished(reply=reply, body=body, headers=headers)


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
