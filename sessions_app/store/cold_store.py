"""The cold archive's store (contract §2.3): the chunk format and every read of chunks.

Layout. The cold part of a session is a prefix of its log, #1..B: chunks of `chunk_size`
consecutive MessageIndexes, never overlapping; everything above B is hot. Readers
(`sessions_app.reads.raw_log.log_*`) merge both by MessageIndex. The moves between hot and cold
are in `sessions_app.services.archive`.

Chunk format (`ArchiveChunk.data`): zlib of the UTF-8 JSON
`{"v": 1, "messages": [record, ...]}` in index order, where a record is a
`sessions_app.store.codec.MessageRecord`: every column of the row (chunks written before
migration 0010 lack `written_at_revision` and `forked_from_message_id`, before 0019 a
tool_call's `frozen_revision` and `frozen_upper_bound`: they read as null).
Content is stored as the database returned it, so restore writes it back unchanged.

Archived tool calls. An unanswered call may be archived (an orphaned call must not pin the
whole log hot forever); its result is written later as a hot row. Code that looks a call up
by toolCallId uses `archived_message_by_tool_call` when the hot table has no such row.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db.models import BigIntegerField, Subquery, Value
from django.db.models.functions import Coalesce

from contextproto.protocol.messages import RawMessage
from sessions_app.models import ArchiveChunk
from sessions_app.store.codec import MessageRecord, raw_from_record

FORMAT_VERSION = 1
# Bound on clock disagreement between nodes, used only to bound the search for a run's
# inputs in cold chunks (created_at follows MessageIndex up to this skew).
CLOCK_SKEW = timedelta(minutes=5)
# How many chunks a reader decompresses per query when it may stop early.
CHUNK_BATCH = 4
# Decoded tool-call maps kept per process; a chunk's content is a pure function of
# (session, first_index, last_index) because messages never change.
TOOL_INDEX_CACHE_SIZE = 4096


# --- the chunk format ---------------------------------------------------------------------


def chunk_encode(records: list[MessageRecord]) -> bytes:
    body = json.dumps(
        {"v": FORMAT_VERSION, "messages": records}, ensure_ascii=False, separators=(",", ":")
    )
    return zlib.compress(body.encode("utf-8"), 6)


def chunk_records(chunk: ArchiveChunk) -> list[MessageRecord]:
    """Decompress one chunk; refuses a format it does not know or a count that disagrees."""
    payload = json.loads(zlib.decompress(bytes(chunk.data)).decode("utf-8"))
    if payload.get("v") != FORMAT_VERSION:
        raise ValueError(f"archive chunk {chunk.pk}: unknown format {payload.get('v')!r}")
    records = payload["messages"]
    if len(records) != chunk.message_count:
        raise ValueError(f"archive chunk {chunk.pk}: {len(records)} records, expected count")
    return records


def chunk_messages(chunk: ArchiveChunk) -> list[RawMessage]:
    return [raw_from_record(r) for r in chunk_records(chunk)]


# --- chunk lookups used by the readers -----------------------------------------------------
#
# The cold part of a session is always #1..B, B = the highest last_index of its chunks (0
# without chunks): archive_session only ever appends the chunk that starts at B + 1, and
# restore_session empties the archive. So B alone says which indices are cold, and a reader
# whose hot rows and chunks were read in two statements checks that both saw the same B.


def archived_through_expr(session_id: Any) -> Coalesce:
    """B as a scalar subquery (one (session, last_index) index probe, evaluated once)."""
    return Coalesce(
        Subquery(
            ArchiveChunk.objects.filter(session_id=session_id)
            .order_by("-last_index")
            .values("last_index")[:1]
        ),
        Value(0),
        output_field=BigIntegerField(),
    )


def archived_through(session_id: Any) -> int:
    last = (
        ArchiveChunk.objects.filter(session_id=session_id)
        .order_by("-last_index")
        .values_list("last_index", flat=True)
        .first()
    )
    return last or 0


def boundary_of(chunk: ArchiveChunk) -> int:
    """B as the query that read `chunk` saw it (the `archived_through` annotation)."""
    # An annotation of chunks_overlapping/iter_chunks, which the model class does not declare.
    return int(chunk.archived_through)  # type: ignore[attr-defined]


def chunks_overlapping(session_id: Any, after_index: int, through_index: int | None):
    """Chunks holding some index in (after, through], by first index ((session, last_index)).

    Each row carries `archived_through` (B at the time of the query).
    """
    chunks = ArchiveChunk.objects.filter(session_id=session_id, last_index__gt=after_index)
    if through_index is not None:
        chunks = chunks.filter(first_index__lte=through_index)
    return chunks.annotate(archived_through=archived_through_expr(session_id)).order_by(
        "first_index"
    )


def iter_chunks(
    session_id: Any, after_index: int, through_index: int | None, *, batch: int | None
) -> Iterator[ArchiveChunk]:
    """Overlapping chunks in index order; `batch` set: a few per query, for early stops."""
    if batch is None:
        yield from chunks_overlapping(session_id, after_index, through_index)
        return
    cursor = after_index
    while True:
        page = list(chunks_overlapping(session_id, cursor, through_index)[:batch])
        yield from page
        if len(page) < batch:
            return
        cursor = page[-1].last_index


def iter_chunks_newest_first(
    session_id: Any, through_index: int, *, batch: int = CHUNK_BATCH
) -> Iterator[ArchiveChunk]:
    """Chunks holding some index <= through, newest first, a few per query."""
    cursor: int | None = None
    while True:
        chunks = ArchiveChunk.objects.filter(session_id=session_id, first_index__lte=through_index)
        if cursor is not None:
            chunks = chunks.filter(first_index__lt=cursor)
        chunks = chunks.annotate(archived_through=archived_through_expr(session_id))
        page = list(chunks.order_by("-first_index")[:batch])
        yield from page
        if len(page) < batch:
            return
        cursor = page[-1].first_index


# --- archived tool calls -------------------------------------------------------------------

_tool_index: OrderedDict[tuple[str, int, int], dict[tuple[str, str], int]] = OrderedDict()
_tool_index_lock = threading.Lock()


def _tool_map(records: Iterable[MessageRecord]) -> dict[tuple[str, str], int]:
    return {
        (r["tool_call_id"], r["kind"]): r["index"] for r in records if r["tool_call_id"] is not None
    }


def _cached_tool_map(key: tuple[str, int, int]) -> dict[tuple[str, str], int] | None:
    with _tool_index_lock:
        found = _tool_index.get(key)
        if found is not None:
            _tool_index.move_to_end(key)
        return found


def _remember_tool_map(key: tuple[str, int, int], value: dict[tuple[str, str], int]) -> None:
    with _tool_index_lock:
        _tool_index[key] = value
        _tool_index.move_to_end(key)
        while len(_tool_index) > TOOL_INDEX_CACHE_SIZE:
            _tool_index.popitem(last=False)


def _archived_tool_record(
    session_id: Any, tool_call_id: str, kind: str, after_index: int
) -> MessageRecord | None:
    session_key = str(UUID(str(session_id)))
    ranges = list(
        ArchiveChunk.objects.filter(session_id=session_id, last_index__gt=after_index)
        .order_by("-first_index")
        .values_list("first_index", "last_index")
    )
    # Newest first: an archived call still waiting for its result is usually recent.
    for start in range(0, len(ranges), CHUNK_BATCH):
        batch = ranges[start : start + CHUNK_BATCH]
        maps = {r: _cached_tool_map((session_key, *r)) for r in batch}
        missing = [r for r, m in maps.items() if m is None]
        decoded: dict[tuple[int, int], list[MessageRecord]] = {}
        if missing:
            chunks = ArchiveChunk.objects.filter(
                session_id=session_id, first_index__in=[r[0] for r in missing]
            )
            for chunk in chunks:
                records = chunk_records(chunk)
                span = (chunk.first_index, chunk.last_index)
                decoded[span] = records
                tool_map = maps[span] = _tool_map(records)
                _remember_tool_map((session_key, *span), tool_map)
        for span in batch:
            index = (maps.get(span) or {}).get((tool_call_id, kind))
            if index is None:
                continue
            found = decoded.get(span)
            if found is None:
                chunk = ArchiveChunk.objects.get(session_id=session_id, first_index=span[0])
                found = chunk_records(chunk)
            records = found
            return next(r for r in records if r["index"] == index)
    return None


def archived_message_by_tool_call(
    session_id: UUID | str, tool_call_id: str, kind: str, *, after_index: int = 0
) -> RawMessage | None:
    """The archived `kind` message (tool_call, tool_result, ...) of `tool_call_id`, or None.

    Call it when the hot table has no such row. Cost: one small query listing the session's
    chunk ranges, plus decompressing the chunks this process has not mapped yet (newest
    first, stopping at the match); `after_index` skips chunks below it (a result comes after
    its call). Run it under the session row lock to get an answer no move can change.
    """
    record = _archived_tool_record(session_id, tool_call_id, kind, after_index)
    return raw_from_record(record) if record is not None else None
