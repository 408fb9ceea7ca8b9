"""Reads of the raw log (hot and cold merged) and the state beside it, each bounded.

Every reader of raw messages goes through `log_*` functions here, which merge the cold archive
(sessions_app.store.cold_store) with the hot table by MessageIndex (contract §2.3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import CharField, Exists, Q, QuerySet, Value

from contextproto.ids import canonical_uuid
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, Fold, RawMessage
from contextproto.protocol.state import fold_key
from sessions_app.models import (
    ArchiveChunk,
    FoldRecord,
    KVEntry,
    Message,
    Run,
    Session,
)
from sessions_app.store import cold_store as cold
from sessions_app.store.codec import (
    RAW_COLUMNS,
    MessageRecord,
    raw_from_record,
    raw_from_row,
    raw_from_values,
    record_of_row,
)
from sessions_app.store.state import session_lock


def _raw(rows: Iterable[Message]) -> list[RawMessage]:
    return [raw_from_row(row) for row in rows]


def call_and_answer(
    session_id: Any, tool_call_id: str
) -> tuple[RawMessage | None, RawMessage | None]:
    """The tool_call `tool_call_id` and the result after it, hot or archived.

    One query while the call is hot; the cold archive is searched only when the hot table
    cannot settle it (the call itself archived, or unknown). A call archived while
    unanswered gets its result later (contract §2.3). The one lookup of "this call and whether it
    is answered" for dispatch and for message writes.
    """
    rows = [
        raw_from_values(values)
        for values in Message.objects.filter(
            session_id=session_id,
            tool_call_id=tool_call_id,
            kind__in=(KIND_TOOL_CALL, KIND_TOOL_RESULT),
        )
        .order_by("index")
        .values_list(*RAW_COLUMNS)
    ]
    call = next((m for m in rows if m.kind == KIND_TOOL_CALL), None)
    if call is None:
        call = cold.archived_message_by_tool_call(session_id, tool_call_id, KIND_TOOL_CALL)
    after = call.index if call is not None else 0
    answer = next((m for m in rows if m.kind == KIND_TOOL_RESULT and m.index > after), None)
    if answer is None and (call is None or not rows):
        # A result comes after its call, so it can be archived only if the call is.
        answer = cold.archived_message_by_tool_call(
            session_id, tool_call_id, KIND_TOOL_RESULT, after_index=after
        )
    return call, answer


# Cold and hot are merged by MessageIndex (contract §2.3). The cold part is #1..B (see
# sessions_app.store.cold_store). A reader takes the hot rows and B in one statement, then
# decompresses only the chunks overlapping its range, each chunk query reporting B again: if
# the two disagree, an archive or restore committed in between and the read starts over;
# after a few tries it reads once under the session row lock, which every move takes. So no
# message is lost or doubled whatever the isolation level, and a session without chunks
# costs no extra query.
OPTIMISTIC_READS = 3


def _stable_read[T](session_id: Any, attempt: Callable[[], T | None]) -> T:
    """Run `attempt` until it saw one archive state (it returns None when it did not)."""
    for _try in range(OPTIMISTIC_READS):
        result = attempt()
        if result is not None:
            return result
    # The archive keeps moving: read once under the lock, so no move can commit meanwhile.
    with transaction.atomic():
        session_lock(session_id)
        result = attempt()
    if result is None:
        raise RuntimeError("the archive moved while the session row was locked")
    return result


def _merge(
    cold_rows: Iterable[RawMessage], hot_rows: Iterable[RawMessage], limit: int | None = None
) -> list[RawMessage]:
    by_index = {m.index: m for m in cold_rows}
    by_index.update((m.index, m) for m in hot_rows)
    merged = [by_index[i] for i in sorted(by_index)]
    return merged if limit is None else merged[:limit]


# The columns of a RawMessage with content and arguments left empty: what a reader of the
# group structure needs (ids, indices, kinds, roles, call ids), without the bodies.
OUTLINE_FIELDS = tuple(
    Value("" if name == "content" else None, output_field=CharField())
    if name in ("content", "arguments")
    else name
    for name in RAW_COLUMNS
)


def _hot_and_boundary(
    session_id: Any,
    rows: QuerySet[Message],
    limit: int | None,
    fields: Sequence[Any] = RAW_COLUMNS,
) -> tuple[list[RawMessage], int] | None:
    """Hot rows of `rows` (ordered, limited) and B from the same statement; None: retry.

    Without hot rows B comes from one statement that also re-checks there are none.
    """
    annotated = rows.annotate(archived_through=cold.archived_through_expr(session_id)).values_list(
        *fields, "archived_through"
    )
    found = list(annotated[:limit] if limit is not None else annotated)
    if found:
        return [raw_from_values(row) for row in found], found[0][-1]
    state = (
        Session.objects.filter(pk=session_id)
        .annotate(b=cold.archived_through_expr(session_id), hot=Exists(rows))
        .values_list("b", "hot")
        .first()
    )
    if state is None:
        return [], 0
    boundary, hot_now = state
    return None if hot_now else ([], boundary)


def _merged_range(
    session_id: Any,
    *,
    after_index: int,
    through_index: int | None,
    limit: int | None,
    hot_rows: QuerySet[Message],
    wanted: Callable[[RawMessage], bool],
    outline: bool = False,
) -> list[RawMessage]:
    """`wanted` cold messages in (after, through] merged with `hot_rows`, first `limit`.

    With `outline`, content and arguments are left empty (see OUTLINE_FIELDS).

    Decompresses only the chunks overlapping the range; with a limit, a few at a time,
    stopping once it has enough.
    """
    # Indices start at 1: a negative `after` means the start (and would otherwise make the
    # cold scan wait for an index 0 that never comes).
    after_index = max(after_index, 0)
    if through_index is not None and through_index <= after_index:
        return []
    rows = hot_rows.order_by("index")

    def attempt() -> list[RawMessage] | None:
        hot = _hot_and_boundary(session_id, rows, limit, OUTLINE_FIELDS if outline else RAW_COLUMNS)
        if hot is None:
            return None
        hot_messages, boundary = hot
        if boundary <= after_index:
            return hot_messages
        found: list[RawMessage] = []
        seen: set[int] = set()
        # The cold indices of the range are after+1 .. min(through, B): the scan must reach
        # the end of that span (an empty batch reports no B, so coverage is checked too).
        reached, end = (
            after_index,
            boundary if through_index is None else min(through_index, boundary),
        )
        batch = cold.CHUNK_BATCH if limit is not None else None
        for chunk in cold.iter_chunks(session_id, after_index, through_index, batch=batch):
            seen.add(cold.boundary_of(chunk))
            reached = chunk.last_index
            found.extend(
                replace(m, content="", arguments=None) if outline else m
                for m in cold.chunk_messages(chunk)
                if after_index < m.index
                and (through_index is None or m.index <= through_index)
                and wanted(m)
            )
            if limit is not None and len(found) >= limit:
                reached = end
                break
        if seen != {boundary} or reached < end:
            return None
        return _merge(found, hot_messages, limit)

    return _stable_read(session_id, attempt)


def log_window(
    session_id: Any,
    window_id: str,
    after_index: int,
    through_index: int,
    limit: int | None = None,
    *,
    outline: bool = False,
) -> list[RawMessage]:
    """W's messages with after < index <= through, index order (message_window_index).

    With `outline`, without content and arguments (group structure only).
    """
    rows = Message.objects.filter(
        session_id=session_id,
        window_id=window_id,
        index__gt=after_index,
        index__lte=through_index,
    )
    return _merged_range(
        session_id,
        after_index=after_index,
        through_index=through_index,
        limit=limit,
        hot_rows=rows,
        wanted=lambda m: m.window_id == window_id,
        outline=outline,
    )


def log_window_count(session_id: Any, window_id: str, after_index: int, through_index: int) -> int:
    """How many of W's messages have after < index <= through, hot and cold.

    All hot: one COUNT on the (session, window, index) index. A range reaching into the
    archive is read in outline (no bodies) and counted, as log_window reads it.
    """
    if through_index <= after_index:
        return 0
    if cold.archived_through(session_id) <= after_index:
        return Message.objects.filter(
            session_id=session_id,
            window_id=window_id,
            index__gt=after_index,
            index__lte=through_index,
        ).count()
    return len(log_window(session_id, window_id, after_index, through_index, outline=True))


def log_run_inputs(session_id: Any, run_id: str, through_index: int) -> list[RawMessage]:
    """The current run's input messages, any window (message_run_inputs).

    Chunks are searched only when the run may have started before the oldest hot message,
    newest chunk first, stopping at a chunk that begins before the run did.
    """
    rows = Message.objects.filter(
        session_id=session_id, kind="input", input_run=run_id, index__lte=through_index
    ).order_by("index")

    def attempt() -> list[RawMessage] | None:
        hot = _hot_and_boundary(session_id, rows, None)
        if hot is None:
            return None
        hot_messages, boundary = hot
        if boundary == 0:
            return hot_messages
        searched = _cold_run_inputs(session_id, run_id, through_index, boundary)
        return None if searched is None else _merge(searched, hot_messages)

    return _stable_read(session_id, attempt)


def _cold_run_inputs(
    session_id: Any, run_id: str, through_index: int, boundary: int
) -> list[RawMessage] | None:
    """Archived inputs of `run_id`, or None if the archive moved since B was `boundary`."""
    try:
        run_uuid = UUID(str(run_id))
    except ValueError:
        return []
    started = (
        Run.objects.filter(session_id=session_id, id=run_uuid)
        .values_list("created_at", flat=True)
        .first()
    )
    if started is None:
        return []
    oldest_hot = (
        Message.objects.filter(session_id=session_id, index__gt=boundary)
        .annotate(archived_through=cold.archived_through_expr(session_id))
        .order_by("index")
        .values_list("created_at", "archived_through")
        .first()
    )
    if oldest_hot is not None:
        if oldest_hot[1] != boundary:
            return None
        # A run's input is written after its run row: a run that began after the oldest hot
        # message (beyond clock skew between nodes) has only hot inputs.
        if started - cold.CLOCK_SKEW > oldest_hot[0]:
            return []
    found: list[RawMessage] = []
    for chunk in cold.iter_chunks_newest_first(session_id, through_index):
        if cold.boundary_of(chunk) != boundary:
            return None
        records = cold.chunk_records(chunk)
        found.extend(
            raw_from_record(r)
            for r in records
            if r["kind"] == "input" and r["input_run"] == run_id and r["index"] <= through_index
        )
        if chunk.first_index == 1:
            return found
        if datetime.fromisoformat(records[0]["created_at"]) < started - cold.CLOCK_SKEW:
            return found
    # The scan ended before the first chunk: the chunks went away meanwhile (a restore).
    return None


def _canonical_ids(message_ids: Iterable[str]) -> list[str]:
    ids = []
    for raw in message_ids:
        found = canonical_uuid(raw)
        if found is not None:  # anything else is no MessageId: it matches nothing
            ids.append(str(found))
    return list(dict.fromkeys(ids))


def log_by_ids(
    session_id: Any,
    message_ids: Sequence[str],
    index_range: tuple[int, int] | None = None,
) -> list[RawMessage]:
    """The messages with these ids, index order, hot and cold merged.

    Ids missing from the hot table are looked up in chunks: only those overlapping
    `index_range` (first, last) when the caller knows it (a fold does), else the session's
    chunks in index order, a few per query, until all are found.
    """
    ids = _canonical_ids(message_ids)
    found = {m.id: m for m in _hot_by_ids(session_id, ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        found.update(_cold_by_ids(session_id, set(missing), index_range))
        # A restore may have moved rows back between the two reads: look once more.
        still = [i for i in missing if i not in found]
        if still:
            found.update((m.id, m) for m in _hot_by_ids(session_id, still))
    return sorted(found.values(), key=lambda m: m.index)


def _hot_by_ids(session_id: Any, ids: list[str]) -> list[RawMessage]:
    if not ids:
        return []
    return _raw(Message.objects.filter(session_id=session_id, id__in=ids).order_by("index"))


def _cold_by_ids(
    session_id: Any, ids: set[str], index_range: tuple[int, int] | None
) -> dict[str, RawMessage]:
    after, through = (index_range[0] - 1, index_range[1]) if index_range else (0, None)
    found: dict[str, RawMessage] = {}
    for chunk in cold.iter_chunks(session_id, after, through, batch=cold.CHUNK_BATCH):
        found.update((m.id, m) for m in cold.chunk_messages(chunk) if m.id in ids)
        if len(found) == len(ids):
            break
    return found


def log_windows_of(session_id: Any, indices: Sequence[int]) -> dict[int, str]:
    """index -> window id for those of `indices` that exist, hot and cold merged."""
    wanted = {i for i in indices if isinstance(i, int) and i > 0}
    windows = _hot_windows(session_id, wanted)
    missing = wanted - windows.keys()
    if missing:
        for chunk in _chunks_holding(session_id, missing):
            windows.update(
                (r["index"], r["window_id"])
                for r in cold.chunk_records(chunk)
                if r["index"] in missing
            )
        still = missing - windows.keys()
        if still:
            windows.update(_hot_windows(session_id, still))
    return windows


def _hot_windows(session_id: Any, indices: set[int]) -> dict[int, str]:
    if not indices:
        return {}
    return dict(
        Message.objects.filter(session_id=session_id, index__in=list(indices)).values_list(
            "index", "window_id"
        )
    )


def _chunks_holding(session_id: Any, indices: set[int]) -> list[ArchiveChunk]:
    """The chunks containing any of `indices` (one bounded query; a span for many indices)."""
    if len(indices) > 32:
        return list(cold.chunks_overlapping(session_id, min(indices) - 1, max(indices)))
    holds = Q()
    for index in indices:
        holds |= Q(first_index__lte=index, last_index__gte=index)
    return list(ArchiveChunk.objects.filter(holds, session_id=session_id).order_by("first_index"))


def log_at(session_id: Any, index: int) -> RawMessage | None:
    """The message #index, hot or cold, or None."""
    row = Message.objects.filter(session_id=session_id, index=index).first()
    if row is not None:
        return raw_from_row(row)
    for chunk in _chunks_holding(session_id, {index}):
        for message in cold.chunk_messages(chunk):
            if message.index == index:
                return message
    row = Message.objects.filter(session_id=session_id, index=index).first()
    return raw_from_row(row) if row is not None else None


