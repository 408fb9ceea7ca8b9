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
            "console_links": [
                ("Protocol catalog", reverse("admin:agents_agentversion_catalog")),
                ("Experiments", reverse("admin:sessions_app_experiments")),
                ("Search sessions", reverse("admin:sessions_app_session_search")),
            ],
        }
        if request.user.has_perm("sessions_app.view_session"):
            context["dashboard"] = console_reads.dashboard(request.user)
        return super().index(request, {**context, **(extra_context or {})})
