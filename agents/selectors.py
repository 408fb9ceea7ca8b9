"""Reads of agents, versions, API keys and the protocol catalog, scoped to one Application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from agents.models import Agent, AgentVersion, ApiKey, Application, GatewaySettings, Tool
from agents.wire import AgentVersionPublishedWire, AgentVersionWire, GatewaySettingsWire
from contextproto.errors import (
    AGENT_VERSION_ARCHIVED,
    GATEWAY_MODEL_NOT_FOUND,
    GATEWAY_MODEL_NOT_RUNNABLE,
    ApplicationError,
    NotFound,
)
from contextproto.ids import canonical_uuid, parse_uuid
from contextproto.pagination import BY_ID, Keyset, Page, keyset_page
from contextproto.protocol import catalog
from contextproto.protocol.gateway.model_names import (
    DEFAULT_SIDE_MODELS,
    Alias,
    alias_for,
    matches_any,
)
from contextproto.protocol.prompt_cache import effective_prompt_cache
from contextproto.usage import Problem

AGENT_LIST_MAX = 500


def protocol_of(version: AgentVersion) -> catalog.ProtocolVersion:
    """The catalog entry of a version's context protocol (ProtocolError if the catalog lacks it)."""
    return catalog.get_version(version.context_protocol_id, version.context_protocol_version)


def effective_options(
    version: AgentVersion, protocol: catalog.ProtocolVersion | None = None
) -> dict[str, Any]:
    """The protocol's defaults overlaid by the version's options: what the engine runs with.

    Published options are stored normalized; the defaults fill any gap of older rows. Pass
    `protocol` when the caller already looked it up.
    """
    protocol = protocol if protocol is not None else protocol_of(version)
    return {**protocol.defaults, **(version.options or {})}


def tools_for(version: AgentVersion, protocol: catalog.ProtocolVersion) -> list[dict[str, Any]]:
    """Protocol tool schemas of the version's protocol, then the version's host tools by name.

    The order is fixed (a many-to-many read has none): tools are the start of every
    provider request, so a reordering would re-bill the whole prompt cache (contract §8).
    Sorted in Python, so a prefetched relation costs no query.
    """
    return list(protocol.tools.values()) + _host_tools(version)


# Host tools of published (and archived) versions, which never change: a version's tools
# cannot be rebound once published, and a tool a published version binds cannot be edited
# (409 tool_in_use). Bounded like any per-process cache.
_FROZEN_TOOLS: dict[UUID, list[dict[str, Any]]] = {}
FROZEN_TOOLS_MAX = 1024


def _host_tools(version: AgentVersion) -> list[dict[str, Any]]:
    frozen = version.status != AgentVersion.Status.DRAFT
    if frozen and version.pk in _FROZEN_TOOLS:
        return [dict(t) for t in _FROZEN_TOOLS[version.pk]]
    host = [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        for t in sorted(version.tools.all(), key=lambda t: t.name)
    ]
    if frozen:
        if len(_FROZEN_TOOLS) >= FROZEN_TOOLS_MAX:
            _FROZEN_TOOLS.clear()
        _FROZEN_TOOLS[version.pk] = host
    return [dict(t) for t in host]


def protocol_version_get(protocol_id: str, version: str) -> catalog.ProtocolVersion:
    """The catalog entry `protocol_id@version` named in a path; NotFound (404) otherwise."""
    # isdigit() alone accepts characters like "²" that int() refuses.
    numeric = version.isascii() and version.isdigit()
    found = catalog.find_version(protocol_id, int(version)) if numeric else None
    if found is None:
        raise NotFound("Protocol version", {"protocol": f"{protocol_id}@{version}"})
    return found


def agent_list(*, application: Application) -> list[Agent]:
    """The Application's agents by name (at most AGENT_LIST_MAX)."""
    return list(application.agents.order_by("name")[:AGENT_LIST_MAX])


def agent_get(*, application: Application, agent_id: Any) -> Agent:
    agent = Agent.objects.filter(application=application, id=parse_uuid(agent_id, "Agent")).first()
    if agent is None:
        raise NotFound("Agent")
    return agent


