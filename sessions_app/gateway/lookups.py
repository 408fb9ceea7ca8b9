"""The gateway's endpoints that run no turn (contract §19, §21): counting a view's tokens, and a
stored response read, listed or deleted.

`count_tokens` (Anthropic's `…/messages/count_tokens`, the Responses API's
`…/responses/input_tokens`) opens the request as its turn would, builds the view the model would
see now, and writes nothing: an `anthropic` upstream counts it with its own endpoint, any other
is the service's estimate (`X-Contextproto-Estimated: true`). A response of the Responses API
is a point in its session's log: read back, its input items listed (the transcript before its
output), or deleted (its id is unknown from then on; the log keeps the turn).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from contextproto.errors import METHOD_NOT_ALLOWED, RESPONSE_NOT_FOUND, ApplicationError
from contextproto.protocol.gateway.responses_render import input_items_page, render_reply
from contextproto.protocol.gateway.wire import ClientFormat, Reply, WireError, dumps
from contextproto.protocol.gateway.wires import wire_for
from contextproto.protocol.tokens import json_tokens
from sessions_app.gateway.incoming import Caller, Refused, caller_of
from sessions_app.gateway.open import count_request
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.threads import in_thread
from sessions_app.gateway.upstream import upstream_error
from sessions_app.gateway.views import (
    REQUEST_ID_HEADER,
    SESSION_HEADER,
    _record,
    _refuse,
    _refuse_quietly,
    failure_of,
    received,
)
from sessions_app.models import GatewayExchange
from sessions_app.providers import ProviderError
from sessions_app.providers.anthropic_messages import AnthropicMessagesProvider
from sessions_app.reads.transcript import transcript_tail

ESTIMATED_HEADER = "X-Contextproto-Estimated"
# A stored response's input items are listed from this many transcript items before it.
INPUT_ITEMS_READ = 10_000


def _json(record: ExchangeRecord, body: Any, status: int = 200) -> HttpResponse:
    response = HttpResponse(dumps(body), status=status, content_type="application/json")
    response[REQUEST_ID_HEADER] = record.request_id
    if record.session_id is not None:
        response[SESSION_HEADER] = str(record.session_id)
    record.done(status)
    return response


# --------------------------------------------------------------------------- counting


def _count(incoming: Any, record: ExchangeRecord) -> tuple[int, bool]:
    """(input tokens, estimated) of the view the request would make the model see now."""
    counted = count_request(incoming, record)
    record.session_id = counted.session_id
    provider = counted.provider
    if isinstance(provider, AnthropicMessagesProvider):
        try:
            return provider.count_tokens(counted.request, model=counted.model), False
        except ProviderError as exc:
            raise upstream_error(exc, counted.version, incoming.upstream_key) from exc
    return json_tokens(counted.request), True


async def count_tokens(request: HttpRequest, client_format: ClientFormat) -> HttpResponse:
    """`…/messages/count_tokens` and `…/responses/input_tokens`: the managed view's size."""
    wire = wire_for(client_format)
    record = _record(request, wire)
    incoming = await received(request, wire, record)
    if isinstance(incoming, HttpResponse):
        return incoming
    try:
        tokens, estimated = await in_thread(_count, incoming, record)
        await in_thread(record.answered)
    except ApplicationError as exc:
        return await _refuse(wire, exc, record)
    except Exception as exc:
        return await _refuse_quietly(wire, failure_of(exc), record)
    response = _json(record, wire.token_count(tokens))
    if estimated:
        response[ESTIMATED_HEADER] = "true"
    return response


@csrf_exempt
async def anthropic_count_tokens(request: HttpRequest) -> HttpResponse:
    return await count_tokens(request, ClientFormat.ANTHROPIC)


@csrf_exempt
async def responses_input_tokens(request: HttpRequest) -> HttpResponse:
    return await count_tokens(request, ClientFormat.RESPONSES)


# --------------------------------------------------------------------------- stored responses


