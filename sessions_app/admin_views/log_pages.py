"""The session browser's log pages: the raw log keyset-paged by MessageIndex (hot and cold
merged), one message, the folds and one fold read back as raw text."""

from __future__ import annotations

from uuid import UUID

from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse

from contextproto.pagination import split_page
from contextproto.protocol.foldtext import render_fold_text
from contextproto.protocol.messages import KIND_TOOL_RESULT
from sessions_app.admin_views import context as ctx
from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.common import (
    arguments_block,
    content_text,
    int_param,
    limit_param,
    pretty,
    query,
    url,
)
from sessions_app.admin_views.presenters import fold_rows, message_rows
from sessions_app.admin_views.reads import fold_entries, latest_view, message_page
from sessions_app.models import FoldRecord, Run, ToolReceipt, WindowRecord
from sessions_app.reads import raw_log


class LogPages(BrowserPages):
    """Messages and folds of one session."""

    def routes(self) -> list[Route]:
        return [
            ("messages/", self.messages, "messages"),
            ("messages/<uuid:message_id>/", self.message_detail, "message"),
            ("folds/", self.folds, "folds"),
            ("folds/<str:fold_id>/", self.fold_detail, "fold"),
        ]

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
            rows=message_rows(page.messages, session),
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
        if message.kind == KIND_TOOL_RESULT:
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
            rows=fold_rows(session, fold_entries(session, found)),
            window=window or "",
            next_url=query(request, after=found[-1].first_index) if found and more else None,
            first_url=query(request, after=None) if after else None,
        )

    def fold_detail(self, request: HttpRequest, session_id: UUID, fold_id: str) -> TemplateResponse:
        session = self.session_for(request, session_id)
        record = FoldRecord.objects.filter(session=session, fold_id=fold_id).first()
        if record is None:
            raise Http404("No such fold in this session.")
        row = fold_rows(session, fold_entries(session, [record]))[0]
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
            fold_messages=message_rows(messages, session),
            raw_text=render_fold_text(messages),
            missing=len(row["message_ids"]) - len(messages),
        )
