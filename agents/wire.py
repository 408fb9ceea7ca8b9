"""The agent, API-key and host-tool reply shapes (contract §12.1), as their builders render them
(`selectors.agent_version_to_wire`, `apis_keys.api_key_to_wire`, `apis_tools.tool_to_wire`).

The catalog's shapes are the engine's (`ProtocolVersionPublic`, `OptionErrorWire`).
`apis_shapes.py` documents the same shapes for the OpenAPI schema;
tests/api/test_wire_shapes.py holds the two together.
"""

from __future__ import annotations

from typing import Any, TypedDict

from contextproto.usage import Problem


class ModelSettingsWire(TypedDict):
    provider: str | None  # scripted, openai, anthropic, external
    name: str | None
    maxInputTokens: int | None
    maintenanceTriggerRatio: float
    config: dict[str, Any]
    # The setting in effect: the defaults overlaid by what is stored (a draft may hold an
    # invalid value, shown as stored).
    promptCache: object
    prices: dict[str, Any] | None


class AgentVersionWire(TypedDict):
    id: str
    agentId: str
    number: int
    status: str
    systemPrompt: str
    contextProtocolId: str
    contextProtocolVersion: int
    options: dict[str, Any]
    model: ModelSettingsWire
    tools: list[str]  # host tool ids
    maintainerAgentId: str | None
    maxTurnsPerRun: int
    createdAt: str
    publishedAt: str | None


class AgentVersionPublishedWire(AgentVersionWire):
    """The publish answer: the version, and what publish reports without refusing
    (`{field, code, message}`; [] when nothing)."""

    warnings: list[Problem]


class ApiKeyWire(TypedDict):
    """Never the key itself: only its prefix."""

    id: int
    prefix: str
    createdAt: str
    revokedAt: str | None


class ApiKeyCreatedWire(ApiKeyWire):
    key: str  # shown once, only in this response


class HostToolWire(TypedDict):
    id: str
    name: str
    description: str
    inputSchema: dict[str, Any]
    createdAt: str


class ModelAliasWire(TypedDict):
    pattern: str  # an exact model name, or a glob whose wildcard is *
    agentVersion: str  # agent@N, an agent's name or a version id


class GatewaySettingsWire(TypedDict):
    modelAliases: list[ModelAliasWire]
    sideModels: list[str]  # globs; the service's default when the Application set none
    sideModelsDefault: bool  # true: sideModels is the default list