def agent_version_get(*, application: Application, version_id: Any) -> AgentVersion:
    version = (
        AgentVersion.objects.select_related("agent", "maintainer_agent")
        .prefetch_related("tools")
        .filter(agent__application=application, id=parse_uuid(version_id, "AgentVersion"))
        .first()
    )
    if version is None:
        raise NotFound("AgentVersion")
    return version


def agent_version_for_session(*, application: Application, version_id: Any) -> AgentVersion:
    """The version a new session names in `agentVersionId` (one query, no prefetch)."""
    version = AgentVersion.objects.filter(id=version_id, agent__application=application).first()
    if version is None:
        raise NotFound("AgentVersion", {"field": "agentVersionId"})
    return version


# Model providers the service calls itself (a gateway can drive them); `external` is a host's.
RUNNABLE_MODEL_PROVIDERS = ("scripted", "openai", "anthropic")
GATEWAY_MODELS_MAX = 500


def gateway_model_name(version: AgentVersion) -> str:
    """How the gateway's `models` lists a version and a client names it: `agent@number`."""
    return f"{version.agent.name}@{version.number}"


def gateway_models(*, application: Application) -> list[AgentVersion]:
    """The published versions a gateway client can start a session on (contract §14), by agent
    name then newest first."""
    return list(
        AgentVersion.objects.select_related("agent")
        .filter(
            agent__application=application,
            status=AgentVersion.Status.PUBLISHED,
            model_provider__in=RUNNABLE_MODEL_PROVIDERS,
        )
        .order_by("agent__name", "-number")[:GATEWAY_MODELS_MAX]
    )


@dataclass(frozen=True)
class GatewaySettingsView:
    """An Application's gateway settings as they apply (contract §14): its model aliases in
    order, its side-model globs (the service's default when it set none) and whether those
    are the default."""

    aliases: tuple[Alias, ...] = ()
    side_models: tuple[str, ...] = DEFAULT_SIDE_MODELS
    side_models_default: bool = True


def gateway_settings_of(application: Application) -> GatewaySettingsView:
    """The Application's gateway settings (one query; the defaults when it has no row)."""
    row = GatewaySettings.objects.filter(application=application).first()
    if row is None:
        return GatewaySettingsView()
    # Written only through agents.services_gateway, which checks every entry; a row edited
    # by hand into another shape loses the entries that are not strings, not the whole row.
    aliases = tuple(
        Alias(pattern=entry["pattern"], agent_version=entry["agentVersion"])
        for entry in row.model_aliases or ()
        if isinstance(entry, dict)
        and isinstance(entry.get("pattern"), str)
        and isinstance(entry.get("agentVersion"), str)
    )
    if row.side_models is None:
        return GatewaySettingsView(aliases=aliases)
    side = tuple(glob for glob in row.side_models if isinstance(glob, str))
    return GatewaySettingsView(aliases=aliases, side_models=side, side_models_default=False)


def gateway_settings_to_wire(settings: GatewaySettingsView) -> GatewaySettingsWire:
    return {
        "modelAliases": [
            {"pattern": alias.pattern, "agentVersion": alias.agent_version}
            for alias in settings.aliases
        ],
        "sideModels": list(settings.side_models),
        "sideModelsDefault": settings.side_models_default,
    }


def is_side_model(application: Application, model: str | None) -> bool:
    """Whether `model` is one of the Application's side models (contract §14: a model name
    clients use only for background requests; `sideModels`, or the default list). One query."""
    if not model:
        return False
    return matches_any(gateway_settings_of(application).side_models, model)


def gateway_version_named(application: Application, name: str) -> AgentVersion | None:
    """The version `name` names as a gateway's `model` does (contract §14): a version id,
    `agent@N` (any status), or an agent's name (its newest published version); else None."""
    if not name:
        return None
    versions = AgentVersion.objects.select_related("agent").filter(agent__application=application)
    as_id = canonical_uuid(name)
    if as_id is not None:
        found = versions.filter(id=as_id).first()
        if found is not None:
            return found
    agent_name, _, number = name.rpartition("@")
    if agent_name and number.isascii() and number.isdigit():
        found = versions.filter(agent__name=agent_name, number=int(number)).first()
        if found is not None:
            return found
    return (
        versions.filter(agent__name=name, status=AgentVersion.Status.PUBLISHED)
        .order_by("-number")
        .first()
    )


