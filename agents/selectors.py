"""Reads of agents, versions, API keys and the protocol catalog, scoped to one Application."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, AgentVersion, ApiKey, Application, Tool
from contextproto.errors import NotFound
from contextproto.ids import parse_uuid
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


def agent_version_to_wire(version: AgentVersion) -> dict[str, Any]:
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
