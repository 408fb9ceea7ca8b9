"""The API's list and lookup selectors (contract §12): a session by id, a gateway conversation by
its client's id, and the operator lists (messages, windows, folds, snapshots, KV), each
keyset-paged by contextproto.pagination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils.dateparse import parse_datetime

from contextproto.errors import NotFound
from contextproto.ids import parse_uuid
from contextproto.pagination import (
    BY_ID,
    Keyset,
    Page,
    Position,
    invalid_cursor,
    keyset_page,
    split_page,
)
from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key, window_key
from sessions_app.models import (
    FoldRecord,
    GatewayConversation,
    KVEntry,
    MaintenanceJob,
    ProjectionSnapshot,
    Session,
    WindowRecord,
)
from sessions_app.reads.raw_log import folds_from_records, kv_values, log_page
from sessions_app.store.snapshot_bodies import views_of


def session_get(*, session_id: Any, application_id: Any = None) -> Session:
    sessions = Session.objects.select_related("agent_version", "agent_version__agent")
    if application_id is not None:
        sessions = sessions.filter(application_id=application_id)
    session = sessions.filter(id=parse_uuid(session_id, "Session")).first()
    if session is None:
        raise NotFound("Session")
    return session


# A conversation's sub-agents listed at most: Claude Code starts one per Agent call.
CONVERSATION_CHILDREN_MAX = 1000


@dataclass(frozen=True)
class ConversationView:
    """A gateway conversation (contract §14): the session its id names, and its sub-agents'
    child sessions as (agent id, session id) in the order they began."""

    conversation_id: str
    session_id: UUID
    children: list[tuple[str, UUID]]


def gateway_conversation_get(*, application_id: Any, conversation_id: str) -> ConversationView:
    """The Application's conversation `conversation_id` (one query); NotFound (404) when it
    has none by that id."""
    rows = list(
        GatewayConversation.objects.filter(
            application_id=application_id, conversation_id=conversation_id
        )
        .order_by(
            # The conversation's own row first, then its children as they began.
            Case(When(agent_id="", then=Value(0)), default=Value(1), output_field=IntegerField()),
            "created_at",
            "id",
        )
        .values_list("agent_id", "session_id")[: CONVERSATION_CHILDREN_MAX + 1]
    )
    if not rows or rows[0][0] != "":
        raise NotFound("Conversation", {"conversationId": conversation_id})
    return ConversationView(
        conversation_id=conversation_id, session_id=rows[0][1], children=rows[1:]
    )


# ---------------------------------------------------------------- operator lists (contract §12)
# Each list is keyset-paged by contextproto.pagination: a Keyset per list says its order and
# what its cursor holds.


def message_page(
    session_id: Any, *, window_id: str | None, after_index: int, limit: int
) -> tuple[list[RawMessage], int | None]:
    """Up to `limit` messages above `after_index` and the afterIndex of the next page."""
    found, more = split_page(
        log_page(session_id, window_id=window_id, after_index=after_index, limit=limit + 1),
        limit,
    )
    return found, found[-1].index if more else None


WINDOWS = Keyset(
    order=("created_at_index", "window_id"),
    shape={"c": int, "w": str},
    position=lambda row: {"c": row.created_at_index, "w": row.window_id},
    after=lambda rows, at: rows.filter(created_at_index__gte=at["c"]).exclude(
        created_at_index=at["c"], window_id__lte=at["w"]
    ),
)


@dataclass(frozen=True)
class WindowView:
    """A window as operators list it: its KV record, checkpoint and compressed range."""

    window_id: str
    active: bool
    record: Any
    checkpoint: Any
    covered_through: int


def window_page(session: Session, *, cursor: str | None, limit: int) -> Page[WindowView]:
    """The session's windows in creation order, with their KV state (two queries)."""
    page = keyset_page(
        WindowRecord.objects.filter(session=session), WINDOWS, cursor=cursor, limit=limit
    )
    keys = []
    for row in page.items:
        keys += [window_key(row.window_id), checkpoint_key(row.window_id)]
        keys.append(covered_key(row.window_id))
    values = kv_values(session.id, keys)
    windows = [
        WindowView(
            window_id=row.window_id,
            active=row.window_id == session.active_window,
            record=values.get(window_key(row.window_id)),
            checkpoint=values.get(checkpoint_key(row.window_id)),
            covered_through=values.get(covered_key(row.window_id), 0),
        )
        for row in page.items
    ]
    return Page(windows, page.next_cursor)


