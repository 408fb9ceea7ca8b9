"""A gateway request's record (contract §14): its `GatewayExchange` row, its counter, its line.

`ExchangeRecord` is the request's collaborator from its first byte to its last: it knows the
request's id, path, client API and timings, and which row is its own. Every answer is
counted once, when the request ends (`done`): refusals, replays, failures after a stream
began, unknown paths, refused keys (their rows name no Application).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone
from opentelemetry.trace import INVALID_SPAN, Span

from agents.models import Application
from contextproto import metrics, telemetry
from contextproto.errors import ApplicationError
from contextproto.usage import TokenUsage
from sessions_app.gateway.events import Finished
from sessions_app.models import GatewayExchange

logger = logging.getLogger("contextproto.gateway")

OK = "ok"  # the code of an answer that is not an error, in the counter and the log line
CLIENT_API = "contextproto.gateway.client_api"


@dataclass
class ExchangeRecord:
    """What the gateway records of one request (module docstring)."""

    api: str
    path: str
    request_id: str
    user_agent: str = ""
    started: float = field(default_factory=time.monotonic)
    application: Application | None = None
    session_id: UUID | None = None
    # The request's own row, once written (in the commit that opens the request).
    exchange_id: UUID | None = None
    upstream_ms: int = 0
    turns: int = 0
    streamed: bool = False
    replayed: bool = False
    warning: str = ""  # X-Contextproto-Warning of the reply
    # The request's root span (contract §22) and what ends it, once the request has ended.
    span: Span = INVALID_SPAN
    _trace: ExitStack | None = None
    _done: bool = False
    # Work the client need not wait for (describing a turn on its spans): run once the reply
    # has gone, in the request's thread (`replied`, registered on the response).
    _after_reply: list[Callable[[], None]] = field(default_factory=list)

    def trace(self, method: str, route: str, headers: Mapping[str, str]) -> None:
        """Start the request's root span (continuing the client's `traceparent`); `done` ends
        it, whenever the request ends (a stream's end included)."""
        stack = ExitStack()
        self.span = stack.enter_context(
            telemetry.request_span(
                method, route, headers, path=self.path, attributes={CLIENT_API: self.api}
            )
        )
        self._trace = stack

    def after_reply(self, work: Callable[[], None]) -> None:
        """Run `work` once the reply is sent (`replied`); it must not raise."""
        self._after_reply.append(work)

    def replied(self) -> None:
        """The reply has gone (its response is closed): run what waited for it."""
        waiting, self._after_reply = self._after_reply, []
        for work in waiting:
            work()

    def elapsed_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)

    def gateway_ms(self) -> int:
        """Time spent in the gateway outside its upstream calls, so far."""
        return max(self.elapsed_ms() - self.upstream_ms, 0)

    def _base(self) -> dict[str, Any]:
        return {
            "application": self.application,
            "session_id": self.session_id,
            "client_format": self.api,
            "request_id": self.request_id,
            "path": self.path[:200],
            "user_agent": self.user_agent,
            "streamed": self.streamed,
            "warning": self.warning,
        }

    def opened(
        self,
        *,
        request_hash: str,
        idempotency_key: str | None,
        continues: str = "",
        stored: bool = True,
    ) -> GatewayExchange:
        """The request's row, `running`, written in the caller's transaction (the one that
        opens the request): an identical request arriving meanwhile finds it. `continues`
        the response it continues, `stored` false for a Responses `store: false`."""
        row = GatewayExchange.objects.create(
            **self._base(),
            request_hash=request_hash,
            idempotency_key=idempotency_key,
            continues=continues,
            stored=stored,
        )
        self.exchange_id = row.id
        return row

    def answered(self, http_status: int = 200) -> None:
        """An answer that is not a model's reply (a models list, a count, a stored response
        read or deleted), counted as every answer is: its own finished row."""
        row = GatewayExchange.objects.create(
            **self._base(),
            status=GatewayExchange.Status.REPLIED,
            http_status=http_status,
            finished_at=timezone.now(),
            gateway_ms=self.gateway_ms(),
        )
        self.exchange_id = row.id

    def reply_fields(self, **fields: Any) -> dict[str, Any]:
        """The row's fields once the reply is known (the caller writes them in the turn's
        commit, so the stored reply and the answer it is made of commit together)."""
        return {
            **fields,
            "status": GatewayExchange.Status.REPLIED,
            "http_status": 200,
            "finished_at": timezone.now(),
            "upstream_ms": self.upstream_ms,
            "gateway_ms": self.gateway_ms(),
        }

    def write_reply(self, **fields: Any) -> None:
        """Write the reply to the request's row (in the caller's transaction)."""
        assert self.exchange_id is not None, "a request that replies was opened"
        GatewayExchange.objects.filter(pk=self.exchange_id).update(**self.reply_fields(**fields))

    def side_reply(
        self,
        finished: Finished,
        *,
        request_hash: str,
        tokens: TokenUsage | None,
        cost: Decimal | None,
    ) -> None:
        """A side request answered: its own row, outside the conversation, with its usage."""
        with transaction.atomic():
            row = GatewayExchange.objects.create(
                **self._base(),
                status=GatewayExchange.Status.REPLIED,
                request_hash=request_hash,
                http_status=200,
                side=True,
                reply=finished.reply.to_json(),
                reply_body=finished.body,
                reply_headers=finished.headers,
                reply_id=finished.reply.id,
                turns=1,
                input_tokens=tokens.input_tokens if tokens else None,
                cache_read_input_tokens=tokens.cache_read_input_tokens if tokens else 0,
                cache_write_input_tokens=tokens.cache_write_input_tokens if tokens else 0,
                output_tokens=tokens.output_tokens if tokens else None,
                cost=cost,
                finished_at=timezone.now(),
                upstream_ms=self.upstream_ms,
                gateway_ms=self.gateway_ms(),
            )
        self.exchange_id = row.id

    def compacted(self, body: str, request_hash: str) -> None:
        """A compaction answered (no model call): a replied row of its own with its body."""
        with transaction.atomic():
            row = GatewayExchange.objects.create(
                **self._base(),
                status=GatewayExchange.Status.REPLIED,
                request_hash=request_hash,
                http_status=200,
                reply_body=body,
                finished_at=timezone.now(),
                gateway_ms=self.elapsed_ms(),
            )
        self.exchange_id = row.id

    def replay(self, finished: Finished, *, request_hash: str, idempotency_key: str | None) -> None:
        """A request answered from a stored reply: a row of its own (counted, no turns), with
        the reply it sent, so its Idempotency-Key answers the same again."""
        self.replayed = True
        with transaction.atomic():
            _async_commit()
            row = GatewayExchange.objects.create(
                **self._base(),
                status=GatewayExchange.Status.REPLIED,
                request_hash=request_hash,
                idempotency_key=idempotency_key,
                http_status=200,
                replayed=True,
                reply=finished.reply.to_json(),
                reply_body=finished.body,
                reply_headers=finished.headers,
                finished_at=timezone.now(),
                gateway_ms=self.elapsed_ms(),
            )
        self.exchange_id = row.id

    def failed(self, error: ApplicationError, request_hash: str = "") -> None:
        """Record a refused or failed request: its own row, or a new one (its own commit)."""
        fields = {
            "status": GatewayExchange.Status.FAILED,
            "http_status": error.status,
            "error_code": error.code,
            "finished_at": timezone.now(),
            "upstream_ms": self.upstream_ms,
            "gateway_ms": self.gateway_ms(),
        }
        with transaction.atomic():
            # Nothing else commits with it: it need not wait for the disk.
            _async_commit()
            if self.exchange_id is not None:
                updated = GatewayExchange.objects.filter(pk=self.exchange_id).update(
                    **fields, idempotency_key=None
                )
                if updated:
                    return
            row = GatewayExchange.objects.create(
                **self._base(), request_hash=request_hash, **fields
            )
            self.exchange_id = row.id

    def done(self, status: int, code: str = OK) -> None:
        """Count the answer and write its log line, once (the request has ended)."""
        if self._done:
            return
        self._done = True
        served = self.application is not None
        metrics.gateway_request(
            self.api, status, code, self.gateway_ms() / 1000 if served else None
        )
        line = {
            "requestId": self.request_id,
            "api": self.api,
            "path": self.path,
            "status": status,
            "code": code,
            "application": str(self.application.pk) if self.application is not None else None,
            "session": str(self.session_id) if self.session_id is not None else None,
            "turns": self.turns,
            "ms": self.elapsed_ms(),
            "gatewayMs": self.gateway_ms(),
            "upstreamMs": self.upstream_ms,
            "replayed": self.replayed or None,
            "warning": self.warning or None,
            "streamed": self.streamed or None,
        }
        logger.log(
            logging.WARNING if status >= 500 else logging.INFO,
            " ".join(f"{k}={v}" for k, v in line.items() if v is not None),
            extra={"gateway": line},
        )
        if self._trace is not None:
            telemetry.http_response(self.span, status, error_code=None if code == OK else code)
            self._trace.close()


def _async_commit() -> None:
    """Let the current PostgreSQL transaction commit without waiting for its WAL flush."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
