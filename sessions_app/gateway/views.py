"""The gateway's HTTP edge (contract §14, §21): one async view per endpoint, any client API.

A request goes through its stages (`read_incoming` → `open_request` → `drive`), each
refusal and failure is answered in the client's own wire (`ClientWire.error_reply_body`) with the
headers its SDK retries by, and a streamed reply is Server-Sent Events from ONE async
generator (`_events_stream`) that closes the turns in `finally` and turns any failure after
the stream began into the wire's error event and a record. Under uvicorn the views run as
coroutines (contextproto/asgi.py serves /gateway/ without the browser middleware), so a client
that goes away cancels the request, which closes its upstream call; under WSGI (runserver,
the test client) Django runs them to the end and a stream is sent once complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from agents.models import Application
from agents.selectors import gateway_model_name, gateway_models
from contextproto import telemetry
from contextproto.errors import (
    DEPENDENCY_UNAVAILABLE,
    GATEWAY_CLIENT_DISCONNECTED,
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    SESSION_BUSY,
    ApplicationError,
    retryable,
)
from contextproto.middleware import request_id_of
from contextproto.protocol.gateway.responses_render import compacted_response
from contextproto.protocol.gateway.wire import (
    ClientFormat,
    ClientWire,
    ListedModel,
    StreamEncoder,
    Usage,
    dumps,
)
from contextproto.protocol.gateway.wires import wire_for
from sessions_app.gateway.checks import RETRY_AFTER_SECONDS
from sessions_app.gateway.drive import drive, release_run
from sessions_app.gateway.events import (
    Event,
    Finished,
    KeepAlive,
    ReasoningDone,
    TextDelta,
    TurnDone,
)
from sessions_app.gateway.incoming import (
    SESSION_HEADER,
    SESSION_KEY_HEADER,
    Incoming,
    Refused,
    caller_of,
    read_incoming,
)
from sessions_app.gateway.open import InFlight, Opened, compact_request, open_request
from sessions_app.gateway.paths import client_format_of_path
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.side import Side, side_drive
from sessions_app.gateway.threads import in_thread
from sessions_app.models import GatewayExchange

logger = logging.getLogger("contextproto.gateway")

REPLAYED_HEADER = "X-Contextproto-Replayed"
WARNING_HEADER = "X-Contextproto-Warning"
REQUEST_ID_HEADER = "X-Request-Id"
# How long a request identical to one in flight waits for that one's reply, at most.
IN_FLIGHT_POLL_SECONDS = (0.05, 0.1, 0.2, 0.4)


def _record(request: HttpRequest, wire: ClientWire) -> ExchangeRecord:
    """The request's record, its root span started (contract §22)."""
    record = ExchangeRecord(
        api=wire.format,
        path=request.path,
        request_id=request_id_of(request),
        user_agent=request.headers.get("User-Agent", "")[:256],
    )
    match = request.resolver_match
    route = "/" + match.route if match is not None and match.route else request.path
    record.trace(request.method or "POST", route, request.headers)
    return record


def _session_headers(
    response: HttpResponse | StreamingHttpResponse,
    record: ExchangeRecord,
    created_key: str | None = None,
) -> None:
    response[REQUEST_ID_HEADER] = record.request_id
    # Django closes a response once it is sent (ASGI: in the request's thread, before its
    # connection is released); what the reply need not wait for runs then.
    response._resource_closers.append(record.replied)  # type: ignore[union-attr]  # Django's
    if record.session_id is not None:
        response[SESSION_HEADER] = str(record.session_id)
    if record.warning:
        response[WARNING_HEADER] = record.warning
    if created_key is not None:
        response[SESSION_KEY_HEADER] = created_key


def error_answer(
    wire: ClientWire, error: ApplicationError, record: ExchangeRecord | None = None
) -> HttpResponse:
    """An error in the client API's shape, with the headers its SDK retries by: a 4xx the
    same request cannot get past says `x-should-retry: false`; what a later retry may get
    past says `Retry-After` (the registry's `retryable`)."""
    status = error.status
    response = HttpResponse(
        dumps(wire.error_reply_body(status, error.code, error.message, error.details)),
        status=status,
        content_type="application/json",
    )
    if retryable(error.code):
        if status != 500:
            wait = error.details.get("retryAfterSeconds") or RETRY_AFTER_SECONDS
            response["Retry-After"] = str(max(1, math.ceil(float(wait))))
    elif 400 <= status < 500:
        response["x-should-retry"] = "false"
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="gateway"'
    if record is not None:
        _session_headers(response, record)
    return response


