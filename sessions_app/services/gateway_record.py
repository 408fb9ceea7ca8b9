"""A gateway request's record (contract §14): its `GatewayExchange` row, its timings, and the
replies answered again from storage.

`GatewayRecord` holds what the record needs; `GatewayTurns` (gateway_turns.py) and
`GatewayCall` (gateway.py) build on it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Application
from contextproto import metrics
from contextproto.errors import ApplicationError
from contextproto.protocol.gateway import anthropic_wire, openai_wire
from contextproto.protocol.gateway.wire import ClientFormat, GatewayRequest, Reply, dumps
from sessions_app.models import GatewayExchange, Session


def render(reply: Reply, client_format: ClientFormat) -> dict[str, Any]:
    """The reply object of the client's API."""
    if client_format == ClientFormat.ANTHROPIC:
        return anthropic_wire.render_reply(reply)
    return openai_wire.render_reply(reply)


@dataclass(frozen=True)
class Finished:
    """The request's reply: `body` is exactly what a non-streamed reply sends."""

    reply: Reply
    body: str
    headers: dict[str, str]
    replayed: bool = False


@dataclass
class GatewayRecord:
    """A request's record: what it was, its session, its exchange row, its times."""

    application: Application
    request: GatewayRequest
    body_hash: str
    idempotency_key: str | None = None
    session: Session | None = None
    exchange: GatewayExchange | None = None
    started: float = field(default_factory=time.monotonic)
    upstream_ms: int = 0
    # The reply's id and time, known from the start: a stream's first event carries them.
    reply_id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        self.reply_id = self.reply_id or _reply_id(self.request.format)

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


def _reply_id(client_format: ClientFormat) -> str:
    prefix = "msg_" if client_format == ClientFormat.ANTHROPIC else "chatcmpl-"
    return prefix + uuid.uuid4().hex
