"""The tuple path of the hot reads returns exactly what the ORM model path returns."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID

from django.db import transaction

from contextproto.protocol.messages import Frame
from contextproto.protocol.state import KEY_CURRENT_WINDOW_ENTRY
from sessions_app.models import Message
from sessions_app.reads import hot_sql
from sessions_app.reads.hot_sql import kv_values
from sessions_app.reads.raw_log import log_window
from sessions_app.services.archive import archive_session
from sessions_app.services.dispatch import tool_dispatch
from sessions_app.services.messages import NewMessage, message_write_locked
from sessions_app.store.codec import (
    RAW_COLUMNS,
    MessageValues,
    raw_from_record,
    raw_from_row,
    raw_from_values,
    record_of_row,
    row_from_record,
)
from sessions_app.store.state import session_lock


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
    s = api_session()
    for n in range(3):
        s.input(f"input {n}")
        s.host_tool_work(result="x" * 50)
    full = log_window(s.id, "main", 0, 10**6)
    archive_session(session_id=s.id, keep_last=3, chunk_size=4)
    outline = log_window(s.id, "main", 0, 10**6, outline=True)
    assert outline == [replace(m, content="", arguments=None) for m in full]
    assert log_window(s.id, "main", 0, 10**6) == full


def test_a_tool_call_records_its_frame_and_archived_records_carry_it(api_session):
    """A host's call takes its snapshot's (R, U) as its frame; the record keeps it, and every
    path from a row to a RawMessage carries it."""
    s = api_session()
    s.input("start")
    view = s.project()
    call_id = s.call("context_task_memory_get", view)
    row = Message.objects.get(session_id=s.id, tool_call_id=call_id, kind="tool_call")
    frame = Frame(view["revision"], view["upperBound"])
    assert (row.frozen_revision, row.frozen_upper_bound) == (frame.revision, frame.upper_bound)
    record = record_of_row(row)
    assert raw_from_record(record).frame == raw_from_row(row).frame == frame
    values = Message.objects.filter(pk=row.pk).values_list(*RAW_COLUMNS).get()
    assert raw_from_values(values).frame == frame
    back = row_from_record(row.session_id, record)
    assert (back.frozen_revision, back.frozen_upper_bound) == (
        row.frozen_revision,
        row.frozen_upper_bound,
    )
    older = {k: v for k, v in record.items() if not k.startswith("frozen_")}
    assert row_from_record(row.session_id, older).frozen_revision is None  # an old chunk
    assert raw_from_record(older).frame is None
    other = Message.objects.filter(session_id=s.id, kind="input").first()
    assert (other.frozen_revision, other.frozen_upper_bound) == (None, None)
    assert raw_from_row(other).frame is None


def test_dispatch_acts_on_the_frame_recorded_on_the_call_before_its_snapshots(api_session):
    """A call whose frame differs from its snapshot's is dispatched on its own: the window
    entry an open records names the call's bound. A call without one (written before calls
    recorded theirs) reads its snapshot's."""
    s = api_session(version=2)
    s.input("start")
    view = s.project()
    own = Frame(view["revision"], view["upperBound"] - 1)
    with transaction.atomic():
        session = session_lock(s.id)
        call = message_write_locked(
            session,
            NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id="framed",
                tool_name="context_window_open",
                arguments={
                    "purpose": "p",
                    "windowId": "side",
                    "goal": "g",
                    "input": "i",
                    "expectedWindowId": "main",
                },
                snapshot_id=view["snapshotId"],
                frame=own,
            ),
        )
    assert raw_from_row(call).frame == own
    receipt = tool_dispatch(session_id=s.id, tool_call_id="framed")
    assert receipt.result["success"] is True, receipt.result
    entry = kv_values(s.id, [KEY_CURRENT_WINDOW_ENTRY])[KEY_CURRENT_WINDOW_ENTRY]
    assert entry["upperBoundBeforeEntry"] == own.upper_bound
    legacy = hot_sql.dispatch_frame(s.id, view["snapshotId"], call.index + 1)
    assert legacy.snapshot == Frame(view["revision"], view["upperBound"])


def test_raw_from_values_reads_each_column_by_its_name():
    """The codec's unpacking follows MessageValues (and RAW_COLUMNS is its field list): every
    column lands in the RawMessage field of the same name, the frame's two in `frame`."""
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
        frozen_revision=5,
        frozen_upper_bound=6,
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
    frame = {"frozen_revision": 5, "frozen_upper_bound": 6}
    expected = {k: v for k, v in expected.items() if k not in frame}
    assert {name: getattr(raw, name) for name in RAW_COLUMNS if name not in frame} == expected
    assert raw.frame == Frame(5, 6)
