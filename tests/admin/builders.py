"""Session builders for admin and browser tests: data made through the services (bulk
inserts of finished messages aside, which the log allows)."""

from __future__ import annotations

import uuid

from django.utils import timezone

SYSTEM_PROMPT = "You are a careful agent.\n{{context_protocol}}"


def build_session(version, *, input_text: str = "hello", tool_result: str = "42"):
    """A session with one run, a folded host tool interaction and three snapshots.

    Returns (session, fold_id, last_snapshot). Everything goes through the services the API
    uses: session_create, run_start, projection_build, message_write, tool_dispatch.
    """
    from sessions_app.services.dispatch import tool_dispatch
    from sessions_app.services.messages import message_write
    from sessions_app.services.projection import projection_build
    from sessions_app.services.runs import run_start
    from sessions_app.services.sessions import session_create

    session, _key = session_create(agent_version=version, inputs={"user": "operator"})
    run_start(session_id=session.id, content=input_text)
    first = projection_build(session_id=session.id)
    call = message_write(
        session_id=session.id,
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id="host_1",
        tool_name="lookup",
        arguments={"q": "answer"},
        snapshot_id=str(first.id),
    )
    result = message_write(
        session_id=session.id,
        role="tool",
        kind="tool_result",
        content=tool_result,
        tool_call_id="host_1",
    )
    second = projection_build(session_id=session.id)
    arguments = {
        "purpose": "tidy up",
        "fromIndex": call.index,
        "throughIndex": result.index,
        "summary": "Looked up the answer: 42.",
    }
    if version.context_protocol_version >= 2:
        arguments["expectedWindowId"] = "main"
    message_write(
        session_id=session.id,
        role="assistant",
        kind="tool_call",
        content="",
        tool_call_id="fold_1",
        tool_name="context_fold_create",
        arguments=arguments,
        snapshot_id=str(second.id),
    )
    receipt = tool_dispatch(session_id=session.id, tool_call_id="fold_1")
    assert receipt.result["success"], receipt.result
    last = projection_build(session_id=session.id)
    session.refresh_from_db()
    return session, receipt.result["foldId"], last


def bulk_messages(session, count: int, windows: tuple[str, ...] = ("main", "w1", "w2")) -> None:
    """Append `count` finished assistant texts round-robin over `windows` (raw inserts)."""
    from sessions_app.models import Message, Session

    start = Session.objects.get(pk=session.pk).next_message_index
    now = timezone.now()
    rows = [
        Message(
            id=uuid.uuid4(),
            session_id=session.pk,
            index=start + n,
            window_id=windows[n % len(windows)],
            role="assistant",
            kind="text",
            content=f"note {start + n}",
            created_at=now,
        )
        for n in range(count)
    ]
    Message.objects.bulk_create(rows, batch_size=2000)
    Session.objects.filter(pk=session.pk).update(next_message_index=start + count)
    session.refresh_from_db()
