"""Reads of agents and versions, always scoped to one Application."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, AgentVersion, Application
from contextproto.api import parse_uuid
from contextproto.errors import NotFound


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
        },
        "tools": [str(t.id) for t in version.tools.all()],
        "maintainerAgentId": str(version.maintainer_agent_id)
        if version.maintainer_agent_id
        else None,
        "maxTurnsPerRun": version.max_turns_per_run,
        "createdAt": version.created_at.isoformat(),
        "publishedAt": version.published_at.isoformat() if version.published_at else None,
    }