async def _refuse(
    wire: ClientWire, error: ApplicationError, record: ExchangeRecord, request_hash: str = ""
) -> HttpResponse:
    """Record a refusal (its own commit), count it, answer it."""
    await in_thread(record.failed, error, request_hash)
    record.done(error.status, error.code)
    return error_answer(wire, error, record)


def _reply_response(
    finished: Finished, record: ExchangeRecord, created_key: str | None
) -> HttpResponse:
    response = HttpResponse(finished.body, content_type="application/json")
    for name, value in finished.headers.items():
        response[name] = value
    if finished.replayed:
        response[REPLAYED_HEADER] = "true"
    _session_headers(response, record, created_key)
    record.done(200)
    return response


async def _stream_response(
    content: AsyncIterator[str],
    request: HttpRequest,
    record: ExchangeRecord,
    created_key: str | None,
) -> StreamingHttpResponse:
    body: AsyncIterator[str] | list[str]
    if isinstance(request, ASGIRequest):
        body = content
    else:
        # WSGI: the whole stream at once (runserver and the test client have no event loop
        # to send it from as it comes).
        body = [chunk async for chunk in content]
    response = StreamingHttpResponse(body, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    _session_headers(response, record, created_key)
    return response


async def _open(incoming: Incoming, record: ExchangeRecord) -> Opened | Finished | Side:
    """Open the request; while a request identical to it is in flight on its session, wait
    for that one to end and open again (its reply then answers this one as a replay)."""
    waits = 0
    deadline = asyncio.get_running_loop().time() + settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS
    while True:
        task = asyncio.ensure_future(in_thread(open_request, incoming, record))
        try:
            opened = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The client went away while the request opened: let the open finish, then free
            # the run it claimed (nothing else of the request is written).
            with contextlib.suppress(Exception):
                late = await task
                if isinstance(late, Opened):
                    await in_thread(_release, late)
            raise
        if not isinstance(opened, InFlight):
            return opened
        while await in_thread(_running, opened):
            if asyncio.get_running_loop().time() > deadline:
                raise ApplicationError(
                    SESSION_BUSY,
                    "An identical request is still being served; retry for its reply.",
                    {"retryAfterSeconds": RETRY_AFTER_SECONDS},
                )
            await asyncio.sleep(IN_FLIGHT_POLL_SECONDS[min(waits, len(IN_FLIGHT_POLL_SECONDS) - 1)])
            waits += 1


def _running(in_flight: InFlight) -> bool:
    """Whether the identical request is still being served. The connection goes back to the
    pool after each look: a waiting request must not hold one the request it waits for needs
    to write its reply."""
    try:
        return GatewayExchange.objects.filter(
            pk=in_flight.exchange_id, status=GatewayExchange.Status.RUNNING
        ).exists()
    finally:
        connection.close()


def _release(opened: Opened) -> None:
    release_run(
        opened.run,
        ApplicationError(GATEWAY_CLIENT_DISCONNECTED, "The client went away before its reply."),
    )


async def _events_stream(
    head: list[Event],
    events: AsyncGenerator[Event, None],
    encoder: StreamEncoder,
    record: ExchangeRecord,
) -> AsyncIterator[str]:
    """The one stream of a reply: `head` (already pulled), then the events as they come, in
    the client's grammar. Closes the turns in `finally`; a failure after the first byte ends
    the stream with the wire's error event and is recorded."""
    status, code = 200, "ok"
    started = False

    def render(event: Event) -> str:
        nonlocal started
        out = ""
        if not started and not isinstance(event, KeepAlive):
            started = True
            usage = event.usage if isinstance(event, TurnDone) else None
            if isinstance(event, Finished):
                usage = event.reply.usage
            out += encoder.start(usage or Usage())
        if isinstance(event, TextDelta):
            return out + encoder.text(event.text)
        if isinstance(event, ReasoningDone):
            return out + encoder.reasoning(event.item)
        if isinstance(event, Finished):
            return out + encoder.finish(event.reply)
        if isinstance(event, KeepAlive):
            return out + encoder.keepalive()
        return out

    try:
        async with aclosing(events):
            for event in head:
                chunk = render(event)
                if chunk:
                    yield chunk
            async for event in events:
                chunk = render(event)
                if chunk:
                    yield chunk
    except Exception as exc:
        error = failure_of(exc)
        status, code = error.status, error.code
        with contextlib.suppress(Exception):  # the database may be what failed
            await in_thread(record.failed, error)
        yield encoder.error(error.status, error.code, error.message, error.details)
    except BaseException:
        status, code = 499, "gateway_client_disconnected"
        raise
    finally:
        record.done(status, code)


def _visible(event: Event) -> bool:
    """Whether an event puts bytes on the wire of its own (then the stream has begun)."""
    return isinstance(event, TextDelta | ReasoningDone | Finished)


async def serve(
    request: HttpRequest, client_format: ClientFormat
) -> HttpResponse | StreamingHttpResponse:
    """One request of a client API (module docstring)."""
    wire = wire_for(client_format)
    record = _record(request, wire)
    if request.method != "POST":
        return await _refuse(
            wire, ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes POST."), record
        )
    incoming: Incoming | None = None
    created_key: str | None = None
    try:
        try:
            incoming = await in_thread(read_incoming, request, wire)
        except Refused as refused:
            record.application = refused.application
            return await _refuse(wire, refused.error, record)
        record.application = incoming.application
        record.streamed = incoming.request.stream
        opened = await _open(incoming, record)
        if isinstance(opened, Finished):
            if incoming.request.stream:
                encoder = wire.encoder(
                    incoming.request,
                    reply_id=opened.reply.id,
                    created=opened.reply.created,
                    model=opened.reply.model,
                )
                response = await _stream_response(
                    _once(encoder.whole(opened.reply)), request, record, None
                )
                for name, value in opened.headers.items():
                    response[name] = value
                if opened.replayed:  # a retry's reply again, not a compaction's own answer
                    response[REPLAYED_HEADER] = "true"
                record.done(200)
                return response
            return _reply_response(opened, record, None)
        if isinstance(opened, Side):
            events = side_drive(opened, record)
            model = opened.version.model_name
        else:
            created_key = opened.created_key
            telemetry.annotate_current(opened.facts)
            events = drive(opened, record)
            model = opened.session.agent_version.model_name
        encoder = wire.encoder(
            incoming.request, reply_id=opened.reply_id, created=opened.created, model=model
        )
        if not incoming.request.stream:
            finished: Finished | None = None
            async with aclosing(events):  # closed (its spans ended) before the root span
                async for event in events:
                    if isinstance(event, Finished):
                        finished = event
                        break
            assert finished is not None, "a request's turns end with its reply"
            return _reply_response(finished, record, created_key)
        # A failure before the first byte is an HTTP error (and the SDKs retry by it); the
        # stream begins with the first event that puts bytes on the wire.
        head: list[Event] = []
        try:
            async for event in events:
                if isinstance(event, KeepAlive):
                    continue
                head.append(event)
                if _visible(event):
                    break
        except BaseException:
            await events.aclose()
            raise
        return await _stream_response(
            _events_stream(head, events, encoder, record), request, record, created_key
        )
    except ApplicationError as exc:
        return await _refuse(wire, exc, record, incoming.body_hash if incoming else "")
    except Exception as exc:
        return await _refuse_quietly(wire, failure_of(exc), record)


def failure_of(exc: Exception) -> ApplicationError:
    """The error a failure is answered with: its own, the database's unavailability, or a
    defect (logged with its stack)."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, OperationalError | InterfaceError):
        logger.exception("gateway: database unavailable")
        return ApplicationError(DEPENDENCY_UNAVAILABLE, "The database is unavailable; retry later.")
    logger.exception("gateway: unexpected error")
    return ApplicationError(INTERNAL_ERROR, "A defect of the service; nothing to fix on your side.")


async def _refuse_quietly(
    wire: ClientWire, error: ApplicationError, record: ExchangeRecord
) -> HttpResponse:
    """A refusal whose record may fail too (the database is what failed)."""
    with contextlib.suppress(Exception):
        await in_thread(record.failed, error)
    record.done(error.status, error.code)
    return error_answer(wire, error, record)


async def _once(text: str) -> AsyncIterator[str]:
    yield text


@csrf_exempt
async def openai_chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return await serve(request, ClientFormat.OPENAI)


@csrf_exempt
async def anthropic_messages(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return await serve(request, ClientFormat.ANTHROPIC)


@csrf_exempt
async def openai_responses(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return await serve(request, ClientFormat.RESPONSES)


async def received(
    request: HttpRequest, wire: ClientWire, record: ExchangeRecord
) -> Incoming | HttpResponse:
    """A POST endpoint's request read (`read_incoming`), or the answer refusing it."""
    if request.method != "POST":
        return await _refuse(
            wire, ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes POST."), record
        )
    try:
        incoming = await in_thread(read_incoming, request, wire)
    except Refused as refused:
        record.application = refused.application
        return await _refuse(wire, refused.error, record)
    record.application = incoming.application
    return incoming


@csrf_exempt
async def responses_compact(request: HttpRequest) -> HttpResponse:
    """`POST …/v1/responses/compact` (contract §21): a compaction item for the conversation,
    without a model call."""
    wire = wire_for(ClientFormat.RESPONSES)
    record = _record(request, wire)
    incoming = await received(request, wire, record)
    if isinstance(incoming, HttpResponse):
        return incoming
    try:
        compacted = await in_thread(compact_request, incoming, record)
        body = dumps(
            compacted_response(
                reply_id=wire.reply_id_prefix + uuid.uuid4().hex,
                created=int(time.time()),
                request=incoming.request,
                token=compacted.token,
            )
        )
        await in_thread(record.compacted, body, incoming.body_hash)
    except ApplicationError as exc:
        return await _refuse(wire, exc, record, incoming.body_hash)
    except Exception as exc:
        return await _refuse_quietly(wire, failure_of(exc), record)
    response = HttpResponse(body, content_type="application/json")
    _session_headers(response, record, compacted.created_key)
    record.done(200)
    return response


async def _models(request: HttpRequest, client_format: ClientFormat) -> HttpResponse:
    wire = wire_for(client_format)
    record = _record(request, wire)
    if request.method != "GET":
        return await _refuse(
            wire, ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes GET."), record
        )
    try:
        caller = await in_thread(caller_of, request)
    except Refused as refused:
        return await _refuse(wire, refused.error, record)
    record.application = caller.application
    try:
        listed = await in_thread(_listed, caller.application)
        await in_thread(record.answered)
    except Exception as exc:
        return await _refuse_quietly(wire, failure_of(exc), record)
    record.done(200)
    response = HttpResponse(dumps(wire.models_list(listed)), content_type="application/json")
    response[REQUEST_ID_HEADER] = record.request_id
    return response


def _listed(application: Application) -> list[ListedModel]:
    return [
        ListedModel(
            gateway_model_name(v),
            int((v.published_at or v.created_at).timestamp()),
            application.name,
        )
        for v in gateway_models(application=application)
    ]


@csrf_exempt
async def openai_models(request: HttpRequest) -> HttpResponse:
    return await _models(request, ClientFormat.OPENAI)


@csrf_exempt
async def anthropic_models(request: HttpRequest) -> HttpResponse:
    return await _models(request, ClientFormat.ANTHROPIC)


@csrf_exempt
async def anthropic_hello(request: HttpRequest) -> HttpResponse:
    """Claude Code's probe of its base URL (`HEAD …/api/hello`): 200 with nothing in it, and
    no exchange recorded, so a working client never shows on the dashboard as refused."""
    return HttpResponse(status=200)


@csrf_exempt
async def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """An unknown path under /gateway/: 404 in the wire its prefix names, counted and
    recorded like every other answer (with the key's Application when the key is known)."""
    wire = wire_for(client_format_of_path(request.path))
    record = _record(request, wire)
    try:
        record.application = (await in_thread(caller_of, request)).application
    except Refused:
        pass
    return await _refuse(
        wire,
        ApplicationError(
            NOT_FOUND,
            f"No gateway endpoint at {request.path}: use …/gateway/openai/v1/chat/completions, "
            "…/gateway/openai/v1/responses or …/gateway/anthropic/v1/messages (and each one's "
            "models).",
        ),
        record,
    )
