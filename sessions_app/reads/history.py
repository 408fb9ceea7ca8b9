"""Reads of the KV history (contract §10): the state of a session as it was at a revision.

The state at R is, per key, the newest KVHistory row with revision <= R, unless that row
records a removal. One statement answers it: the rows <= R of the session with no newer
row <= R for their key (an anti-join on the primary key (session, key, revision)). Rows
<= R never change once R is committed, so any read of them is one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from contextproto.errors import REVISION_NOT_RECORDED, REVISION_OUT_OF_RANGE, ApplicationError
from contextproto.pagination import Page, keyset_page
from sessions_app.models import KVHistory, Session
from sessions_app.reads.lists import KV


def revision_check(session: Session, revision: int) -> None:
    """Refuse a revision the history cannot answer for `session`.

    Above the current revision: 400 `revision_out_of_range`. Below `kv_history_from` (a
    session older than the history, seeded with its state of that day): 400
    `revision_not_recorded`. `session` must have been read after `revision` was committed
    for the first check to mean "not yet".
    """
    if revision > session.state_revision:
        raise ApplicationError(
            REVISION_OUT_OF_RANGE,
            f"Revision {revision} is above the session's current revision "
            f"{session.state_revision}; ask for a revision from {session.kv_history_from} "
            f"to {session.state_revision}.",
            {
                "field": "revision",
                "revision": revision,
                "currentRevision": session.state_revision,
                "earliestRevision": session.kv_history_from,
            },
        )
    if revision < session.kv_history_from:
        raise ApplicationError(
            REVISION_NOT_RECORDED,
            f"The KV history of this session begins at revision {session.kv_history_from} "
            f"(the session is older than the history); its state at revision {revision} was "
            f"not recorded. Ask for a revision from {session.kv_history_from} to "
            f"{session.state_revision}.",
            {
                "field": "revision",
                "revision": revision,
                "currentRevision": session.state_revision,
                "earliestRevision": session.kv_history_from,
            },
        )


def _latest_through(session_id: Any, revision: int) -> QuerySet[KVHistory]:
    """Per key, the newest row with revision <= `revision` (removals included)."""
    newer = KVHistory.objects.filter(
        session_id=session_id,
        key=OuterRef("key"),
        revision__gt=OuterRef("revision"),
        revision__lte=revision,
    )
    return KVHistory.objects.filter(session_id=session_id, revision__lte=revision).filter(
        ~Exists(newer)
    )


def kv_rows_at(session_id: Any, revision: int) -> QuerySet[KVHistory]:
    """The entries of the session's KV at `revision` (rows with key, value and the revision
    that wrote them), to filter and page like KVEntry."""
    return _latest_through(session_id, revision).filter(deleted=False)


def kv_at(session_id: Any, revision: int, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """The KV of the session at `revision` (only `keys` if given): key -> value."""
    rows = kv_rows_at(session_id, revision)
    if keys is not None:
        rows = rows.filter(key__in=list(keys))
    return dict(rows.values_list("key", "value"))


def kv_page_at(
    session: Session, revision: int, *, prefix: str | None, cursor: str | None, limit: int
) -> Page[KVHistory]:
    """`kv_page` as it was at `revision`: entries in key order, each with the revision that
    last wrote it (at or below `revision`), only those starting with `prefix` if given."""
    rows = kv_rows_at(session.id, revision)
    if prefix:
        rows = rows.filter(key__startswith=prefix)
    return keyset_page(rows, KV, cursor=cursor, limit=limit)


def kv_history_through(session_id: Any, revision: int) -> list[KVHistory]:
    """Every history row of the session with revision <= `revision`, by key and revision."""
    return list(
        KVHistory.objects.filter(session_id=session_id, revision__lte=revision).order_by(
            "key", "revision"
        )
    )
