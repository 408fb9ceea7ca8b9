"""The session browser's state pages: the KV store (now or at a revision), tool receipts and
maintenance jobs, each keyset-paged."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from contextproto.errors import ApplicationError
from contextproto.pagination import split_page
from sessions_app.admin_views.browser import BrowserPages, Route
from sessions_app.admin_views.common import int_param, limit_param, pretty, preview, query, url
from sessions_app.admin_views.reads import keyset_by_time
from sessions_app.models import KVEntry, MaintenanceJob, ToolReceipt
from sessions_app.reads import history as history_reads


class StatePages(BrowserPages):
    """KV, receipts and maintenance of one session."""

    def routes(self) -> list[Route]:
        return [
            ("kv/", self.kv, "kv"),
            ("receipts/", self.receipts, "receipts"),
            ("maintenance/", self.maintenance, "maintenance"),
        ]

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
        # Rows with key and value either way: the KV now, or as it was at `revision`.
        entries: QuerySet[Any] = (
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
            ToolReceipt.objects.filter(session=session),
            request.GET.get("before", ""),
            limit_param(request, 50),
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
            MaintenanceJob.objects.filter(session=session),
            request.GET.get("before", ""),
            limit_param(request, 50),
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
