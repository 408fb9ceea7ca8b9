"""A window's rows already read, kept per process, so a turn reads only what is new.

Every turn's view needs the active window's messages in (C, U]. Messages are immutable once
written, a message never changes window, and an archive move keeps every field, so the rows a
turn read for (C, U] are still exactly the rows of that range at the next turn: only the
messages above U are new (and C, the checkpoint's bound, only moves up). A driver that
advances one session turn after turn (a Celery worker's run, a gateway request's turns, the
next request served by the same process) then converts a few new rows per turn instead of
the whole window. Bounded by sessions and by rows; a read that finds part of its range
archived goes to the merging readers and starts the entry over.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from contextproto.protocol.messages import RawMessage
from sessions_app.reads import hot_sql, raw_log

MAX_WINDOWS = 256  # (session, window) entries kept
MAX_ROWS = 20_000  # a window with more rows than this is not kept


@dataclass(frozen=True)
class _Entry:
    after: int  # the rows are the window's messages in (after, through]
    through: int
    rows: tuple[RawMessage, ...]


_entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
_lock = threading.Lock()


def _get(key: tuple[str, str]) -> _Entry | None:
    with _lock:
        entry = _entries.get(key)
        if entry is not None:
            _entries.move_to_end(key)
        return entry


def _put(key: tuple[str, str], entry: _Entry) -> None:
    if connection.in_atomic_block:
        # Rows read inside a transaction may be its own uncommitted writes: kept only once
        # they are committed (a rollback would leave indices that later rows reuse).
        transaction.on_commit(lambda: _keep(key, entry))
        return
    _keep(key, entry)


def _keep(key: tuple[str, str], entry: _Entry) -> None:
    with _lock:
        if len(entry.rows) > MAX_ROWS:
            _entries.pop(key, None)
            return
        _entries[key] = entry
        _entries.move_to_end(key)
        while len(_entries) > MAX_WINDOWS:
            _entries.popitem(last=False)


def clear() -> None:
    with _lock:
        _entries.clear()


def view_rows(
    session_id: Any, window_id: str, after: int, through: int, run_id: str | None
) -> tuple[list[RawMessage], list[RawMessage]]:
    """W's messages in (after, through] and the run's inputs up to `through`, as
    `hot_sql.view_rows` (or the merging readers) give them, reading only the rows above the
    kept ones when this process read the window before."""
    key = (str(session_id), window_id)
    kept = _get(key)
    if kept is not None and kept.after <= after and kept.through <= through:
        newer = hot_sql.view_rows(session_id, window_id, kept.through, through, run_id)
        if newer is not None:
            rows = tuple(m for m in kept.rows if m.index > after) + tuple(newer.window)
            _put(key, _Entry(after, through, rows))
            return list(rows), newer.run_inputs
    hot = hot_sql.view_rows(session_id, window_id, after, through, run_id)
    if hot is not None:
        window, run_inputs = hot.window, hot.run_inputs
    else:
        window = raw_log.log_window(session_id, window_id, after, through)
        run_inputs = raw_log.log_run_inputs(session_id, run_id, through) if run_id else []
    _put(key, _Entry(after, through, tuple(window)))
    return window, run_inputs