def log_records(session_id: Any, *, after_index: int, through_index: int) -> list[MessageRecord]:
    """Every column of the messages with after < index <= through, hot and cold merged.

    In the archive's record format (cold_store.record_of_row), index order: what a copy of
    the log needs beyond the engine's RawMessage (the revision each message was written at).
    """
    after_index = max(after_index, 0)
    if through_index <= after_index:
        return []
    rows = Message.objects.filter(
        session_id=session_id, index__gt=after_index, index__lte=through_index
    ).order_by("index")

    def attempt() -> list[MessageRecord] | None:
        found = list(rows.annotate(archived_through=cold.archived_through_expr(session_id)))
        if found:
            boundary = found[0].archived_through
        else:
            state = (
                Session.objects.filter(pk=session_id)
                .annotate(b=cold.archived_through_expr(session_id), hot=Exists(rows))
                .values_list("b", "hot")
                .first()
            )
            if state is None:
                return []
            boundary, hot_now = state
            if hot_now:
                return None
        hot = {row.index: record_of_row(row) for row in found}
        if boundary <= after_index:
            return list(hot.values())
        merged: dict[int, MessageRecord] = {}
        seen: set[int] = set()
        reached, end = after_index, min(through_index, boundary)
        for chunk in cold.iter_chunks(session_id, after_index, through_index, batch=None):
            seen.add(cold.boundary_of(chunk))
            reached = chunk.last_index
            merged.update(
                (r["index"], r)
                for r in cold.chunk_records(chunk)
                if after_index < r["index"] <= through_index
            )
        if seen != {boundary} or reached < end:
            return None
        merged.update(hot)
        return [merged[i] for i in sorted(merged)]

    return _stable_read(session_id, attempt)


def log_page(
    session_id: Any, *, window_id: str | None, after_index: int, limit: int
) -> list[RawMessage]:
    """Up to `limit` messages above `after_index` (of one window if given), index order."""
    rows = Message.objects.filter(session_id=session_id, index__gt=after_index)
    if window_id is not None:
        rows = rows.filter(window_id=window_id)
    return _merged_range(
        session_id,
        after_index=after_index,
        through_index=None,
        limit=limit,
        hot_rows=rows,
        wanted=lambda m: window_id is None or m.window_id == window_id,
    )


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
