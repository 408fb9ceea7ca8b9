"""A side request answered (contract §19.1): its version's model, the request's own messages.

A client's background request (a title, a summary) beside a conversation with tools is not
part of the conversation: `open_request` recognises it (`Side`), and `side_drive` asks the
session's model with the client's own system text, messages and forwarded fields (no
protocol view, no tools, not the version's prompt), streamed or not like any reply, and
records it as a side exchange of the session (priced apart: `sideUsage`). Nothing of it is
written to the log, so it never enters the transcript or a view; it takes no run, so it does
not wait for (or hold up) the conversation's own request in flight.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from agents.models import AgentVersion
from contextproto.protocol.adapters import adapt
from contextproto.protocol.gateway.side import side_projection
from contextproto.protocol.gateway.wire import FINISH_LENGTH, FINISH_STOP, Reply, Usage
from contextproto.protocol.parameters import unused_fields, with_parameters
from contextproto.usage import tokens_of, turn_cost
from sessions_app.gateway.checks import within_model_limit
from sessions_app.gateway.events import Event, Finished, KeepAlive, ReasoningDone, TextDelta
from sessions_app.gateway.incoming import Incoming
from sessions_app.gateway.record import ExchangeRecord
from sessions_app.gateway.reply import LENGTH_STOPS, render, reply_headers
from sessions_app.gateway.threads import in_thread
from sessions_app.gateway.upstream import Heartbeat, model_pieces, upstream_error, upstream_timeout
from sessions_app.models import Session
from sessions_app.providers import ModelProvider, ProviderError
from sessions_app.providers.base import ModelReply, ReasoningChunk, TextChunk
from sessions_app.providers.scripted import ScriptedProvider
from sessions_app.services.runtime import model_step


@dataclass(frozen=True)
class Side:
    """A side request of `session` (None: its conversation has no session yet), ready to be
    asked of `version`'s model: the provider request to send."""

    incoming: Incoming
    session: Session | None
    version: AgentVersion
    provider: ModelProvider
    body: dict[str, Any]
    step: int | None
    reply_id: str
    created: int
    # What the request's fields became (X-Contextproto-Adjusted / -Ignored), as for any reply.
    adjusted: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()


def side_of(
    incoming: Incoming, session: Session | None, provider: ModelProvider, version: AgentVersion
) -> Side:
    """The side request's provider body, in the upstream's words (in the request's thread). A
    scripted model's step: the session's model calls so far (0 without a session)."""
    request = incoming.request
    session_id = str(session.id) if session is not None else ""
    adapted = adapt(side_projection(request, session_id), provider.wire_format, ())
    scripted = isinstance(provider, ScriptedProvider)
    parameters, adjusted = within_model_limit(request.parameters, version, incoming.wire)
    return Side(
        incoming=incoming,
        session=session,
        version=version,
        provider=provider,
        body=with_parameters(adapted.body, provider.wire_format, parameters),
        adjusted=adjusted,
        unused=unused_fields(parameters, provider.wire_format),
        step=(model_step(session) if session is not None else 0) if scripted else None,
        reply_id=incoming.wire.reply_id_prefix + uuid.uuid4().hex,
        created=int(time.time()),
    )


async def side_drive(side: Side, record: ExchangeRecord) -> AsyncGenerator[Event, None]:
    """The side request's events: its text as it comes, then its reply, recorded."""
    incoming, version = side.incoming, side.version
    answer: ModelReply | None = None
    started = time.monotonic()
    try:
        async for piece in model_pieces(
            side.provider,
            side.body,
            model=version.model_name,
            step=side.step,
            stream=incoming.request.stream,
            timeout=upstream_timeout(version),
            keepalive=settings.GATEWAY_KEEPALIVE_SECONDS,
        ):
            if isinstance(piece, Heartbeat):
                yield KeepAlive()
            elif isinstance(piece, TextChunk):
                yield TextDelta(piece.text)
            elif isinstance(piece, ReasoningChunk):
                yield ReasoningDone(piece.item)
            else:
                answer = piece
    except ProviderError as exc:
        raise upstream_error(exc, version, incoming.upstream_key) from exc
    assert answer is not None, "a model call ends with its answer"
    record.upstream_ms = round((time.monotonic() - started) * 1000)
    usage = dict(answer.usage or {})
    reply = Reply(
        id=side.reply_id,
        created=side.created,
        model=version.model_name,
        text=answer.text or "",
        call=None,
        finish=FINISH_LENGTH if answer.stop_reason in LENGTH_STOPS else FINISH_STOP,
        usage=Usage.from_recorded(usage),
        completed=int(time.time()),
    )
    finished = Finished(
        reply=reply,
        body=render(incoming.wire, reply, incoming.request),
        headers={
            **reply_headers(1, "", incoming.request, unused=side.unused, adjusted=side.adjusted),
            SIDE_HEADER: "true",
        },
    )
    tokens = tokens_of(usage)
    cost = turn_cost(tokens, version.prices) if tokens is not None else None
    await in_thread(
        record.side_reply, finished, request_hash=incoming.body_hash, tokens=tokens, cost=cost
    )
    yield finished


SIDE_HEADER = "X-Contextproto-Side"
