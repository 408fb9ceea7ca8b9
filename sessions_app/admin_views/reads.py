"""Read-only selectors of the session browser: each a fixed number of queries whatever the
session's size (keyset pages by MessageIndex or time, grouped counts, bounded side tables).

They return rows and dataclasses; `presenters` turns them into what a template shows (URLs,
pretty JSON, the chart).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils.dateparse import parse_datetime

from contextproto.pagination import split_page
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import checkpoint_key, covered_key, fold_key, window_key
from sessions_app.admin_views import context as ctx
from sessions_app.models import (
    FoldRecord,
    MaintenanceJob,
    ProjectionSnapshot,
    Run,
    Session,
    WindowRecord,
)
from sessions_app.reads import raw_log
from sessions_app.reads.raw_log import kv_values

CHART_TURNS = 200


@dataclass(frozen=True)
class WindowRow:
    window_id: str
    active: bool
    status: str
    goal: str
    opened_from: str | None
    created_at_index: int | None
    covered_through: int
    checkpoint: str
    memory: str
    outcomes: list[Any]
    message_count: int
    fold_count: int
    has_record: bool


def _count_of(model: type[WindowRecord] | type[FoldRecord]) -> Coalesce:
    per_session = (
        model.objects.filter(session=OuterRef("pk"))
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(per_session), 0)


def record_counts(session: Session) -> tuple[int, int]:
    """The session's windows and folds, counted in one statement."""
    row = (
        Session.objects.filter(pk=session.pk)
        .annotate(windows=_count_of(WindowRecord), folds=_count_of(FoldRecord))
        .values("windows", "folds")
        .get()
    )
    return row["windows"], row["folds"]


def windows_table(session: Session) -> list[WindowRow]:
    """Every window of the session with coverage, checkpoint and counts, in four queries.

    Message counts: the per-window counters kept on write (archived messages included), so
    no message table is counted. Fold counts: one GROUP BY over FoldRecord.
    """
    records = list(
        WindowRecord.objects.filter(session=session)
        .order_by("created_at_index", "window_id")
        .values_list("window_id", "status", "created_at_index")
    )
    message_counts = dict(
        WindowRecord.objects.filter(session=session).values_list("window_id", "message_count")
    )
    fold_counts = dict(
        FoldRecord.objects.filter(session=session)
        .values("window_id")
        .annotate(n=Count("*"))
        .order_by()
        .values_list("window_id", "n")
    )
    ids = [r[0] for r in records]
    ids += sorted(w for w in message_counts if w not in set(ids))
    keys = [k for w in ids for k in (window_key(w), checkpoint_key(w), covered_key(w))]
    kv = kv_values(session.id, keys)
    status_of = {r[0]: r[1] for r in records}
    rows = []
    for window_id in ids:
        record = kv.get(window_key(window_id)) or {}
        rows.append(
            WindowRow(
                window_id=window_id,
                active=window_id == session.active_window,
                status=str(record.get("status") or status_of.get(window_id) or "—"),
                goal=str(record.get("goal", "")),
                opened_from=record.get("openedFrom"),
                created_at_index=record.get("createdAtIndex"),
                covered_through=int(kv.get(covered_key(window_id)) or 0),
                checkpoint=str(kv.get(checkpoint_key(window_id)) or ""),
                memory=str(record.get("memory", "")),
                outcomes=list(record.get("outcomes") or []),
                message_count=message_counts.get(window_id, 0),
                fold_count=fold_counts.get(window_id, 0),
                has_record=window_id in status_of,
            )
        )
    return rows


@dataclass(frozen=True)
class MessagePage:
    messages: list[RawMessage]
    next_after: int | None
    prev_before: int | None
    from_start: bool


