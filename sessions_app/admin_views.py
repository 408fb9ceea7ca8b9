"""The session browser: custom admin pages inside one session (SPEC §10).

Each page issues a fixed number of queries whatever the session's size: the raw log is
paged by MessageIndex (keyset, never OFFSET or COUNT(*)), per-window counts come from one
grouped query each, and the secondary tables (WindowRecord, FoldRecord) bound the rest.
The read-only selectors the pages need live here, next to the pages.

Pages 404 for a session outside the user's Applications (the SessionAdmin queryset is
scoped) and 403 without the view permission on sessions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Max, Q, QuerySet
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.dateparse import parse_datetime

from contextproto.protocol.catalog import JSON_INTEGER_MAX
from contextproto.protocol.foldtext import render_fold_text
from contextproto.protocol.messages import RawMessage
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    covered_key,
    fold_key,
    window_key,
)
from sessions_app import charts, selectors
from sessions_app.models import (
    ArchiveChunk,
    FoldRecord,
    KVEntry,
    MaintenanceJob,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
    WindowRecord,
)
from sessions_app.selectors import kv_values

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
RAW_INLINE_LIMIT = 20_000
PREVIEW_CHARS = 400
CHART_TURNS = 200
SOURCE_LINKS = 20
SNAPSHOT_HEAVY_FIELDS = ("messages", "sources", "request", "options", "notes")

TABS = (
    ("overview", "Overview"),
    ("windows", "Windows"),
    ("messages", "Messages"),
    ("folds", "Folds"),
    ("snapshots", "Snapshots"),
    ("kv", "KV"),
    ("receipts", "Receipts"),
    ("maintenance", "Maintenance"),
)


def url(name: str, session: Session | UUID | str, *args: Any) -> str:
    session_id = session.pk if isinstance(session, Session) else session
    return reverse(f"admin:sessions_app_session_browse_{name}", args=[session_id, *args])


# ---------------------------------------------------------------- rendering helpers


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def content_text(content: Any) -> str:
    """Flatten a message content (text or parts) into readable text; images become markers."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                pieces.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "image":
                pieces.append(f"[image {part.get('mediaType', '')}]")
            else:
                pieces.append(json.dumps(part, ensure_ascii=False))
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False)


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    raw = request.GET.get(name, "")
    try:
        value = int(raw) if raw != "" else default
    except ValueError:
        return default
    # A number beyond the index columns' range would reach the database and fail there.
    if value is not None and abs(value) > JSON_INTEGER_MAX:
        return default
    return value


def _limit(request: HttpRequest, default: int = PAGE_SIZE) -> int:
    value = _int_param(request, "limit", default) or default
    return max(1, min(value, MAX_PAGE_SIZE))


def _query(request: HttpRequest, **changes: Any) -> str:
    """The current query string with `changes` applied (None removes a key)."""
    query = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = str(value)
    encoded = query.urlencode()
    return "?" + encoded if encoded else "?"


# ---------------------------------------------------------------- selectors (read-only)


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
    rows: list[dict[str, Any]]
    next_after: int | None
    prev_before: int | None
    from_start: bool


def message_row(message: RawMessage, session: Session) -> dict[str, Any]:
    raw = pretty(message.to_wire())
    text = content_text(message.content)
    return {
        "message": message,
        "run_hex": message.run_id or "",
        "preview": preview(text),
        "raw": raw if len(raw) <= RAW_INLINE_LIMIT else None,
        "raw_size": len(raw),
        "detail_url": url("message", session, message.id),
    }


def message_page(
    session: Session,
    *,
    window: str | None,
    run: Run | None,
    after: int,
    before: int | None,
    limit: int,
) -> MessagePage:
    """One page of the raw log in index order, hot and cold merged (selectors.log_page).

    Keyset by MessageIndex: `after` pages forward. The unfiltered log also pages backward
    (`before`): MessageIndex is gapless, so the page before #N starts at N - limit. A run's
    messages are scanned from the run's first input; a page then shows that run's rows
    among the `limit` indices it read.
    """
    filtered = window is not None or run is not None
    if run is not None:
        inputs = selectors.log_run_inputs(session.id, run.id.hex, session.last_index)
        if inputs:
            after = max(after, inputs[0].index - 1)
    elif before is not None and window is None:
        after = max(before - limit - 1, 0)
    found = selectors.log_page(session.id, window_id=window, after_index=after, limit=limit + 1)
    more = len(found) > limit
    found = found[:limit]
    next_after = found[-1].index if found and more else None
    if run is not None:
        found = [m for m in found if m.run_id == run.id.hex]
    return MessagePage(
        rows=[message_row(m, session) for m in found],
        next_after=next_after,
        prev_before=after + 1 if after > 0 and not filtered else None,
        from_start=after > 0 and filtered,
    )


