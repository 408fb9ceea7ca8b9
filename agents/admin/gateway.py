"""An Application's gateway settings page (contract §14): its model aliases and side models,
edited on the Application admin (`<application>/gateway-settings/`).

The page writes through agents.services_gateway, so it refuses what `PUT gateway-settings/`
refuses, with the same messages, each next to its field and naming its line. Operators see
it for the Applications they are members of; changing it takes the
`agents.change_gatewaysettings` permission.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from agents.models import Application
from agents.selectors import GatewaySettingsView, gateway_settings_of
from agents.services_gateway import gateway_settings_problems, gateway_settings_set
from contextproto.errors import ApplicationError
from contextproto.protocol.gateway.model_names import DEFAULT_SIDE_MODELS
from contextproto.usage import Problem

CHANGE_PERMISSION = "agents.change_gatewaysettings"
SEPARATOR = "="


def _lines(text: str) -> list[tuple[int, str]]:
    """The non-blank lines of a text area, each with its 1-based line number."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


class GatewaySettingsForm(forms.Form):
    model_aliases = forms.CharField(
        label="Model aliases",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80, "class": "vLargeTextField"}),
        help_text="One alias per line: <code>pattern = version</code>, e.g. "
        "<code>claude-* = helper@2</code>. A pattern is an exact model name or a glob whose "
        "only wildcard is <code>*</code>; the version is <code>agent@N</code>, an agent's "
        "name (its newest published version) or a version id. An exact pattern wins over "
        "globs, then the first glob in this order that matches.",
    )
    default_side_models = forms.BooleanField(
        label="Use the default side models",
        required=False,
        help_text="The service's list: "
        + ", ".join(f"<code>{g}</code>" for g in DEFAULT_SIDE_MODELS)
        + " (docs/contract.md §14 says which client sends each).",
    )
    side_models = forms.CharField(
        label="Side models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80, "class": "vLargeTextField"}),
        help_text="One glob per line: model names clients use only for background requests "
        "(titles, summaries). Used when the default is not ticked; empty: none.",
    )

    def __init__(self, *args: Any, application: Application, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.application = application
        self.aliases: list[dict[str, str]] = []
        self.alias_lines: list[int] = []
        self.side: list[str] | None = None
        self.side_lines: list[int] = []

    @classmethod
    def initial_for(cls, settings: GatewaySettingsView) -> dict[str, Any]:
        return {
            "model_aliases": "\n".join(
                f"{alias.pattern} {SEPARATOR} {alias.agent_version}" for alias in settings.aliases
            ),
            "default_side_models": settings.side_models_default,
            "side_models": "" if settings.side_models_default else "\n".join(settings.side_models),
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        unreadable = []
        for number, line in _lines(cleaned.get("model_aliases") or ""):
            pattern, separator, version = line.partition(SEPARATOR)
            if not separator:
                unreadable.append(f"Line {number}: write pattern {SEPARATOR} version.")
                continue
            self.aliases.append({"pattern": pattern.strip(), "agentVersion": version.strip()})
            self.alias_lines.append(number)
        if unreadable:
            self.add_error("model_aliases", unreadable)
        if not cleaned.get("default_side_models"):
            side = _lines(cleaned.get("side_models") or "")
            self.side = [glob for _, glob in side]
            self.side_lines = [number for number, _ in side]
        if not unreadable:
            problems = gateway_settings_problems(
                application=self.application, model_aliases=self.aliases, side_models=self.side
            )
            self.show(problems)
        return cleaned

    def show(self, problems: list[Problem]) -> None:
        """Each problem next to its text area, naming the line it is about."""
        for problem in problems:
            field, message = problem["field"], problem["message"]
            if field.startswith("modelAliases"):
                name, lines = "model_aliases", self.alias_lines
            else:
                name, lines = "side_models", self.side_lines
            index = field.partition("[")[2].partition("]")[0]
            if index.isdigit() and int(index) < len(lines):
                message = f"Line {lines[int(index)]}: {message} ({problem['code']})"
            else:
                message = f"{message} ({problem['code']})"
            self.add_error(name, message)

    def save(self) -> None:
        gateway_settings_set(
            application=self.application, model_aliases=self.aliases, side_models=self.side
        )


def gateway_settings_page(
    admin: ModelAdmin[Application], request: HttpRequest, object_id: str
) -> HttpResponse:
    """The page: GET shows the settings, POST replaces them (then redirects back to GET)."""
    application = admin.get_object(request, unquote(object_id))
    if application is None or not admin.has_view_or_change_permission(request, application):
        raise Http404("No such application.")
    can_change = request.user.has_perm(CHANGE_PERMISSION)
    settings = gateway_settings_of(application)
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied
        form = GatewaySettingsForm(request.POST, application=application)
        if form.is_valid():
            try:
                form.save()
            except ApplicationError as exc:  # changed meanwhile (a version archived)
                form.show(exc.details.get("errors") or [])
            else:
                admin.log_change(request, application, "Changed its gateway settings.")
                admin.message_user(request, "The gateway settings are saved.", messages.SUCCESS)
                return HttpResponseRedirect(request.path)
    else:
        form = GatewaySettingsForm(
            initial=GatewaySettingsForm.initial_for(settings), application=application
        )
    context = {
        **admin.admin_site.each_context(request),
        "title": f"Gateway settings of {application}",
        "opts": admin.opts,
        "original": application,
        "form": form,
        "can_change": can_change,
        "settings": settings,
        "change_url": reverse("admin:agents_application_change", args=[application.pk]),
        "api_path": "/api/v1/gateway-settings/",
    }
    return TemplateResponse(request, "admin/agents/application/gateway_settings.html", context)
