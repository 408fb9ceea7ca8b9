"""The session browser's base: the session a page is about (403/404), the tabs and the
rendering with the admin's context. Page groups subclass BrowserPages and list their routes,
mounted under `<session_id>/browse/` with the names `sessions_app_session_browse_<name>`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from sessions_app.admin_views.common import url
from sessions_app.models import Session

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

# (path under <session_id>/browse/, view, name suffix)
Route = tuple[str, Callable[..., HttpResponse], str]

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


class BrowserPages:
    """A group of session browser pages; `routes()` lists them."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.admin_site = model_admin.admin_site

    def routes(self) -> list[Route]:
        return []

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                f"<uuid:session_id>/browse/{route}",
                view(handler),
                name=f"sessions_app_session_browse_{name}",
            )
            for route, handler, name in self.routes()
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