def message_page(
    session: Session,
    *,
    window: str | None,
    run: Run | None,
    after: int,
    before: int | None,
    limit: int,
) -> MessagePage:
    """One page of the raw log in index order, hot and cold merged (raw_log.log_page).

    Keyset by MessageIndex: `after` pages forward. The unfiltered log also pages backward
    (`before`): MessageIndex is gapless, so the page before #N starts at N - limit. A run's
    messages are scanned from the run's first input; a page then shows that run's rows
    among the `limit` indices it read.
    """
    filtered = window is not None or run is not None
    if run is not None:
        inputs = raw_log.log_run_inputs(session.id, run.id.hex, session.last_index)
        if inputs:
            after = max(after, inputs[0].index - 1)
    elif before is not None and window is None:
        after = max(before - limit - 1, 0)
    found = raw_log.log_page(session.id, window_id=window, after_index=after, limit=limit + 1)
    found, more = split_page(found, limit)
    next_after = found[-1].index if found and more else None
    if run is not None:
        found = [m for m in found if m.run_id == run.id.hex]
    return MessagePage(
        messages=found,
        next_after=next_after,
        prev_before=after + 1 if after > 0 and not filtered else None,
        from_start=after > 0 and filtered,
    )


def keyset_by_time(queryset: QuerySet, before: str, limit: int) -> tuple[list[Any], str | None]:
    """Newest first, paged by (created_at, pk): `before` is the cursor `<iso>|<pk>` of the
    page's `?before=` (anything else reads the first page); the answer's cursor is the next."""
    if "|" in before:
        stamp, _, raw_pk = before.partition("|")
        pk: Any = None
        try:
            moment = parse_datetime(stamp)
            pk = queryset.model._meta.pk.to_python(raw_pk)
        except (ValueError, ValidationError):
            moment = None
        if moment is not None:
            queryset = queryset.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=pk))
    found = list(queryset.order_by("-created_at", "-pk")[: limit + 1])
    found, more = split_page(found, limit)
    cursor = f"{found[-1].created_at.isoformat()}|{found[-1].pk}" if found and more else None
    return found, cursor


@dataclass(frozen=True)
class FoldEntry:
    """A fold record with its KV value and its window's coverage."""

    record: FoldRecord
    summary: str
    message_ids: list[str]
    created_at_index: int | None
    covered_through: int

    @property
    def compressed(self) -> bool:
        """Whether a checkpoint covers the whole fold."""
        return self.record.last_index <= self.covered_through


def fold_entries(session: Session, records: list[FoldRecord]) -> list[FoldEntry]:
    """Fold records joined with their KV values and their window's coverage (one query)."""
    windows = sorted({r.window_id for r in records})
    kv = kv_values(
        session.id,
        [fold_key(r.fold_id) for r in records] + [covered_key(w) for w in windows],
    )
    entries = []
    for record in records:
        value = kv.get(fold_key(record.fold_id)) or {}
        entries.append(
            FoldEntry(
                record=record,
                summary=str(value.get("summary", "")),
                message_ids=list(value.get("messageIds") or []),
                created_at_index=value.get("createdAtIndex"),
                covered_through=int(kv.get(covered_key(record.window_id)) or 0),
            )
        )
    return entries


@dataclass(frozen=True)
class ChartTurn:
    """A turn with provider usage, as the chart plots it."""

    created_at: datetime
    upper_bound: int
    input_tokens: int | None  # never None here: the query keeps turns with usage
    snapshot_id: UUID
    cache_read_tokens: int
    cache_write_tokens: int
    cost: Decimal | None


@dataclass(frozen=True)
class ChartCommit:
    """A committed maintenance job (unfinished: placed by its bound)."""

    finished_at: datetime | None
    through_index: int | None
    window_id: str


@dataclass(frozen=True)
class ChartFold:
    fold_id: str
    window_id: str
    first_index: int
    last_index: int


@dataclass(frozen=True)
class ChartData:
    """The latest turns with usage, oldest first, and the events among them."""

    turns: list[ChartTurn]
    commits: list[ChartCommit]
    folds: list[ChartFold]
    threshold: int | None  # the maintenance trigger in tokens, if the version sets one


