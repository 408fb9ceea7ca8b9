"""Applications (tenants) and their API keys: membership is changed by superusers, keys are
seen and revoked, never edited; an Application's gateway settings have a page of their own
(agents/admin/gateway.py), linked from its change page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html

from agents.admin.gateway import gateway_settings_page
from agents.models import ApiKey, Application
from agents.selectors import gateway_settings_of
from agents.services import (
    api_key_revoke,
)
from contextproto.admin_site import ReadOnlyAdmin, scope_to_member


def member_applications(request: HttpRequest) -> QuerySet[Application]:
    """The Applications the operator is a member of (a superuser: all)."""
    return scope_to_member(Application.objects.all(), request, "")


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin):
    """Tenants. Created with `manage.py create_application` (it prints the first API key)."""

    list_display = ("name", "created_at")
    search_fields = ("name",)
    filter_horizontal = ("members",)
    readonly_fields = ("id", "created_at", "gateway_settings_summary")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Application]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(members=request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Membership decides visibility, so only superusers may change it.
        return request.user.is_superuser

    @admin.display(description="Gateway settings")
    def gateway_settings_summary(self, obj: Application) -> str:
        settings = gateway_settings_of(obj)
        side = "default" if settings.side_models_default else f"{len(settings.side_models)}"
        return format_html(
            '<a href="{}" id="gateway-settings-link">{} model alias(es), side models: {}</a>',
            reverse("admin:agents_application_gateway_settings", args=[obj.pk]),
            len(settings.aliases),
            side,
        )

    def get_urls(self) -> list:
        return [
            path(
                "<path:object_id>/gateway-settings/",
                self.admin_site.admin_view(self.gateway_settings_view),
                name="agents_application_gateway_settings",
            ),
            *super().get_urls(),
        ]

    def gateway_settings_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return gateway_settings_page(self, request, object_id)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    """Keys are issued by `create_application`, `rotate_api_key` and the API; here they are
    seen and revoked, never edited."""

    list_display = ("prefix", "application", "created_at", "revoked_at")
    list_select_related = ("application",)
    exclude = ("key_hash",)
    actions = ["revoke_selected"]

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.change_apikey")

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        # An operator may revoke an Application's last key (a leak); the API may not.
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True).select_related("application"):
            api_key_revoke(api_key=key)
            self.log_change(request, key, "Revoked.")
            revoked += 1
        self.message_user(
            request,
            f"Revoked {revoked} API key(s); requests with them now get 401.",
            messages.SUCCESS,
        )
