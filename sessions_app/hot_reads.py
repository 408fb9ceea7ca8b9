"""The turn's hot reads in plain SQL: the one module that owns raw SQL reads (issue #13).

`projection_build` runs on every turn. Through the ORM its reads cost several times the
statements themselves (compiling querysets, building rows), so the reads it needs are
written here by hand, one statement each:

* `view_rows`: the active window's messages in (C, U], the current run's inputs and the
  archive boundary B, from one snapshot of the table. When B says part of the range is in
  the cold archive, it answers None and the caller takes the merging readers of
  `sessions_app.selectors`, which handle cold chunks and concurrent moves.
* `kv_values` and `folds_of_window_above`: the view's KV values, and the folds of W above C
  (FoldRecord joined to their KV records).

Each returns exactly what the ORM readers in `selectors` return for the same rows (tests in
tests/sessions_app/test_hot_reads.py compare them on SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from django.db import connection, models

from contextproto.protocol.messages import Fold, RawMessage
from sessions_app.selectors import raw_from_values

_UUID = models.UUIDField()

# The columns of RawMessage, in selectors.RAW_FIELDS order.
_COLUMNS = (
    'id, "index", window_id, role, kind, content, run_id, input_run, tool_call_id, '
    "tool_name, arguments, is_error, snapshot_id, created_at"
)
_NULLS = ", ".join(["NULL"] * 12)  # the columns after "index" in part 2

# part 0: the window range; part 1: the run's inputs (any window, as log_run_inputs);
# part 2: one row carrying B in the "index" column. One statement, so one snapshot.
_VIEW_ROWS_SQL = f"""
SELECT 0 AS part, {_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND window_id = %s AND "index" > %s AND "index" <= %s
UNION ALL
SELECT 1, {_COLUMNS} FROM sessions_app_message
WHERE session_id = %s AND kind = 'input' AND input_run = %s AND "index" <= %s
UNION ALL
SELECT 2, NULL, COALESCE(
    (SELECT MAX(last_index) FROM sessions_app_archivechunk WHERE session_id = %s), 0
), {_NULLS}
ORDER BY 1, 3
"""

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


def _json(value: Any) -> Any:
    # Both backends hand JSON columns over as text here; the ORM decodes them the same way.
    return json.loads(value) if isinstance(value, str | bytes) else value


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _datetime(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite keeps naive UTC text
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _same(value: Any) -> Any:
    return value


# What the ORM's field converters do to each column of selectors.RAW_FIELDS, on both
# backends; raw_from_values then builds the RawMessage exactly as for an ORM row.
_CONVERTERS = (_uuid, _same, _same, _same, _same, _json, _uuid, _same, _same, _same, _json)
_CONVERTERS += (_bool, _uuid, _datetime)


def _raw(row: Sequence[Any]) -> RawMessage:
    """RawMessage of a `_VIEW_ROWS_SQL` row (its first column is the part)."""
    return raw_from_values([convert(v) for convert, v in zip(_CONVERTERS, row[1:], strict=True)])


def view_rows(
    session_id: Any,
    window_id: str,
    after_index: int,
    through_index: int,
    run_id: str | None,
) -> ViewRows | None:
    """W's messages in (after, through] and run `run_id`'s inputs up to `through`, or None
    when some of them may be archived (then read with `selectors.log_window` /
    `selectors.log_run_inputs`)."""
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
    boundary = rows[-1][2]
    # The window needs no cold rows when B <= after; the run's inputs only when B == 0
    # (a run may have started anywhere in the archived part; the cold reader searches it).
    if boundary > after_index or (run_id and boundary > 0):
        return None
    window = [_raw(row) for row in rows if row[0] == 0]
    run_inputs = [_raw(row) for row in rows if row[0] == 1]
    return ViewRows(window=window, run_inputs=run_inputs)


def kv_values(session_id: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The values of those of `keys` that are set (as `selectors.kv_values`)."""
    if not keys:
        return {}
    sql = _KV_SQL.format(keys=", ".join(["%s"] * len(keys)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [_db_uuid(session_id), *keys])
        return {key: _json(value) for key, value in cursor.fetchall()}


def folds_of_window_above(session_id: Any, window_id: str, after_index: int) -> list[Fold]:
    """W's folds starting above `after_index`, first index order, resolved to their KV
    records (as `selectors.folds_of_window_above`)."""
    with connection.cursor() as cursor:
        cursor.execute(_FOLDS_SQL, [_db_uuid(session_id), window_id, after_index])
        return [Fold.from_kv(fold_id, _json(value)) for fold_id, value in cursor.fetchall()]
