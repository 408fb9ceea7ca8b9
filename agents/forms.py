"""Admin forms for AgentVersions: option fields generated from the catalog's option schema,
model fields from the model schema (agents/model_schema.py).

The option fields of a form belong to one protocol version (`option_protocol`). Changing the
protocol select and saving stores the options that carry over and re-renders the form with
the new protocol's fields (see AgentVersionAdmin). The model settings (provider, name,
tokens, connection, `model.promptCache`, `model.prices`) are one typed field per entry of
MODEL_FIELDS; what no entry names (a scripted model's script) stays a JSON box of its own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.forms.utils import ErrorDict
from django.utils.html import escape

from agents.model_schema import (
    COLUMN,
    COLUMN_INT_MAX,
    CONFIG,
    CONFIG_KEYS,
    MODEL_FIELDS,
    PRICES,
    PROMPT_CACHE,
    ModelField,
    Store,
    fields_of,
    stored_value,
)
from agents.models import Agent, AgentVersion, Tool
from contextproto.protocol import catalog

OPTION_PREFIX = "option_"
DEFAULT_PROTOCOL = "unified@2"
MODEL_EXTRA_FIELD = "model_config_extra"

# Publish problem field (API spelling) -> admin form field.
PROBLEM_FIELDS = {
    "contextProtocolId": "protocol",
    "contextProtocolVersion": "protocol",
    "systemPrompt": "system_prompt",
    **{field.path: field.form_name for field in MODEL_FIELDS},
    # A whole-object problem (not an object, unknown key) goes to the object's first field.
    "model.promptCache": fields_of(PROMPT_CACHE)[0].form_name,
    "model.prices": fields_of(PRICES)[0].form_name,
    "tools": "tools",
    "maintainerAgentId": "maintainer_agent",
    "maxTurnsPerRun": "max_turns_per_run",
}
# The admin's fieldsets of the model settings, one per place a setting is stored.
MODEL_FIELDSETS: tuple[tuple[Store, str, str], ...] = (
    (COLUMN, "Model", ""),
    (
        CONFIG,
        "Connection",
        "model.config: where the workers reach the provider. Empty fields follow the node's "
        "settings.",
    ),
    (
        PROMPT_CACHE,
        "Prompt caching",
        "model.promptCache. Leave a field at its default to follow the default.",
    ),
    (
        PRICES,
        "Prices per million tokens",
        "model.prices: all four, or none (no cost is computed). Currency units per million tokens.",
    ),
)


def protocol_choices() -> list[tuple[str, str]]:
    return [(v.key, f"{v.key} ({v.status})") for v in catalog.all_versions()]


def option_field_name(option: str) -> str:
    return OPTION_PREFIX + option


def model_fieldsets() -> list[tuple[str, dict[str, Any]]]:
    """The model settings' fieldsets, generated from MODEL_FIELDS, then the JSON box."""
    sets: list[tuple[str, dict[str, Any]]] = []
    for store, title, description in MODEL_FIELDSETS:
        names = [field.form_name for field in fields_of(store)]
        sets.append((title, {"fields": names, "description": description}))
    sets.append(
        (
            "Script and other model settings",
            {
                "fields": [MODEL_EXTRA_FIELD],
                "description": "model.config keys without a field above: a scripted model's "
                "script (steps, tokens, wireFormat), assistantPrefill, maxTokensParam.",
            },
        )
    )
    return sets


def model_help_text(field: ModelField) -> str:
    """Help under a model field: what it is, what a valid value is, its default."""
    if field.type == "choice":
        rule = "One of " + ", ".join(field.choices) + "."
    else:
        text = field.rule()
        rule = "" if text == "is required" else text[0].upper() + text[1:] + "."
    parts = [
        field.help,
        rule,
        "Publishing requires it." if field.required else "",
        f"Default: {field.default}." if field.default is not None else "",
        f"({field.path})",
    ]
    return " ".join(p for p in parts if p)


def _schema_validator(field: ModelField) -> Any:
    """The form-side check of a setting publish does not check (refused when saved)."""

    def check(value: Any) -> None:
        if value not in (None, "") and not field.valid(value):
            # Not code "invalid": a field's own "invalid" message would replace this one.
            raise ValidationError(f"{field.path} {field.rule()}.", code="model_setting")

    return check


def model_form_field(field: ModelField, current: Any = None) -> forms.Field:
    """A typed form field for one model setting.

    Settings publish checks keep their bounds on the widget and in the help, not in
    validators: a draft may hold a value publish refuses, and publish then names it next to
    this field. Settings publish never checked are refused here, when saved. Integers stay
    within the columns' storage range either way.
    """
    help_text = escape(model_help_text(field))  # the admin renders help text with |safe
    validators = [_schema_validator(field)] if field.checked_at == "save" else []
    common: dict[str, Any] = {
        "label": field.title,
        "help_text": help_text,
        "required": not field.nullable,
        "initial": field.default,
        "validators": validators,
    }
    bounds: dict[str, Any] = {}
    if field.minimum is not None:
        bounds["min"] = field.minimum
    if field.maximum is not None:
        bounds["max"] = field.maximum
    if field.type == "choice":
        choices = [(v, f"{v} (default)" if v == field.default else v) for v in field.choices]
        if field.default is None:
            choices.insert(0, ("", "---------"))
        if current not in (None, "") and current not in field.choices:
            # Keep a stored invalid value visible so publish can point at it.
            choices.append((str(current), f"{current} (not allowed)"))
        return forms.ChoiceField(choices=choices, **common)
    if field.type == "integer":
        # Validators, not min_value/max_value: those would replace the schema's bounds on
        # the widget with the storage range.
        common["validators"] += [MinValueValidator(0), MaxValueValidator(COLUMN_INT_MAX)]
        return forms.IntegerField(widget=forms.NumberInput(attrs={**bounds, "step": 1}), **common)
    if field.type == "number":
        return forms.FloatField(widget=forms.NumberInput(attrs={**bounds, "step": "any"}), **common)
    column = AgentVersion._meta.get_field(field.key) if field.store == COLUMN else None
    max_length = getattr(column, "max_length", None) or 2000
    return forms.CharField(
        max_length=max_length,
        widget=forms.TextInput(attrs={"size": 60}),
        **{**common, "initial": field.default or ""},
    )


