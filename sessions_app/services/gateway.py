"""The gateway (contract §14): a Chat Completions or Messages request drives a session.

One request: find or start the session, reconcile the request's messages with the session's
transcript (contextproto.protocol.gateway.reconcile), write what is new, then run the
built-in runtime's turns (`runtime.run_turns`, the same loop a Celery task runs) while the
model calls protocol tools, until it answers with text or calls one of the client's tools.
The reply is stored with the request's record (`GatewayExchange`), so a retry of a request
whose reply was lost gets the same reply again without a model call.

`GatewayCall` holds one request: `open()` does everything before the first model call (and
answers a retry from storage), `drive()` yields the answer's text as it comes and ends with
the reply. The edge (sessions_app/gateway_views.py) renders both in the client's format.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import AgentVersion, Application
from agents.selectors import RUNNABLE_MODEL_PROVIDERS, gateway_version_for_model
from contextproto import metrics
from contextproto.errors import (
    GATEWAY_MODEL_NOT_RUNNABLE,
    GATEWAY_SYSTEM_NOT_ACCEPTED,
    GATEWAY_TRANSCRIPT_MISMATCH,
    GATEWAY_UPSTREAM_FAILED,
    GATEWAY_UPSTREAM_RATE_LIMITED,
    GATEWAY_UPSTREAM_REJECTED,
    GATEWAY_UPSTREAM_TIMEOUT,
    GATEWAY_UPSTREAM_UNAUTHORIZED,
    IDEMPOTENCY_KEY_REUSED,
    INVALID_INPUT_SCHEMA,
    INVALID_REQUEST,
    MAX_TURNS_REACHED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_REQUEST_REJECTED,
    PROVIDER_UNAVAILABLE,
    SESSION_BUSY,
    TOOL_NAME_INVALID,
    TOOL_NAME_RESERVED,
    ApplicationError,
    NotFound,
)
from contextproto.ids import canonical_uuid
from contextproto.protocol import catalog, host_tools
from contextproto.protocol.gateway import anthropic_wire, openai_wire
from contextproto.protocol.gateway import state as client_state
from contextproto.protocol.gateway.reconcile import Proceed, Refusal, Replay, reconcile
from contextproto.protocol.gateway.transcript import (
    ANSWER_SEPARATOR,
    Item,
    open_text,
    reply_of,
)
from contextproto.protocol.gateway.wire import (
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    ClientFormat,
    ClientToolWire,
    Finish,
    GatewayRequest,
    Reply,
    Usage,
    dumps,
)
from contextproto.protocol.messages import (
    KIND_INPUT,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_USER,
    RawMessage,
)
from contextproto.protocol.vocabulary import CLIENT_SYSTEM_PLACEHOLDER
from sessions_app import nodes, providers
from sessions_app.models import GatewayExchange, Run, Session
from sessions_app.providers.base import CallOptions
from sessions_app.reads import hot_sql, raw_log
from sessions_app.reads.transcript import transcript_tail
from sessions_app.services.messages import content_check, message_append_locked
from sessions_app.services.runtime import Drive, TurnReport, run_finish, run_turns
from sessions_app.services.sessions import session_create
from sessions_app.store.state import KV_DELETE, kv_apply_locked, session_lock

# Idempotency-Key (contract §14): the same key within this long answers the stored reply.
IDEMPOTENCY_WINDOW = timedelta(hours=24)
# What a client waits before retrying a busy session or a failed upstream call.
RETRY_AFTER_SECONDS = 1
# Stop reasons of an answer cut by its token limit (OpenAI's, Anthropic's words).
LENGTH_STOPS = frozenset({"length", "max_tokens"})
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def request_hash(body: Any) -> str:
    """The identity of a request body for Idempotency-Key checks (key order does not count)."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def render(reply: Reply, client_format: ClientFormat) -> dict[str, Any]:
    """The reply object of the client's API."""
    if client_format == ClientFormat.ANTHROPIC:
        return anthropic_wire.render_reply(reply)
    return openai_wire.render_reply(reply)


@dataclass(frozen=True)
class TextDelta:
    """Text of the answer that came in (a streamed reply sends it at once)."""

    text: str


