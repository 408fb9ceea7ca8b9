"""Admin forms for AgentVersions: option fields generated from the catalog's option schema.

The option fields of a form belong to one protocol version (`option_protocol`). Changing the
protocol select and saving stores the options that carry over and re-renders the form with
the new protocol's fields (see AgentVersionAdmin). The `model.promptCache` fields are
generated the same way, from the engine's PROMPT_CACHE_SCHEMA.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.forms.utils import ErrorDict
from django.utils.html import escape

from agents.models import Agent, AgentVersion, Tool
from contextproto.protocol import catalog
from contextproto.protocol.prompt_cache import PROMPT_CACHE_SCHEMA

OPTION_PREFIX = "option_"
PROMPT_CACHE_PREFIX = "prompt_cache_"
DEFAULT_PROTOCOL = "unified@2"

# Publish problem field (API spelling) -> admin form field.
PROBLEM_FIELDS = {
    "contextProtocolId": "protocol",
    "contextProtocolVersion": "protocol",
    "systemPrompt": "system_prompt",
    "model.provider": "model_provider",
    "model.name": "model_name",
    "model.maxInputTokens": "max_input_tokens",
    "model.maintenanceTriggerRatio": "maintenance_trigger_ratio",
    "tools": "tools",
    "maintainerAgentId": "maintainer_agent",
    "maxTurnsPerRun": "max_turns_per_run",
}


def protocol_choices() -> list[tuple[str, str]]:
    return [(v.key, f"{v.key} ({v.status})") for v in catalog.all_versions()]


def parse_protocol_key(key: str | None) -> catalog.ProtocolVersion | None:
    """Return the catalog entry for "id@version", or None for anything else."""
    if not key or "@" not in key:
        return None
    protocol_id, _, version = key.partition("@")
    if not version.isdigit():
        return None
    return catalog.find_version(protocol_id, int(version))


def option_field_name(option: str) -> str:
    return OPTION_PREFIX + option


def prompt_cache_field_name(key: str) -> str:
    return PROMPT_CACHE_PREFIX + key


def prompt_cache_field_names() -> list[str]:
    return [prompt_cache_field_name(k) for k in PROMPT_CACHE_SCHEMA["properties"]]


def _range_text(schema: dict[str, Any]) -> str:
    if schema.get("type") == "integer":
        return f"Range {schema['minimum']} to {schema['maximum']}."
    if "enum" in schema:
        return "One of " + ", ".join(schema["enum"]) + "."
    return ""


def option_help_text(schema: dict[str, Any]) -> str:
    default = schema.get("default")
    shown = str(default).lower() if isinstance(default, bool) else str(default)
    parts = [schema.get("description", ""), _range_text(schema), f"Default: {shown}."]
    return " ".join(p for p in parts if p)


def option_form_field(schema: dict[str, Any], current: Any = None) -> forms.Field:
    """Build a typed form field for one option schema (boolean, integer or enum string).

    Ranges go to the widget and the help text, not to validators: a draft may hold an
    out-of-range value, and publishing reports it next to this field with the service's code.
    """
    label = schema.get("title")
    # The admin renders help text with |safe; escape it here.
    help_text = escape(option_help_text(schema))
    default = schema.get("default")
    if schema.get("type") == "boolean":
        return forms.BooleanField(label=label, help_text=help_text, initial=default, required=False)
    if schema.get("type") == "integer":
        return forms.IntegerField(
            label=label,
            help_text=help_text,
            initial=default,
            required=False,
            widget=forms.NumberInput(
                attrs={"min": schema["minimum"], "max": schema["maximum"], "step": 1}
            ),
        )
    if "enum" in schema:
        choices = [(v, f"{v} (default)" if v == default else v) for v in schema["enum"]]
        if current is not None and current not in schema["enum"]:
            # Keep a stored invalid value visible so publish can point at it.
            choices.append((str(current), f"{current} (not allowed)"))
        return forms.ChoiceField(
            label=label, help_text=help_text, initial=default, choices=choices, required=False
        )
    return forms.JSONField(label=label, help_text=help_text, initial=default, required=False)


class ApplicationNameChoiceField(forms.ModelChoiceField):
    """Choices labelled "application / name": agent and tool names are unique only within
    an Application."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.application.name} / {obj.name}"