def _json_number(value: Any) -> Any:
    """A float the form parsed, as JSON would hold it (3.0 -> 3)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


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
        if not instance._state.adding:
            self._model_initial(instance)
        if self.publish_problems and not self.is_bound:
            self._attach_problems(self.publish_problems)

    def _model_initial(self, instance: AgentVersion) -> None:
        """Fill the model fields from the stored settings (the JSON box: keys without a field)."""
        for field in MODEL_FIELDS:
            value = stored_value(instance, field)
            if value is None:
                continue
            self.initial[field.form_name] = value
            if field.type == "choice":
                # Rebuilt with the stored value, so an invalid one stays visible for publish.
                self.fields[field.form_name] = model_form_field(field, value)
        config = instance.model_config
        if isinstance(config, dict):
            self.initial[MODEL_EXTRA_FIELD] = {
                k: v for k, v in config.items() if k not in CONFIG_KEYS
            }
        else:
            self.initial[MODEL_EXTRA_FIELD] = config

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
        else:
            # An unknown key of promptCache or prices ("model.prices.euro") has no field.
            name = PROBLEM_FIELDS.get(api_field, "")
        return name if name in self.fields else None

    def clean_system_prompt(self) -> str:
        # Browsers submit textareas with CRLF line ends; prompts are stored with LF, as the
        # API stores them, so the model never sees stray carriage returns.
        return (self.cleaned_data.get("system_prompt") or "").replace("\r\n", "\n")

    def clean_model_config_extra(self) -> dict[str, Any]:
        value = self.cleaned_data.get(MODEL_EXTRA_FIELD)
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise ValidationError("Enter a JSON object ({} for none).", code="invalid")
        own = sorted(k for k in value if k in CONFIG_KEYS)
        if own:
            raise ValidationError(
                f"Set {', '.join(own)} in the Connection fields above, not here.",
                code="invalid",
            )
        return value

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
        return catalog.by_key(self.cleaned_data.get("protocol")) or self.option_protocol

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

    def _chosen(self, store: Store) -> dict[str, Any]:
        """The filled-in fields of one store, by key ("" and None: not given)."""
        chosen = {}
        for field in fields_of(store):
            value = self.cleaned_data.get(field.form_name)
            if value not in (None, ""):
                chosen[field.key] = _json_number(value)
        return chosen

    def prompt_cache_value(self) -> dict[str, Any]:
        """The `model.promptCache` to store: values that differ from the defaults ({} = all)."""
        defaults = {field.key: field.default for field in fields_of(PROMPT_CACHE)}
        return {k: v for k, v in self._chosen(PROMPT_CACHE).items() if v != defaults[k]}

    def prices_value(self) -> dict[str, Any] | None:
        """`model.prices`: None when no price is filled in; else the ones given (publish
        names any missing one)."""
        return self._chosen(PRICES) or None

    def model_config_value(self) -> dict[str, Any]:
        """`model.config`: the JSON box's keys and the connection fields that are set."""
        extra = self.cleaned_data.get(MODEL_EXTRA_FIELD) or {}
        return {**extra, **self._chosen(CONFIG)}

    def service_fields(self) -> dict[str, Any]:
        """The VERSION_FIELDS values for agent_version_create / agent_version_update_draft."""
        data = self.cleaned_data
        protocol = self.chosen_protocol
        return {
            "system_prompt": data.get("system_prompt", ""),
            "context_protocol_id": protocol.protocol_id,
            "context_protocol_version": protocol.version,
            "options": self.options_value(),
            "model_provider": data.get("model_provider") or "",
            "model_name": data.get("model_name") or "",
            "max_input_tokens": data.get("max_input_tokens"),
            "maintenance_trigger_ratio": data.get("maintenance_trigger_ratio"),
            "model_config": self.model_config_value(),
            "prompt_cache": self.prompt_cache_value(),
            "prices": self.prices_value(),
            "max_turns_per_run": data.get("max_turns_per_run"),
        }


def agent_version_form_for(
    protocol: catalog.ProtocolVersion, publish_problems: list[dict[str, Any]] | None = None
) -> type[AgentVersionForm]:
    """Return an AgentVersionForm subclass declaring one typed field per option of `protocol`
    and per model setting (MODEL_FIELDS), and the JSON box for the rest of `model.config`."""
    attrs: dict[str, Any] = {
        "option_protocol": protocol,
        "publish_problems": list(publish_problems or []),
        "__module__": __name__,
    }
    for option, schema in protocol.option_schema["properties"].items():
        attrs[option_field_name(option)] = option_form_field(schema)
    for field in MODEL_FIELDS:
        attrs[field.form_name] = model_form_field(field)
    attrs[MODEL_EXTRA_FIELD] = forms.JSONField(
        label="Other model.config",
        required=False,
        initial=dict,
        help_text="A JSON object, merged with the connection fields into model.config.",
        widget=forms.Textarea(attrs={"rows": 6, "cols": 90}),
    )
    name = f"AgentVersionForm_{protocol.protocol_id}{protocol.version}"
    return type(name, (AgentVersionForm,), attrs)


def option_field_names(protocol: catalog.ProtocolVersion) -> list[str]:
    return [option_field_name(o) for o in protocol.option_schema["properties"]]