@dataclass(frozen=True)
class TurnDone:
    """A model call of the request is written; `usage` sums the calls so far."""

    usage: Usage


@dataclass(frozen=True)
class Finished:
    """The request's reply: `body` is exactly what a non-streamed reply sends."""

    reply: Reply
    body: str
    headers: dict[str, str]
    replayed: bool = False


def _client_tools(request: GatewayRequest) -> list[ClientToolWire]:
    """The request's tools as the session stores them; refuses what no view may carry."""
    reserved = host_tools.reserved_names()
    seen: set[str] = set()
    tools: list[ClientToolWire] = []
    for tool in request.tools:
        problem = host_tools.name_problem(tool.name)
        if problem is not None:
            raise ApplicationError(
                TOOL_NAME_INVALID, f"{tool.where}: {problem}", {"field": tool.where}
            )
        if tool.name in reserved:
            raise ApplicationError(
                TOOL_NAME_RESERVED,
                f"{tool.where}: {tool.name!r} is a context protocol tool; the gateway adds "
                "those itself. Rename your tool.",
                {"field": tool.where, "name": tool.name},
            )
        if tool.name in seen:
            raise ApplicationError(
                INVALID_REQUEST,
                f"{tool.where}: the tool name {tool.name!r} is declared twice.",
                {"field": tool.where},
            )
        seen.add(tool.name)
        schema_problem = host_tools.input_schema_problem(tool.input_schema)
        if schema_problem is not None:
            raise ApplicationError(
                INVALID_INPUT_SCHEMA,
                f"{tool.where} ({tool.name}): the input schema at {schema_problem.path} "
                f"{schema_problem.message}",
                {"field": tool.where, "path": schema_problem.path},
            )
        tools.append(tool.to_wire())
    return tools


def _system_check(version: AgentVersion, system: str) -> None:
    if system and CLIENT_SYSTEM_PLACEHOLDER not in version.system_prompt:
        raise ApplicationError(
            GATEWAY_SYSTEM_NOT_ACCEPTED,
            f"This agent's system prompt has no {CLIENT_SYSTEM_PLACEHOLDER}, so it takes no "
            "system text from the client: leave out the system/developer messages (or the "
            f"system field), or publish a version whose prompt says {CLIENT_SYSTEM_PLACEHOLDER} "
            "where the client's text belongs.",
            {"field": "system"},
        )


def _runnable_check(version: AgentVersion) -> None:
    if version.model_provider not in RUNNABLE_MODEL_PROVIDERS:
        raise ApplicationError(
            GATEWAY_MODEL_NOT_RUNNABLE,
            f"This session's model provider is {version.model_provider!r}: a host drives it "
            "through the API, the gateway cannot call its model.",
            {"agentVersionId": str(version.id)},
        )


def _busy(run: Run | None) -> bool:
    """Whether a live driver holds the session's current run."""
    if run is None or run.status not in ACTIVE:
        return False
    if run.status == Run.Status.QUEUED:
        return not run.via_gateway  # a worker will take it
    return run.lease_until is not None and run.lease_until > timezone.now()


@dataclass
class _Progress:
    """What a request's turns wrote and cost so far."""

    written: list[RawMessage]
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    upstream_ms: int = 0
    snapshot_id: str = ""
    finish: str | None = None
    finished: Finished | None = None

    def add(self, report: TurnReport) -> None:
        self.turns += 1
        self.upstream_ms += report.upstream_ms
        self.usage = self.usage.plus(Usage.from_recorded(report.usage))
        self.snapshot_id, self.finish = report.snapshot_id, report.finish
        self.written.extend(report.written)


