"""Raw log writes: gapless MessageIndex allocation under the session row lock."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from contextproto.protocol.messages import ROLE_OF_KIND
from sessions_app.models import Message, Run, Session
from sessions_app.services.state import session_lock


def message_append_locked(
    session: Session,
    *,
    role: str,
    kind: str,
    content: Any,
    window_id: str | None = None,
    run: Run | None = None,
    input_run: str | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    arguments: dict[str, Any] | None = None,
    is_error: bool | None = None,
    snapshot_id: UUID | str | None = None,
) -> Message:
    """Write one message with the next index of the locked session.

    Precondition: inside a transaction, `session` locked by `session_lock`. The window is the
    active window unless given (a tool result carries its call's window).
    """
    if ROLE_OF_KIND.get(kind) != role:
        raise ValueError(f"kind {kind!r} needs role {ROLE_OF_KIND.get(kind)!r}, not {role!r}")
    index = session.next_message_index
    message = Message(
        session=session,
        index=index,
        window_id=window_id or session.active_window,
        role=role,
        kind=kind,
        content=content,
        run=run if run is not None else session.current_run,
        input_run=input_run,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments=arguments,
        is_error=is_error,
        snapshot_id=snapshot_id,
        created_at=timezone.now(),
    )
    message.save(force_insert=True)
    session.next_message_index = index + 1
    session.save(update_fields=["next_message_index"])
    return message


def message_append(
    *, session_id: UUID | str, role: str, kind: str, content: Any, **fields: Any
) -> Message:
    """Append one message to a session's log; safe under any number of concurrent writers."""
    with transaction.atomic():
        session = session_lock(session_id)
        return message_append_locked(session, role=role, kind=kind, content=content, **fields)