# Where an operator maps the model names clients send (said in every unmatched 404).
ALIAS_PLACES = (
    "in the admin (Applications > {application} > Gateway settings) or with "
    "PUT /api/v1/gateway-settings/"
)


def _alias_text(alias: Alias) -> str:
    return f"the model alias {alias.pattern!r} → {alias.agent_version!r}"


def _startable(
    application: Application, found: AgentVersion | None, model: str | None, alias: Alias | None
) -> AgentVersion:
    """`found` if a new gateway session may start on it; else the refusal (contract §14)."""
    details: dict[str, Any] = {"model": model}
    if alias is not None:
        details.update(aliasPattern=alias.pattern, agentVersion=alias.agent_version)
    places = ALIAS_PLACES.format(application=application.name)
    if found is None or found.status == AgentVersion.Status.DRAFT:
        if alias is not None:
            message = (
                f"model {model!r} takes {_alias_text(alias)}, which names no published "
                f"version of this Application; change the alias {places}."
            )
        else:
            message = (
                f"model {model!r} names no published version of this Application and no "
                f"model alias takes it. Map the model names your client sends to a version "
                f'with a model alias ({{"pattern": "claude-*", "agentVersion": "helper@2"}}) '
                f"{places}, or send as `model` 'agent@number', an agent's name (its newest "
                "published version) or a version id (GET /gateway/openai/v1/models lists "
                "them)."
            )
        raise ApplicationError(GATEWAY_MODEL_NOT_FOUND, message, details)
    via = f" ({_alias_text(alias)})" if alias is not None else ""
    details["agentVersionId"] = str(found.id)
    if found.status == AgentVersion.Status.ARCHIVED:
        raise ApplicationError(
            AGENT_VERSION_ARCHIVED,
            f"{gateway_model_name(found)}{via} is archived: its sessions go on, new ones "
            "start on a published version.",
            details,
        )
    if found.model_provider not in RUNNABLE_MODEL_PROVIDERS:
        raise ApplicationError(
            GATEWAY_MODEL_NOT_RUNNABLE,
            f"{gateway_model_name(found)}{via} has model provider {found.model_provider!r}: "
            "a host drives it through the API, the gateway cannot call its model. Use a "
            f"version whose model is one of {', '.join(RUNNABLE_MODEL_PROVIDERS)}.",
            details,
        )
    return found


def gateway_version_for_model(*, application: Application, model: str | None) -> AgentVersion:
    """The version a new gateway session of `model` starts on (contract §14).

    A version name (`agent@N`, `agent`: its newest published version, a version id) is never
    taken by an alias; any other name takes the Application's model alias for it (an exact
    pattern, else the first glob that matches). Refuses with 404 `gateway_model_not_found`
    (nothing named, unpublished, or an alias naming no published version; the message says
    where to set an alias), 409 `agent_version_archived`, 400 `gateway_model_not_runnable`
    (an `external` model). At most four queries.
    """
    name = model or ""
    found = gateway_version_named(application, name)
    if found is not None or not name:
        return _startable(application, found, model, None)
    alias = alias_for(gateway_settings_of(application).aliases, name)
    if alias is None:
        return _startable(application, None, model, None)
    return _startable(
        application, gateway_version_named(application, alias.agent_version), model, alias
    )


def alias_target_problem(*, application: Application, agent_version: str) -> Problem | None:
    """Why a model alias to `agent_version` could start no gateway session now, as
    `{field, code, message}` with the code a request would be refused with (the caller sets
    `field`); None when it can."""
    found = gateway_version_named(application, agent_version)
    if found is None or found.status == AgentVersion.Status.DRAFT:
        return {
            "field": "agentVersion",
            "code": GATEWAY_MODEL_NOT_FOUND,
            "message": f"{agent_version!r} names no published version of this Application "
            "(write 'agent@number', an agent's name or a version id).",
        }
    if found.status == AgentVersion.Status.ARCHIVED:
        return {
            "field": "agentVersion",
            "code": AGENT_VERSION_ARCHIVED,
            "message": f"{gateway_model_name(found)} is archived: it starts no new sessions.",
        }
    if found.model_provider not in RUNNABLE_MODEL_PROVIDERS:
        return {
            "field": "agentVersion",
            "code": GATEWAY_MODEL_NOT_RUNNABLE,
            "message": f"{gateway_model_name(found)} has model provider "
            f"{found.model_provider!r}: the gateway cannot call its model (use one of "
            f"{', '.join(RUNNABLE_MODEL_PROVIDERS)}).",
        }
    return None