def _stored(caller: Caller, response_id: str) -> GatewayExchange:
    """The stored response `response_id` of the caller's Application (404 otherwise)."""
    found = (
        GatewayExchange.objects.filter(
            application=caller.application,
            reply_id=response_id,
            replayed=False,
            stored=True,
            deleted_at__isnull=True,
            status=GatewayExchange.Status.REPLIED,
            client_format=ClientFormat.RESPONSES,
        )
        .only(
            "id",
            "session_id",
            "reply",
            "reply_body",
            "reply_start_index",
            "client_format",
        )
        .first()
    )
    if found is None or found.session_id is None:
        raise ApplicationError(
            RESPONSE_NOT_FOUND,
            f"No stored response {response_id!r} in this Application (unknown, deleted, or "
            "made with store: false).",
            {"responseId": response_id},
        )
    if caller.session_key_of is not None and caller.session_key_of != found.session_id:
        raise ApplicationError(
            RESPONSE_NOT_FOUND,
            f"No stored response {response_id!r} in this session.",
            {"responseId": response_id},
        )
    return found


def _detail(request: HttpRequest, response_id: str) -> tuple[Caller, Any, Any]:
    caller = caller_of(request)
    found = _stored(caller, response_id)
    if request.method == "DELETE":
        GatewayExchange.objects.filter(pk=found.pk).update(deleted_at=timezone.now())
        return caller, found.session_id, {"id": response_id, "object": "response", "deleted": True}
    return (
        caller,
        found.session_id,
        found.reply_body or dumps(render_reply(Reply.from_json(found.reply or {}), None)),
    )


def _input_items(request: HttpRequest, response_id: str) -> tuple[Caller, Any, Any]:
    caller = caller_of(request)
    found = _stored(caller, response_id)
    start = int(found.reply_start_index or 0)
    tail = transcript_tail(found.session_id, start - 1, wanted=INPUT_ITEMS_READ)
    items = [i for i in tail.transcript.items if i.position < start]
    limit = request.GET.get("limit")
    try:
        page = input_items_page(
            items,
            scope=str(found.session_id),
            order=request.GET.get("order", "desc"),
            after=request.GET.get("after") or None,
            limit=int(limit) if limit and limit.isdigit() else 20,
        )
    except WireError as exc:
        # Computed: the wire raises INVALID_REQUEST for a bad order, limit or cursor.
        raise ApplicationError(exc.code, exc.message, exc.details) from exc
    return caller, found.session_id, page


async def _lookup(request: HttpRequest, read: Any, *args: str) -> HttpResponse:
    wire = wire_for(ClientFormat.RESPONSES)
    record = _record(request, wire)
    try:
        caller, session_id, body = await in_thread(read, request, *args)
        record.application, record.session_id = caller.application, session_id
        await in_thread(record.answered)
    except Refused as refused:
        return await _refuse(wire, refused.error, record)
    except ApplicationError as exc:
        return await _refuse(wire, exc, record)
    except Exception as exc:
        return await _refuse_quietly(wire, failure_of(exc), record)
    if isinstance(body, str):
        response = HttpResponse(body, content_type="application/json")
        response[REQUEST_ID_HEADER] = record.request_id
        response[SESSION_HEADER] = str(session_id)
        record.done(200)
        return response
    return _json(record, body)


@csrf_exempt
async def response_detail(request: HttpRequest, response_id: str) -> HttpResponse:
    """`GET|DELETE …/v1/responses/{id}`."""
    if request.method not in ("GET", "DELETE"):
        wire = wire_for(ClientFormat.RESPONSES)
        return await _refuse(
            wire,
            ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes GET or DELETE."),
            _record(request, wire),
        )
    return await _lookup(request, _detail, response_id)


@csrf_exempt
async def response_input_items(request: HttpRequest, response_id: str) -> HttpResponse:
    """`GET …/v1/responses/{id}/input_items`."""
    if request.method != "GET":
        wire = wire_for(ClientFormat.RESPONSES)
        return await _refuse(
            wire,
            ApplicationError(METHOD_NOT_ALLOWED, "This endpoint takes GET."),
            _record(request, wire),
        )
    return await _lookup(request, _input_items, response_id)