def keyset_by_time(
    queryset: QuerySet, request: HttpRequest, limit: int
) -> tuple[list[Any], str | None]:
    """Newest first, paged by (created_at, pk) through `?before=<iso>|<pk>`."""
    before = request.GET.get("before", "")
    if "|" in before:
        stamp, _, raw_pk = before.partition("|")
        try:
            moment = parse_datetime(stamp)
            pk = queryset.model._meta.pk.to_python(raw_pk)
        except (ValueError, ValidationError):
            moment = None
        if moment is not None:
            queryset = queryset.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=pk))
    found = list(queryset.order_by("-created_at", "-pk")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    cursor = f"{found[-1].created_at.isoformat()}|{found[-1].pk}" if found and more else None
    return found, cursor


def fold_rows(session: Session, records: list[FoldRecord]) -> list[dict[str, Any]]:
    """Fold records joined with their KV values and their window's coverage (one query)."""
    windows = sorted({r.window_id for r in records})
    kv = kv_values(
        session.id,
        [fold_key(r.fold_id) for r in records] + [covered_key(w) for w in windows],
    )
    rows = []
    for record in records:
        value = kv.get(fold_key(record.fold_id)) or {}
        covered = int(kv.get(covered_key(record.window_id)) or 0)
        rows.append(
            {
                "record": record,
                "summary": str(value.get("summary", "")),
                "message_ids": list(value.get("messageIds") or []),
                "created_at_index": value.get("createdAtIndex"),
                "covered_through": covered,
                "compressed": record.last_index <= covered,
                "detail_url": url("fold", session, record.fold_id),
                "range_url": url("messages", session)
                + f"?window={record.window_id}&after={record.first_index - 1}",
            }
        )
    return rows


def chart_for(session: Session) -> dict[str, Any]:
    """Input tokens of the latest turns with maintenance commits and folds marked."""
    turns = list(
        ProjectionSnapshot.objects.filter(session=session, usage__isnull=False)
        .order_by("-created_at", "-pk")
        .values_list("created_at", "upper_bound", "usage")[:CHART_TURNS]
    )[::-1]
    points = []
    for created_at, upper_bound, usage in turns:
        tokens = usage.get("inputTokens") if isinstance(usage, dict) else None
        points.append((created_at, upper_bound, tokens if isinstance(tokens, int) else None))
    markers: list[charts.Marker] = []
    if points:
        first_time, first_bound = points[0][0], points[0][1]
        jobs = MaintenanceJob.objects.filter(
            session=session, status=MaintenanceJob.Status.COMMITTED
        ).filter(Q(finished_at__gte=first_time) | Q(finished_at__isnull=True))
        for finished_at, through_index, window_id in jobs.order_by("finished_at").values_list(
            "finished_at", "through_index", "window_id"
        )[:CHART_TURNS]:
            if finished_at is not None:
                position = _position(points, lambda p, t=finished_at: p[0] >= t)
            else:
                position = _position(points, lambda p, b=through_index or 0: p[1] > b)
            markers.append(
                charts.Marker(
                    position,
                    charts.MAINTENANCE,
                    f"maintenance of {window_id} through #{through_index}",
                )
            )
        folds = FoldRecord.objects.filter(session=session, last_index__gte=first_bound)
        for fold_id, window_id, first, last in folds.order_by("last_index").values_list(
            "fold_id", "window_id", "first_index", "last_index"
        )[:CHART_TURNS]:
            # The fold_create call and its result come after the fold's last message.
            position = _position(points, lambda p, b=last + 1: p[1] > b)
            markers.append(
                charts.Marker(
                    position, charts.FOLD, f"fold {fold_id} ({window_id} #{first}-#{last})"
                )
            )
    version = session.agent_version
    threshold = (
        int(version.maintenance_trigger_ratio * version.max_input_tokens)
        if version.max_input_tokens and version.maintenance_trigger_ratio
        else None
    )
    svg = charts.input_tokens_chart(
        [charts.Turn(str(i + 1), p[2]) for i, p in enumerate(points)],
        markers,
        threshold=threshold,
    )
    return {"svg": svg, "turns": len(points), "markers": markers, "threshold": threshold}


def _position(points: list[tuple], after: Any) -> float:
    """Half a turn before the first point for which `after(point)` holds (or past the end)."""
    for i, point in enumerate(points):
        if after(point):
            return max(i - 0.5, 0)
    return len(points) - 0.5 if len(points) > 1 else 0


def derived_badge(derived_type: str) -> str:
    return {
        "system": "badge-system",
        "raw": "badge-raw",
        "context_header": "badge-header",
        "context_fold": "badge-fold",
        "context_state": "badge-state",
    }.get(derived_type, "badge-other")


def snapshot_rows(session: Session, snapshot: ProjectionSnapshot) -> list[dict[str, Any]]:
    rows = []
    sources = snapshot.sources or []
    for position, message in enumerate(snapshot.messages or []):
        source = sources[position] if position < len(sources) else {}
        ids = list(source.get("messageIds") or [])
        fold_id = source.get("foldId")
        window = source.get("windowId")
        first = source.get("firstIndex")
        range_url = None
        if first is not None and window:
            range_url = url("messages", session) + f"?window={window}&after={int(first) - 1}"
        rows.append(
            {
                "position": position,
                "message": message,
                "text": content_text(message.get("content")),
                "arguments": pretty(message["arguments"]) if message.get("arguments") else None,
                "source": source,
                "badge": derived_badge(str(source.get("derivedType", ""))),
                "links": [(i, url("message", session, i)) for i in ids[:SOURCE_LINKS]],
                "more_links": max(len(ids) - SOURCE_LINKS, 0),
                "fold_url": url("fold", session, fold_id) if fold_id else None,
                "range_url": range_url,
            }
        )
    return rows


# ---------------------------------------------------------------- the pages


class SessionBrowser:
    """The browser's views, mounted by SessionAdmin.get_urls under `<session_id>/browse/`."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        routes = [
            ("", self.overview, "overview"),
            ("windows/", self.windows, "windows"),
            ("messages/", self.messages, "messages"),
            ("messages/<uuid:message_id>/", self.message_detail, "message"),
            ("folds/", self.folds, "folds"),
            ("folds/<str:fold_id>/", self.fold_detail, "fold"),
            ("snapshots/", self.snapshots, "snapshots"),
            ("snapshots/<uuid:snapshot_id>/", self.snapshot_detail, "snapshot"),
            ("kv/", self.kv, "kv"),
            ("receipts/", self.receipts, "receipts"),
            ("maintenance/", self.maintenance, "maintenance"),
        ]
        return [
            path(
                f"<uuid:session_id>/browse/{route}",
                view(handler),
                name=f"sessions_app_session_browse_{name}",
            )
            for route, handler, name in routes
        ]

    def session_for(self, request: HttpRequest, session_id: UUID) -> Session:
        """The session if the user may view it: 403 without the permission, else 404."""
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied
        session = (
            self.model_admin.get_queryset(request)
            .select_related("application", "agent_version__agent", "current_run")
            .filter(pk=session_id)
            .first()
        )
        if session is None:
            raise Http404("No such session.")
        return session

    def render(
        self, request: HttpRequest, session: Session, template: str, title: str, **context: Any
    ) -> TemplateResponse:
        """Render templates/admin/sessions_app/browser/<template>.html with the admin context."""
        tab = {"message": "messages", "fold": "folds", "snapshot": "snapshots"}.get(
            template, template
        )
        base = {
            **self.admin_site.each_context(request),
            "opts": self.model_admin.opts,
            "session": session,
            "title": title,
            "subtitle": f"Session {session.pk}",
            "tab": tab,
            "tabs": [(key, label, url(key, session)) for key, label in TABS],
            "version_url": reverse(
                "admin:agents_agentversion_change", args=[session.agent_version_id]
            ),
        }
        return TemplateResponse(
            request, f"admin/sessions_app/browser/{template}.html", {**base, **context}
        )

    def overview(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        active = session.active_window
        kv = kv_values(
            session.id,
            [
                KEY_ACTIVE_WINDOW,
                KEY_TASK_MEMORY,
                KEY_CURRENT_WINDOW_ENTRY,
                window_key(active),
                checkpoint_key(active),
                covered_key(active),
            ],
        )
        runs = list(Run.objects.filter(session=session).order_by("-created_at")[:20])
        snapshots = list(
            ProjectionSnapshot.objects.filter(session=session)
            .defer(*SNAPSHOT_HEAVY_FIELDS)
            .order_by("-created_at", "-pk")[:5]
        )
        jobs = list(
            MaintenanceJob.objects.filter(
                session=session, status__in=MaintenanceJob.ACTIVE_STATUSES
            ).order_by("created_at")
        )
        return self.render(
            request,
            session,
            "overview",
            "Session overview",
            active_window=active,
            window_record=kv.get(window_key(active)) or {},
            window_record_json=pretty(kv.get(window_key(active)) or {}),
            checkpoint=str(kv.get(checkpoint_key(active)) or ""),
            covered_through=int(kv.get(covered_key(active)) or 0),
            task_memory=str(kv.get(KEY_TASK_MEMORY) or ""),
            window_entry=pretty(kv[KEY_CURRENT_WINDOW_ENTRY])
            if KEY_CURRENT_WINDOW_ENTRY in kv
            else None,
            runs=runs,
            window_count=WindowRecord.objects.filter(session=session).count(),
            fold_count=FoldRecord.objects.filter(session=session).count(),
            snapshots=snapshots,
            active_jobs=jobs,
            chart=chart_for(session),
            inputs_json=pretty(session.inputs),
        )

    def windows(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        rows = windows_table(session)
        archived = ArchiveChunk.objects.filter(session=session).aggregate(b=Max("last_index"))
        return self.render(
            request,
            session,
            "windows",
            "Windows",
            rows=rows,
            archived_through=archived["b"] or 0,
            messages_url=url("messages", session),
            folds_url=url("folds", session),
        )

    def messages(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        window = request.GET.get("window") or None
        run = None
        try:
            run_id = UUID(request.GET.get("run", "").strip()) if request.GET.get("run") else None
        except ValueError:
            run_id = None
        if run_id is not None:
            run = Run.objects.filter(session=session, pk=run_id).first()
        limit = _limit(request)
        page = message_page(
            session,
            window=window,
            run=run,
            after=max(_int_param(request, "after", 0) or 0, 0),
            before=_int_param(request, "before"),
            limit=limit,
        )
        window_ids = list(
            WindowRecord.objects.filter(session=session)
            .order_by("created_at_index", "window_id")
            .values_list("window_id", flat=True)
        )
        return self.render(
            request,
            session,
            "messages",
            "Messages",
            page=page,
            limit=limit,
            window=window or "",
            run=run.id.hex if run else "",
            window_ids=window_ids,
            next_url=_query(request, after=page.next_after, before=None)
            if page.next_after is not None
            else None,
            prev_url=_query(request, before=page.prev_before, after=None)
            if page.prev_before is not None
            else None,
            start_url=_query(request, after=None, before=None) if page.from_start else None,
            last_url=_query(request, before=session.next_message_index, after=None)
            if not window and not run
            else None,
        )

    def message_detail(
        self, request: HttpRequest, session_id: UUID, message_id: UUID
    ) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found = selectors.log_by_ids(session.id, [str(message_id)])
        if not found:
            raise Http404("No such message in this session.")
        message = found[0]
        receipt = None
        if message.kind == Message.Kind.TOOL_RESULT:
            receipt = (
                ToolReceipt.objects.filter(session=session, tool_call_id=message.tool_call_id)
                .only("tool_call_id", "state_revision", "success")
                .first()
            )
        return self.render(
            request,
            session,
            "message",
            f"Message #{message.index}",
            message=message,
            text=content_text(message.content),
            raw=pretty(message.to_wire()),
            receipt=receipt,
            snapshot_url=url("snapshot", session, message.snapshot_id)
            if message.snapshot_id
            else None,
            around_url=url("messages", session)
            + f"?window={message.window_id}&after={max(message.index - 6, 0)}",
        )

    def folds(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        window = request.GET.get("window") or None
        after = _int_param(request, "after", 0) or 0
        limit = _limit(request)
        records = FoldRecord.objects.filter(session=session, first_index__gt=after)
        if window:
            records = records.filter(window_id=window)
        found = list(records.order_by("first_index")[: limit + 1])
        more = len(found) > limit
        found = found[:limit]
        return self.render(
            request,
            session,
            "folds",
            "Folds",
            rows=fold_rows(session, found),
            window=window or "",
            next_url=_query(request, after=found[-1].first_index) if found and more else None,
            first_url=_query(request, after=None) if after else None,
        )

    def fold_detail(self, request: HttpRequest, session_id: UUID, fold_id: str) -> TemplateResponse:
        session = self.session_for(request, session_id)
        record = FoldRecord.objects.filter(session=session, fold_id=fold_id).first()
        if record is None:
            raise Http404("No such fold in this session.")
        row = fold_rows(session, [record])[0]
        messages = selectors.log_by_ids(session.id, row["message_ids"])
        return self.render(
            request,
            session,
            "fold",
            f"Fold {fold_id}",
            row=row,
            fold_messages=[message_row(m, session) for m in messages],
            raw_text=render_fold_text(messages),
            missing=len(row["message_ids"]) - len(messages),
        )

    def snapshots(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            ProjectionSnapshot.objects.filter(session=session).defer(*SNAPSHOT_HEAVY_FIELDS),
            request,
            _limit(request, 50),
        )
        return self.render(
            request,
            session,
            "snapshots",
            "Projection snapshots",
            snapshots=[(s, url("snapshot", session, s.pk)) for s in found],
            next_url=_query(request, before=cursor) if cursor else None,
        )

    def snapshot_detail(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> TemplateResponse:
        session = self.session_for(request, session_id)
        snapshot = ProjectionSnapshot.objects.filter(session=session, pk=snapshot_id).first()
        if snapshot is None:
            raise Http404("No such snapshot in this session.")
        return self.render(
            request,
            session,
            "snapshot",
            "Projection snapshot",
            snapshot=snapshot,
            rows=snapshot_rows(session, snapshot),
            request_json=pretty(snapshot.request),
            usage_json=pretty(snapshot.usage) if snapshot.usage is not None else None,
            options_json=pretty(snapshot.options),
            notes_json=pretty(snapshot.notes) if snapshot.notes else None,
        )

    def kv(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        prefix = request.GET.get("prefix", "")
        after = request.GET.get("after", "")
        limit = _limit(request, 200)
        entries = KVEntry.objects.filter(session=session)
        if prefix:
            entries = entries.filter(key__startswith=prefix)
        if after:
            entries = entries.filter(key__gt=after)
        found = list(entries.order_by("key")[: limit + 1])
        more = len(found) > limit
        found = found[:limit]
        rows = []
        for entry in found:
            text = pretty(entry.value)
            rows.append({"entry": entry, "preview": preview(text, 160), "value": text})
        return self.render(
            request,
            session,
            "kv",
            "KV entries",
            rows=rows,
            prefix=prefix,
            next_url=_query(request, after=found[-1].key) if found and more else None,
        )

    def receipts(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            ToolReceipt.objects.filter(session=session), request, _limit(request, 50)
        )
        rows = [
            {
                "receipt": r,
                "result": pretty(r.result),
                "message_url": url("message", session, r.result_message_id),
            }
            for r in found
        ]
        return self.render(
            request,
            session,
            "receipts",
            "Tool receipts",
            rows=rows,
            next_url=_query(request, before=cursor) if cursor else None,
        )

    def maintenance(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            MaintenanceJob.objects.filter(session=session), request, _limit(request, 50)
        )
        rows = [
            {
                "job": job,
                "history": pretty(job.history) if job.history else None,
                "usage": pretty(job.summarizer_usage) if job.summarizer_usage else None,
                "range_url": url("messages", session)
                + f"?window={job.window_id}&after={(job.from_index or 0)}"
                if job.from_index is not None
                else None,
            }
            for job in found
        ]
        return self.render(
            request,
            session,
            "maintenance",
            "Maintenance jobs",
            rows=rows,
            next_url=_query(request, before=cursor) if cursor else None,
        )
