"""The snapshot storage page: how much each Application's stored views take (issue 33)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path

from sessions_app.reads.console import member_scope, snapshot_storage

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


class StoragePages:
    """One page: snapshot bodies per Application (bytes stored, bytes of JSON, by state)."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path(
                "snapshot-storage/",
                view(self.storage),
                name="sessions_app_session_snapshot_storage",
            )
        ]

    def storage(self, request: HttpRequest) -> TemplateResponse:
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied
        rows = snapshot_storage(member_scope(request.user))
        return TemplateResponse(
            request,
            "admin/sessions_app/snapshot_storage.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model_admin.opts,
                "title": "Snapshot storage",
                "rows": rows,
                "total_stored": sum(r.stored_bytes for r in rows),
                "total_view": sum(r.view_bytes for r in rows),
                "retention_days": settings.SNAPSHOT_BODY_RETENTION_DAYS,
                "keyframe_interval": settings.SNAPSHOT_KEYFRAME_INTERVAL,
            },
        )
