"""Per-window message counts are kept on write, so operator pages never count messages."""

from __future__ import annotations

from sessions_app.models import WindowRecord
from sessions_app.services.archive import archive_session
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.store.state import kv_commit


def test_each_append_counts_in_its_window(session):
    kv_commit(session_id=session.id, writes={"window/alpha": {"goal": "g", "status": "active"}})
    for _ in range(3):
        message_write(
            session_id=session.id, message=NewMessage(role="assistant", kind="text", content="m")
        )
    message_write(
        session_id=session.id,
        message=NewMessage(role="assistant", kind="text", content="a", window_id="alpha"),
    )
    counts = dict(
        WindowRecord.objects.filter(session=session).values_list("window_id", "message_count")
    )
    assert counts == {"main": 3, "alpha": 1}


def test_counts_survive_archiving(session):
    for _ in range(6):
        message_write(
            session_id=session.id, message=NewMessage(role="assistant", kind="text", content="m")
        )
    archive_session(session_id=session.id, keep_last=0, chunk_size=2)
    record = WindowRecord.objects.get(session=session, window_id="main")
    assert record.message_count == 6
