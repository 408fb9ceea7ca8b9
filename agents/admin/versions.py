"""AgentVersion admin: drafts are created and edited through agents.services, published,
duplicated and archived; published and archived versions are read-only. Its form glue is
in version_forms, its columns in version_columns. Other apps add to the change page's
context with `add_change_form_context` (sessions_app: the usage totals), so this module
imports none of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from agents.admin.version_columns import VersionColumns
from agents.admin.version_forms import VersionForms
from agents.model_schema import model_warnings
from agents.models import AgentVersion
from agents.services import (
    agent_version_archive,
    agent_version_create,
    agent_version_duplicate,
    agent_version_problems,
    agent_version_publish,
    agent_version_update_draft,
)
from contextproto.errors import ApplicationError
from contextproto.protocol import catalog
from contextproto.protocol.prompt_cache import PROMPT_CACHE_SCHEMA
from contextproto.usage import PRICE_KEYS

PUBLISH_PROBLEMS_SESSION_KEY = "agentversion-publish-problems"

# Context for a saved version's change page from other apps: each gets the version and
# returns names for the template (change_form.html shows `usage_totals`).
_CHANGE_FORM_CONTEXT: list[Callable[[AgentVersion], dict[str, Any]]] = []


def add_change_form_context(extra: Callable[[AgentVersion], dict[str, Any]]) -> None:
    """Add `extra(version)` to the context of every saved version's change page (once)."""
    if extra not in _CHANGE_FORM_CONTEXT:
        _CHANGE_FORM_CONTEXT.append(extra)


