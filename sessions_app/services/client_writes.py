"""Idempotent host writes: a client message id turns a retried input or message into a replay.

Hosts retry when a response is lost (a timeout, a dropped connection). Without a key a retry
writes the message twice; with one, the first outcome is kept and replayed, like a tool
receipt. As Stripe does, the same id with a different request is an error, not a replay.
Refusals write nothing, so an id whose write was refused may be sent again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db import transaction

from contextproto.errors import CLIENT_MESSAGE_ID_REUSED, ApplicationError
from contextproto.protocol.messages import RawMessage
from sessions_app.models import ClientWrite, Message
from sessions_app.reads import raw_log
from sessions_app.store.codec import raw_from_row
from sessions_app.store.state import session_lock


def write_once(
    *,
    session_id: UUID | str,
    client_message_id: str | None,
    request: dict[str, Any],
    write: Callable[[], Message],
) -> tuple[RawMessage, bool]:
    """Run `write` once per (session, client_message_id); return (message, replayed).

    `request` is what identifies the write (kind, role, content, ...); a later call with the
    same id and another request is refused with 409 `client_message_id_reused`. The session
    row lock, taken before the lookup, serialises concurrent duplicates: the second one
    waits, then finds the first one's record. Without an id, `write` simply runs.
    """
    if client_message_id is None:
        return raw_from_row(write()), False
    digest = hashlib.sha256(
        json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    ).hexdigest()
    with transaction.atomic():
        session = session_lock(session_id)
        found = ClientWrite.objects.filter(
            session=session, client_message_id=client_message_id
        ).first()
        if found is not None:
            if found.request_hash != digest:
                raise ApplicationError(
                    CLIENT_MESSAGE_ID_REUSED,
                    f"clientMessageId {client_message_id!r} was already used for another write "
                    f"(message #{found.message_index}); use a new id for a new message.",
                    {"field": "clientMessageId", "index": found.message_index},
                )
            message = raw_log.log_at(session.id, found.message_index)
            if message is None:  # pragma: no cover - messages are never deleted
                raise RuntimeError(f"message #{found.message_index} of a client write is gone")
            return message, True
        written = write()
        ClientWrite.objects.create(
            session=session,
            client_message_id=client_message_id,
            request_hash=digest,
            message_index=written.index,
        )
        return raw_from_row(written), False
