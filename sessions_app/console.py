"""The operator console's site: Django's admin, branded, with the dashboard as its index.

contextproto.apps.ConsoleAdminConfig makes it the default `admin.site`; it lives in the app
because its index reads the sessions' rows (the project package imports no app).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from sessions_app import nodes
from sessions_app.reads import console as console_reads

# The links under the dashboard, (label, URL name) in display order. Other apps add theirs
# with add_console_link (labs: Experiments), so the console names no URL it does not own.
_CONSOLE_LINKS: list[tuple[str, str]] = [
    ("Protocol catalog", "admin:agents_agentversion_catalog"),
    ("Search sessions", "admin:sessions_app_session_search"),
    ("Snapshot storage", "admin:sessions_app_session_snapshot_storage"),
]


def add_console_link(label: str, url_name: str, *, after: str | None = None) -> None:
    """Show a link to `url_name` under the dashboard, after the link labelled `after` (else
    last); a link already listed is not added twice."""
    if (label, url_name) in _CONSOLE_LINKS:
        return
    labels = [existing for existing, _name in _CONSOLE_LINKS]
    at = labels.index(after) + 1 if after in labels else len(_CONSOLE_LINKS)
    _CONSOLE_LINKS.insert(at, (label, url_name))


class ConsoleAdminSite(admin.AdminSite):
    """The operator console: Django's admin, branded, with the dashboard as its index."""

    site_header = "contextproto"
    site_title = "contextproto console"
    index_title = "Dashboard"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None):
        """The dashboard above the app list: nodes, activity, the maintenance queue,
        the last hour's failures, today's cost (a fixed number of queries, see
        sessions_app.reads.console)."""
        context: dict[str, Any] = {
            "registry": nodes.registry_report(),
            "console_links": [(label, reverse(name)) for label, name in _CONSOLE_LINKS],
        }
        if request.user.has_perm("sessions_app.view_session"):
            context["dashboard"] = console_reads.dashboard(request.user)
        return super().index(request, {**context, **(extra_context or {})})
