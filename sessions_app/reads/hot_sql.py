"""The turn's hot reads in plain SQL: the one module that owns raw SQL reads (issue #13).

`projection_build` and the dispatcher run on every turn. Through the ORM their reads cost
several times the statements themselves (compiling querysets, building rows), so the reads
they need are written here by hand, one statement each:

* `view_rows`: the active window's messages in (C, U], the current run's inputs and the
  archive boundary B, from one snapshot of the table. When B says part of the range is in
  the cold archive, it answers None and the caller takes the merging readers of
  `sessions_app.reads.raw_log`, which handle cold chunks and concurrent moves.
* `window_outline`: the same window range without the bodies, for the group scan of
  `context_fold_create`.
* `dispatch_frame`: a call's snapshot's frame (R, U) and the message before the call.
* `log_tail`: the log above an index, what a gateway request is reconciled with.
* `kv_values` and `folds_of_window_above`: the view's KV values, and the folds of W above C
  (FoldRecord joined to their KV records).

Each returns exactly what the ORM readers in `raw_log` return for the same rows (tests in
tests/sessions_app/test_hot_reads.py compare them on SQLite and PostgreSQL).

Rows are read by name: a message row is `part, *values` (the part says which SELECT of the
UNION it comes from, `_RANGE`, `_RUN_INPUTS` or `_BOUNDARY`; the values are the codec's
`MessageValues`), a dispatch frame row is a `_FrameRow`, and the column converters are keyed
by column name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, models

from contextproto.protocol.messages import Fold, Frame, RawMessage
from sessions_app.store.codec import RAW_COLUMNS, MessageValues, raw_from_values, sql_columns

_UUID = models.UUIDField()

# The columns of RawMessage (the codec's RAW_COLUMNS), and the same without the bodies
# (content as the JSON text of "", no arguments): what the group structure needs, as
# raw_log.OUTLINE_FIELDS.
_COLUMNS = sql_columns()
_OUTLINE_COLUMNS = sql_columns(outline=True)
# The "part" column of a UNION's rows: the range asked for (a window's or the log's tail),
# the current run's inputs, and the one last row that carries B in its "index" column.
_RANGE, _RUN_INPUTS, _BOUNDARY = 0, 1, 2
_NULLS = ", ".join(["NULL"] * (len(RAW_COLUMNS) - 2))  # the columns after "index"
_BOUNDARY_ROW = f"""SELECT {_BOUNDARY}, NULL, COALESCE(
    (SELECT MAX(last_index) FROM sessions_app_archivechunk WHERE session_id = %s), 0
), {_NULLS}"""

# The window range, the run's inputs (any window, as log_run_inputs) and B, in one
# statement, so one snapshot.
_VIEW_ROWS_SQL = f"""
SELECT {_RANGE} AS part, {_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND window_id = %s AND "index" > %s AND "index" <= %s
UNION ALL
SELECT {_RUN_INPUTS}, {_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND kind = 'input' AND input_run = %s AND "index" <= %s
UNION ALL
{_BOUNDARY_ROW}
ORDER BY 1, 3
"""

# The log above an index (every window) and B: the tail a gateway request is reconciled with.
# The upper bound is not a filter (nothing is above the session's last index) but what lets
# PostgreSQL see a narrow range: with `"index" > %s` alone it estimates from the whole
# table's histogram, where the largest sessions dominate, and on a long session scans all
# of its rows by session_id (18 ms instead of 0.2 ms at 100k messages).
_TAIL_SQL = f"""
SELECT {_RANGE} AS part, {_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND "index" > %s AND "index" <= %s
UNION ALL
{_BOUNDARY_ROW}
ORDER BY 1, 3
"""

# The window range without bodies and B, for the group scan of context_fold_create.
_OUTLINE_SQL = f"""
SELECT {_RANGE} AS part, {_OUTLINE_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND window_id = %s AND "index" > %s AND "index" <= %s
UNION ALL
{_BOUNDARY_ROW}
ORDER BY 1, 3
"""

# What a dispatch checks before its handler runs, for a call that names a snapshot: the
# snapshot's R/U (_FRAME_SNAPSHOT; the frame of a call written before calls recorded their
# own, which the call's RawMessage carries) and the message just before the call
# (_FRAME_PREVIOUS: is it a call of the same answer?), with B (_BOUNDARY), in one statement;
# each row is a _FrameRow.
_FRAME_SNAPSHOT, _FRAME_PREVIOUS = 0, 1
_DISPATCH_FRAME_SQL = f"""
SELECT {_FRAME_SNAPSHOT} AS part, revision, upper_bound, NULL, NULL, NULL
FROM sessions_app_projectionsnapshot WHERE session_id = %s AND id = %s
UNION ALL
SELECT {_FRAME_PREVIOUS}, "index", NULL, kind, tool_call_id, snapshot_id
FROM sessions_app_message WHERE session_id = %s AND "index" = %s
UNION ALL
SELECT {_BOUNDARY}, COALESCE(
    (SELECT MAX(last_index) FROM sessions_app_archivechunk WHERE session_id = %s), 0
), NULL, NULL, NULL, NULL
ORDER BY 1
"""


class _FrameRow(NamedTuple):
    """A row of `_DISPATCH_FRAME_SQL`; `number` is the snapshot's revision, the previous
    message's index or B, by part."""

    part: int
    number: int
    upper_bound: Any  # U on the snapshot's row, NULL on the others
    kind: Any  # the previous message's kind, NULL on the other rows
    tool_call_id: str | None
    snapshot_id: Any


_KV_SQL = "SELECT key, value FROM sessions_app_kventry WHERE session_id = %s AND key IN ({keys})"

_FOLDS_SQL = """
SELECT f.fold_id, k.value
FROM sessions_app_foldrecord f
JOIN sessions_app_kventry k ON k.session_id = f.session_id AND k.key = 'fold/' || f.fold_id
WHERE f.session_id = %s AND f.window_id = %s AND f.first_index > %s
ORDER BY f.first_index
"""


@dataclass(frozen=True)
class ViewRows:
    window: list[RawMessage]
    run_inputs: list[RawMessage]


def _db_uuid(value: Any) -> Any:
    return _UUID.get_db_prep_value(value, connection)


def _uuid(value: Any) -> UUID | None:
    return value if value is None or isinstance(value, UUID) else UUID(value)


def _uuid_text(value: Any) -> str | None:
    return None if value is None else str(_uuid(value))


def _json(value: Any) -> Any:
    # Both backends hand JSON columns over as text here; the ORM decodes them the same way.
    return json.loads(value) if isinstance(value, str | bytes) else value


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _datetime(value: Any) -> datetime:
    # SQLite keeps naive UTC text; PostgreSQL gives an aware datetime.
    moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# What the ORM's field converters do to the columns of a MessageValues, by column name, on
# both backends; the columns not named here come as the ORM gives them. raw_from_values then
# builds the RawMessage exactly as for an ORM row.
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "id": _uuid,
    "content": _json,
    "run_id": _uuid,
    "arguments": _json,
    "is_error": _bool,
    "snapshot_id": _uuid,
    "created_at": _datetime,
}
# The same as (position in the values, converter), worked out once so a row pays no lookup.
_CONVERSIONS = tuple((RAW_COLUMNS.index(name), convert) for name, convert in _CONVERTERS.items())


def _messages(rows: Sequence[Sequence[Any]]) -> dict[int, list[RawMessage]]:
    """The RawMessages of a UNION read's `part, *values` rows (all but the last, B's row), by
    part, in row order."""
    by_part: dict[int, list[RawMessage]] = {_RANGE: [], _RUN_INPUTS: []}
    for part, *values in rows[:-1]:
        for position, convert in _CONVERSIONS:
            values[position] = convert(values[position])
        by_part[part].append(raw_from_values(values))
    return by_part


def _boundary(rows: Sequence[Sequence[Any]]) -> int:
    """B, from the last row of a UNION read (the `_BOUNDARY` part, B in "index")."""
    part, *values = rows[-1]
    assert part == _BOUNDARY, part
    index: int = MessageValues._make(values).index
    return index


def view_rows(
    session_id: Any,
    window_id: str,
    after_index: int,
    through_index: int,
    run_id: str | None,
) -> ViewRows | None:
    """W's messages in (after, through] and run `run_id`'s inputs up to `through`, or None
    when some of them may be archived (then read with `raw_log.log_window` /
    `raw_log.log_run_inputs`)."""
    session = _db_uuid(session_id)
    after_index = max(after_index, 0)
    with connection.cursor() as cursor:
        cursor.execute(
            _VIEW_ROWS_SQL,
            [
                session,
                window_id,
                after_index,
                through_index,
                session,
                run_id or "",
                through_index if run_id else -1,
                session,
            ],
        )
        rows = cursor.fetchall()
    boundary = _boundary(rows)
    # The window needs no cold rows when B <= after; the run's inputs only when B == 0
    # (a run may have started anywhere in the archived part; the cold reader searches it).
    if boundary > after_index or (run_id and boundary > 0):
        return None
    found = _messages(rows)
    return ViewRows(window=found[_RANGE], run_inputs=found[_RUN_INPUTS])


def log_tail(session_id: Any, after_index: int, through_index: int) -> list[RawMessage] | None:
    """The messages in (after_index, through_index] in index order, or None when some of them
    may be archived (then `raw_log.log_page`)."""
    session = _db_uuid(session_id)
    after_index = max(after_index, 0)
    with connection.cursor() as cursor:
        cursor.execute(_TAIL_SQL, [session, after_index, through_index, session])
        rows = cursor.fetchall()
    if _boundary(rows) > after_index:
        return None
    return _messages(rows)[_RANGE]


def window_outline(
    session_id: Any, window_id: str, after_index: int, through_index: int
) -> list[RawMessage] | None:
    """W's messages in (after, through] without content and arguments, or None when some of
    them may be archived (then `raw_log.log_window(..., outline=True)`)."""
    session = _db_uuid(session_id)
    after_index = max(after_index, 0)
    with connection.cursor() as cursor:
        cursor.execute(_OUTLINE_SQL, [session, window_id, after_index, through_index, session])
        rows = cursor.fetchall()
    if _boundary(rows) > after_index:
        return None
    return _messages(rows)[_RANGE]


@dataclass(frozen=True)
class DispatchFrame:
    """The frame of the call's snapshot (None when it names none, or an unknown one); the
    message before the call as (kind, tool_call_id, snapshot_id) and whether it was read
    (False: archived, read it with `raw_log.log_at`)."""

    snapshot: Frame | None
    previous: tuple[str, str | None, str | None] | None
    previous_known: bool


def dispatch_frame(session_id: Any, snapshot_id: Any, call_index: int) -> DispatchFrame:
    """The call's snapshot's frame and the previous message a dispatch needs, in one
    statement."""
    session = _db_uuid(session_id)
    before = call_index - 1
    with connection.cursor() as cursor:
        cursor.execute(
            _DISPATCH_FRAME_SQL,
            [session, _db_uuid(snapshot_id), session, before, session],
        )
        rows = [_FrameRow._make(row) for row in cursor.fetchall()]
    snapshot = next(
        (Frame(r.number, r.upper_bound) for r in rows if r.part == _FRAME_SNAPSHOT),
        None,
    )
    previous = next(
        (
            (r.kind, r.tool_call_id, _uuid_text(r.snapshot_id))
            for r in rows
            if r.part == _FRAME_PREVIOUS
        ),
        None,
    )
    boundary = next(r.number for r in rows if r.part == _BOUNDARY)
    return DispatchFrame(
        snapshot=snapshot,
        previous=previous,
        previous_known=previous is not None or call_index - 1 > boundary or call_index <= 1,
    )


def kv_values(session_id: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The values of those of `keys` that are set (as `raw_log.kv_values`)."""
    if not keys:
        return {}
    sql = _KV_SQL.format(keys=", ".join(["%s"] * len(keys)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [_db_uuid(session_id), *keys])
        return {key: _json(value) for key, value in cursor.fetchall()}


def folds_of_window_above(session_id: Any, window_id: str, after_index: int) -> list[Fold]:
    """W's folds starting above `after_index`, first index order, resolved to their KV
    records (as `raw_log.folds_of_window_above`)."""
    with connection.cursor() as cursor:
        cursor.execute(_FOLDS_SQL, [_db_uuid(session_id), window_id, after_index])
        return [Fold.from_kv(fold_id, _json(value)) for fold_id, value in cursor.fetchall()]
