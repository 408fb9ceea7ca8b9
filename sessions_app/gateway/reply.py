"""A gateway request's reply (contract §14): made of what its turns wrote, rendered by its wire.

The reply is read off the log as the transcript reads it (`reply_of`), so a client that
resends it is recognised; it is stored with the request's record in the commit of the turn
that ends the request, and a retry gets that stored body again, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextproto.protocol import catalog
from contextproto.protocol.custom_tools import KIND_CUSTOM
from contextproto.protocol.gateway.transcript import Item, reply_of
from contextproto.protocol.gateway.wire import (
    FINISH_LENGTH,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    ClientWire,
    Finish,
    GatewayRequest,
    Reply,
    Usage,
    dumps,
)
from contextproto.protocol.messages import KIND_TOOL_RESULT, RawMessage
from sessions_app.gateway.events import Finished
from sessions_app.models import GatewayExchange

# Stop reasons of an answer cut by its token limit (OpenAI's, Anthropic's words).
LENGTH_STOPS = frozenset({"length", "max_tokens"})
TURNS_HEADER = "X-Contextproto-Turns"
SNAPSHOT_HEADER = "X-Contextproto-Snapshot"
IGNORED_HEADER = "X-Contextproto-Ignored"
ADJUSTED_HEADER = "X-Contextproto-Adjusted"


def finish_of(item: Item, stop_reason: str | None) -> Finish:
    if item.calls:
        return FINISH_TOOL_CALLS
    return FINISH_LENGTH if stop_reason in LENGTH_STOPS else FINISH_STOP


def custom_tools_of(request: GatewayRequest) -> frozenset[str]:
    """The names of the request's free-form (custom) tools: their calls are custom calls."""
    return frozenset(t.name for t in request.tools if t.kind == KIND_CUSTOM)


def reply_item(written: Sequence[RawMessage], request: GatewayRequest) -> Item:
    """The reply the messages a request's turns wrote make (the answers of a request that
    failed half way and its retry's included)."""
    service_answered = {
        str(m.tool_call_id)
        for m in written
        if m.kind == KIND_TOOL_RESULT and m.snapshot_id is not None
    }
    item = reply_of(
        written, catalog.PROTOCOL_TOOL_NAMES, service_answered, custom_tools_of(request)
    )
    assert item is not None, "a finished request ends with a reply"
    return item


def render(wire: ClientWire, reply: Reply, request: GatewayRequest) -> str:
    """The reply's body in the client's wire: exactly what a non-streamed reply sends."""
    return dumps(wire.render_reply(reply, request))


def reply_headers(
    turns: int,
    snapshot_id: str,
    request: GatewayRequest,
    *,
    unused: tuple[str, ...] = (),
    adjusted: tuple[str, ...] = (),
) -> dict[str, str]:
    """A reply's headers: model calls made, the last view, what the gateway did not use
    (fields it ignores, and forwarded fields the upstream's API cannot carry) and what it
    changed (an output limit above the model's)."""
    headers = {TURNS_HEADER: str(turns)}
    if snapshot_id:
        headers[SNAPSHOT_HEADER] = snapshot_id
    ignored = (*request.ignored, *unused)
    if ignored:
        headers[IGNORED_HEADER] = ",".join(ignored)
    if adjusted:
        headers[ADJUSTED_HEADER] = ",".join(adjusted)
    return headers


def stored_reply(exchange: GatewayExchange, wire: ClientWire, request: GatewayRequest) -> Finished:
    """The stored reply of `exchange` again (a retry, a reused key): byte for byte, unless the
    retry speaks another client API (then rendered in its wire from the stored reply)."""
    reply = Reply.from_json(exchange.reply or {})
    # The body as sent, in the wire it was sent in; another wire renders the stored reply.
    sent = {exchange.client_format: exchange.reply_body}
    body = sent.get(wire.format) or render(wire, reply, request)
    headers = {**(exchange.reply_headers or {}), TURNS_HEADER: "0"}
    return Finished(reply=reply, body=body, headers=headers, replayed=True)


def rebuilt_reply(
    item: Item,
    wire: ClientWire,
    request: GatewayRequest,
    *,
    reply_id: str,
    created: int,
    model: str,
) -> Finished:
    """A reply of the log the gateway has no stored body for (it came through the HTTP API,
    or its record was lost), rendered anew for a retry."""
    reply = Reply(
        id=reply_id,
        created=created,
        model=model,
        text=item.text,
        call=item.calls[0] if item.calls else None,
        finish=finish_of(item, None),
        usage=Usage(),
        reasoning=item.reasoning,
        message_at=item.message_at,
        completed=created,
    )
    return Finished(
        reply=reply,
        body=render(wire, reply, request),
        headers={TURNS_HEADER: "0"},
        replayed=True,
    )