@admin.register(AgentVersion)
class AgentVersionAdmin(VersionForms, VersionColumns):
    application_path = "agent__application"
    # Five narrow columns, so the list reads without scrolling sideways at 1400 px beside the
    # navigation and the filter (change_list.html lets long names wrap).
    list_display = (
        "version_display",
        "status_display",
        "protocol_display",
        "model_display",
        "dates_display",
    )
    list_display_links = ("version_display",)
    list_filter = ("status",)
    list_select_related = ("agent", "agent__application")
    search_fields = ("agent__name",)
    actions = ["duplicate_selected", "archive_selected"]

    # ------------------------------------------------------------ permissions

    def has_change_permission(self, request: HttpRequest, obj: AgentVersion | None = None):
        if obj is not None and not self.is_editable(obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: AgentVersion | None = None):
        return False

    # ------------------------------------------------------------ saving through services

    def save_model(self, request: HttpRequest, obj: AgentVersion, form: Any, change: bool) -> None:
        data = form.cleaned_data
        tool_ids = [t.pk for t in data.get("tools") or []]
        maintainer = data.get("maintainer_agent")
        maintainer_id = maintainer.pk if maintainer is not None else None
        fields = form.service_fields()
        if change:
            known = form.chosen_protocol.option_schema["properties"]
            stored = obj.options if isinstance(obj.options, dict) else {}
            dropped = sorted(str(k) for k in stored if k not in known)
            cache = obj.prompt_cache if isinstance(obj.prompt_cache, dict) else {}
            cache_keys = PROMPT_CACHE_SCHEMA["properties"]
            dropped_cache = sorted(str(k) for k in cache if k not in cache_keys)
            prices = obj.prices if isinstance(obj.prices, dict) else {}
            dropped_prices = sorted(str(k) for k in prices if k not in PRICE_KEYS)
            saved = agent_version_update_draft(
                version=obj, fields=fields, tool_ids=tool_ids, maintainer_agent_id=maintainer_id
            )
            if dropped:
                self.message_user(
                    request,
                    f"Dropped options unknown to {form.chosen_protocol.key}: {', '.join(dropped)}.",
                    messages.WARNING,
                )
            if dropped_cache:
                self.message_user(
                    request,
                    f"Dropped unknown model.promptCache keys: {', '.join(dropped_cache)}.",
                    messages.WARNING,
                )
            if dropped_prices:
                self.message_user(
                    request,
                    f"Dropped unknown model.prices keys: {', '.join(dropped_prices)}.",
                    messages.WARNING,
                )
        else:
            saved = agent_version_create(
                agent=data["agent"],
                fields=fields,
                tool_ids=tool_ids,
                maintainer_agent_id=maintainer_id,
            )
        # The admin continues with `obj` (logging, redirect): make it the saved row.
        for field in AgentVersion._meta.concrete_fields:
            setattr(obj, field.attname, getattr(saved, field.attname))
        obj._state = saved._state
        if form.protocol_changed:
            # Read back by the response step (below); our own attribute on the request.
            request.protocol_changed_to = form.chosen_protocol.key  # type: ignore[attr-defined]
        problems = agent_version_problems(saved)
        if problems:
            self.message_user(
                request,
                f"Saved as a draft. {len(problems)} problem(s) would block publishing; press "
                "Publish to see each one next to its field.",
                messages.WARNING,
            )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The services already bound the tools; form.save_m2m() would write them directly.
        return None

    def _reload_for_new_protocol(self, request: HttpRequest, obj: AgentVersion):
        key = getattr(request, "protocol_changed_to", None)
        if key is None:
            return None
        self.message_user(
            request,
            f"The protocol is now {key}: the option fields below are {key}'s. Review them "
            "and save again.",
            messages.INFO,
        )
        return redirect("admin:agents_agentversion_change", obj.pk)

    def response_add(self, request: HttpRequest, obj: AgentVersion, *args: Any) -> HttpResponse:
        return self._reload_for_new_protocol(request, obj) or super().response_add(
            request, obj, *args
        )

    def response_change(self, request: HttpRequest, obj: AgentVersion) -> HttpResponse:
        return self._reload_for_new_protocol(request, obj) or super().response_change(request, obj)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as exc:
            # A refusal by a service (for example a version published meanwhile).
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    # ------------------------------------------------------------ pages

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        protocol = self.form_protocol(request, None)
        links = []
        for version in catalog.all_versions():
            query = request.GET.copy()
            query["protocol"] = version.key
            links.append((version.key, version.status, "?" + query.urlencode()))
        context = {
            "option_protocol": protocol,
            "protocol_links": links,
            "catalog_url": reverse("admin:agents_agentversion_catalog"),
            **(extra_context or {}),
        }
        return super().add_view(request, form_url, context)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None
    ):
        if request.method == "GET":
            stash = request.session.get(PUBLISH_PROBLEMS_SESSION_KEY) or {}
            problems = stash.pop(str(object_id), None)
            if problems is not None:
                request.session[PUBLISH_PROBLEMS_SESSION_KEY] = stash
                # Read by get_form and the template; our own attribute on the request.
                request.publish_problems = problems  # type: ignore[attr-defined]
        context = {
            "publish_url": reverse("admin:agents_agentversion_publish", args=[object_id]),
            "duplicate_url": reverse("admin:agents_agentversion_duplicate", args=[object_id]),
            "catalog_url": reverse("admin:agents_agentversion_catalog"),
            "publish_problems": getattr(request, "publish_problems", None),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: AgentVersion | None = None,
    ) -> HttpResponse:
        if obj is not None and obj.pk is not None:
            # What publish reports without refusing (an apiKeyEnv unset on this node), on
            # every saved version's page: after Publish, the page it lands on.
            context["model_warnings"] = model_warnings(obj)
            for extra in _CHANGE_FORM_CONTEXT:
                context.update(extra(obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("catalog/", view(self.catalog_view), name="agents_agentversion_catalog"),
            path(
                "<path:object_id>/publish/",
                view(require_POST(self.publish_view)),
                name="agents_agentversion_publish",
            ),
            path(
                "<path:object_id>/duplicate/",
                view(require_POST(self.duplicate_view)),
                name="agents_agentversion_duplicate",
            ),
            *super().get_urls(),
        ]

    def _version_or_404(self, request: HttpRequest, object_id: str) -> AgentVersion:
        version = self.get_object(request, unquote(object_id))
        if version is None:
            raise Http404("No such agent version.")
        return version

    def publish_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Publish a draft; on refusal show every problem next to its field (PRG)."""
        version = self._version_or_404(request, object_id)
        change_url = reverse("admin:agents_agentversion_change", args=[version.pk])
        if not self.is_editable(version):
            self.message_user(request, f"Version {version.number} is already {version.status}.")
            return HttpResponseRedirect(change_url)
        if not self.has_change_permission(request, version):
            raise PermissionDenied
        try:
            agent_version_publish(version=version)
        except ApplicationError as exc:
            problems = exc.details.get("errors") or [
                {"field": None, "code": exc.code, "message": exc.message}
            ]
            stash = request.session.get(PUBLISH_PROBLEMS_SESSION_KEY) or {}
            stash[str(version.pk)] = problems
            request.session[PUBLISH_PROBLEMS_SESSION_KEY] = stash
            self.message_user(
                request,
                f"Publish refused: {len(problems)} problem(s), shown next to their fields. "
                "Fix them, save, and publish again.",
                messages.ERROR,
            )
            return HttpResponseRedirect(change_url)
        self.log_change(request, version, "Published.")
        self.message_user(request, f"{version} is published and now read-only.", messages.SUCCESS)
        return HttpResponseRedirect(change_url)

    def _duplicate(self, request: HttpRequest, version: AgentVersion) -> AgentVersion:
        copy = agent_version_duplicate(version=version)
        self.log_addition(request, copy, f"Duplicated from version {version.number}.")
        return copy

    def duplicate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._version_or_404(request, object_id)
        if not self.has_add_permission(request):
            raise PermissionDenied
        copy = self._duplicate(request, version)
        self.message_user(
            request, f"Version {copy.number} is a new draft copied from version {version.number}."
        )
        return redirect("admin:agents_agentversion_change", copy.pk)

    @admin.action(description="Duplicate as new draft", permissions=["add"])
    def duplicate_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        copies = [self._duplicate(request, v) for v in queryset.select_related("agent")]
        self.message_user(request, f"Created {len(copies)} draft(s).")

    def has_archive_permission(self, request: HttpRequest) -> bool:
        # Archiving changes a version's status, so it needs the change permission
        # (has_change_permission(request, obj) is False for every non-draft row).
        return request.user.has_perm(f"{self.opts.app_label}.change_agentversion")

    @admin.action(description="Archive selected published versions", permissions=["archive"])
    def archive_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        # Sessions already running on an archived version go on; only new sessions are refused.
        archived, skipped = 0, 0
        for version in queryset.select_related("agent"):
            if version.status != AgentVersion.Status.PUBLISHED:
                skipped += 1
                continue
            agent_version_archive(version=version)
            self.log_change(request, version, "Archived.")
            archived += 1
        level = messages.SUCCESS if archived else messages.WARNING
        text = f"Archived {archived} version(s): new sessions on them are refused, their "
        text += "sessions go on."
        if skipped:
            text += f" Skipped {skipped} that were not published (drafts or already archived)."
        self.message_user(request, text, level)

    def catalog_view(self, request: HttpRequest) -> TemplateResponse:
        """Every protocol version: status, summary, options with defaults and ranges, tools,
        prompt text."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        entries = []
        for version in catalog.all_versions():
            options = [
                {
                    "name": name,
                    "title": schema.get("title", ""),
                    "type": schema.get("type", ""),
                    "default": json.dumps(schema.get("default")),
                    "range": (
                        f"{schema['minimum']} to {schema['maximum']}"
                        if "minimum" in schema
                        else " | ".join(schema.get("enum", []))
                    ),
                    "description": schema.get("description", ""),
                }
                for name, schema in version.option_schema["properties"].items()
            ]
            tools = [
                {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "schema": json.dumps(tool.get("inputSchema", {}), indent=2),
                    "mutating": tool["name"] in version.mutating_tools,
                }
                for tool in version.tools.values()
            ]
            entries.append(
                {
                    "version": version,
                    "options": options,
                    "tools": tools,
                    "defaults": json.dumps(version.defaults, indent=2),
                    "add_url": reverse("admin:agents_agentversion_add")
                    + f"?protocol={version.key}",
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "title": "Protocol catalog",
            "opts": self.opts,
            "entries": entries,
            "fingerprint": catalog.fingerprint(),
        }
        return TemplateResponse(request, "admin/agents/catalog.html", context)
