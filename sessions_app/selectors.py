"""Reads of the raw log and state, each bounded and index-backed.

Every reader of raw messages goes through `log_*` functions here, so the cold archive can be
merged in one place (SPEC §7).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from contextproto.api import parse_uuid
from contextproto.errors import NotFound
from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.state import fold_key
from sessions_app.models import FoldRecord, KVEntry, Message, Session

RAW_FIELDS = (
    "id",
    "index",
    "window_id",
    "role",
    "kind",
    "content",
    "run_id",
    "input_run",
    "tool_call_id",
    "tool_name",
    "arguments",
    "is_error",
    "snapshot_id",
    "created_at",
)


def to_raw(row: Message) -> RawMessage:
    return RawMessage(
        id=str(row.id),
        index=row.index,
        window_id=row.window_id,
        role=row.role,
        kind=row.kind,
        content=row.content,
        run_id=row.run_id.hex if row.run_id else None,
        input_run=row.input_run,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        arguments=row.arguments,
        is_error=row.is_error,
        snapshot_id=str(row.snapshot_id) if row.snapshot_id else None,
        created_at=row.created_at.isoformat() if row.created_at else None,
    )


def _raw(rows: Iterable[Message]) -> list[RawMessage]:
    return [to_raw(row) for row in rows]


def log_window(
    session_id: Any, window_id: str, after_index: int, through_index: int, limit: int | None = None
) -> list[RawMessage]:
    """W's messages with after < index <= through, index order (message_window_index)."""
    rows = Message.objects.filter(
        session_id=session_id,
        window_id=window_id,
        index__gt=after_index,
        index__lte=through_index,
    ).order_by("index")
    if limit is not None:
        rows = rows[:limit]
    return _raw(rows)


def log_run_inputs(session_id: Any, run_id: str, through_index: int) -> list[RawMessage]:
    """The current run's input messages, any window (message_run_inputs)."""
    rows = Message.objects.filter(
        session_id=session_id, kind="input", input_run=run_id, index__lte=through_index
    ).order_by("index")
    return _raw(rows)


def log_by_ids(session_id: Any, message_ids: Sequence[str]) -> list[RawMessage]:
    rows = Message.objects.filter(session_id=session_id, id__in=list(message_ids)).order_by("index")
    return _raw(rows)


def log_windows_of(session_id: Any, indices: Sequence[int]) -> dict[int, str]:
    return dict(
        Message.objects.filter(session_id=session_id, index__in=list(indices)).values_list(
            "index", "window_id"
        )
    )


def log_page(
    session_id: Any, *, window_id: str | None, after_index: int, limit: int
) -> list[RawMessage]:
    rows = Message.objects.filter(session_id=session_id, index__gt=after_index)
    if window_id is not None:
        rows = rows.filter(window_id=window_id)
    return _raw(rows.order_by("index")[:limit])


def kv_values(session_id: Any, keys: Sequence[str]) -> dict[str, Any]:
    return dict(
        KVEntry.objects.filter(session_id=session_id, key__in=list(keys)).values_list(
            "key", "value"
        )
    )


def folds_from_records(session_id: Any, records: Iterable[FoldRecord]) -> list[Fold]:
    """Resolve fold index rows to their KV records (the source of truth), in row order."""
    ids = [r.fold_id for r in records]
    if not ids:
        return []
    values = kv_values(session_id, [fold_key(i) for i in ids])
    return [Fold.from_kv(i, values[fold_key(i)]) for i in ids if fold_key(i) in values]


def folds_of_window_above(session_id: Any, window_id: str, after_index: int) -> list[Fold]:
    records = FoldRecord.objects.filter(
        session_id=session_id, window_id=window_id, first_index__gt=after_index
    ).order_by("first_index")
    return folds_from_records(session_id, records)


def session_get(*, session_id: Any, application_id: Any = None) -> Session:
    sessions = Session.objects.select_related("agent_version", "agent_version__agent")
    if application_id is not None:
        sessions = sessions.filter(application_id=application_id)
    session = sessions.filter(id=parse_uuid(session_id, "Session")).first()
    if session is None:
        raise NotFound("Session")
    return session
