"""Agents: created here, then only their versions change (no rename service)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from agents.admin.applications import member_applications
from agents.models import Agent
from agents.services import (
    agent_create,
)
from contextproto.admin_site import ApplicationScopedAdmin
from contextproto.errors import ApplicationError


@admin.register(Agent)
class AgentAdmin(ApplicationScopedAdmin):
    list_display = ("name", "application", "created_at")
    list_select_related = ("application",)
    search_fields = ("name",)

    def get_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("application", "name")
        return ("application", "name", "created_at", "versions_list")

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> tuple:
        return () if obj is None else ("application", "name", "created_at", "versions_list")

    def has_change_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        # No rename service exists: an agent is created, then only its versions change.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any):
        if db_field.name == "application":
            kwargs["queryset"] = member_applications(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="Versions")
    def versions_list(self, obj: Agent) -> str:
        versions = obj.versions.order_by("-number")
        rows = format_html_join(
            "",
            '<li><a href="{}">v{}</a> · {} · {}</li>',
            (
                (
                    reverse("admin:agents_agentversion_change", args=[v.pk]),
                    v.number,
                    v.status,
                    v.protocol_key,
                )
                for v in versions
            ),
        )
        add = reverse("admin:agents_agentversion_add") + f"?agent={obj.pk}"
        return format_html('<ul>{}</ul><a href="{}">Add a draft version</a>', rows, add)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        created = agent_create(application=form.cleaned_data["application"], name=obj.name)
        obj.pk = created.pk
        obj.created_at = created.created_at
        obj._state = created._state

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().changeform_view(request, *args, **kwargs)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
