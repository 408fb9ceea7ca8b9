"""Read-only admin of sessions and their log, state and derived tables (docs/architecture.md:
Admin).

Nothing here writes: sessions start through the API, the log is immutable, state changes
through the dispatcher and maintenance. Big tables never count all their rows and never
inline messages; the session browser (sessions_app.admin_views) is where an operator
looks inside one session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import redirect
from django.utils.html import format_html

from agents.admin import add_change_form_context
from agents.models import AgentVersion
from contextproto.admin_site import HugeTableAdmin
from sessions_app import admin_views
from sessions_app.admin_views import content_text, preview, url
from sessions_app.admin_views.replay import ReplayPages
from sessions_app.admin_views.search import SearchPages
from sessions_app.admin_views.storage import StoragePages
from sessions_app.models import (
    ArchiveChunk,
    KVEntry,
    MaintenanceJob,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
)
from sessions_app.reads.usage import agent_version_usage
from sessions_app.services.sessions import session_key_revoke

# More page groups under the session admin's URLs, added by other apps (labs: the
# experiment pages) so this module imports none of them. Each takes the ModelAdmin and has
# get_urls().
_EXTRA_PAGES: list[Callable[[admin.ModelAdmin], Any]] = []


def add_session_pages(pages: Callable[[admin.ModelAdmin], Any]) -> None:
    """Mount `pages(model_admin).get_urls()` under the session admin (once per class)."""
    if pages not in _EXTRA_PAGES:
        _EXTRA_PAGES.append(pages)


def _usage_totals(version: AgentVersion) -> dict[str, Any]:
    # Tokens by kind, cost and turns of all the version's sessions: one aggregate query.
    return {"usage_totals": agent_version_usage(version)}


# The version admin's change page shows what its sessions used (agents imports no app).
add_change_form_context(_usage_totals)


class SessionChildAdmin(HugeTableAdmin):
    """A table of rows that belong to one session; links lead into the session browser."""

    application_path = "session__application"

    @admin.display(description="Session")
    def session_link(self, obj: Any) -> str:
        return format_html(
            '<a href="{}">{}</a>', url("overview", obj.session_id), str(obj.session_id)[:8]
        )


@admin.register(Session)
class SessionAdmin(HugeTableAdmin):
    list_display = (
        "browse_link",
        "application",
        "agent_version",
        "active_window",
        "state_revision",
        "message_total",
        "created_at",
    )
    list_select_related = ("application", "agent_version__agent")
    search_fields = ("=id",)
    # Index-backed orderings (session_app_recent etc.): no sort over the whole table.
    ordering = ("application", "-created_at")
    actions = ["revoke_session_keys"]

    @admin.display(description="Session")
    def browse_link(self, obj: Session) -> str:
        return format_html('<a href="{}">{}</a>', url("overview", obj), obj.pk)

    @admin.display(description="Messages")
    def message_total(self, obj: Session) -> int:
        # The index is gapless, so the counter is the count: no COUNT(*) over the log.
        return obj.last_index

    def has_revoke_key_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.change_session")

    @admin.action(
        description="Revoke session keys of selected sessions", permissions=["revoke_key"]
    )
    def revoke_session_keys(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        # One fresh hash per session (the column is unique), so no bulk UPDATE.
        count = 0
        for session in queryset:
            session_key_revoke(session=session)
            self.log_change(request, session, "Revoked the session key.")
            count += 1
        self.message_user(
            request,
            f"Revoked the session keys of {count} session(s); the application key can issue "
            "new ones (POST sessions/{id}/session-key/rotate/).",
            messages.SUCCESS,
        )

    def get_urls(self) -> list:
        return (
            admin_views.SessionBrowser(self).get_urls()
            + admin_views.TimelinePages(self).get_urls()
            + ReplayPages(self).get_urls()
            + SearchPages(self).get_urls()
            + StoragePages(self).get_urls()
            + [route for pages in _EXTRA_PAGES for route in pages(self).get_urls()]
            + super().get_urls()
        )

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kw: Any):
        # The browser is the session's page (it 404s outside the user's Applications).
        return redirect(url("overview", object_id))


@admin.register(Run)
class RunAdmin(SessionChildAdmin):
    list_display = ("run_hex", "session_link", "status", "turns", "created_at", "finished_at")
    # A run's page is its timeline (linked from the RunId), not a read-only form.
    list_display_links = None
    list_filter = ("status",)
    ordering = ("session", "created_at")

    @admin.display(description="RunId")
    def run_hex(self, obj: Run) -> str:
        # The run's timeline: its turns, model calls and dispatches.
        return format_html('<a href="{}">{}</a>', url("run", obj.session_id, obj.pk), obj.id.hex)


@admin.register(Message)
class MessageAdmin(SessionChildAdmin):
    list_display = ("index", "session_link", "window_id", "role", "kind", "content_preview")
    list_filter = ("role", "kind")
    ordering = ("session", "index")

    @admin.display(description="Content")
    def content_preview(self, obj: Message) -> str:
        return preview(content_text(obj.content), 120)

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kw: Any):
        message = self.get_object(request, object_id)
        if message is None:
            return super().change_view(request, object_id, *args, **kw)
        return redirect(url("message", message.session_id, message.pk))


@admin.register(KVEntry)
class KVEntryAdmin(SessionChildAdmin):
    list_display = ("key", "session_link", "revision", "value_preview")
    ordering = ("session", "key")

    @admin.display(description="Value")
    def value_preview(self, obj: KVEntry) -> str:
        return preview(admin_views.pretty(obj.value), 120)


@admin.register(ToolReceipt)
class ToolReceiptAdmin(SessionChildAdmin):
    list_display = (
        "tool_call_id",
        "session_link",
        "tool_name",
        "success",
        "duration_ms",
        "state_revision",
        "created_at",
    )
    list_filter = ("success",)
    ordering = ("-id",)


@admin.register(ProjectionSnapshot)
class ProjectionSnapshotAdmin(SessionChildAdmin):
    list_display = (
        "snapshot_link",
        "session_link",
        "revision",
        "upper_bound",
        "window_id",
        "protocol",
        "provider",
        "created_at",
    )
    ordering = ("session", "created_at")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).defer(*admin_views.SNAPSHOT_HEAVY_FIELDS)

    @admin.display(description="Snapshot")
    def snapshot_link(self, obj: ProjectionSnapshot) -> str:
        return format_html(
            '<a href="{}">{}</a>', url("snapshot", obj.session_id, obj.pk), str(obj.pk)[:8]
        )

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kw: Any):
        snapshot = self.get_object(request, object_id)
        if snapshot is None:
            return super().change_view(request, object_id, *args, **kw)
        return redirect(url("snapshot", snapshot.session_id, snapshot.pk))


@admin.register(MaintenanceJob)
class MaintenanceJobAdmin(SessionChildAdmin):
    list_display = (
        "id",
        "session_link",
        "window_id",
        "status",
        "frozen_revision",
        "from_index",
        "through_index",
        "attempts",
        "created_at",
    )
    list_filter = ("status",)
    ordering = ("-created_at",)


@admin.register(ArchiveChunk)
class ArchiveChunkAdmin(SessionChildAdmin):
    list_display = ("session_link", "first_index", "last_index", "message_count", "created_at")
    exclude = ("data",)
    ordering = ("session", "first_index")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).defer("data")
