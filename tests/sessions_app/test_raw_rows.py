"""The tuple path of the hot reads returns exactly what the ORM model path returns."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from sessions_app.models import Message
from sessions_app.reads.raw_log import log_window
from sessions_app.store.codec import RAW_COLUMNS, MessageValues, raw_from_row, raw_from_values


def test_values_rows_map_to_the_same_raw_messages_as_model_rows(api_session):
    s = api_session()
    s.input("plain text input")
    s.input(
        [
            {"type": "text", "text": "parts ü"},
            {"type": "image", "mediaType": "image/png", "data": "AAAA"},
        ]
    )
    s.host_tool_work()
    s.write(role="assistant", kind="text", content="an answer")
    rows = Message.objects.filter(session_id=s.id).order_by("index")
    by_model = [raw_from_row(row) for row in rows]
    by_values = [raw_from_values(v) for v in rows.values_list(*RAW_COLUMNS)]
    assert by_values == by_model
    assert {m.kind for m in by_values} == {"input", "tool_call", "tool_result", "text"}
    call = next(m for m in by_values if m.kind == "tool_call")
    assert call.snapshot_id and call.run_id and len(call.run_id) == 32  # N-format RunId
    assert log_window(s.id, "main", 0, 10**6) == by_model


def test_the_outline_is_the_window_without_bodies_hot_and_archived(api_session):
    from dataclasses import replace

    from sessions_app.services.archive import archive_session

    s = api_session()
    for n in range(3):
        s.input(f"input {n}")
        s.host_tool_work(result="x" * 50)
    full = log_window(s.id, "main", 0, 10**6)
    archive_session(session_id=s.id, keep_last=3, chunk_size=4)
    outline = log_window(s.id, "main", 0, 10**6, outline=True)
    assert outline == [replace(m, content="", arguments=None) for m in full]
    assert log_window(s.id, "main", 0, 10**6) == full


def test_raw_from_values_reads_each_column_by_its_name():
    """The codec's unpacking follows MessageValues (and RAW_COLUMNS is its field list): every
    column lands in the RawMessage field of the same name."""
    assert RAW_COLUMNS == MessageValues._fields
    ids = {name: UUID(int=n + 1) for n, name in enumerate(("id", "run_id", "snapshot_id"))}
    values = MessageValues(
        id=ids["id"],
        index=7,
        window_id="w",
        role="assistant",
        kind="tool_call",
        content="c",
        run_id=ids["run_id"],
        input_run="r",
        tool_call_id="call",
        tool_name="tool",
        arguments={"a": 1},
        is_error=False,
        snapshot_id=ids["snapshot_id"],
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    raw = raw_from_values(values)
    assert raw == raw_from_values(tuple(values))
    expected = {
        **values._asdict(),
        "id": str(ids["id"]),
        "run_id": ids["run_id"].hex,
        "snapshot_id": str(ids["snapshot_id"]),
        "created_at": "2026-01-02T00:00:00+00:00",
    }
    assert {name: getattr(raw, name) for name in RAW_COLUMNS} == expected