def window_record_get(session: Session, window_id: str) -> WindowRecord:
    """The session's window `window_id`; NotFound (404) if it has none by that id."""
    record = WindowRecord.objects.filter(session=session, window_id=window_id).first()
    if record is None:
        raise NotFound("Window", {"windowId": window_id})
    return record


@dataclass(frozen=True)
class FoldView:
    """A fold and whether maintenance has compressed its range (it lies within coveredThrough)."""

    fold: Fold
    compressed: bool


def fold_page(session: Session, *, cursor: str | None, limit: int) -> Page[FoldView]:
    """The session's folds in creation order, resolved to their KV records."""
    page = keyset_page(
        FoldRecord.objects.filter(session=session), BY_ID, cursor=cursor, limit=limit
    )
    folds = folds_from_records(session.id, page.items)
    covered = kv_values(session.id, [covered_key(w) for w in {f.window_id for f in folds}])
    return Page(
        [FoldView(f, f.last_index <= int(covered.get(covered_key(f.window_id), 0))) for f in folds],
        page.next_cursor,
    )


def _snapshots_after(rows: QuerySet, at: Position) -> QuerySet:
    """Snapshots older than the cursor's (createdAt, id); `invalid_cursor` if it holds else."""
    try:
        created_at = parse_datetime(at["t"])
        snapshot_id = UUID(at["id"])
    except ValueError as exc:
        raise invalid_cursor() from exc
    if created_at is None or created_at.tzinfo is None:
        raise invalid_cursor()
    return rows.filter(created_at__lte=created_at).exclude(
        created_at=created_at, id__gte=snapshot_id
    )


SNAPSHOTS = Keyset(
    order=("-created_at", "-id"),
    shape={"t": str, "id": str},
    position=lambda row: {"t": row.created_at.isoformat(), "id": str(row.id)},
    after=_snapshots_after,
)


def snapshot_page(session: Session, *, cursor: str | None, limit: int) -> Page[ProjectionSnapshot]:
    """The session's stored views, newest first."""
    rows = ProjectionSnapshot.objects.filter(session=session)
    page = keyset_page(rows, SNAPSHOTS, cursor=cursor, limit=limit)
    views_of(page.items)  # every body of the page decoded from one read of their rows
    return page


def snapshot_get(session: Session, snapshot_id: str) -> ProjectionSnapshot:
    """One snapshot of the session with its view; 404 `not_found` for another's or none."""
    found = ProjectionSnapshot.objects.filter(
        session=session, pk=parse_uuid(snapshot_id, "Snapshot")
    ).first()
    if found is None:
        raise NotFound("Snapshot", {"snapshotId": snapshot_id})
    views_of([found])
    return found


KV = Keyset(
    order=("key",),
    shape={"k": str},
    position=lambda row: {"k": row.key},
    after=lambda rows, at: rows.filter(key__gt=at["k"]),
)


def kv_page(
    session: Session, *, prefix: str | None, cursor: str | None, limit: int
) -> Page[KVEntry]:
    """The session's KV entries in key order, only those starting with `prefix` if given."""
    rows = KVEntry.objects.filter(session=session)
    if prefix:
        rows = rows.filter(key__startswith=prefix)
    return keyset_page(rows, KV, cursor=cursor, limit=limit)


def maintenance_jobs_recent(session: Session, *, limit: int) -> list[MaintenanceJob]:
    """The session's last `limit` maintenance jobs, newest first."""
    return list(session.maintenance_jobs.order_by("-created_at")[:limit])