class ApplicationNameMultipleChoiceField(forms.ModelMultipleChoiceField):
    """The many-valued ApplicationNameChoiceField (a version's host tools)."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.application.name} / {obj.name}"


class AgentVersionForm(forms.ModelForm):
    """Create or edit a draft; `save_model` hands `service_fields()` to the services."""

    option_protocol: ClassVar[catalog.ProtocolVersion]
    # Publish problems shown on an unbound form (set by agent_version_form_for).
    publish_problems: ClassVar[list[dict[str, Any]]] = []

    protocol = forms.ChoiceField(
        label="Context protocol",
        choices=protocol_choices,
        help_text="From the protocol catalog. Changing it and saving reloads this form with "
        "the option fields of the new protocol.",
    )
    options_protocol = forms.CharField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = AgentVersion
        fields = [
            "agent",
            "system_prompt",
            "model_provider",
            "model_name",
            "max_input_tokens",
            "maintenance_trigger_ratio",
            "model_config",
            "tools",
            "maintainer_agent",
            "max_turns_per_run",
        ]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 8, "cols": 90})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = self.instance
        protocol = self.option_protocol
        self.fields["options_protocol"].initial = protocol.key
        if not instance._state.adding:
            self.fields["protocol"].initial = instance.protocol_key
            stored = instance.options if isinstance(instance.options, dict) else {}
            for option, schema in protocol.option_schema["properties"].items():
                if option in stored:
                    name = option_field_name(option)
                    self.initial[name] = stored[option]
                    if "enum" in schema:
                        self.fields[name] = option_form_field(schema, stored[option])
            application_id = instance.agent.application_id
            tools_field = self.fields.get("tools")
            if isinstance(tools_field, forms.ModelChoiceField):
                tools_field.queryset = Tool.objects.filter(
                    application_id=application_id
                ).select_related("application")
            maintainer_field = self.fields.get("maintainer_agent")
            if isinstance(maintainer_field, forms.ModelChoiceField):
                maintainer_field.queryset = (
                    Agent.objects.select_related("application")
                    .filter(application_id=application_id)
                    .exclude(pk=instance.agent_id)
                )
        else:
            self.fields["protocol"].initial = protocol.key
        stored_cache = instance.prompt_cache if isinstance(instance.prompt_cache, dict) else {}
        for key, schema in PROMPT_CACHE_SCHEMA["properties"].items():
            if key in stored_cache:
                name = prompt_cache_field_name(key)
                self.initial[name] = stored_cache[key]
                # Rebuilt with the stored value, so an invalid one stays visible for publish.
                self.fields[name] = option_form_field(schema, stored_cache[key])
        if self.publish_problems and not self.is_bound:
            self._attach_problems(self.publish_problems)

    def _attach_problems(self, problems: list[dict]) -> None:
        """Show publish problems next to their fields (the form stays unbound)."""
        self._errors = ErrorDict()
        self.cleaned_data = {}
        for problem in problems:
            field = self.problem_field(problem.get("field"))
            message = f"{problem['message']} ({problem['code']})"
            self.add_error(field, message)

    def problem_field(self, api_field: str | None) -> str | None:
        """Map a publish problem's field ("options.pageSize", "systemPrompt", …) to a field."""
        if not api_field:
            return None
        if api_field.startswith("options."):
            name = option_field_name(api_field[len("options.") :])
        elif api_field.startswith("model.promptCache."):
            name = prompt_cache_field_name(api_field[len("model.promptCache.") :])
        elif api_field == "model.promptCache":
            name = prompt_cache_field_name("mode")
        else:
            name = PROBLEM_FIELDS.get(api_field, "")
        return name if name in self.fields else None

    def clean_system_prompt(self) -> str:
        # Browsers submit textareas with CRLF line ends; prompts are stored with LF, as the
        # API stores them, so the model never sees stray carriage returns.
        return (self.cleaned_data.get("system_prompt") or "").replace("\r\n", "\n")

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        agent = cleaned.get("agent") or (
            None if self.instance._state.adding else self.instance.agent
        )
        if agent is not None:
            tools = cleaned.get("tools") or []
            foreign = [t.name for t in tools if t.application_id != agent.application_id]
            if foreign:
                self.add_error("tools", f"Tools of another application: {', '.join(foreign)}.")
            maintainer = cleaned.get("maintainer_agent")
            if maintainer is not None and maintainer.application_id != agent.application_id:
                self.add_error("maintainer_agent", "The maintainer belongs to another application.")
        return cleaned

    @property
    def chosen_protocol(self) -> catalog.ProtocolVersion:
        return parse_protocol_key(self.cleaned_data.get("protocol")) or self.option_protocol

    @property
    def protocol_changed(self) -> bool:
        return self.chosen_protocol.key != self.option_protocol.key

    def options_value(self) -> dict[str, Any]:
        """The options to store: values that differ from the defaults and fit the protocol.

        `{}` means all defaults. After a protocol change, only options the new protocol has
        are kept (values equal to the old defaults are dropped, so the new defaults apply).
        """
        old = self.option_protocol
        new_properties = self.chosen_protocol.option_schema["properties"]
        options: dict[str, Any] = {}
        for option, schema in old.option_schema["properties"].items():
            value = self.cleaned_data.get(option_field_name(option))
            if value is None or value == "":
                continue
            if value == schema.get("default") or option not in new_properties:
                continue
            options[option] = value
        return options

    def prompt_cache_value(self) -> dict[str, Any]:
        """The `model.promptCache` to store: values that differ from the defaults ({} = all)."""
        value: dict[str, Any] = {}
        for key, schema in PROMPT_CACHE_SCHEMA["properties"].items():
            chosen = self.cleaned_data.get(prompt_cache_field_name(key))
            if chosen not in (None, "") and chosen != schema["default"]:
                value[key] = chosen
        return value

    def service_fields(self) -> dict[str, Any]:
        """The VERSION_FIELDS values for agent_version_create / agent_version_update_draft."""
        data = self.cleaned_data
        protocol = self.chosen_protocol
        return {
            "system_prompt": data.get("system_prompt", ""),
            "context_protocol_id": protocol.protocol_id,
            "context_protocol_version": protocol.version,
            "options": self.options_value(),
            "model_provider": data.get("model_provider", ""),
            "model_name": data.get("model_name", ""),
            "max_input_tokens": data.get("max_input_tokens"),
            "maintenance_trigger_ratio": data.get("maintenance_trigger_ratio"),
            "model_config": data.get("model_config") or {},
            "prompt_cache": self.prompt_cache_value(),
            "max_turns_per_run": data.get("max_turns_per_run"),
        }


def agent_version_form_for(
    protocol: catalog.ProtocolVersion, publish_problems: list[dict[str, Any]] | None = None
) -> type[AgentVersionForm]:
    """Return an AgentVersionForm subclass declaring one typed field per option of `protocol`
    and per key of `model.promptCache`."""
    attrs: dict[str, Any] = {
        "option_protocol": protocol,
        "publish_problems": list(publish_problems or []),
        "__module__": __name__,
    }
    for option, schema in protocol.option_schema["properties"].items():
        attrs[option_field_name(option)] = option_form_field(schema)
    for key, schema in PROMPT_CACHE_SCHEMA["properties"].items():
        attrs[prompt_cache_field_name(key)] = option_form_field(schema)
    name = f"AgentVersionForm_{protocol.protocol_id}{protocol.version}"
    return type(name, (AgentVersionForm,), attrs)


def option_field_names(protocol: catalog.ProtocolVersion) -> list[str]:
    return [option_field_name(o) for o in protocol.option_schema["properties"]]
