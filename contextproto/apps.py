"""The admin app with the project's site: `admin.site` is contextproto's ConsoleAdminSite."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    default_site = "sessions_app.console.ConsoleAdminSite"
