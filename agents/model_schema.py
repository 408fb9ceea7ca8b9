"""An AgentVersion's model settings as one schema: the admin's form and the checks read it.

MODEL_FIELDS names every model setting an operator sets, where it is stored (a column of
AgentVersion, or a key of its `model_config`, `prompt_cache` or `prices` JSON), its type,
bounds and help. The admin generates one typed form field per entry (agents/forms.py);
publish (`model_problems`, called by agents.services) checks the entries marked
`checked_at="publish"` with the wording the API has always answered; entries marked
`checked_at="save"` (connection settings, which publish never checked) are refused by the
form when saved, next to their field.

The promptCache entries are read off the engine's PROMPT_CACHE_SCHEMA and the price entries
off contextproto.usage (PRICE_KEYS, PRICE_MAX), so each rule still has a single home; their
publish checks stay `validate_prompt_cache` and `prices_problems`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from agents.models import AgentVersion
from contextproto.protocol.adapters import OPENAI_APIS
from contextproto.protocol.prompt_cache import PROMPT_CACHE_SCHEMA, validate_prompt_cache
from contextproto.protocol.scripted_script import ScriptInvalid, check_script
from contextproto.usage import PRICE_KEYS, PRICE_MAX, Problem, prices_problems

# Where a setting lives on AgentVersion.
COLUMN: Final = "column"
CONFIG: Final = "config"
PROMPT_CACHE: Final = "promptCache"
PRICES: Final = "prices"
# The storage range of the integer columns (PositiveIntegerField): past it, the database
# fails. The form holds every integer setting to it; publish rules say nothing about it.
COLUMN_INT_MAX = 2**31 - 1

Store = Literal["column", "config", "promptCache", "prices"]
FieldType = Literal["choice", "string", "integer", "number"]


@dataclass(frozen=True)
class ModelField:
    """One model setting. `name` is its path under the API's `model` object."""

    name: str
    title: str
    help: str
    type: FieldType
    store: Store
    key: str  # the column, or the key inside the JSON column
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False  # the bounds themselves are out of range
    default: Any = None
    pattern: str | None = None  # a string's shape, as a regular expression
    pattern_text: str = ""  # that shape in words, for help and errors
    required: bool = False  # publish refuses it unset
    nullable: bool = True  # False: the column has no "unset" (the form requires a value)
    checked_at: Literal["publish", "save"] = "publish"
    missing_code: str = "required"
    invalid_code: str = "out_of_range"

    @property
    def path(self) -> str:
        return f"model.{self.name}"

    @property
    def form_name(self) -> str:
        """The admin form field's name (the column's own name for a column)."""
        prefix = {COLUMN: "", CONFIG: "config_", PROMPT_CACHE: "prompt_cache_", PRICES: "price_"}
        return prefix[self.store] + self.key

    def rule(self) -> str:
        """What a valid value is, in words ("must be an integer of at least 1000")."""
        if self.type == "choice":
            return "must be one of " + ", ".join(self.choices)
        if self.pattern_text:
            return f"must be {self.pattern_text}"
        if self.type in ("integer", "number"):
            kind = "an integer" if self.type == "integer" else "a number"
            low, high = _shown(self.minimum), _shown(self.maximum)
            if self.exclusive and self.minimum is not None and self.maximum is not None:
                return f"must be strictly between {low} and {high}"
            if self.minimum is not None and self.maximum is not None:
                return f"must be {kind} from {low} to {high}"
            if self.minimum is not None:
                above = "above" if self.exclusive else "of at least"
                return f"must be {kind} {above} {low}"
        return "is required"

    def problem(self, value: Any) -> Problem | None:
        """Why `value` (None: unset) cannot be published; None when it can."""
        if value is None or value == "":
            if not self.required:
                return None
            return {
                "field": self.path,
                "code": self.missing_code,
                "message": f"{self.path} {self.rule()}.",
            }
        if self.valid(value):
            return None
        return {
            "field": self.path,
            "code": self.invalid_code,
            "message": f"{self.path} {self.rule()}.",
        }

    def valid(self, value: Any) -> bool:
        """Whether a set value fits the type, choices, bounds and shape."""
        if self.type == "choice":
            return value in self.choices
        if self.type == "string":
            if not isinstance(value, str):
                return False
            return self.pattern is None or re.fullmatch(self.pattern, value) is not None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value):
            return False
        if self.type == "integer" and not isinstance(value, int):
            return False
        if self.minimum is not None and (
            value <= self.minimum if self.exclusive else value < self.minimum
        ):
            return False
        return self.maximum is None or (
            value < self.maximum if self.exclusive else value <= self.maximum
        )