def chart_data(session: Session) -> ChartData:
    """Input tokens of the latest CHART_TURNS turns, their cache counts and cost, and the
    maintenance commits and folds since the first of them (at most three queries)."""
    turns = [
        ChartTurn(*row)
        for row in ProjectionSnapshot.objects.filter(session=session, input_tokens__isnull=False)
        .order_by("-created_at", "-pk")
        .values_list(
            "created_at",
            "upper_bound",
            "input_tokens",
            "pk",
            "cache_read_input_tokens",
            "cache_write_input_tokens",
            "cost",
        )[:CHART_TURNS]
    ][::-1]
    commits: list[ChartCommit] = []
    folds: list[ChartFold] = []
    if turns:
        first_time, first_bound = turns[0].created_at, turns[0].upper_bound
        jobs = MaintenanceJob.objects.filter(
            session=session, status=MaintenanceJob.Status.COMMITTED
        ).filter(Q(finished_at__gte=first_time) | Q(finished_at__isnull=True))
        commits = [
            ChartCommit(*row)
            for row in jobs.order_by("finished_at").values_list(
                "finished_at", "through_index", "window_id"
            )[:CHART_TURNS]
        ]
        records = FoldRecord.objects.filter(session=session, last_index__gte=first_bound)
        folds = [
            ChartFold(*row)
            for row in records.order_by("last_index").values_list(
                "fold_id", "window_id", "first_index", "last_index"
            )[:CHART_TURNS]
        ]
    version = session.agent_version
    threshold = (
        int(version.maintenance_trigger_ratio * version.max_input_tokens)
        if version.max_input_tokens and version.maintenance_trigger_ratio
        else None
    )
    return ChartData(turns=turns, commits=commits, folds=folds, threshold=threshold)


def neighbours(
    session: Session, snapshot: ProjectionSnapshot
) -> tuple[ProjectionSnapshot | None, ProjectionSnapshot | None]:
    """The turns just before and after `snapshot` in the session, by (created_at, pk)."""
    base = ProjectionSnapshot.objects.filter(session=session).only(
        "id", "created_at", "upper_bound", "window_id", "revision"
    )
    at, pk = snapshot.created_at, snapshot.pk
    previous = (
        base.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=pk))
        .order_by("-created_at", "-pk")
        .first()
    )
    following = (
        base.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=pk))
        .order_by("created_at", "pk")
        .first()
    )
    return previous, following


def latest_view(session: Session) -> ProjectionSnapshot | None:
    """The session's latest snapshot with what placing a message in it needs."""
    return (
        ProjectionSnapshot.objects.filter(session=session)
        .defer("options", "notes")
        .order_by("-created_at", "-pk")
        .first()
    )


def view_range_of(
    session: Session, snapshot: ProjectionSnapshot, index: ctx.ViewIndex
) -> ctx.ViewRange:
    """The raw range `snapshot` was built from, with every status counted (two index reads:
    W's first message and a count of W's messages in the range)."""
    first_of_window = raw_log.log_page(
        session.id, window_id=snapshot.window_id, after_index=0, limit=1
    )
    first = ctx.view_range_start(snapshot, first_of_window[0].index if first_of_window else None)
    count = raw_log.log_window_count(
        session.id, snapshot.window_id, first - 1, snapshot.upper_bound
    )
    return ctx.view_range(index, first=first, window_count=count)


def raw_pane(
    session: Session,
    snapshot: ProjectionSnapshot,
    *,
    after: int | None,
    before: int | None,
    window: str | None,
    limit: int,
) -> tuple[list[RawMessage], int | None, int | None, bool]:
    """One page of the raw log up to the turn's bound: (messages, earlier, later, from_start).

    All windows: by default the `limit` indices ending at the bound; `before`/`after` page
    by index (gapless, so a page is an index range). One window: forward from `after`.
    `earlier` is the `raw_before` of the page before, `later` the `raw_after` of the next.
    """
    bound = snapshot.upper_bound
    if window:
        start = max(after or 0, 0)
        found = [
            m
            for m in raw_log.log_page(
                session.id, window_id=window, after_index=start, limit=limit + 1
            )
            if m.index <= bound
        ]
        found, more = split_page(found, limit)
        return found, None, found[-1].index if found and more else None, start > 0
    if before is not None:
        start = max(min(before, bound + 1) - limit - 1, 0)
    elif after is not None:
        start = max(min(after, bound), 0)
    else:
        start = max(bound - limit, 0)
    count = min(limit, bound - start)
    found = (
        raw_log.log_page(session.id, window_id=None, after_index=start, limit=count)
        if count > 0
        else []
    )
    later = start + count if start + count < bound else None
    return found, start + 1 if start > 0 else None, later, False
