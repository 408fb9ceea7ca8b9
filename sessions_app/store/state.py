"""KV state writes: several keys per transaction, revision +1 exactly once, limits enforced.

Locking contract: every function here that changes state runs inside a transaction and
holds the session row lock (`SELECT ... FOR NO KEY UPDATE`), so revisions are serial.

History (contract §10): `kv_apply_locked` is the one writer of KVEntry, and every row it
upserts is appended to KVHistory at the new revision by a trigger on KVEntry (migration
0011), in the same statement; removals append their marker here. So the state at any
revision since the history began can be read back (sessions_app.reads.history).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, overload
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q

from contextproto.errors import (
    KV_KEY_INVALID,
    KV_KEY_LIMIT_REACHED,
    KV_VALUE_TOO_LARGE,
    STATE_STALE,
    ApplicationError,
    NotFound,
)
from contextproto.protocol import json_texts
from contextproto.protocol import state as kvkeys
from sessions_app.models import FoldRecord, KVEntry, KVHistory, Session, WindowRecord


class _Delete:
    def __repr__(self) -> str:
        return "KV_DELETE"


KV_DELETE: Any = _Delete()
KV_KEY_MAX_LENGTH = 200


@overload
def session_lock(session_id: UUID | str) -> Session: ...
@overload
def session_lock(session_id: UUID | str, *, application_id: Any) -> Session | None: ...
def session_lock(session_id: UUID | str, *, application_id: Any = None) -> Session | None:
    """Lock and return the session row (FOR NO KEY UPDATE: child inserts are not blocked).

    Must be called inside a transaction. The version comes along (every write path needs
    it); only the session row is locked. Its current run does not: a run read in the same
    statement would be the row as it was when the statement began, before the lock was
    granted (PostgreSQL's READ COMMITTED), not what the lock's previous holder committed.
    With `application_id`: None when the session is not that Application's (else 404).
    """
    rows = Session.objects.select_for_update(no_key=True, of=("self",)).select_related(
        "agent_version"
    )
    if application_id is not None:
        return rows.filter(pk=session_id, application_id=application_id).first()
    try:
        return rows.get(pk=session_id)
    except (Session.DoesNotExist, ValueError) as exc:
        raise NotFound("Session", {"sessionId": str(session_id)}) from exc


def session_relock(session: Session) -> Session:
    """Lock `session`'s row again in this transaction and refresh what may have moved since it
    was read (its counters, its active window, its current run), without reading it whole:
    a driver that read the session with its version once, when its request opened, writes
    each later turn under this lock (issue 38: the session row read once per request)."""
    try:
        row = (
            Session.objects.select_for_update(no_key=True)
            .filter(pk=session.pk)
            .values("next_message_index", "state_revision", "active_window", "current_run_id")
            .get()
        )
    except Session.DoesNotExist as exc:
        raise NotFound("Session", {"sessionId": str(session.pk)}) from exc
    for name, value in row.items():
        setattr(session, name, value)
    return session


def encoded_size(value: Any) -> int:
    return len(json_texts.compact(value).encode())


def _check_writes(session: Session, writes: Mapping[str, Any]) -> None:
    """Refuse the whole batch if any key or value breaks a limit; nothing is written then."""
    max_bytes = settings.KV_MAX_VALUE_BYTES
    for key, value in writes.items():
        if not isinstance(key, str) or not key or len(key) > KV_KEY_MAX_LENGTH:
            raise ApplicationError(
                KV_KEY_INVALID,
                f"KV keys are non-empty strings of at most {KV_KEY_MAX_LENGTH} characters.",
                {"key": str(key)[:KV_KEY_MAX_LENGTH]},
            )
        if value is KV_DELETE:
            continue
        size = encoded_size(value)
        if size > max_bytes:
            raise ApplicationError(
                KV_VALUE_TOO_LARGE,
                f"The value of {key!r} is {size} bytes; the limit is {max_bytes} bytes. "
                "Store less (summarise) or split it.",
                {"key": key, "size": size, "limit": max_bytes},
            )
    added = [k for k, v in writes.items() if v is not KV_DELETE]
    removed = [k for k, v in writes.items() if v is KV_DELETE]
    # One statement: the session's key count and how many of these keys exist already.
    counts = KVEntry.objects.filter(session=session).aggregate(
        total=Count("id"),
        added_present=Count("id", filter=Q(key__in=added)),
        removed_present=Count("id", filter=Q(key__in=removed)),
    )
    new_keys = len(added) - counts["added_present"]
    gone = counts["removed_present"]
    if new_keys:
        count = counts["total"]
        limit = settings.KV_MAX_KEYS_PER_SESSION
        if count - gone + new_keys > limit:
            raise ApplicationError(
                KV_KEY_LIMIT_REACHED,
                f"This session already holds {count} KV keys; the limit is {limit}.",
                {"count": count, "adding": new_keys, "limit": limit},
            )


def _sync_secondary(session: Session, writes: Mapping[str, Any]) -> None:
    """Keep the fold and window index tables equal to their KV entries (one upsert each)."""
    folds, windows, gone_folds, gone_windows = [], [], [], []
    for key, value in writes.items():
        if key.startswith(kvkeys.FOLD_PREFIX):
            fold_id = key[len(kvkeys.FOLD_PREFIX) :]
            if value is KV_DELETE:
                gone_folds.append(fold_id)
            else:
                folds.append(
                    FoldRecord(
                        session=session,
                        fold_id=fold_id,
                        window_id=value["windowId"],
                        first_index=value["firstIndex"],
                        last_index=value["lastIndex"],
                    )
                )
        elif key.startswith(kvkeys.WINDOW_PREFIX):
            window_id = key[len(kvkeys.WINDOW_PREFIX) :]
            if value is KV_DELETE:
                gone_windows.append(window_id)
            else:
                windows.append(
                    WindowRecord(
                        session=session,
                        window_id=window_id,
                        status=value.get("status", kvkeys.STATUS_ACTIVE),
                        created_at_index=value.get("createdAtIndex", 0),
                    )
                )
    if gone_folds:
        FoldRecord.objects.filter(session=session, fold_id__in=gone_folds).delete()
    if gone_windows:
        WindowRecord.objects.filter(session=session, window_id__in=gone_windows).delete()
    if folds:
        FoldRecord.objects.bulk_create(
            folds,
            update_conflicts=True,
            unique_fields=["session", "fold_id"],
            update_fields=["window_id", "first_index", "last_index"],
        )
    if windows:
        WindowRecord.objects.bulk_create(
            windows,
            update_conflicts=True,
            unique_fields=["session", "window_id"],
            update_fields=["status", "created_at_index"],
        )


def kv_apply_locked(
    session: Session, writes: Mapping[str, Any], *, save_session: bool = True
) -> int:
    """Apply `writes` (key → JSON value or KV_DELETE) and bump the revision once.

    Precondition: inside a transaction, `session` locked by `session_lock`. Returns the new
    revision. Raises ApplicationError (kv_*) before writing anything if a limit is broken.
    With `save_session=False` the caller saves `state_revision` and `active_window` of the
    session row itself, in the same transaction (one row update per dispatch).
    """
    if not writes:
        return session.state_revision
    _check_writes(session, writes)
    revision = session.state_revision + 1
    deleted = [k for k, v in writes.items() if v is KV_DELETE]
    if deleted:
        KVEntry.objects.filter(session=session, key__in=deleted).delete()
        # The trigger sees inserts and updates only: a removal records its marker here.
        KVHistory.objects.bulk_create(
            [KVHistory(session=session, key=k, revision=revision, deleted=True) for k in deleted]
        )
    upserts = [
        KVEntry(session=session, key=k, value=v, revision=revision)
        for k, v in writes.items()
        if v is not KV_DELETE
    ]
    if upserts:
        KVEntry.objects.bulk_create(
            upserts,
            update_conflicts=True,
            unique_fields=["session", "key"],
            update_fields=["value", "revision"],
        )
    _sync_secondary(session, writes)
    session.state_revision = revision
    update_fields = ["state_revision"]
    active = writes.get(kvkeys.KEY_ACTIVE_WINDOW)
    if isinstance(active, str):
        session.active_window = active
        update_fields.append("active_window")
    if save_session:
        session.save(update_fields=update_fields)
    return revision


def kv_commit(
    *, session_id: UUID | str, writes: Mapping[str, Any], expected_revision: int | None = None
) -> int:
    """Commit several KV keys in one transaction; the revision rises by exactly one.

    With `expected_revision`, refuses with `context_state_stale` (409) unless the session is
    still at that revision (compare-and-set). Nothing is written on any refusal.
    """
    with transaction.atomic():
        session = session_lock(session_id)
        if expected_revision is not None and session.state_revision != expected_revision:
            raise ApplicationError(
                STATE_STALE,
                f"The state moved to revision {session.state_revision}; "
                f"re-read it before writing (you sent {expected_revision}).",
                {"currentRevision": session.state_revision, "expectedRevision": expected_revision},
            )
        return kv_apply_locked(session, writes)


def kv_install_locked(session: Session, history: Iterable[KVHistory]) -> dict[str, Any]:
    """Give a new session the KV history `history` (a fork's copy); return its current KV.

    `history`: unsaved rows (key, revision, value, deleted) of this session, in key and
    revision order, none above `session.state_revision`. KVEntry gets each key's newest
    value at its own revision (the trigger appends those history rows), KVHistory the rest
    (older values and removals), and the fold and window tables follow the entries.
    Precondition: inside a transaction; the session has no KV yet. Limits are not checked:
    the state was within them when it was written.
    """
    rows = list(history)
    newest: dict[str, KVHistory] = {}
    for row in rows:
        newest[row.key] = row
    current = {key: row for key, row in newest.items() if not row.deleted}
    older = [row for row in rows if current.get(row.key) is not row]
    if older:
        KVHistory.objects.bulk_create(older)
    if current:
        KVEntry.objects.bulk_create(
            [
                KVEntry(session=session, key=key, value=row.value, revision=row.revision)
                for key, row in current.items()
            ]
        )
    state = {key: row.value for key, row in current.items()}
    _sync_secondary(session, state)
    return state
