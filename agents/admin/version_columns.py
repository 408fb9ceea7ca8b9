"""The AgentVersion admin's read-only columns and tables: the list's five narrow columns and
the settings, options and model tables of a published or archived version."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from agents.forms import (
    model_help_text,
    option_help_text,
)
from agents.model_schema import CONFIG_KEYS, MODEL_FIELDS, PROMPT_CACHE, stored_value
from agents.models import AgentVersion
from contextproto.admin_site import ApplicationScopedAdmin
from contextproto.protocol import catalog
from contextproto.protocol.prompt_cache import effective_prompt_cache

STAMP = "%Y-%m-%d %H:%M:%S"


class VersionColumns(ApplicationScopedAdmin):
    """Display methods of AgentVersionAdmin (list columns and read-only fields)."""

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
