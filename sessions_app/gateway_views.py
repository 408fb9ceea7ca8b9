"""The gateway's HTTP edge (contract §14): OpenAI- and Anthropic-compatible endpoints.

`POST /gateway/openai/v1/chat/completions` and `POST /gateway/anthropic/v1/messages` (plus
each API's `GET …/v1/models`). These are plain Django views, not the JSON API's: requests
and replies follow the respective public API, errors use its error shape, and a streamed
reply is Server-Sent Events in its grammar. The work is the service's
(sessions_app/services/gateway.py); here: the key, the body's checks, the headers, the
rendering, and streaming under ASGI (an async iterator, so uvicorn sends each event as it
comes; with WSGI a plain iterator).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from agents.models import Application
from agents.selectors import gateway_model_name, gateway_models
from contextproto import metrics
from contextproto.errors import (
    BODY_TOO_DEEP,
    DEPENDENCY_UNAVAILABLE,
    GATEWAY_UPSTREAM_FAILED,
    GATEWAY_UPSTREAM_RATE_LIMITED,
    GATEWAY_UPSTREAM_TIMEOUT,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MALFORMED_JSON,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    NOT_FOUND,
    REQUEST_TOO_LARGE,
    SESSION_BUSY,
    ApplicationError,
)
from contextproto.parsers import check_storable
from contextproto.protocol.gateway import anthropic_wire, openai_wire
from contextproto.protocol.gateway.wire import ClientFormat, ListedModel, Reply, WireError, dumps
from sessions_app.auth import credential_for_key
from sessions_app.services.gateway import GatewayCall
from sessions_app.services.gateway_checks import request_hash
from sessions_app.services.gateway_record import Finished
from sessions_app.services.gateway_turns import TextDelta, TurnDone

logger = logging.getLogger("contextproto.gateway")

SESSION_HEADER = "X-Contextproto-Session"
SESSION_KEY_HEADER = "X-Contextproto-Session-Key"
UPSTREAM_KEY_HEADER = "X-Contextproto-Upstream-Key"
IDEMPOTENCY_KEY_MAX = 255
# Errors a retry may get past: the SDKs retry these on their own (contract §14).
RETRIED_WITH_DELAY = frozenset(
    {SESSION_BUSY, GATEWAY_UPSTREAM_RATE_LIMITED, GATEWAY_UPSTREAM_FAILED, GATEWAY_UPSTREAM_TIMEOUT}
)


class _Refused(Exception):
    """A refusal before the service runs (key, body), carried to the one error renderer."""

    def __init__(self, error: ApplicationError) -> None:
        super().__init__(error.message)
        self.error = error


def _error_reply(client_format: ClientFormat, status: int, error: ApplicationError) -> str:
    wire = anthropic_wire if client_format == ClientFormat.ANTHROPIC else openai_wire
    return dumps(wire.error_reply(status, error.code, error.message, error.details))


def refusal_response(
    client_format: ClientFormat, error: ApplicationError, call: GatewayCall | None = None
) -> HttpResponse:
    """An error in the client API's shape, with the headers its SDK retries by."""
    status = error.status
    response = HttpResponse(
        _error_reply(client_format, status, error),
        status=status,
        content_type="application/json",
    )
    if 400 <= status < 500 and status not in (408, 429) and error.code != SESSION_BUSY:
        response["x-should-retry"] = "false"  # the same request cannot get past it
    if error.code in RETRIED_WITH_DELAY:
        wait = error.details.get("retryAfterSeconds") or 1
        response["Retry-After"] = str(max(1, math.ceil(float(wait))))
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="gateway"'
    if call is not None:
        _session_headers(response, call)
    return response


def _session_headers(response: HttpResponse | StreamingHttpResponse, call: GatewayCall) -> None:
    if call.session is not None:
        response[SESSION_HEADER] = str(call.session.pk)
    if call.created_key is not None:
        response[SESSION_KEY_HEADER] = call.created_key