def api_key_page(*, application: Application, cursor: str | None, limit: int) -> Page[ApiKey]:
    """The Application's API keys (revoked ones too) in creation order."""
    return keyset_page(
        ApiKey.objects.filter(application=application), BY_ID, cursor=cursor, limit=limit
    )


def api_key_get(*, application: Application, key_id: str) -> ApiKey:
    """The Application's API key with this id (from a path); NotFound (404) otherwise."""
    key = (
        ApiKey.objects.filter(application=application, pk=int(key_id)).first()
        if key_id.isascii() and key_id.isdigit() and len(key_id) <= 18
        else None
    )
    if key is None:
        raise NotFound("API key")
    return key


# Host tools list by name: unique within an Application, and what an operator looks for.
TOOLS_BY_NAME = Keyset(
    order=("name",),
    shape={"n": str},
    position=lambda row: {"n": row.name},
    after=lambda rows, at: rows.filter(name__gt=at["n"]),
)


def tool_page(
    *, application: Application, cursor: str | None, limit: int, name: str | None = None
) -> Page[Tool]:
    """The Application's host tools in name order (one query); only `name`'s when given."""
    tools = Tool.objects.filter(application=application)
    if name is not None:
        tools = tools.filter(name=name)
    return keyset_page(tools, TOOLS_BY_NAME, cursor=cursor, limit=limit)


def tool_get(*, application: Application, tool_id: Any) -> Tool:
    """The Application's host tool with this id (from a path); NotFound (404) otherwise."""
    tool = Tool.objects.filter(application=application, id=parse_uuid(tool_id, "Tool")).first()
    if tool is None:
        raise NotFound("Tool")
    return tool


# Versions that run (or ran) with their tools as they were: published and archived ones.
FROZEN_STATUSES = (AgentVersion.Status.PUBLISHED, AgentVersion.Status.ARCHIVED)


def tool_frozen_versions(tool: Tool) -> list[AgentVersion]:
    """The published and archived versions binding `tool`, by agent name and number."""
    return list(
        tool.agent_versions.filter(status__in=FROZEN_STATUSES)
        .select_related("agent")
        .order_by("agent__name", "number")
    )


def agent_version_to_wire(version: AgentVersion) -> AgentVersionWire:
    return {
        "id": str(version.id),
        "agentId": str(version.agent_id),
        "number": version.number,
        "status": version.status,
        "systemPrompt": version.system_prompt,
        "contextProtocolId": version.context_protocol_id,
        "contextProtocolVersion": version.context_protocol_version,
        "options": version.options,
        "model": {
            "provider": version.model_provider or None,
            "name": version.model_name or None,
            "maxInputTokens": version.max_input_tokens,
            "maintenanceTriggerRatio": version.maintenance_trigger_ratio,
            "config": version.model_config,
            # The effective setting: {} stored means the defaults, shown as such.
            "promptCache": effective_prompt_cache(version.prompt_cache),
            "prices": version.prices,
        },
        "tools": [str(t.id) for t in version.tools.all()],
        "maintainerAgentId": str(version.maintainer_agent_id)
        if version.maintainer_agent_id
        else None,
        "maxTurnsPerRun": version.max_turns_per_run,
        "createdAt": version.created_at.isoformat(),
        "publishedAt": version.published_at.isoformat() if version.published_at else None,
    }


def agent_version_published_to_wire(
    version: AgentVersion, warnings: list[Problem]
) -> AgentVersionPublishedWire:
    return {**agent_version_to_wire(version), "warnings": warnings}
