"""Operator admin for Applications, Agents and AgentVersions (SPEC §10).

Every write goes through `agents.services`: a draft is created and edited with
agent_version_create / agent_version_update_draft, published with agent_version_publish and
copied with agent_version_duplicate. Published and archived versions are read-only.

Option fields are generated from the catalog's option schema of one protocol version: the
saved protocol on a change page, `?protocol=id@version` (or unified@2) on the add page.
Picking another protocol and saving stores the options that carry over and reloads the
form with the new protocol's fields.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from agents import admin_tools  # noqa: F401  (registers ToolAdmin)
from agents.forms import (
    DEFAULT_PROTOCOL,
    ApplicationNameChoiceField,
    ApplicationNameMultipleChoiceField,
    agent_version_form_for,
    model_fieldsets,
    model_help_text,
    option_field_names,
    option_help_text,
    parse_protocol_key,
)
from agents.model_schema import CONFIG_KEYS, MODEL_FIELDS, PROMPT_CACHE, stored_value
from agents.models import Agent, AgentVersion, ApiKey, Application, Tool
from agents.services import (
    agent_create,
    agent_version_archive,
    agent_version_create,
    agent_version_duplicate,
    agent_version_problems,
    agent_version_publish,
    agent_version_update_draft,
    api_key_revoke,
)
from contextproto.admin_site import ApplicationScopedAdmin, ReadOnlyAdmin, scope_to_member
from contextproto.errors import ApplicationError
from contextproto.protocol import catalog
from contextproto.protocol.prompt_cache import PROMPT_CACHE_SCHEMA, effective_prompt_cache
from contextproto.usage import PRICE_KEYS
from sessions_app.reads.usage import agent_version_usage

PUBLISH_PROBLEMS_SESSION_KEY = "agentversion-publish-problems"
STAMP = "%Y-%m-%d %H:%M:%S"


def _member_applications(request: HttpRequest) -> QuerySet[Application]:
    return scope_to_member(Application.objects.all(), request, "")


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin):
    """Tenants. Created with `manage.py create_application` (it prints the first API key)."""

    list_display = ("name", "created_at")
    search_fields = ("name",)
    filter_horizontal = ("members",)
    readonly_fields = ("id", "created_at")

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
            kwargs["queryset"] = _member_applications(request)
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


@admin.register(AgentVersion)
class AgentVersionAdmin(ApplicationScopedAdmin):
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

    # ------------------------------------------------------------ which form

    @staticmethod
    def is_editable(obj: AgentVersion | None) -> bool:
        return obj is None or obj.status == AgentVersion.Status.DRAFT

    def form_protocol(
        self, request: HttpRequest, obj: AgentVersion | None
    ) -> catalog.ProtocolVersion:
        """The protocol whose option fields the form shows (and, on POST, received)."""
        if request.method == "POST":
            posted = parse_protocol_key(request.POST.get("options_protocol"))
            if posted is not None:
                return posted
        if obj is not None:
            saved = catalog.find_version(obj.context_protocol_id, obj.context_protocol_version)
            if saved is not None:
                return saved
        else:
            asked = parse_protocol_key(request.GET.get("protocol"))
            if asked is not None:
                return asked
        found = parse_protocol_key(DEFAULT_PROTOCOL)
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
            # Tokens by kind, cost and turns of all its sessions: one aggregate query.
            context["usage_totals"] = agent_version_usage(obj)
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

    # ------------------------------------------------------------ display

    @admin.display(description="Protocol", ordering="context_protocol_id")
    def protocol_display(self, obj: AgentVersion) -> str:
        found = catalog.find_version(obj.context_protocol_id, obj.context_protocol_version)
        return format_html(
            "{} <small>({})</small>", obj.protocol_key, found.status if found else "not in catalog"
        )

    @admin.display(description="Version", ordering="agent__name")
    def version_display(self, obj: AgentVersion) -> str:
        return format_html(
            '<strong>{}</strong> v{}<br><small class="quiet">{}</small>',
            obj.agent.name,
            obj.number,
            obj.agent.application.name,
        )

    @admin.display(description="Status", ordering="status")
    def status_display(self, obj: AgentVersion) -> str:
        return format_html(
            '<span class="version-status status-{}">{}</span>', obj.status, obj.status
        )

    @admin.display(description="Model")
    def model_display(self, obj: AgentVersion) -> str:
        if not obj.model_provider:
            return "—"
        tokens = f"{obj.max_input_tokens:,} input tokens" if obj.max_input_tokens else "no max"
        return format_html(
            '{}<br><code class="model-name">{}</code><br><small class="quiet">{}</small>',
            obj.model_provider,
            obj.model_name or "—",
            tokens,
        )

    @admin.display(description="Created / published", ordering="created_at")
    def dates_display(self, obj: AgentVersion) -> str:
        # Seconds shown: versions made in one sitting differ by seconds only.
        created = timezone.localtime(obj.created_at).strftime(STAMP)
        if obj.published_at is None:
            return format_html('{}<br><small class="quiet">not published</small>', created)
        published = timezone.localtime(obj.published_at).strftime(STAMP)
        return format_html('{}<br><small class="quiet">published {}</small>', created, published)

    @admin.display(description="Model settings")
    def model_settings_table(self, obj: AgentVersion) -> str:
        """Every model setting of the schema with its stored value (promptCache: in effect)."""
        cache = effective_prompt_cache(obj.prompt_cache)
        rows = []
        for field in MODEL_FIELDS:
            value = stored_value(obj, field)
            if field.store == PROMPT_CACHE and isinstance(cache, dict):
                value = cache.get(field.key)
            if value in (None, ""):
                shown = "—"
            else:
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            rows.append((field.path, field.title, shown, model_help_text(field)))
        body = format_html_join(
            "",
            '<tr data-setting="{}"><th>{}</th><td><code>{}</code></td><td class="help">{}</td>'
            "</tr>",
            rows,
        )
        return format_html('<table class="options-table" id="model-settings">{}</table>', body)

    @admin.display(description="Other model.config")
    def model_config_extra_display(self, obj: AgentVersion) -> str:
        config = obj.model_config
        extra = (
            {k: v for k, v in config.items() if k not in CONFIG_KEYS}
            if isinstance(config, dict)
            else config
        )
        if not extra:
            return "—"
        return format_html("<pre>{}</pre>", json.dumps(extra, indent=2, ensure_ascii=False))

    @admin.display(description="Options")
    def options_table(self, obj: AgentVersion) -> str:
        found = catalog.find_version(obj.context_protocol_id, obj.context_protocol_version)
        stored = obj.options if isinstance(obj.options, dict) else {}
        properties = found.option_schema["properties"] if found else {}
        names = list(properties) + sorted(str(k) for k in stored if k not in properties)
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td><code>{}</code></td><td>{}</td></tr>",
            (
                (
                    name,
                    json.dumps(stored.get(name, properties.get(name, {}).get("default"))),
                    option_help_text(properties[name]) if name in properties else "unknown",
                )
                for name in names
            ),
        )
        return format_html('<table class="options-table">{}</table>', rows)
