"""The session browser's pages, mounted by SessionAdmin.get_urls under `<session_id>/browse/`.

Each page issues a fixed number of queries whatever the session's size: the raw log is
paged by MessageIndex (keyset, never OFFSET or COUNT(*)), per-window counts come from one
grouped query each, and the secondary tables (WindowRecord, FoldRecord) bound the rest.
A snapshot's pages read that snapshot (and its neighbour) plus one page of the raw log.

Pages 404 for a session outside the user's Applications (the SessionAdmin queryset is
scoped) and 403 without the view permission on sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.contrib import messages as flash
from django.core.exceptions import PermissionDenied
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from contextproto.errors import ApplicationError
from contextproto.pagination import split_page
from contextproto.protocol.foldtext import render_fold_text
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    KEY_CURRENT_WINDOW_ENTRY,
    KEY_TASK_MEMORY,
    checkpoint_key,
    covered_key,
    window_key,
)
from sessions_app.admin_views import context as ctx
from sessions_app.admin_views import turns
from sessions_app.admin_views.common import (
    SNAPSHOT_HEAVY_FIELDS,
    arguments_block,
    content_text,
    int_param,
    limit_param,
    pretty,
    preview,
    query,
    url,
)
from sessions_app.admin_views.diff import snapshot_diff
from sessions_app.admin_views.reads import (
    chart_for,
    fold_rows,
    keyset_by_time,
    latest_view,
    message_page,
    message_row,
    neighbours,
    raw_pane,
    record_counts,
    view_range_of,
    windows_table,
)
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
from sessions_app.reads import history as history_reads
from sessions_app.reads import raw_log
from sessions_app.reads.raw_log import kv_values
from sessions_app.reads.usage import run_usage, session_usage
from sessions_app.services.fork import session_fork

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

RAW_PANE_SIZE = 60
FORKS_LISTED = 20

TABS = (
    ("overview", "Overview"),
    ("windows", "Windows"),
    ("messages", "Messages"),
    ("folds", "Folds"),
    ("snapshots", "Snapshots"),
    ("kv", "KV"),
    ("receipts", "Receipts"),
    ("maintenance", "Maintenance"),
    ("search", "Search"),  # sessions_app.admin_views.search
)


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
            ("snapshots/<uuid:snapshot_id>/diff/", self.snapshot_diff, "snapshot_diff"),
            ("snapshots/<uuid:snapshot_id>/fork/", self.snapshot_fork, "snapshot_fork"),
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
        tab = {
            "message": "messages",
            "fold": "folds",
            "snapshot": "snapshots",
            "snapshot_diff": "snapshots",
        }.get(template, template)
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
        window_count, fold_count = record_counts(session)
        by_run = run_usage([run.id for run in runs], session.agent_version.prices)
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
        forks = list(
            Session.objects.filter(forked_from=session)
            .order_by("-created_at", "-pk")
            .only("id", "forked_through_index", "forked_revision", "created_at")[:FORKS_LISTED]
        )
        return self.render(
            request,
            session,
            "overview",
            "Session overview",
            forked_from=_fork_origin(session),
            forks=[(fork, url("overview", fork.pk)) for fork in forks],
            forks_listed=FORKS_LISTED,
            active_window=active,
            window_record=kv.get(window_key(active)) or {},
            window_record_json=pretty(kv.get(window_key(active)) or {}),
            checkpoint=str(kv.get(checkpoint_key(active)) or ""),
            covered_through=int(kv.get(covered_key(active)) or 0),
            task_memory=str(kv.get(KEY_TASK_MEMORY) or ""),
            window_entry=pretty(kv[KEY_CURRENT_WINDOW_ENTRY])
            if KEY_CURRENT_WINDOW_ENTRY in kv
            else None,
            runs=[(run, by_run.get(run.id)) for run in runs],
            usage=session_usage(session),
            window_count=window_count,
            fold_count=fold_count,
            snapshots=snapshots,
            active_jobs=jobs,
            chart=chart_for(session),
            inputs_json=pretty(session.inputs),
            **turns.live_context(
                turns.run_is_live(
                    session.current_run,
                    latest_projection=snapshots[0].created_at if snapshots else None,
                )
            ),
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
        limit = limit_param(request)
        page = message_page(
            session,
            window=window,
            run=run,
            after=max(int_param(request, "after", 0) or 0, 0),
            before=int_param(request, "before"),
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
            next_url=query(request, after=page.next_after, before=None)
            if page.next_after is not None
            else None,
            prev_url=query(request, before=page.prev_before, after=None)
            if page.prev_before is not None
            else None,
            start_url=query(request, after=None, before=None) if page.from_start else None,
            last_url=query(request, before=session.next_message_index, after=None)
            if not window and not run
            else None,
        )

    def message_detail(
        self, request: HttpRequest, session_id: UUID, message_id: UUID
    ) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found = raw_log.log_by_ids(session.id, [str(message_id)])
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
        latest = latest_view(session)
        in_view = None
        if latest is not None and message.index <= latest.upper_bound:
            status, position = ctx.view_index(latest).place(message)
            viewer = url("snapshot", session, latest.pk)
            in_view = {
                "status": status,
                "badge": ctx.STATUS_BADGE[status],
                "help": ctx.STATUS_HELP[status],
                "position": position,
                "snapshot": latest,
                "raw_url": f"{viewer}?raw_after={message.index - 1}#r{message.index}",
                "view_url": f"{viewer}?raw_after={message.index - 1}#v{position}"
                if position is not None
                else None,
            }
        return self.render(
            request,
            session,
            "message",
            f"Message #{message.index}",
            message=message,
            in_view=in_view,
            text=content_text(message.content),
            arguments=arguments_block(message.arguments),
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
        after = int_param(request, "after", 0) or 0
        limit = limit_param(request)
        records = FoldRecord.objects.filter(session=session, first_index__gt=after)
        if window:
            records = records.filter(window_id=window)
        found = list(records.order_by("first_index")[: limit + 1])
        found, more = split_page(found, limit)
        return self.render(
            request,
            session,
            "folds",
            "Folds",
            rows=fold_rows(session, found),
            window=window or "",
            next_url=query(request, after=found[-1].first_index) if found and more else None,
            first_url=query(request, after=None) if after else None,
        )

    def fold_detail(self, request: HttpRequest, session_id: UUID, fold_id: str) -> TemplateResponse:
        session = self.session_for(request, session_id)
        record = FoldRecord.objects.filter(session=session, fold_id=fold_id).first()
        if record is None:
            raise Http404("No such fold in this session.")
        row = fold_rows(session, [record])[0]
        messages = raw_log.log_by_ids(session.id, row["message_ids"])
        latest = latest_view(session)
        in_view = None
        if latest is not None and record.last_index <= latest.upper_bound:
            index = ctx.view_index(latest)
            position = next((p for p, f in index.fold_ids.items() if f == fold_id), None)
            if position is not None:
                status = "shown"
            elif record.window_id == index.window_id:
                status = "compressed"
            else:
                status = "hidden"
            viewer = url("snapshot", session, latest.pk)
            in_view = {
                "status": status,
                "position": position,
                "snapshot": latest,
                "view_url": f"{viewer}?raw_after={record.first_index - 1}#v{position}"
                if position is not None
                else f"{viewer}?raw_after={record.first_index - 1}#r{record.first_index}",
            }
        return self.render(
            request,
            session,
            "fold",
            f"Fold {fold_id}",
            row=row,
            in_view=in_view,
            fold_messages=[message_row(m, session) for m in messages],
            raw_text=render_fold_text(messages),
            missing=len(row["message_ids"]) - len(messages),
        )

    def snapshots(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            ProjectionSnapshot.objects.filter(session=session).defer(*SNAPSHOT_HEAVY_FIELDS),
            request,
            limit_param(request, 50),
        )
        return self.render(
            request,
            session,
            "snapshots",
            "Projection snapshots",
            rows=turns.snapshot_rows(session, found),
            next_url=query(request, before=cursor) if cursor else None,
            first_url=query(request, before=None) if request.GET.get("before") else None,
        )

    def _snapshot(self, session: Session, snapshot_id: UUID) -> ProjectionSnapshot:
        snapshot = ProjectionSnapshot.objects.filter(session=session, pk=snapshot_id).first()
        if snapshot is None:
            raise Http404("No such snapshot in this session.")
        return snapshot

    def snapshot_detail(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> TemplateResponse:
        """The context viewer: the turn's view beside the raw log, with its token breakdown."""
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        previous, following = neighbours(session, snapshot)
        breakdown = ctx.snapshot_breakdown(snapshot)
        index = ctx.view_index(snapshot)
        only_window = request.GET.get("raw_window") == "1"
        limit = limit_param(request, RAW_PANE_SIZE, name="raw_limit")
        view_range = view_range_of(session, snapshot, index)
        after, before = int_param(request, "raw_after"), int_param(request, "raw_before")
        # By default the pane opens on the range the view was built from, from its start.
        in_range = after is None and before is None and not only_window
        found, earlier, later, from_start = raw_pane(
            session,
            snapshot,
            after=view_range.first - 1 if in_range else after,
            before=before,
            window=snapshot.window_id if only_window else None,
            limit=limit,
        )

        def locate(message_index: int) -> str:
            target = query(
                request, raw_after=max(message_index - 1, 0), raw_before=None, raw_window=None
            )
            return f"{target}#r{message_index}"

        raw = ctx.raw_rows(found, index, detail_url=lambda m: url("message", session, m.id))
        return self.render(
            request,
            session,
            "snapshot",
            "Context viewer: the model's view at one turn",
            snapshot=snapshot,
            breakdown=breakdown,
            estimate_label=ctx.ESTIMATE_LABEL,
            view_rows=ctx.view_rows(
                snapshot,
                breakdown,
                message_url=lambda i: url("message", session, i),
                fold_url=lambda f: url("fold", session, f),
                locate=locate,
            ),
            covered=index.covered,
            raw_rows=raw,
            raw_statuses=[
                (status, ctx.STATUS_BADGE[status], ctx.STATUS_HELP[status], n)
                for status, n in view_range.counts.items()
            ],
            view_range=view_range,
            in_range=in_range,
            range_url=None
            if in_range
            else query(request, raw_after=None, raw_before=None, raw_window=None),
            tail_url=query(
                request, raw_before=snapshot.upper_bound + 1, raw_after=None, raw_window=None
            ),
            only_window=only_window,
            raw_first=found[0].index if found else None,
            raw_last=found[-1].index if found else None,
            earlier_url=query(request, raw_before=earlier, raw_after=None) if earlier else None,
            later_url=query(request, raw_after=later, raw_before=None) if later else None,
            start_url=query(request, raw_after=None, raw_before=None) if from_start else None,
            window_toggle_url=query(
                request, raw_window=None if only_window else "1", raw_after=None, raw_before=None
            ),
            previous=previous,
            following=following,
            previous_url=url("snapshot", session, previous.pk) if previous else None,
            following_url=url("snapshot", session, following.pk) if following else None,
            diff_url=url("snapshot_diff", session, snapshot.pk) if previous else None,
            kv_url=url("kv", session),
            state_url=url("kv", session) + f"?revision={snapshot.revision}",
            fork_url=url("snapshot_fork", session, snapshot.pk),
            can_fork=self.may_fork(request),
            request_json=pretty(snapshot.request),
            usage_json=pretty(snapshot.usage) if snapshot.usage is not None else None,
            options_json=pretty(snapshot.options),
            notes_json=pretty(snapshot.notes) if snapshot.notes else None,
        )

    def snapshot_diff(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> TemplateResponse:
        """What changed in the model's view since the session's turn before this one."""
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        previous, following = neighbours(session, snapshot)
        diff = None
        if previous is not None:
            previous = ProjectionSnapshot.objects.get(pk=previous.pk)
            diff = snapshot_diff(previous, snapshot)
        return self.render(
            request,
            session,
            "snapshot_diff",
            "What changed since the turn before",
            snapshot=snapshot,
            previous=previous,
            diff=diff,
            estimate_label=ctx.ESTIMATE_LABEL,
            snapshot_url=url("snapshot", session, snapshot.pk),
            previous_url=url("snapshot", session, previous.pk) if previous else None,
            earlier_diff_url=url("snapshot_diff", session, previous.pk) if previous else None,
            later_diff_url=url("snapshot_diff", session, following.pk) if following else None,
        )

    def may_fork(self, request: HttpRequest) -> bool:
        """Forking creates a session: staff who may add sessions (in their Applications)."""
        return request.user.has_perm(f"{self.model_admin.opts.app_label}.add_session")

    def snapshot_fork(self, request: HttpRequest, session_id: UUID, snapshot_id: UUID):
        """POST: fork the session at this turn (the fork service); open the new session."""
        return require_POST(self._snapshot_fork)(request, session_id, snapshot_id)

    def _snapshot_fork(
        self, request: HttpRequest, session_id: UUID, snapshot_id: UUID
    ) -> HttpResponseRedirect:
        session = self.session_for(request, session_id)
        snapshot = self._snapshot(session, snapshot_id)
        if not self.may_fork(request):
            raise PermissionDenied
        try:
            fork, _key = session_fork(session=session, snapshot_id=snapshot.pk)
        except ApplicationError as exc:
            flash.error(request, f"Not forked: {exc.message}")
            return HttpResponseRedirect(url("snapshot", session, snapshot.pk))
        self.model_admin.log_addition(
            request, fork, f"Forked from session {session.pk} at snapshot {snapshot.pk}."
        )
        # The session key is not shown here (admin messages are stored in the browser
        # session); the application key issues one with session-key/rotate/.
        flash.success(
            request,
            format_html(
                "This session is a fork of {} through #{} at revision {}. Its session key "
                "was not shown: issue one with POST sessions/{}/session-key/rotate/ "
                "(application key).",
                session.pk,
                fork.forked_through_index,
                fork.forked_revision,
                fork.pk,
            ),
        )
        return HttpResponseRedirect(url("overview", fork))

    def kv(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        prefix = request.GET.get("prefix", "")
        after = request.GET.get("after", "")
        limit = limit_param(request, 200)
        revision = int_param(request, "revision")
        refusal = None
        if revision is not None and revision < 0:
            refusal = "A revision is a non-negative integer."
        elif revision is not None:
            try:
                history_reads.revision_check(session, revision)
            except ApplicationError as exc:
                refusal = exc.message
        entries = (
            history_reads.kv_rows_at(session.id, revision)
            if revision is not None
            else KVEntry.objects.filter(session=session)
        )
        if refusal is not None:
            entries = entries.none()
        if prefix:
            entries = entries.filter(key__startswith=prefix)
        if after:
            entries = entries.filter(key__gt=after)
        found = list(entries.order_by("key")[: limit + 1])
        found, more = split_page(found, limit)
        rows = []
        for entry in found:
            text = pretty(entry.value)
            rows.append({"entry": entry, "preview": preview(text, 160), "value": text})
        return self.render(
            request,
            session,
            "kv",
            "KV entries" if revision is None else f"State at revision {revision}",
            rows=rows,
            prefix=prefix,
            revision=revision,
            refusal=refusal,
            current_url=query(request, revision=None, after=None),
            next_url=query(request, after=found[-1].key) if found and more else None,
        )

    def receipts(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            ToolReceipt.objects.filter(session=session), request, limit_param(request, 50)
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
            next_url=query(request, before=cursor) if cursor else None,
        )

    def maintenance(self, request: HttpRequest, session_id: UUID) -> TemplateResponse:
        session = self.session_for(request, session_id)
        found, cursor = keyset_by_time(
            MaintenanceJob.objects.filter(session=session), request, limit_param(request, 50)
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
            next_url=query(request, before=cursor) if cursor else None,
        )


def _fork_origin(session: Session) -> dict[str, Any] | None:
    """Where a forked session came from, with links into the original (no query)."""
    if session.forked_from_id is None:
        return None
    bound = int(session.forked_through_index or 0)
    return {
        "session_id": session.forked_from_id,
        "through_index": bound,
        "revision": session.forked_revision,
        "url": url("overview", session.forked_from_id),
        "messages_url": url("messages", session.forked_from_id) + f"?before={bound + 1}",
        "state_url": url("kv", session.forked_from_id) + f"?revision={session.forked_revision}",
    }
