"""The one codec of a message row: its columns, named once, and every conversion between the
row types the log travels in.

Row types:

* `Message` — the ORM row (hot table `sessions_app_message`).
* `MessageValues` — a `values_list(*RAW_COLUMNS)` row with its columns named and typed (or
  the ORM's plain tuple of it, or a raw-SQL row converted as the ORM would): what the hot
  paths read, since building ~200 model instances per turn cost more than the query
  (BENCHMARKS.md).
* `MessageRecord` — the JSON record of an archived row (the cold chunk format): every
  column, UUIDs canonical, `created_at` ISO 8601.
* `RawMessage` — the engine's shape (contextproto.protocol.messages).

`raw_from_row(row) == raw_from_values(values of row) == raw_from_record(record_of_row(row))`
(tests/sessions_app/test_raw_rows.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, NotRequired, TypedDict, cast
from uuid import UUID

from contextproto.protocol.messages import Frame, Kind, RawMessage, Role
from sessions_app.models import Message


class MessageValues(NamedTuple):
    """A message row as values, its columns named and typed once: what
    `values_list(*RAW_COLUMNS)` gives (and a raw-SQL row once converted as the ORM would)."""

    id: UUID
    index: int  # type: ignore[assignment]  # the column; shadows tuple.index, unused here
    window_id: str
    role: str
    kind: str
    content: Any
    run_id: UUID | None
    input_run: str | None
    tool_call_id: str | None
    tool_name: str | None
    arguments: Any
    is_error: bool | None
    snapshot_id: UUID | None
    created_at: datetime
    frozen_revision: int | None  # a tool call's frame (R, U); null on other kinds
    frozen_upper_bound: int | None


# The columns of a RawMessage, in this order everywhere a row is read as values.
RAW_COLUMNS: tuple[str, ...] = MessageValues._fields
# The columns no RawMessage holds; archived records carry them too (chunks written before
# migration 0010 lack them, and those before 0019 a tool_call's frame: they read as null).
EXTRA_COLUMNS: tuple[str, ...] = (
    "written_at_revision",
    "forked_from_message_id",
)
# Columns left empty by an outline read (the group structure without the bodies).
BODY_COLUMNS: frozenset[str] = frozenset({"content", "arguments"})


def sql_columns(*, outline: bool = False) -> str:
    """RAW_COLUMNS as a SELECT list of `sessions_app_message`; with `outline`, content as
    the JSON text of "" and no arguments."""
    outline_value = {"content": "'\"\"'", "arguments": "NULL"}
    return ", ".join(
        outline_value[name] if outline and name in BODY_COLUMNS else f'"{name}"'
        for name in RAW_COLUMNS
    )


# A row in MessageValues order: a MessageValues, or the ORM's plain values_list tuple.
RawValues = Sequence[Any]


class MessageRecord(TypedDict):
    """One archived row (ArchiveChunk.data's `messages` entries)."""

    id: str
    index: int
    window_id: str
    role: str
    kind: str
    content: Any
    run_id: str | None
    input_run: str | None
    tool_call_id: str | None
    tool_name: str | None
    arguments: Any
    is_error: bool | None
    snapshot_id: str | None
    created_at: str
    written_at_revision: int | None
    forked_from_message_id: str | None
    frozen_revision: NotRequired[int | None]
    frozen_upper_bound: NotRequired[int | None]


def raw_from_values(values: RawValues) -> RawMessage:
    """RawMessage from a row in `MessageValues` order: a MessageValues or a
    `values_list(*RAW_COLUMNS)` tuple (extra trailing columns ignored).

    The unpacking below names the columns in MessageValues' order (a test holds the two
    together); reading a plain tuple by attribute would first build a MessageValues of it,
    which costs the hot path more than it names (docs/decisions.md)."""
    (
        message_id,
        index,
        window_id,
        role,
        kind,
        content,
        run_id,
        input_run,
        tool_call_id,
        tool_name,
        arguments,
        is_error,
        snapshot_id,
        created_at,
        frozen_revision,
        frozen_upper_bound,
    ) = values[: len(RAW_COLUMNS)]
    return RawMessage(
        id=str(message_id),
        index=index,
        window_id=window_id,
        role=role,
        kind=kind,
        content=content,
        run_id=run_id.hex if run_id else None,
        input_run=input_run,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments=arguments,
        is_error=is_error,
        snapshot_id=str(snapshot_id) if snapshot_id else None,
        created_at=created_at.isoformat(),
        frame=_frame(frozen_revision, frozen_upper_bound),
    )


def _frame(revision: int | None, upper_bound: int | None) -> Frame | None:
    """A tool call's frame from its two columns; None where they are null."""
    if revision is None or upper_bound is None:
        return None
    return Frame(revision, upper_bound)


def record_of_row(row: Message) -> MessageRecord:
    """Every column of `row` as JSON values (UUIDs canonical, created_at ISO 8601)."""
    return {
        "id": str(row.id),
        "index": row.index,
        "window_id": row.window_id,
        "role": row.role,
        "kind": row.kind,
        "content": row.content,
        "run_id": str(row.run_id) if row.run_id else None,
        "input_run": row.input_run,
        "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name,
        "arguments": row.arguments,
        "is_error": row.is_error,
        "snapshot_id": str(row.snapshot_id) if row.snapshot_id else None,
        "created_at": row.created_at.isoformat(),
        "written_at_revision": row.written_at_revision,
        "forked_from_message_id": (
            str(row.forked_from_message_id) if row.forked_from_message_id else None
        ),
        "frozen_revision": row.frozen_revision,
        "frozen_upper_bound": row.frozen_upper_bound,
    }


def raw_from_record(record: MessageRecord) -> RawMessage:
    """The engine shape of an archived record; equal to `raw_from_row` of the hot row."""
    return RawMessage(
        id=record["id"],
        index=record["index"],
        window_id=record["window_id"],
        # The stored strings, as on the hot path (each equals its member).
        role=cast(Role, record["role"]),
        kind=cast(Kind, record["kind"]),
        content=record["content"],
        run_id=UUID(record["run_id"]).hex if record["run_id"] else None,
        input_run=record["input_run"],
        tool_call_id=record["tool_call_id"],
        tool_name=record["tool_name"],
        arguments=record["arguments"],
        is_error=record["is_error"],
        snapshot_id=record["snapshot_id"],
        created_at=record["created_at"],
        frame=_frame(record.get("frozen_revision"), record.get("frozen_upper_bound")),
    )


def row_from_record(session_id: UUID, record: MessageRecord) -> Message:
    """An unsaved Message with the archived columns (for restore and read-only lookups)."""
    forked_from = record.get("forked_from_message_id")
    return Message(
        id=UUID(record["id"]),
        session_id=session_id,
        index=record["index"],
        window_id=record["window_id"],
        role=record["role"],
        kind=record["kind"],
        content=record["content"],
        run_id=UUID(record["run_id"]) if record["run_id"] else None,
        input_run=record["input_run"],
        tool_call_id=record["tool_call_id"],
        tool_name=record["tool_name"],
        arguments=record["arguments"],
        is_error=record["is_error"],
        snapshot_id=UUID(record["snapshot_id"]) if record["snapshot_id"] else None,
        created_at=datetime.fromisoformat(record["created_at"]),
        written_at_revision=record.get("written_at_revision"),
        forked_from_message_id=UUID(forked_from) if forked_from else None,
        frozen_revision=record.get("frozen_revision"),
        frozen_upper_bound=record.get("frozen_upper_bound"),
    )


def raw_from_row(row: Message) -> RawMessage:
    """The engine shape of a hot row; one mapping serves hot rows and archived records."""
    return raw_from_record(record_of_row(row))
