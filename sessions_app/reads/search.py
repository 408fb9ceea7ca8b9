"""Search reads for the console (issue 27): sessions by what names them, messages by text.

Sessions: an id prefix is a range on the primary key (a prefix of the hex digits bounds the
UUID from below and above), the other filters are columns of Session or its current run; a
page is newest first by (created_at, id) on the `session_created` index.

Messages within one session: on PostgreSQL, full-text search (`simple` configuration: words
as written, no stemming, so ids and error codes match) over the string values of a
message's content and tool-call arguments, backed by the GIN index of migration 0013 on
exactly MESSAGE_TSVECTOR. Elsewhere (SQLite) a plain scan of at most SCAN_ROWS messages per
request, every word of the query a case-insensitive substring. Hot messages only: archived
(cold) chunks are compressed blobs, and the page says which indices it did not search.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Max, Min, OuterRef, QuerySet, Subquery, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from contextproto.protocol.messages import content_text
from sessions_app.models import ArchiveChunk, Message, ProjectionSnapshot, Run, Session

QUERY_MAX_CHARS = 200
SCAN_ROWS = 2_000
RESULTS_PER_PAGE = 50
SNIPPET_CHARS = 160
NO_RUN = "none"  # the status filter's value for sessions that never started a run

# Must stay character for character the expression of the index in migration 0013.
MESSAGE_TSVECTOR = (
    "jsonb_to_tsvector('simple'::regconfig, content, '[\"string\"]'::jsonb)"
    " || jsonb_to_tsvector('simple'::regconfig, coalesce(arguments, '{}'::jsonb),"
    " '[\"string\"]'::jsonb)"
)
_HEX_PREFIX = re.compile(r"^[0-9a-fA-F-]+$")


class SearchInputError(ValueError):
    """A search parameter the page cannot use; `field` names it, the text says what to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# ---------------------------------------------------------------- sessions


