"""Which form the AgentVersion admin shows: a draft's option fields generated from the chosen
protocol's schema, the model fieldsets, the read-only layout of a frozen version, and the
Application-scoped choices of agents and tools."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agents.forms import (
    DEFAULT_PROTOCOL,
    ApplicationNameChoiceField,
    ApplicationNameMultipleChoiceField,
    agent_version_form_for,
    model_fieldsets,
    option_field_names,
)
from agents.models import Agent, AgentVersion, Tool
from contextproto.admin_site import ApplicationScopedAdmin, scope_to_member
from contextproto.protocol import catalog


class VersionForms(ApplicationScopedAdmin):
    """Form glue of AgentVersionAdmin."""

    @staticmethod
    def is_editable(obj: AgentVersion | None) -> bool:
        return obj is None or obj.status == AgentVersion.Status.DRAFT

    def form_protocol(
        self, request: HttpRequest, obj: AgentVersion | None
    ) -> catalog.ProtocolVersion:
        """The protocol whose option fields the form shows (and, on POST, received)."""
        if request.method == "POST":
            posted = catalog.by_key(request.POST.get("options_protocol"))
            if posted is not None:
                return posted
        if obj is not None:
            saved = catalog.find_version(obj.context_protocol_id, obj.context_protocol_version)
            if saved is not None:
                return saved
        else:
            asked = catalog.by_key(request.GET.get("protocol"))
            if asked is not None:
                return asked
        found = catalog.by_key(DEFAULT_PROTOCOL)
        assert found is not None
        return found

    def get_fieldsets(self, request: HttpRequest, obj: AgentVersion | None = None) -> list:
        bindings = ("tools", "maintainer_agent", "max_turns_per_run")
        if not self.is_editable(obj):
            return [
                ("Version", {"fields": ("agent", "number", "status", "published_at")}),
                ("Protocol", {"fields": ("protocol_display", "options_table")}),
                ("System prompt", {"fields": ("system_prompt",)}),
                ("Model", {"fields": ("model_settings_table", "model_config_extra_display")}),
                ("Bindings", {"fields": bindings}),
            ]
        protocol = self.form_protocol(request, obj)
        head = ("agent",) if obj is None else ("agent", "number", "status")
        return [
            ("Version", {"fields": head}),
            ("Protocol", {"fields": ("protocol", "options_protocol")}),
            (
                f"Options of {protocol.key}",
                {
                    "fields": option_field_names(protocol),
                    "description": "Generated from the catalog's option schema. Leave a "
                    "field at its default to follow the protocol's default.",
                },
            ),
            ("System prompt", {"fields": ("system_prompt",)}),
            # Generated from the model schema (agents/model_schema.py).
            *model_fieldsets(),
            ("Bindings", {"fields": bindings}),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: AgentVersion | None = None):
        if obj is None:
            return ()
        if self.is_editable(obj):
            return ("agent", "number", "status")
        return (
            "agent",
            "number",
            "status",
            "published_at",
            "protocol_display",
            "options_table",
            "system_prompt",
            "model_settings_table",
            "model_config_extra_display",
            "tools",
            "maintainer_agent",
            "max_turns_per_run",
        )

    def get_form(
        self, request: HttpRequest, obj: AgentVersion | None = None, change: bool = False, **kw
    ):
        if self.is_editable(obj):
            problems = getattr(request, "publish_problems", None)
            kw["form"] = agent_version_form_for(self.form_protocol(request, obj), problems)
        return super().get_form(request, obj, change, **kw)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any):
        if db_field.name in ("agent", "maintainer_agent"):
            kwargs["queryset"] = scope_to_member(
                Agent.objects.select_related("application"), request, "application"
            )
            # Names are unique only within an Application.
            kwargs["form_class"] = ApplicationNameChoiceField
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any):
        if db_field.name == "tools":
            kwargs["queryset"] = scope_to_member(
                Tool.objects.select_related("application").order_by("application__name", "name"),
                request,
                "application",
            )
            # Tool names are unique only within an Application (the add page lists all of
            # the operator's); a draft's change page lists its Application's tools only.
            kwargs["form_class"] = ApplicationNameMultipleChoiceField
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if field is not None and db_field.name == "tools":
            field.help_text = "Host tools of the agent's application (register them under Tools)."
        return field
