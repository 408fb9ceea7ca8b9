"""Earlier reply items a request names instead of sending them, resolved (contract §21).

A Responses client that keeps the ids of the output items it was given may send an earlier
item back as `{"type": "item_reference", "id": …}` (the Vercel AI SDK's `openai()` does for a
model it does not take for a reasoning model). The gateway gave the id, so the request's wire
names the replies it needs (`referenced_replies`), their stored bodies are read in one query
(stored responses of the key's Application only), and the wire puts each item in its
reference's place before the request is read.
"""

from __future__ import annotations

import json
from typing import Any

from agents.models import Application
from contextproto.protocol.gateway.wire import ClientWire, Reply
from sessions_app.models import GatewayExchange


def with_references_resolved(wire: ClientWire, body: Any, application: Application) -> Any:
    """`body` with its references replaced (`body` itself when it has none). Raises WireError
    naming a reference no stored response of `application` holds."""
    wanted = wire.referenced_replies(body)
    if not wanted:
        return wire.with_references(body, ())
    rows = GatewayExchange.objects.filter(
        application=application,
        reply_id__in=wanted,
        replayed=False,
        stored=True,
        deleted_at__isnull=True,
        status=GatewayExchange.Status.REPLIED,
    ).values_list("reply_body", "reply")
    replies = [
        json.loads(reply_body)
        if reply_body
        else wire.render_reply(Reply.from_json(reply or {}), None)  # type: ignore[arg-type]
        for reply_body, reply in rows
    ]
    return wire.with_references(body, replies)
