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

Here: the session and the reconciliation (`open`). Its parts: gateway_checks.py (what a
request must be), gateway_writes.py (what a reconciled request writes), gateway_turns.py
(`drive` and the reply), gateway_record.py (the request's record and stored replies).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.selectors import gateway_version_for_model
from contextproto.errors import IDEMPOTENCY_KEY_REUSED, SESSION_BUSY, ApplicationError, NotFound
from contextproto.ids import canonical_uuid
from contextproto.protocol import catalog
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.gateway.reconcile import Proceed, Refusal, Replay, reconcile
from contextproto.protocol.gateway.transcript import Item, open_text
from contextproto.protocol.gateway.wire import (
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    Reply,
    dumps,
)
from contextproto.protocol.messages import KIND_TOOL_CALL, ROLE_ASSISTANT
from sessions_app.models import GatewayExchange, Run, Session
from sessions_app.reads.transcript import transcript_tail
from sessions_app.services.gateway_checks import (
    IDEMPOTENCY_WINDOW,
    RETRY_AFTER_SECONDS,
    busy,
    client_tools,
    runnable_check,
    system_check,
)
from sessions_app.services.gateway_record import Finished, render
from sessions_app.services.gateway_turns import GatewayTurns
from sessions_app.services.gateway_writes import client_state_write, messages_write, run_for
from sessions_app.services.sessions import session_create
from sessions_app.store.state import session_lock


@dataclass
class GatewayCall(GatewayTurns):
    """One gateway request (module docstring). It is built with the request's own fields
    (`application`, `request`, `body_hash`, `idempotency_key`, `upstream_key`,
    `session_key_of`, `named_session`); the others are its state."""

    session_key_of: UUID | None = None
    named_session: str | None = None
    created_key: str | None = None

    # ------------------------------------------------------------------ open

    def open(self) -> Finished | None:
        """Everything before the first model call; a stored reply when this is a retry.

        Raises ApplicationError for a request that cannot be served (nothing written then,
        apart from its record). `session` and `created_key` are set as soon as they are
        known, so even a refusal can name the session.
        """
        tools = client_tools(self.request)
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
        return not busy(run)

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
        system_check(version, self.request.system)
        session, key = session_create(agent_version=version)
        self.created_key = key
        return session_lock(session.id, with_run=True)

    def _open_locked(self, tools: list[ClientToolWire]) -> Finished | None:
        session = self._session_locked()
        self.session = session
        version = session.agent_version
        runnable_check(version)
        system_check(version, self.request.system)
        current = session.current_run
        if busy(current):
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
        client_state_write(session, self.request.system, tools)
        run = run_for(session, outcome)
        messages_write(session, run, outcome)
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


def _last_reply(items: Sequence[Item]) -> Item | None:
    """The transcript's last reply, when nothing but the client's messages follows it."""
    return next((i for i in reversed(items) if i.role == ROLE_ASSISTANT), None)
