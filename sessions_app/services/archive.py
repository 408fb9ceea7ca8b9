"""Cold archive moves (contract §2.3): hot rows into compressed chunks and back.

Both directions run in one transaction under the session row lock (FOR NO KEY UPDATE), the
same lock every writer takes, so no message is written, lost or duplicated mid-move. Hot
rows leave through raw SQL that passes the PostgreSQL immutability trigger by its
transaction-local flag only (migration 0002); the ORM guard stays in force everywhere. The
chunk format and the reads of chunks are in `sessions_app.store.cold_store`.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import IntegrityError, connection, transaction
from django.db.models import BigIntegerField, F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from contextproto.errors import ARCHIVE_RESTORE_CONFLICT, ApplicationError
from sessions_app.models import ArchiveChunk, Message, Session
from sessions_app.store.codec import record_of_row, row_from_record
from sessions_app.store.cold_store import (
    CHUNK_BATCH,
    archived_through,
    chunk_encode,
    chunk_records,
    iter_chunks,
)
from sessions_app.store.state import session_lock

logger = logging.getLogger(__name__)


# --- moving hot rows to cold ---------------------------------------------------------------


def _quoted(name: str | None) -> str:
    assert name is not None  # a concrete model's table and columns are always named
    return connection.ops.quote_name(name)


def _delete_hot_rows(session_id: UUID, first_index: int, last_index: int) -> int:
    """Delete hot rows #first..#last with raw SQL; the caller's transaction holds the lock.

    The ORM refuses message deletes. On PostgreSQL the trigger lets a DELETE through only while
    the transaction-local flag is on; it is switched off again right after, so nothing else in
    an enclosing transaction inherits it.
    """
    meta = Message._meta
    sql = (
        f"DELETE FROM {_quoted(meta.db_table)} "
        f"WHERE {_quoted(meta.get_field('session').column)} = %s "
        f"AND {_quoted(meta.get_field('index').column)} BETWEEN %s AND %s"
    )
    session_value = Session._meta.pk.get_db_prep_value(session_id, connection)
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("SET LOCAL contextproto.allow_message_delete = 'on'")
        cursor.execute(sql, [session_value, first_index, last_index])
        deleted = cursor.rowcount
        if postgres:
            cursor.execute("SET LOCAL contextproto.allow_message_delete = 'off'")
    return deleted


def _archive_next_chunk(
    session_id: Any, *, keep_last: int, chunk_size: int, older_than: datetime | None
) -> ArchiveChunk | None:
    """Move the next `chunk_size` oldest hot messages, if all may go; else return None."""
    with transaction.atomic():
        session = session_lock(session_id)
        first = (
            Message.objects.filter(session_id=session.id)
            .order_by("index")
            .values_list("index", flat=True)
            .first()
        )
        if first is None:
            return None
        last = first + chunk_size - 1
        if last > session.last_index - keep_last:
            return None
        if older_than is not None:
            newest = (
                Message.objects.filter(session_id=session.id, index=last)
                .values_list("created_at", flat=True)
                .first()
            )
            if newest is None or newest >= older_than:
                return None
        # The archive stays the prefix #1..B: the next chunk starts right after the last one.
        boundary = archived_through(session.id)
        if first != boundary + 1:
            raise IntegrityError(
                f"session {session.id}: oldest hot message #{first}, archive ends at #{boundary}"
            )
        rows = list(
            Message.objects.filter(
                session_id=session.id, index__gte=first, index__lte=last
            ).order_by("index")
        )
        if [r.index for r in rows] != list(range(first, last + 1)):
            raise IntegrityError(f"session {session.id}: hot #{first}-#{last} has a gap")
        records = [record_of_row(r) for r in rows]
        data = chunk_encode(records)
        # Round-trip check before anything is deleted: the chunk must hold exactly the rows.
        if json.loads(zlib.decompress(data))["messages"] != records:
            raise ValueError(f"session {session.id}: chunk #{first}-#{last} does not round-trip")
        chunk = ArchiveChunk.objects.create(
            session=session,
            first_index=first,
            last_index=last,
            message_count=len(rows),
            data=data,
        )
        deleted = _delete_hot_rows(session.id, first, last)
        if deleted != len(rows):
            raise IntegrityError(f"session {session.id}: deleted {deleted} of {len(rows)} rows")
        return chunk


def archive_session(
    *,
    session_id: UUID | str,
    keep_last: int = 2000,
    chunk_size: int = 500,
    older_than: datetime | None = None,
) -> list[ArchiveChunk]:
    """Move a session's oldest hot messages into chunks; return the chunks created.

    Leaves at least the newest `keep_last` messages hot and moves whole chunks of `chunk_size`
    consecutive indices only (a periodic run never leaves slivers); with `older_than`, a
    chunk moves only if its newest message was written before that time. Each chunk moves in
    its own transaction under the session row lock, so writers wait at most one chunk and a
    crash keeps the chunks already moved. Idempotent: a second run moves nothing new, and
    concurrent runs serialise on the lock. Call it outside a transaction, or the lock is held
    until the caller commits. Raises NotFound for an unknown session.
    """
    if keep_last < 0 or chunk_size < 1:
        raise ValueError("keep_last must be >= 0 and chunk_size >= 1")
    chunks: list[ArchiveChunk] = []
    while True:
        chunk = _archive_next_chunk(
            session_id, keep_last=keep_last, chunk_size=chunk_size, older_than=older_than
        )
        if chunk is None:
            return chunks
        chunks.append(chunk)


@dataclass(frozen=True)
class ArchiveSweep:
    sessions: int
    chunks: int
    messages: int
    failed: tuple[str, ...] = ()


def archive_candidates(
    *, older_than: datetime, keep_last: int, chunk_size: int, limit_sessions: int
) -> list[UUID]:
    """Sessions whose next whole chunk may move now: old enough and above `keep_last`.

    One pass over sessions; per session two index lookups (its newest chunk, and the message
    that would end the next chunk), so sessions with nothing to do are never picked.
    """
    boundary = Coalesce(
        Subquery(
            ArchiveChunk.objects.filter(session=OuterRef("pk"))
            .order_by("-last_index")
            .values("last_index")[:1]
        ),
        Value(0),
        output_field=BigIntegerField(),
    )
    next_chunk_end = Subquery(
        Message.objects.filter(
            session=OuterRef("pk"), index=OuterRef("archived_through") + chunk_size
        ).values("created_at")[:1]
    )
    return list(
        Session.objects.filter(created_at__lt=older_than)
        .annotate(archived_through=boundary)
        .filter(next_message_index__gt=F("archived_through") + chunk_size + keep_last)
        .annotate(next_chunk_end=next_chunk_end)
        .filter(next_chunk_end__lt=older_than)
        .order_by("archived_through", "created_at")
        .values_list("id", flat=True)[:limit_sessions]
    )


def archive_old_messages(
    *,
    older_than_seconds: int,
    keep_last: int = 2000,
    chunk_size: int = 500,
    limit_sessions: int = 100,
) -> ArchiveSweep:
    """Archive messages older than `older_than_seconds` in up to `limit_sessions` sessions.

    For the periodic task and the management command. A failing session is logged and
    skipped; the others still move.
    """
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    sessions = chunks = messages = 0
    failed: list[str] = []
    for session_id in archive_candidates(
        older_than=cutoff, keep_last=keep_last, chunk_size=chunk_size, limit_sessions=limit_sessions
    ):
        try:
            moved = archive_session(
                session_id=session_id,
                keep_last=keep_last,
                chunk_size=chunk_size,
                older_than=cutoff,
            )
        except Exception:
            logger.exception("archive of session %s failed", session_id)
            failed.append(str(session_id))
            continue
        if moved:
            sessions += 1
            chunks += len(moved)
            messages += sum(c.message_count for c in moved)
    return ArchiveSweep(sessions=sessions, chunks=chunks, messages=messages, failed=tuple(failed))


# --- moving cold rows back ------------------------------------------------------------------


def restore_session(*, session_id: UUID | str) -> int:
    """Move every chunk of a session back to hot rows; return the number of messages restored.

    One transaction under the session row lock: rows come back with their ids, indices,
    windows, runs, tool pairing and created_at, and the chunks are deleted; on any error
    nothing changes. Raises `archive_restore_conflict` (409) if a hot row already holds an
    archived index or toolCallId, NotFound for an unknown session.
    """
    try:
        with transaction.atomic():
            session = session_lock(session_id)
            restored = 0
            for chunk in iter_chunks(session.id, 0, None, batch=CHUNK_BATCH):
                rows = [row_from_record(session.id, r) for r in chunk_records(chunk)]
                Message.objects.bulk_create(rows)
                restored += len(rows)
            ArchiveChunk.objects.filter(session=session).delete()
            return restored
    except IntegrityError as exc:
        raise ApplicationError(
            ARCHIVE_RESTORE_CONFLICT,
            "An archived message collides with a hot one; nothing was restored.",
            {"sessionId": str(session_id)},
        ) from exc