@dataclass
class GatewayCall:
    """One gateway request (module docstring). Fields after `upstream_key` are its state."""

    application: Application
    request: GatewayRequest
    body_hash: str
    session_key_of: UUID | None = None
    named_session: str | None = None
    idempotency_key: str | None = None
    upstream_key: str | None = None
    session: Session | None = None
    created_key: str | None = None
    exchange: GatewayExchange | None = None
    run: Run | None = None
    opening_text: str = ""
    # The answers an earlier request of the reply wrote before it failed (a retry goes on).
    open_answers: tuple[RawMessage, ...] = ()
    recover: bool = True  # whether a protocol call may wait for its dispatch (see _open_locked)
    started: float = field(default_factory=time.monotonic)
    upstream_ms: int = 0
    # The reply's id and time, known from the start: a stream's first event carries them.
    reply_id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        self.reply_id = self.reply_id or _reply_id(self.request.format)

    # ------------------------------------------------------------------ open

    def open(self) -> Finished | None:
        """Everything before the first model call; a stored reply when this is a retry.

        Raises ApplicationError for a request that cannot be served (nothing written then,
        apart from its record). `session` and `created_key` are set as soon as they are
        known, so even a refusal can name the session.
        """
        tools = _client_tools(self.request)
        stored = self._idempotent_reply()
        if stored is not None:
            return stored
        try:
            with transaction.atomic():
                return self._open_locked(tools)
        except IntegrityError as exc:
            # Another request with this Idempotency-Key won the race; it is still running.
            self._forget_created()
            raise ApplicationError(
                SESSION_BUSY,
                "A request with this Idempotency-Key is being served; retry shortly for its reply.",
                {"retryAfterSeconds": RETRY_AFTER_SECONDS},
            ) from exc
        except Exception:
            self._forget_created()
            raise

    def _forget_created(self) -> None:
        if self.created_key is not None:
            # The session this request started was rolled back with the refusal.
            self.session, self.created_key = None, None

    def _idempotent_reply(self) -> Finished | None:
        if not self.idempotency_key:
            return None
        found = GatewayExchange.objects.filter(
            application=self.application, idempotency_key=self.idempotency_key
        ).first()
        if found is None:
            return None
        stale = found.created_at < timezone.now() - IDEMPOTENCY_WINDOW
        if stale:
            GatewayExchange.objects.filter(pk=found.pk).update(idempotency_key=None)
            return None
        if found.status == GatewayExchange.Status.FAILED or self._abandoned(found):
            # Its request failed (or died with its process): free the key, and let the retry
            # go on in the session that request started, if any.
            GatewayExchange.objects.filter(pk=found.pk).update(idempotency_key=None)
            if found.request_hash == self.body_hash and self.session_key_of is None:
                self.named_session = self.named_session or (
                    str(found.session_id) if found.session_id else None
                )
            return None
        self.session = found.session
        if found.request_hash != self.body_hash:
            raise ApplicationError(
                IDEMPOTENCY_KEY_REUSED,
                "This Idempotency-Key was used for a request with another body in the last "
                "24 hours; use a new key for a new request.",
                {"idempotencyKey": self.idempotency_key},
            )
        if found.status != GatewayExchange.Status.REPLIED:
            raise ApplicationError(
                SESSION_BUSY,
                "The request with this Idempotency-Key is still being served; retry shortly "
                "for its reply.",
                {"retryAfterSeconds": RETRY_AFTER_SECONDS},
            )
        return self._replay(found, keep_key=False)

    @staticmethod
    def _abandoned(exchange: GatewayExchange) -> bool:
        """A request still marked running whose session no live request holds: its process
        died (its run's lease ran out), so its key may be used again."""
        if exchange.status != GatewayExchange.Status.RUNNING or exchange.session_id is None:
            return False
        run = Run.objects.filter(session_id=exchange.session_id).order_by("-created_at").first()
        return not _busy(run)

    def _session_locked(self) -> Session:
        """Find (and lock) or start the request's session."""
        if self.session_key_of is not None:
            return session_lock(self.session_key_of, with_run=True)
        if self.named_session is not None:
            wanted = canonical_uuid(self.named_session)
            if wanted is None or not (
                Session.objects.filter(application=self.application, id=wanted).exists()
            ):
                raise NotFound("Session", {"sessionId": self.named_session})
            return session_lock(wanted, with_run=True)
        version = gateway_version_for_model(application=self.application, model=self.request.model)
        _system_check(version, self.request.system)
        session, key = session_create(agent_version=version)
        self.created_key = key
        return session_lock(session.id, with_run=True)

    def _open_locked(self, tools: list[ClientToolWire]) -> Finished | None:
        session = self._session_locked()
        self.session = session
        version = session.agent_version
        _runnable_check(version)
        _system_check(version, self.request.system)
        current = session.current_run
        if _busy(current):
            raise ApplicationError(
                SESSION_BUSY,
                "Another request (or a run) is working on this session; retry when it has "
                "answered.",
                {"retryAfterSeconds": RETRY_AFTER_SECONDS},
            )
        wanted = len(self.request.items)
        tail = transcript_tail(session.id, session.last_index, wanted=wanted + 1)
        last_reply = _last_reply(tail.transcript.items)
        if last_reply is not None and not tail.complete:
            # A retry is recognised against the transcript before the last reply: as many
            # items of it as the request has.
            tail = transcript_tail(
                session.id, session.last_index, wanted=wanted + 1, before_index=last_reply.position
            )
        items = tail.transcript.items
        before_reply = (
            [i for i in items if i.position < last_reply.position] if last_reply else None
        )
        outcome = reconcile(
            self.request.items,
            items,
            before_reply=before_reply,
            log_empty=session.last_index == 0,
            pending_calls=tail.transcript.pending_calls,
        )
        if isinstance(outcome, Replay) and last_reply is not None:
            return self._replay_of(session, last_reply)
        if isinstance(outcome, Refusal):
            details: dict[str, Any] = {"index": outcome.index, "reason": outcome.reason}
            if outcome.tool_call_id is not None:
                details["toolCallId"] = outcome.tool_call_id
            # Computed: the reconciliation's codes are GATEWAY_* constants (registered).
            raise ApplicationError(outcome.code, outcome.message, details)
        assert isinstance(outcome, Proceed)
        self._client_state(session, tools)
        run = self._run_for(session, outcome)
        self._write(session, run, outcome)
        if not outcome.new:
            self.open_answers = tail.transcript.open_answers
            self.opening_text = open_text(self.open_answers)
        # An answer whose protocol call a dead driver never dispatched is among the answers
        # after the last client message; only then must the runtime look for one.
        self.recover = any(
            m.kind == KIND_TOOL_CALL and m.tool_name in catalog.PROTOCOL_TOOL_NAMES
            for m in tail.transcript.open_answers
        )
        session.via_gateway = True
        session.current_run = run
        session.save(update_fields=["next_message_index", "current_run", "via_gateway"])
        self.run = run
        if self.idempotency_key:
            # Taken now, in the commit of the request's messages: a concurrent request with
            # the same key fails on the unique key. Without a key, the record is written
            # with the reply (or the refusal).
            self.exchange = GatewayExchange.objects.create(
                application=self.application,
                session=session,
                client_format=self.request.format,
                idempotency_key=self.idempotency_key,
                request_hash=self.body_hash,
                streamed=self.request.stream,
            )
        return None

    def _client_state(self, session: Session, tools: list[ClientToolWire]) -> None:
        """Commit the request's system text and tools when they differ (one revision)."""
        kv = hot_sql.kv_values(session.id, client_state.VIEW_KEYS)
        names = client_state.tool_names(kv)
        if names:
            kv.update(hot_sql.kv_values(session.id, [client_state.tool_key(n) for n in names]))
        upserts, removals = client_state.client_state_writes(kv, self.request.system, tools)
        writes: dict[str, Any] = {**upserts, **dict.fromkeys(removals, KV_DELETE)}
        if writes:
            kv_apply_locked(session, writes)

    def _run_for(self, session: Session, outcome: Proceed) -> Run:
        """The run this request drives, claimed for it (a short lease, renewed while it waits
        on the model): a new run for new user input, else the session's current run (which
        a client's tool result answers, or whose turn failed and runs again)."""
        current = session.current_run
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
        run.error = None
        run.finished_at = None
        run.lease_until = timezone.now() + timedelta(seconds=settings.GATEWAY_LEASE_SECONDS)
        run.save()
        return run

    def _write(self, session: Session, run: Run, outcome: Proceed) -> None:
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
                self._write_item(session, earlier, item, calls)
        for item in new:
            self._write_item(session, run, item, calls)

    def _write_item(
        self, session: Session, run: Run, item: Item, calls: dict[str, tuple[str, str]]
    ) -> None:
        where = f"messages[{item.position}]"
        if item.role == ROLE_USER:
            _content_ok(item.content, where)
            message_append_locked(
                session,
                role=ROLE_USER,
                kind=KIND_INPUT,
                content=item.content,
                run=run,
                input_run=run.id.hex,
                save_session=False,
            )
        elif item.role == ROLE_ASSISTANT:  # an imported answer
            if not item.calls:
                message_append_locked(
                    session,
                    role=ROLE_ASSISTANT,
                    kind=KIND_TEXT,
                    content=item.text,
                    run=run,
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
                row = message_append_locked(
                    session,
                    role=ROLE_ASSISTANT,
                    kind=KIND_TOOL_CALL,
                    content=item.text if n == 0 else "",
                    tool_call_id=call.id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    run=run,
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
            message_append_locked(
                session,
                role=ROLE_TOOL,
                kind=KIND_TOOL_RESULT,
                content=item.content,
                window_id=window,
                tool_call_id=call_id,
                tool_name=name,
                is_error=item.is_error,
                run=run,
                save_session=False,
            )

    # ------------------------------------------------------------------ drive

    def drive(self) -> Iterator[TextDelta | TurnDone | Finished]:
        """Run the request's turns; yield the answer's text as it comes, each model call once
        it is written (`TurnDone`), then the reply.

        Raises ApplicationError when the model cannot be called, fails, or the run reaches
        its turn limit; the failed turn leaves no answer, and the run is there for the
        client's retry.
        """
        assert self.session is not None and self.run is not None
        session = self.session  # locked and read with its version when the request opened
        version = session.agent_version
        run = self.run
        try:
            nodes.require_protocol(version.context_protocol_id, version.context_protocol_version)
            provider = providers.provider_for(
                version.model_provider,
                version.model_config or {},
                CallOptions(
                    api_key=self.upstream_key,
                    require_key=False,
                    timeout=float(settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS),
                ),
            )
        except (providers.ProviderError, ApplicationError) as exc:
            raise self._failed(run, exc, version) from exc
        said = self.opening_text
        if said:
            yield TextDelta(said)
        state = _Progress(written=list(self.open_answers))

        def final(report: TurnReport) -> None:
            # Inside the commit of the turn that ends the request: the reply is stored with
            # the answer it is made of.
            state.add(report)
            state.finished = self._finish(version, state)

        drive = Drive(
            parameters=self.request.parameters,
            lease_seconds=settings.GATEWAY_LEASE_SECONDS,
            on_final=final,
            recover=self.recover,
        )
        try:
            for report in run_turns(run, session=session, provider=provider, drive=drive):
                if state.finished is None:
                    state.add(report)
                self.upstream_ms = state.upstream_ms
                if report.text:
                    yield TextDelta((ANSWER_SEPARATOR if said else "") + report.text)
                    said += (ANSWER_SEPARATOR if said else "") + report.text
                yield TurnDone(state.usage)
        except (providers.ProviderError, ApplicationError) as exc:
            raise self._failed(run, exc, version) from exc
        if run.status == Run.Status.MAX_TURNS:
            raise self._failed(
                run,
                ApplicationError(
                    MAX_TURNS_REACHED,
                    f"The run reached this agent's maxTurnsPerRun ({version.max_turns_per_run}"
                    ") before the model answered; send a new message to start a new run.",
                    {"runId": run.id.hex, "turns": run.turns},
                ),
                version,
            )
        assert state.finished is not None, "a run that ended had its final turn"
        metrics.gateway_request(
            self.request.format, 200, max(self._elapsed_ms() - self.upstream_ms, 0) / 1000
        )
        yield state.finished

    def _finish(self, version: AgentVersion, state: _Progress) -> Finished:
        """Build the reply from what the reply's requests wrote, read as the transcript reads
        the log (so a client that resends it is recognised), and store it (in the caller's
        transaction)."""
        group = state.written
        item = reply_of(group, catalog.PROTOCOL_TOOL_NAMES, _service_answered(group))
        assert item is not None, "a finished request ends with a reply"
        call = item.calls[0] if item.calls else None
        ended: Finish = FINISH_STOP
        if call is not None:
            ended = FINISH_TOOL_CALLS
        elif state.finish in LENGTH_STOPS:
            ended = FINISH_LENGTH
        reply = Reply(
            id=self.reply_id,
            created=self.created,
            model=version.model_name,
            text=item.text,
            call=call,
            finish=ended,
            usage=state.usage,
        )
        body = dumps(render(reply, self.request.format))
        headers = {"X-Contextproto-Turns": str(state.turns)}
        if state.snapshot_id:
            headers["X-Contextproto-Snapshot"] = state.snapshot_id
        if self.request.ignored:
            headers["X-Contextproto-Ignored"] = ",".join(self.request.ignored)
        self.upstream_ms = state.upstream_ms
        self._write_record(
            self._fields(
                status=GatewayExchange.Status.REPLIED,
                http_status=200,
                reply=reply.to_json(),
                reply_body=body,
                reply_headers=headers,
                reply_start_index=item.position,
                turns=state.turns,
            )
        )
        return Finished(reply=reply, body=body, headers=headers)

    def _replay_of(self, session: Session, reply: Item) -> Finished:
        """The session's last reply again (a retry): the body its request sent when it is
        stored, else the reply rendered anew from the log (the request that sent it is not
        on record: it came through the HTTP API, or its record was lost)."""
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
            return self._replay(stored)
        version = session.agent_version
        rebuilt = Reply(
            id=self.reply_id,
            created=self.created,
            model=version.model_name,
            text=reply.text,
            call=reply.calls[0] if reply.calls else None,
            finish=FINISH_TOOL_CALLS if reply.calls else FINISH_STOP,
        )
        body = dumps(render(rebuilt, self.request.format))
        self._record_replay()
        return Finished(
            reply=rebuilt, body=body, headers={"X-Contextproto-Turns": "0"}, replayed=True
        )

    def _replay(self, exchange: GatewayExchange, *, keep_key: bool = True) -> Finished:
        """The stored reply of `exchange` again, byte for byte (a retry or a reused key).

        The retry's own record keeps its Idempotency-Key (`keep_key`), unless the key is
        what found the reply (it stays with the first request's record).
        """
        self.session = exchange.session
        reply = Reply.from_json(exchange.reply or {})
        body = exchange.reply_body
        if exchange.client_format != self.request.format:
            body = dumps(render(reply, self.request.format))
        headers = {**(exchange.reply_headers or {}), "X-Contextproto-Turns": "0"}
        self._record_replay(keep_key=keep_key)
        return Finished(reply=reply, body=body, headers=headers, replayed=True)

    def _record_replay(self, *, keep_key: bool = True) -> None:
        """A request answered from a stored reply has its own record (counted, no turns)."""
        GatewayExchange.objects.create(
            application=self.application,
            session=self.session,
            client_format=self.request.format,
            status=GatewayExchange.Status.REPLIED,
            request_hash=self.body_hash,
            idempotency_key=(self.idempotency_key or None) if keep_key else None,
            http_status=200,
            replayed=True,
            streamed=self.request.stream,
            finished_at=timezone.now(),
            gateway_ms=self._elapsed_ms(),
        )
        metrics.gateway_request(self.request.format, 200, self._elapsed_ms() / 1000)

    # ------------------------------------------------------------------ failures

    def _failed(
        self, run: Run, exc: providers.ProviderError | ApplicationError, version: AgentVersion
    ) -> ApplicationError:
        """The client's error for a failure while driving; the run keeps it (key scrubbed)."""
        error = (
            upstream_error(exc, version, self.upstream_key)
            if isinstance(exc, providers.ProviderError)
            else exc
        )
        if run.status != Run.Status.MAX_TURNS:
            run_finish(
                run,
                Run.Status.FAILED,
                {"code": error.code, "message": error.message, **error.details},
            )
        return error

    def refused(self, error: ApplicationError) -> None:
        """Record a refused request (its exchange row, the counters)."""
        self._record(
            status=GatewayExchange.Status.FAILED,
            http_status=error.status,
            error_code=error.code,
        )

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)

    def _fields(self, **fields: Any) -> dict[str, Any]:
        total = self._elapsed_ms()
        return {
            **fields,
            "finished_at": timezone.now(),
            "upstream_ms": self.upstream_ms,
            "gateway_ms": max(total - self.upstream_ms, 0),
        }

    def _write_record(self, fields: dict[str, Any]) -> None:
        """Write the request's record (update the one its key took, or create it)."""
        if self.exchange is not None:
            GatewayExchange.objects.filter(pk=self.exchange.pk).update(**fields)
        else:
            self.exchange = GatewayExchange.objects.create(
                application=self.application,
                session=self.session,
                client_format=self.request.format,
                request_hash=self.body_hash,
                streamed=self.request.stream,
                **fields,
            )

    def _record(self, **fields: Any) -> None:
        """Record a refused or failed request, and count it."""
        fields = self._fields(**fields)
        with transaction.atomic():
            # Nothing else commits with it: it need not wait for the disk.
            _async_commit()
            self._write_record(fields)
        metrics.gateway_request(
            self.request.format, int(fields.get("http_status") or 0), fields["gateway_ms"] / 1000
        )


def _async_commit() -> None:
    """Let the current PostgreSQL transaction commit without waiting for its WAL flush."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _last_reply(items: Sequence[Item]) -> Item | None:
    """The transcript's last reply, when nothing but the client's messages follows it."""
    return next((i for i in reversed(items) if i.role == ROLE_ASSISTANT), None)


def _content_ok(content: Any, where: str) -> None:
    try:
        content_check(content)
    except ApplicationError as exc:
        raise ApplicationError(exc.code, f"{where}: {exc.message}", {"field": where}) from exc


def _reply_id(client_format: ClientFormat) -> str:
    prefix = "msg_" if client_format == ClientFormat.ANTHROPIC else "chatcmpl-"
    return prefix + uuid.uuid4().hex


def _service_answered(group: list[RawMessage]) -> set[str]:
    return {
        str(m.tool_call_id)
        for m in group
        if m.kind == KIND_TOOL_RESULT and m.snapshot_id is not None
    }


def _scrub(value: Any, secret: str | None) -> Any:
    """`value` with every occurrence of `secret` (the client's upstream key) removed."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "[redacted]")
    if isinstance(value, dict):
        return {k: _scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secret) for v in value]
    return value


def upstream_error(
    exc: providers.ProviderError, version: AgentVersion, secret: str | None
) -> ApplicationError:
    """A provider failure as the gateway answers it (contract §14), naming the upstream provider
    and model, never the key: 401 a refused key, 429 a rate limit, 504 no answer in time,
    400 another refusal of the request, 502 anything else."""
    details: Mapping[str, Any] = exc.details or {}
    upstream = f"the upstream model ({version.model_provider} {version.model_name})"
    said = _scrub(exc.message, secret)
    status = details.get("status")
    retry_after = details.get("retryAfterSeconds") or RETRY_AFTER_SECONDS
    base = {
        "provider": version.model_provider,
        "model": version.model_name,
        "providerCode": exc.code,
    }
    provider_message = _scrub(details.get("providerMessage"), secret)
    if provider_message:
        base["providerMessage"] = provider_message
    if exc.code == PROVIDER_RATE_LIMITED:
        return ApplicationError(
            GATEWAY_UPSTREAM_RATE_LIMITED,
            f"{upstream} rate-limited the call: {said}",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_UNAVAILABLE and details.get("reason") == "timeout":
        return ApplicationError(
            GATEWAY_UPSTREAM_TIMEOUT,
            f"{upstream} did not answer within {settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS} s.",
            {**base, "retryAfterSeconds": retry_after},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED and status in (401, 403):
        return ApplicationError(
            GATEWAY_UPSTREAM_UNAUTHORIZED,
            f"{upstream} refused the key (HTTP {status}): send the provider's key in "
            "X-Contextproto-Upstream-Key, or set the version's model config apiKeyEnv.",
            {**base, "status": status},
        )
    if exc.code == PROVIDER_REQUEST_REJECTED:
        return ApplicationError(
            GATEWAY_UPSTREAM_REJECTED,
            f"{upstream} refused the request: {said}",
            {**base, "status": status},
        )
    return ApplicationError(
        GATEWAY_UPSTREAM_FAILED,
        f"{upstream} failed: {said}",
        {**base, "retryAfterSeconds": retry_after},
    )