def id_prefix_range(raw: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest UUIDs starting with the hex digits of `raw` (dashes ignored).

    Raises SearchInputError for anything but 1 to 32 hex digits.
    """
    text = raw.strip()
    digits = text.replace("-", "")
    if not _HEX_PREFIX.match(text) or not digits or len(digits) > 32:
        raise SearchInputError(
            "id",
            "A session id prefix is 1 to 32 hexadecimal digits (0-9, a-f), dashes allowed, "
            "e.g. 3fa85f64 or 3fa85f64-5717.",
        )
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def day_start(day: date) -> datetime:
    """Midnight starting `day` in the current time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


@dataclass(frozen=True)
class SessionFilters:
    id_prefix: str = ""
    application: uuid.UUID | None = None
    agent: uuid.UUID | None = None
    version: uuid.UUID | None = None
    status: str = ""  # a Run.Status value of the current run, NO_RUN, or "" for any
    created_from: date | None = None
    created_to: date | None = None  # inclusive
    active_window: str = ""


def session_search(queryset: QuerySet[Session], filters: SessionFilters) -> QuerySet[Session]:
    """`queryset` (already scoped to the user) narrowed by `filters`; the caller pages it."""
    found = queryset
    if filters.id_prefix:
        low, high = id_prefix_range(filters.id_prefix)
        found = found.filter(pk__gte=low, pk__lte=high)
    if filters.application is not None:
        found = found.filter(application_id=filters.application)
    if filters.agent is not None:
        found = found.filter(agent_version__agent_id=filters.agent)
    if filters.version is not None:
        found = found.filter(agent_version_id=filters.version)
    if filters.status == NO_RUN:
        found = found.filter(current_run__isnull=True)
    elif filters.status:
        found = found.filter(current_run__status=filters.status)
    if filters.created_from is not None:
        found = found.filter(created_at__gte=day_start(filters.created_from))
    if filters.created_to is not None:
        found = found.filter(created_at__lt=day_start(filters.created_to + timedelta(days=1)))
    if filters.active_window:
        found = found.filter(active_window=filters.active_window)
    return found.select_related("application", "agent_version__agent", "current_run")


STATUS_CHOICES = [(NO_RUN, "no run yet"), *Run.Status.choices]


# ---------------------------------------------------------------- messages of one session


@dataclass(frozen=True)
class MessageHit:
    message: Message
    snippet: str
    first_view: uuid.UUID | None  # the first snapshot of its window whose bound reached it
    latest_view: uuid.UUID | None  # the latest such snapshot


@dataclass(frozen=True)
class MessageSearchPage:
    hits: list[MessageHit]
    next_before: int | None  # search on below this index; None when nothing older is left
    scanned_down_to: int | None  # the lowest index a plain scan read (None with full text)
    full_text: bool
    archived: dict[str, int]  # {"first", "last", "count"} of cold messages; empty if none


def check_text_query(raw: str) -> str:
    """The query trimmed; SearchInputError for an empty, overlong or NUL-bearing one."""
    text = raw.strip()
    if not text:
        raise SearchInputError("q", "Type one or more words to search for.")
    if len(text) > QUERY_MAX_CHARS:
        raise SearchInputError(
            "q", f"A search is at most {QUERY_MAX_CHARS} characters; this one has {len(text)}."
        )
    if "\x00" in text:
        raise SearchInputError("q", "A search cannot contain a NUL character.")
    return text


def full_text_available() -> bool:
    return connection.vendor == "postgresql"


def _haystack(message: Message) -> str:
    text = content_text(message.content)
    if message.arguments is not None:
        text += "\n" + json.dumps(message.arguments, ensure_ascii=False)
    return text


def _snippet(text: str, words: list[str]) -> str:
    lowered = text.lower()
    at = min((i for w in words if (i := lowered.find(w)) >= 0), default=0)
    start = max(at - SNIPPET_CHARS // 3, 0)
    piece = text[start : start + SNIPPET_CHARS].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def _words(text: str) -> list[str]:
    return [w.strip("\"'").lower() for w in text.split() if w.strip("\"'")]


def archived_range(session: Session) -> dict[str, int]:
    """The cold messages of `session`: first and last index and how many (one query)."""
    row = ArchiveChunk.objects.filter(session=session).aggregate(
        first=Min("first_index"), last=Max("last_index"), count=Sum("message_count")
    )
    return {} if row["count"] is None else {k: int(v) for k, v in row.items()}


def _views(session: Session, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[Any, Any]]:
    """For each message, the first and the latest snapshot of its window whose upper bound
    reached it (one query, two index probes per message)."""
    if not ids:
        return {}
    reached = ProjectionSnapshot.objects.filter(
        session_id=session.pk, window_id=OuterRef("window_id"), upper_bound__gte=OuterRef("index")
    )
    rows = (
        Message.objects.filter(session_id=session.pk, pk__in=ids)
        .annotate(
            first_view=Subquery(reached.order_by("upper_bound", "created_at").values("id")[:1]),
            latest_view=Subquery(reached.order_by("-upper_bound", "-created_at").values("id")[:1]),
        )
        .values_list("pk", "first_view", "latest_view")
    )
    return {pk: (first, latest) for pk, first, latest in rows}


MESSAGE_FIELDS = (
    "id",
    "session_id",
    "index",
    "window_id",
    "role",
    "kind",
    "content",
    "arguments",
    "tool_name",
    "created_at",
)


def message_search(
    session: Session, text: str, *, before: int | None, limit: int = RESULTS_PER_PAGE
) -> MessageSearchPage:
    """The hot messages of `session` matching `text`, newest first, below index `before`.

    `text` must have passed check_text_query. Three queries: the matches, their views, the
    archived range.
    """
    rows = Message.objects.filter(session=session).only(*MESSAGE_FIELDS).order_by("-index")
    if before is not None:
        rows = rows.filter(index__lt=before)
    words = _words(text)
    scanned_down_to = None
    if full_text_available():
        matches = RawSQL(
            f"({MESSAGE_TSVECTOR}) @@ websearch_to_tsquery('simple'::regconfig, %s)",
            [text],
            output_field=BooleanField(),
        )
        found = list(rows.filter(matches)[: limit + 1])
        more = len(found) > limit
        found = found[:limit]
        next_before = found[-1].index if more else None
    else:
        scanned = list(rows[:SCAN_ROWS])
        found = []
        next_before = None
        for message in scanned:
            haystack = _haystack(message).lower()
            if all(word in haystack for word in words):
                if len(found) == limit:
                    next_before = found[-1].index
                    break
                found.append(message)
        else:
            if len(scanned) == SCAN_ROWS:
                next_before = scanned[-1].index
        if scanned:
            scanned_down_to = scanned[-1].index if next_before is None else next_before
    views = _views(session, [m.pk for m in found])
    hits = [
        MessageHit(m, _snippet(_haystack(m), words), *views.get(m.pk, (None, None))) for m in found
    ]
    return MessageSearchPage(
        hits=hits,
        next_before=next_before,
        scanned_down_to=scanned_down_to,
        full_text=full_text_available(),
        archived=archived_range(session),
    )
