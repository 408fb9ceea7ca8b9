"""Write path of an Application's gateway settings (contract §14): model aliases and side
models, checked entry by entry and refused with every problem at once, as publish is.

The API (`PUT gateway-settings/`) and the admin's Gateway settings page both write through
`gateway_settings_set`; the admin shows `gateway_settings_problems` next to its fields
before it saves.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Application, GatewaySettings
from agents.selectors import alias_target_problem, gateway_model_name, gateway_version_named
from contextproto.errors import GATEWAY_SETTINGS_INVALID, ApplicationError
from contextproto.protocol.gateway.model_names import is_glob, pattern_problem
from contextproto.usage import Problem

MAX_MODEL_ALIASES = 100
MAX_SIDE_MODELS = 100
AGENT_VERSION_MAX_CHARS = 300  # an agent's name (200) and a number, or a version id
ALIAS_KEYS = ("pattern", "agentVersion")


def _problem(field: str, code: str, message: str) -> Problem:
    return {"field": field, "code": code, "message": message}


def _patterns_problems(field: str, patterns: list[tuple[int, Any]], what: str) -> list[Problem]:
    """Each pattern's shape, and patterns written twice (only the first would apply);
    `patterns` are (index in the list, pattern)."""
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, pattern in patterns:
        where = f"{field}[{i}]" + (".pattern" if what == "alias" else "")
        wrong = pattern_problem(pattern)
        if wrong is not None:
            problems.append(_problem(where, "pattern_invalid", f"{where} {wrong}."))
        elif pattern in first:
            problems.append(
                _problem(
                    where,
                    "pattern_repeated",
                    f"{where}: {pattern!r} is also {field}[{first[pattern]}]; only the first "
                    "would ever apply.",
                )
            )
        else:
            first[pattern] = i
    return problems


def _alias_problems(application: Application, aliases: list[Any]) -> list[Problem]:
    problems: list[Problem] = []
    patterns: list[tuple[int, Any]] = []
    targets: dict[str, Problem | None] = {}
    for i, entry in enumerate(aliases):
        where = f"modelAliases[{i}]"
        if not isinstance(entry, dict):
            problems.append(
                _problem(where, "not_an_object", f"{where} must be {{pattern, agentVersion}}.")
            )
            continue
        for key in sorted(set(entry) - set(ALIAS_KEYS)):
            problems.append(
                _problem(
                    f"{where}.{key}",
                    "unknown_key",
                    f"{where}.{key}: unknown key; an alias has pattern and agentVersion.",
                )
            )
        pattern = entry.get("pattern")
        patterns.append((i, pattern))
        if isinstance(pattern, str) and pattern_problem(pattern) is None and not is_glob(pattern):
            named = gateway_version_named(application, pattern)
            if named is not None:
                problems.append(
                    _problem(
                        f"{where}.pattern",
                        "pattern_names_a_version",
                        f"{where}.pattern: {pattern!r} names {gateway_model_name(named)}: a "
                        "request sending it starts that version, never an alias.",
                    )
                )
        target = entry.get("agentVersion")
        field = f"{where}.agentVersion"
        if not isinstance(target, str) or not target or len(target) > AGENT_VERSION_MAX_CHARS:
            problems.append(
                _problem(
                    field,
                    "required",
                    f"{field} must name a version: 'agent@number', an agent's name or a "
                    f"version id (at most {AGENT_VERSION_MAX_CHARS} characters).",
                )
            )
            continue
        if target not in targets:
            targets[target] = alias_target_problem(application=application, agent_version=target)
        found = targets[target]
        if found is not None:
            problems.append(_problem(field, found["code"], f"{field}: {found['message']}"))
    problems[:0] = _patterns_problems("modelAliases", patterns, "alias")
    return problems


def gateway_settings_problems(
    *, application: Application, model_aliases: Any, side_models: Any
) -> list[Problem]:
    """Every reason these settings cannot be stored, as `{field, code, message}` with the
    API's field paths (`modelAliases[2].agentVersion`, `sideModels[0]`); [] when they can.

    Each alias's version is checked as a request naming it now would be (published, not
    archived, a model the gateway calls); `side_models` None means the default list.
    """
    problems: list[Problem] = []
    if not isinstance(model_aliases, list):
        problems.append(
            _problem(
                "modelAliases",
                "not_a_list",
                "modelAliases must be a list of {pattern, agentVersion} objects.",
            )
        )
    elif len(model_aliases) > MAX_MODEL_ALIASES:
        problems.append(
            _problem(
                "modelAliases",
                "too_many",
                f"modelAliases holds {len(model_aliases)} aliases; at most {MAX_MODEL_ALIASES}.",
            )
        )
    else:
        problems += _alias_problems(application, model_aliases)
    if side_models is None:
        return problems
    if not isinstance(side_models, list):
        problems.append(
            _problem(
                "sideModels",
                "not_a_list",
                "sideModels must be a list of model-name globs, or null for the default.",
            )
        )
    elif len(side_models) > MAX_SIDE_MODELS:
        problems.append(
            _problem(
                "sideModels",
                "too_many",
                f"sideModels holds {len(side_models)} globs; at most {MAX_SIDE_MODELS}.",
            )
        )
    else:
        problems += _patterns_problems("sideModels", list(enumerate(side_models)), "side")
    return problems


@transaction.atomic
def gateway_settings_set(
    *, application: Application, model_aliases: Any, side_models: Any
) -> GatewaySettings:
    """Replace the Application's gateway settings (`side_models` None: the default list).

    Locks the Application row, so two writers replace one after the other. Refuses with 400
    `gateway_settings_invalid`, every problem in `details.errors` (nothing is stored).
    """
    Application.objects.select_for_update().filter(pk=application.pk).first()
    problems = gateway_settings_problems(
        application=application, model_aliases=model_aliases, side_models=side_models
    )
    if problems:
        raise ApplicationError(
            GATEWAY_SETTINGS_INVALID,
            f"The gateway settings have {len(problems)} problem(s): {problems[0]['message']}",
            {"errors": problems},
        )
    row, _created = GatewaySettings.objects.update_or_create(
        application=application,
        defaults={
            "model_aliases": [
                {"pattern": entry["pattern"], "agentVersion": entry["agentVersion"]}
                for entry in model_aliases
            ],
            "side_models": None if side_models is None else list(side_models),
        },
    )
    return row
