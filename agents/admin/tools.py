"""Operator admin for host tools (contract §11): register, change and delete an Application's tools.

Every write goes through agents.services_tools, so the admin refuses what the API refuses,
with the same messages next to the field they are about. A tool bound to a published or
archived version is read-only here and its deletion is refused: those versions run with the
tool as it was. Drafts bind tools on the AgentVersion page.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from agents.models import Application, Tool
from agents.selectors import tool_frozen_versions
from agents.services_tools import tool_check, tool_create, tool_delete, tool_update
from contextproto.admin_site import ApplicationScopedAdmin, scope_to_member
from contextproto.errors import ApplicationError
from contextproto.protocol import host_tools

if TYPE_CHECKING:  # a stub-side helper: django-stubs-ext is a dev dependency
    from django_stubs_ext import WithAnnotations


class _ToolCounts(TypedDict):
    bound_versions: int  # ToolAdmin.get_queryset's annotation


# A refusal's details.field (API spelling) -> the form field it is shown next to.
FORM_FIELDS = {"name": "name", "description": "description", "inputSchema": "input_schema"}
EMPTY_SCHEMA = {"type": "object", "properties": {}, "required": []}


class PrettyJSONField(forms.JSONField):
    """A JSON text area that shows the stored value indented, as an operator edits it."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):  # bound data (or an invalid entry) is shown as typed
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class ToolForm(forms.ModelForm):
    input_schema = PrettyJSONField(
        label="Input schema",
        initial=EMPTY_SCHEMA,
        widget=forms.Textarea(attrs={"rows": 16, "cols": 90, "class": "vLargeTextField"}),
        help_text="JSON Schema of the tool's arguments: any JSON Schema 2020-12 object schema "
        '(the root says <code>{"type": "object", …}</code>), as pydantic or zod generate it: '
        "<code>anyOf</code>/<code>oneOf</code>/<code>allOf</code>, <code>$defs</code>, "
        "<code>format</code>, nullable types. <code>$ref</code> only local "
        "(<code>#/$defs/…</code>): nothing is fetched. The runtime checks every call against "
        "all of it before the host sees the call; checked formats: "
        + ", ".join(host_tools.CHECKED_FORMATS)
        + ".",
    )

    class Meta:
        model = Tool
        fields = ["application", "name", "description", "input_schema"]
        widgets = {"description": forms.Textarea(attrs={"rows": 4, "cols": 90})}
        help_texts = {
            "name": f"What the model calls: {host_tools.NAME_RULE}; unique in the application, "
            "and not the name of a context protocol tool.",
            "description": "Tells the model what the tool does and when to call it.",
        }

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        application = cleaned.get("application") or (
            None if self.instance._state.adding else self.instance.application
        )
        if application is None or self.errors:
            return cleaned
        try:
            tool_check(
                application=application,
                name=cleaned.get("name"),
                description=cleaned.get("description") or "",
                input_schema=cleaned.get("input_schema"),
                tool=None if self.instance._state.adding else self.instance,
            )
        except ApplicationError as exc:
            field = FORM_FIELDS.get(str(exc.details.get("field")))
            self.add_error(field, f"{exc.message} ({exc.code})")
        return cleaned

    def validate_unique(self) -> None:
        # tool_check reports a taken name with the API's message and code.
        return None


@admin.register(Tool)
class ToolAdmin(ApplicationScopedAdmin):
    form = ToolForm
    list_display = ("name", "application", "short_description", "version_count", "created_at")
    list_select_related = ("application",)
    search_fields = ("name", "application__name")
    ordering = ("application__name", "name")
    # No bulk delete: deletion goes one tool at a time through the service, which may refuse.
    actions = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).annotate(bound_versions=Count("agent_versions"))

    def get_fields(self, request: HttpRequest, obj: Tool | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("application", "name", "description", "input_schema")
        return (
            "application",
            "name",
            "description",
            "input_schema",
            "created_at",
            "versions_list",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Tool | None = None) -> tuple:
        if obj is None:
            return ()
        # A tool stays in its Application: versions bind it there.
        return ("application", "created_at", "versions_list")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any):
        if db_field.name == "application":
            kwargs["queryset"] = scope_to_member(Application.objects.all(), request, "")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    # ------------------------------------------------------------ permissions

    def has_change_permission(self, request: HttpRequest, obj: Tool | None = None) -> bool:
        if obj is not None and tool_frozen_versions(obj):
            return False  # the page shows it read-only, with the versions that hold it
        return super().has_change_permission(request, obj)

    # ------------------------------------------------------------ writes through services

    def save_model(self, request: HttpRequest, obj: Tool, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            saved = tool_update(
                tool=obj,
                changes={
                    "name": data["name"],
                    "description": data.get("description") or "",
                    "input_schema": data["input_schema"],
                },
            )
        else:
            saved = tool_create(
                application=data["application"],
                name=data["name"],
                description=data.get("description") or "",
                input_schema=data["input_schema"],
            )
        for field in Tool._meta.concrete_fields:
            setattr(obj, field.attname, getattr(saved, field.attname))
        obj._state = saved._state

    def delete_model(self, request: HttpRequest, obj: Tool) -> None:
        tool_delete(tool=obj)

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().changeform_view(request, *args, **kwargs)
        except ApplicationError as exc:
            # A refusal that arrived between the form's check and the write (a concurrent
            # registration of the name, a version published meanwhile).
            self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict | None = None
    ) -> HttpResponse:
        tool = self.get_object(request, unquote(object_id))
        if tool is not None:
            refusal = self._delete_refusal(tool)
            if refusal is not None:
                self.message_user(request, refusal, messages.ERROR)
                return HttpResponseRedirect(reverse("admin:agents_tool_change", args=[tool.pk]))
        try:
            return super().delete_view(request, object_id, extra_context)
        except ApplicationError as exc:
            self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:agents_tool_changelist"))

    @staticmethod
    def _delete_refusal(tool: Tool) -> str | None:
        versions = tool_frozen_versions(tool)
        if not versions:
            return None
        listed = ", ".join(f"{v.agent.name} v{v.number} ({v.status})" for v in versions)
        return (
            f"Tool {tool.name!r} cannot be deleted: published versions run with it ({listed}). "
            "Bind a new tool in a new draft instead; drafts alone never block a deletion."
        )

    # ------------------------------------------------------------ display

    @admin.display(description="Description")
    def short_description(self, obj: Tool) -> str:
        text = obj.description or ""
        return text if len(text) <= 80 else text[:77] + "..."

    @admin.display(description="Versions", ordering="bound_versions")
    def version_count(self, obj: WithAnnotations[Tool, _ToolCounts]) -> int:
        return obj.bound_versions

    @admin.display(description="Bound to")
    def versions_list(self, obj: Tool) -> str:
        versions = obj.agent_versions.select_related("agent").order_by("agent__name", "-number")
        rows = format_html_join(
            "",
            '<li><a href="{}">{} v{}</a> · {}</li>',
            (
                (
                    reverse("admin:agents_agentversion_change", args=[v.pk]),
                    v.agent.name,
                    v.number,
                    v.status,
                )
                for v in versions
            ),
        )
        if not rows:
            return "No version binds this tool yet; bind it on a draft AgentVersion."
        return format_html(
            "<ul>{}</ul><p>Published and archived versions keep the tool read-only: to "
            "change it, register a new tool and bind it in a new draft.</p>",
            rows,
        )