def _shown(number: float | None) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


def _prompt_cache_fields() -> tuple[ModelField, ...]:
    return tuple(
        ModelField(
            name=f"promptCache.{key}",
            title=schema["title"],
            help=schema["description"],
            type="choice",
            store=PROMPT_CACHE,
            key=key,
            choices=tuple(schema["enum"]),
            default=schema["default"],
            # validate_prompt_cache checks the whole object at publish (unknown keys too).
            checked_at="publish",
        )
        for key, schema in PROMPT_CACHE_SCHEMA["properties"].items()
    )


PRICE_TITLES = {
    "input": "Input price",
    "cacheRead": "Cache read price",
    "cacheWrite": "Cache write price",
    "output": "Output price",
}


def _price_fields() -> tuple[ModelField, ...]:
    return tuple(
        ModelField(
            name=f"prices.{key}",
            title=PRICE_TITLES[key],
            help="Currency units per million tokens.",
            type="number",
            store=PRICES,
            key=key,
            minimum=0,
            maximum=PRICE_MAX,
        )
        for key in PRICE_KEYS
    )


MODEL_FIELDS: tuple[ModelField, ...] = (
    ModelField(
        name="provider",
        title="Provider",
        help="scripted: a JSON script (below) plays the model, for tests and demos. openai: any "
        "OpenAI-compatible endpoint. anthropic: the Messages API. external: the host runs the "
        "model and writes its messages through the API.",
        type="choice",
        store=COLUMN,
        key="model_provider",
        choices=tuple(AgentVersion.Provider.values),
        required=True,
        missing_code="model_provider_invalid",
        invalid_code="model_provider_invalid",
    ),
    ModelField(
        name="name",
        title="Model name",
        help="The provider's model id, sent with every request.",
        type="string",
        store=COLUMN,
        key="model_name",
        required=True,
    ),
    ModelField(
        name="maxInputTokens",
        title="Max input tokens",
        help="The model's context size: maintenance starts when a view passes the trigger "
        "ratio of it.",
        type="integer",
        store=COLUMN,
        key="max_input_tokens",
        minimum=1000,
        required=True,
    ),
    ModelField(
        name="maintenanceTriggerRatio",
        title="Maintenance trigger ratio",
        help="The share of max input tokens a view may fill before maintenance compresses "
        "the window's prefix.",
        type="number",
        store=COLUMN,
        key="maintenance_trigger_ratio",
        minimum=0.0,
        maximum=1.0,
        exclusive=True,
        default=0.75,
        required=True,
        nullable=False,
        missing_code="out_of_range",
    ),
    ModelField(
        name="config.baseUrl",
        title="Base URL",
        help="The provider's API root (openai, anthropic). Empty: the node's setting "
        "(OPENAI_BASE_URL, ANTHROPIC_BASE_URL), else the provider's own.",
        type="string",
        store=CONFIG,
        key="baseUrl",
        pattern=r"https?://[^\s/?#]+[^\s]*",
        pattern_text="an http:// or https:// URL",
        checked_at="save",
    ),
    ModelField(
        name="config.api",
        title="OpenAI API",
        help="openai: the API the model is called through. chat: Chat Completions. responses: "
        "the Responses API (the view as its input items; the model's reasoning items kept and "
        "sent back with each later turn). Empty: chat. Other providers ignore it.",
        type="choice",
        store=CONFIG,
        key="api",
        choices=tuple(OPENAI_APIS),
        checked_at="publish",
    ),
    ModelField(
        name="config.apiKeyEnv",
        title="API key variable",
        help="The name of the environment variable on the workers that holds the API key "
        "(never the key itself). Empty: the node's setting (OPENAI_API_KEY, ANTHROPIC_API_KEY).",
        type="string",
        store=CONFIG,
        key="apiKeyEnv",
        pattern=r"[A-Za-z_][A-Za-z0-9_]{0,127}",
        pattern_text="an environment variable name (letters, digits and _, not starting "
        "with a digit)",
        checked_at="save",
    ),
    ModelField(
        name="config.maxOutputTokens",
        title="Max output tokens",
        help="The most tokens the model may write per turn (openai: sent only when set; "
        "anthropic: 4096 when empty).",
        type="integer",
        store=CONFIG,
        key="maxOutputTokens",
        minimum=1,
        checked_at="save",
    ),
    ModelField(
        name="config.timeoutSeconds",
        title="Timeout (seconds)",
        help="How long one model request may take (openai, anthropic). Empty: 60.",
        type="number",
        store=CONFIG,
        key="timeoutSeconds",
        minimum=0,
        maximum=3600,
        exclusive=True,
        checked_at="save",
    ),
    *_prompt_cache_fields(),
    *_price_fields(),
)

