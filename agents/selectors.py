"""Reads of agents, versions, API keys and the protocol catalog, scoped to one Application."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, AgentVersion, ApiKey, Application, Tool
from agents.wire import AgentVersionWire
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
from contextproto.protocol.prompt_cache import effective_prompt_cache

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


def gateway_version_for_model(*, application: Application, model: str | None) -> AgentVersion:
    """The version a gateway request's `model` names: `name@N`, `name` (its newest published
    version that is not archived) or a version id.

    Refuses with 404 `gateway_model_not_found` (unknown, or not published), 409
    `agent_version_archived`, 400 `gateway_model_not_runnable` (an `external` model).
    """
    versions = AgentVersion.objects.select_related("agent").filter(agent__application=application)
    found: AgentVersion | None = None
    name = model or ""
    as_id = canonical_uuid(name)
    agent_name, _, number = name.rpartition("@")
    if as_id is not None:
        found = versions.filter(id=as_id).first()
    if found is None and agent_name and number.isascii() and number.isdigit():
        found = versions.filter(agent__name=agent_name, number=int(number)).first()
    if found is None and name:
        found = (
            versions.filter(agent__name=name, status=AgentVersion.Status.PUBLISHED)
            .order_by("-number")
            .first()
        )
    if found is None or found.status == AgentVersion.Status.DRAFT:
        raise ApplicationError(
            GATEWAY_MODEL_NOT_FOUND,
            f"model {model!r} names no published version of this Application; use "
            "'agent@number', an agent's name (its newest published version) or a version "
            "id (GET /gateway/openai/v1/models lists them), or name a session with the "
            "X-Contextproto-Session header.",
            {"model": model},
        )
    if found.status == AgentVersion.Status.ARCHIVED:
        raise ApplicationError(
            AGENT_VERSION_ARCHIVED,
            f"{gateway_model_name(found)} is archived: its sessions go on, new ones start on "
            "a published version.",
            {"model": model, "agentVersionId": str(found.id)},
        )
    if found.model_provider not in RUNNABLE_MODEL_PROVIDERS:
        raise ApplicationError(
            GATEWAY_MODEL_NOT_RUNNABLE,
            f"{gateway_model_name(found)} has model provider {found.model_provider!r}: a host "
            "drives it through the API, the gateway cannot call its model. Use a version "
            f"whose model is one of {', '.join(RUNNABLE_MODEL_PROVIDERS)}.",
            {"model": model, "agentVersionId": str(found.id)},
        )
    return found


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
