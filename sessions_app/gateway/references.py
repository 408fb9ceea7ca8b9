"""A Responses request's `item_reference` items, resolved (contract §21).

A client that keeps the ids of the output items it was given may send an earlier item back as
`{"type": "item_reference", "id": …}` instead of the item (the Vercel AI SDK's `openai()` does
for a model it does not take for a reasoning model). The gateway gave the id (`output_item_id`:
the reply's id and the item's place), so it finds the stored response of the key's
Application, and the item as that response answered it takes the reference's place before
the request is read. A reference to anything else is refused with the item named.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agents.models import Application
from contextproto.errors import INVALID_REQUEST, ApplicationError
from contextproto.protocol.gateway.responses_render import render_reply, reply_of_item
from contextproto.protocol.gateway.wire import Reply
from sessions_app.models import GatewayExchange

REFERENCE = "item_reference"


def _is_reference(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == REFERENCE


def with_references_resolved(body: Any, application: Application) -> Any:
    """`body` with each `item_reference` of its `input` replaced by the output item it names
    (one query for all of them); `body` itself when it has none. Raises ApplicationError 400
    `invalid_request` naming the first reference that names no output item of a stored
    response of `application`."""
    items = body.get("input") if isinstance(body, Mapping) else None
    if not isinstance(items, list) or not any(_is_reference(i) for i in items):
        return body
    wanted = {
        reply
        for item in items
        if _is_reference(item) and isinstance(item.get("id"), str)
        for reply in [reply_of_item(item["id"])]
        if reply is not None
    }
    outputs: dict[str, Any] = {}
    rows = GatewayExchange.objects.filter(
        application=application,
        reply_id__in=wanted,
        replayed=False,
        stored=True,
        deleted_at__isnull=True,
        status=GatewayExchange.Status.REPLIED,
    ).values_list("reply_body", "reply")
    for reply_body, reply in rows:
        answered = (
            json.loads(reply_body)
            if reply_body
            else render_reply(Reply.from_json(reply or {}), None)
        )
        outputs.update({o["id"]: o for o in answered.get("output", ()) if "id" in o})
    resolved: list[Any] = []
    for position, item in enumerate(items):
        if not _is_reference(item):
            resolved.append(item)
            continue
        found = outputs.get(item.get("id"))
        if found is None:
            raise ApplicationError(
                INVALID_REQUEST,
                f"input[{position}]: item_reference {item.get('id')!r} names no output item of "
                "a stored response of this Application (unknown, deleted, or made with store: "
                "false); send the item itself.",
                {"field": f"input[{position}].id"},
            )
        resolved.append(found)
    return {**body, "input": resolved}