FIELDS_BY_NAME = {field.name: field for field in MODEL_FIELDS}
CONFIG_KEYS = frozenset(f.key for f in MODEL_FIELDS if f.store == CONFIG)


def fields_of(store: Store) -> tuple[ModelField, ...]:
    return tuple(f for f in MODEL_FIELDS if f.store == store)


def stored_value(version: AgentVersion, field: ModelField) -> Any:
    """The value `version` holds for `field` (None: unset)."""
    if field.store == COLUMN:
        return getattr(version, field.key)
    holder = {
        CONFIG: version.model_config,
        PROMPT_CACHE: version.prompt_cache,
        PRICES: version.prices,
    }[field.store]
    return holder.get(field.key) if isinstance(holder, Mapping) else None


def model_problems(version: AgentVersion) -> list[Problem]:
    """Every model setting publish refuses (contract §2.1, §8), in MODEL_FIELDS order.

    Column settings and the config settings marked for publish (`config.api`) are checked
    entry by entry; `model.promptCache` and `model.prices` as a whole (unknown keys, a
    non-object), by the engine's and contextproto.usage's checks.
    """
    problems: list[Problem] = []
    for field in (*fields_of(COLUMN), *fields_of(CONFIG)):
        if field.checked_at == "publish":
            found = field.problem(stored_value(version, field))
            if found is not None:
                problems.append(found)
    problems.extend(
        {
            "field": "model.promptCache" + (f".{error['key']}" if error["key"] else ""),
            "code": error["code"],
            "message": error["message"],
        }
        for error in validate_prompt_cache(version.prompt_cache).errors
    )
    problems.extend(prices_problems(version.prices, "model.prices"))
    script = script_problem(version)
    if script is not None:
        problems.append(script)
    return problems


# Providers whose calls carry the key `model.config.apiKeyEnv` names.
KEYED_PROVIDERS = ("openai", "anthropic")
SCRIPTED = "scripted"


def script_problem(version: AgentVersion) -> Problem | None:
    """A scripted version's script the runtime would refuse, in the runtime's own words
    (`script_invalid`, contract §7): its `model.config` is the script."""
    if version.model_provider != SCRIPTED:
        return None
    try:
        check_script(version.model_config)
    except ScriptInvalid as exc:
        # The runtime names the part from the script's root ("script.steps", "steps[1].text").
        where = exc.where.removeprefix("script").lstrip(".")
        field = "model.config" + (f".{where}" if where else "")
        return {"field": field, "code": "script_invalid", "message": exc.message}
    return None


def model_warnings(version: AgentVersion) -> list[Problem]:
    """What publish reports without refusing (contract §2.1): a `model.config.apiKeyEnv`
    naming a variable that is unset or empty on this node. Not refused: another node may
    have it, and a gateway request may bring its own key."""
    config = version.model_config if isinstance(version.model_config, Mapping) else {}
    name = config.get("apiKeyEnv")
    if version.model_provider not in KEYED_PROVIDERS or not isinstance(name, str) or not name:
        return []
    if os.environ.get(name):
        return []
    return [
        {
            "field": "model.config.apiKeyEnv",
            "code": "api_key_env_unset",
            "message": f"model.config.apiKeyEnv names {name}, which is not set (or empty) on "
            "this node: the built-in runtime's turns fail with provider_not_configured and "
            "the gateway calls the model without a key, unless a request sends "
            f"X-Contextproto-Upstream-Key. Set {name} on every node that runs this version.",
        }
    ]