def _key_of(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def _caller(request: HttpRequest) -> tuple[Application, Any]:
    """The Application and, for a session key, its session id (401 otherwise)."""
    raw = _key_of(request)
    credential = credential_for_key(raw) if raw else None
    if credential is None:
        raise _Refused(
            ApplicationError(
                NOT_AUTHENTICATED,
                "Send an application key or a session key as 'Authorization: Bearer <key>' "
                "or 'x-api-key: <key>'."
                if raw is None
                else "Unknown or revoked key.",
            )
        )
    return credential.application, credential.session_id


def _body(request: HttpRequest) -> Any:
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise _Refused(
            ApplicationError(
                REQUEST_TOO_LARGE,
                f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; send "
                "fewer or shorter messages (the session keeps the history: a client may send "
                "only the new ones).",
            )
        ) from exc
    try:
        body = json.loads(raw)
    except RecursionError as exc:
        raise _Refused(ApplicationError(BODY_TOO_DEEP, "The JSON body nests too deeply.")) from exc
    except ValueError as exc:
        raise _Refused(
            ApplicationError(MALFORMED_JSON, f"The body is not valid JSON: {exc}.")
        ) from exc
    try:
        check_storable(body)
    except ApplicationError as exc:
        raise _Refused(exc) from exc
    return body


def _idempotency_key(request: HttpRequest) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is not None and not 0 < len(key) <= IDEMPOTENCY_KEY_MAX:
        raise _Refused(
            ApplicationError(
                INVALID_REQUEST,
                f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters.",
                {"field": "Idempotency-Key"},
            )
        )
    return key


def _parse(client_format: ClientFormat, body: Any) -> Any:
    parse = (
        anthropic_wire.parse_request
        if client_format == ClientFormat.ANTHROPIC
        else openai_wire.parse_request
    )
    try:
        return parse(body)
    except WireError as exc:
        # Computed: the wire modules raise INVALID_REQUEST or GATEWAY_PARAMETER_UNSUPPORTED.
        raise _Refused(ApplicationError(exc.code, exc.message, exc.details)) from exc


def _reply_response(call: GatewayCall, finished: Finished) -> HttpResponse:
    response = HttpResponse(finished.body, content_type="application/json")
    for name, value in finished.headers.items():
        response[name] = value
    if finished.replayed:
        response["X-Contextproto-Replayed"] = "true"
    _session_headers(response, call)
    return response


class _Encoder:
    """One streamed reply in the client's event grammar."""

    def __init__(self, call: GatewayCall) -> None:
        self.call = call
        self.anthropic = call.request.format == ClientFormat.ANTHROPIC
        model = call.session.agent_version.model_name if call.session else ""
        self.openai = openai_wire.Stream(
            reply_id=call.reply_id,
            created=call.created,
            model=model,
            include_usage=call.request.include_usage,
        )
        self.messages = anthropic_wire.Stream(reply_id=call.reply_id, model=model)

    def start(self, usage_reply: Reply) -> str:
        return self.messages.start(usage_reply.usage) if self.anthropic else self.openai.start()

    def event(self, event: TextDelta | TurnDone | Finished) -> str:
        if isinstance(event, TextDelta):
            return (
                self.messages.text(event.text) if self.anthropic else self.openai.text(event.text)
            )
        if isinstance(event, Finished):
            return (
                self.messages.finish(event.reply)
                if self.anthropic
                else self.openai.finish(event.reply)
            )
        return ""

    def error(self, error: ApplicationError) -> str:
        wire = self.messages if self.anthropic else self.openai
        return wire.error(error.status, error.code, error.message, error.details)

    def keepalive(self) -> str:
        return self.messages.keepalive() if self.anthropic else self.openai.keepalive()

    def whole(self, reply: Reply) -> str:
        return self.messages.whole(reply) if self.anthropic else self.openai.whole(reply)


def _usage_reply(call: GatewayCall, event: TurnDone | Finished) -> Reply:
    """A reply holding only the usage so far (what a stream's first event states)."""
    usage = event.usage if isinstance(event, TurnDone) else event.reply.usage
    return Reply(
        id=call.reply_id,
        created=call.created,
        model="",
        text="",
        call=None,
        finish="stop",
        usage=usage,
    )


def _stream_response(
    request: HttpRequest,
    call: GatewayCall,
    encoder: _Encoder,
    head: list[str],
    events: Iterator[Any],
) -> StreamingHttpResponse:
    """The rest of a streamed reply: `head` (already worked out), then the events as they come.

    Under ASGI the events are pulled in the request's thread (`sync_to_async`) from an async
    iterator, with a keep-alive while the model works; under WSGI from a plain iterator.
    """

    def pull() -> Any:
        try:
            return next(events)
        except StopIteration:
            return None

    def failed(exc: ApplicationError) -> str:
        call.refused(exc)
        return encoder.error(exc)

    def sync_stream() -> Iterator[str]:
        yield from head
        while True:
            try:
                event = pull()
            except ApplicationError as exc:
                yield failed(exc)
                return
            if event is None:
                return
            yield encoder.event(event)

    async def async_stream() -> AsyncIterator[str]:
        for chunk in head:
            yield chunk
        while True:
            pending = asyncio.ensure_future(sync_to_async(pull)())
            while True:
                done, _ = await asyncio.wait({pending}, timeout=settings.GATEWAY_KEEPALIVE_SECONDS)
                if done:
                    break
                yield encoder.keepalive()
            try:
                event = pending.result()
            except ApplicationError as exc:
                yield await sync_to_async(failed)(exc)
                return
            if event is None:
                return
            chunk = encoder.event(event)
            if chunk:
                yield chunk

    content: Any = async_stream() if isinstance(request, ASGIRequest) else sync_stream()
    response = StreamingHttpResponse(content, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    _session_headers(response, call)
    return response


def _serve(
    request: HttpRequest, client_format: ClientFormat
) -> HttpResponse | StreamingHttpResponse:
    if request.method != "POST":
        return refusal_response(
            client_format,
            ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes POST."),
        )
    call: GatewayCall | None = None
    try:
        application, session_id = _caller(request)
        body = _body(request)
        parsed = _parse(client_format, body)
        call = GatewayCall(
            application=application,
            request=parsed,
            body_hash=request_hash(body),
            session_key_of=session_id,
            named_session=request.headers.get(SESSION_HEADER) if session_id is None else None,
            idempotency_key=_idempotency_key(request),
            upstream_key=request.headers.get(UPSTREAM_KEY_HEADER) or None,
        )
        stored = call.open()
        if stored is not None:
            if parsed.stream:
                encoder = _Encoder(call)
                response = _stream_response(
                    request, call, encoder, [encoder.whole(stored.reply)], iter(())
                )
                response["X-Contextproto-Replayed"] = "true"
                return response
            return _reply_response(call, stored)
        events = call.drive()
        if not parsed.stream:
            for event in events:
                if isinstance(event, Finished):
                    return _reply_response(call, event)
            raise AssertionError("the gateway's turns ended without a reply")
        # Errors up to the first model call's answer still get their HTTP status (and the
        # SDKs' retries); after it, a failure is an error event of the stream.
        encoder = _Encoder(call)
        text: list[TextDelta] = []
        head: list[str] = []
        for event in events:
            if isinstance(event, TextDelta):
                text.append(event)
                continue
            head.append(encoder.start(_usage_reply(call, event)))
            head += [encoder.event(t) for t in text]
            head.append(encoder.event(event))
            break
        return _stream_response(request, call, encoder, head, events)
    except _Refused as refused:
        if call is not None:
            call.refused(refused.error)
        else:  # no Application known (a bad key) or no request to record: counted here
            metrics.gateway_request(client_format, refused.error.status, None)
        return refusal_response(client_format, refused.error, call)
    except ApplicationError as exc:
        if call is not None:
            call.refused(exc)
        return refusal_response(client_format, exc, call)
    except (OperationalError, InterfaceError):  # the database is down or unreachable
        logger.exception("gateway: database unavailable")
        return refusal_response(
            client_format,
            ApplicationError(DEPENDENCY_UNAVAILABLE, "The database is unavailable; retry later."),
            call,
        )
    except Exception:
        logger.exception("gateway: unexpected error")
        return refusal_response(
            client_format,
            ApplicationError(
                INTERNAL_ERROR, "A defect of the service; nothing to fix on your side."
            ),
            call,
        )


@csrf_exempt
def openai_chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _serve(request, ClientFormat.OPENAI)


@csrf_exempt
def anthropic_messages(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _serve(request, ClientFormat.ANTHROPIC)


def _models(
    request: HttpRequest, client_format: ClientFormat, render: Callable[..., Any]
) -> HttpResponse:
    if request.method != "GET":
        return refusal_response(
            client_format, ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes GET.")
        )
    try:
        application, _session = _caller(request)
    except _Refused as refused:
        return refusal_response(client_format, refused.error)
    listed = [
        ListedModel(
            gateway_model_name(v),
            int((v.published_at or v.created_at).timestamp()),
            application.name,
        )
        for v in gateway_models(application=application)
    ]
    return HttpResponse(dumps(render(listed)), content_type="application/json")


@csrf_exempt
def openai_models(request: HttpRequest) -> HttpResponse:
    return _models(request, ClientFormat.OPENAI, openai_wire.models_list)


@csrf_exempt
def anthropic_models(request: HttpRequest) -> HttpResponse:
    return _models(request, ClientFormat.ANTHROPIC, anthropic_wire.models_list)


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    client_format = (
        ClientFormat.ANTHROPIC
        if request.path.startswith("/gateway/anthropic")
        else ClientFormat.OPENAI
    )
    return refusal_response(
        client_format,
        ApplicationError(
            NOT_FOUND,
            f"No gateway endpoint at {request.path}: use …/gateway/openai/v1/chat/completions "
            "or …/gateway/anthropic/v1/messages (and each one's v1/models).",
        ),
    )
