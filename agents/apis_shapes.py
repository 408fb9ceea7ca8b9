"""Response shapes of the agent, catalog and API-key endpoints (contract §12.1), for the OpenAPI
schema.

They describe what the wire functions render (`agent_version_to_wire`, `to_public`,
`api_key_to_wire`, `tool_to_wire`), whose TypedDicts (`agents/wire.py`, the catalog's in the
engine) tests/api/test_wire_shapes.py holds them to; tests/api/test_response_shapes.py and
schemathesis check responses against them.
"""

from __future__ import annotations

from rest_framework import serializers

from agents.models import AgentVersion as AgentVersionModel
from contextproto.api import AnyJSONField


class Agent(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()


class AgentList(serializers.Serializer):
    agents = Agent(many=True)


# Who runs a version's model (`model.provider`): named ModelProvider in the schema.
MODEL_PROVIDERS: list[str] = list(AgentVersionModel.Provider.values)
# A version's `status`: named AgentVersionStatusEnum in the schema.
AGENT_VERSION_STATUSES: list[str] = list(AgentVersionModel.Status.values)


class ModelSettings(serializers.Serializer):
    provider = serializers.ChoiceField(
        choices=MODEL_PROVIDERS,
        allow_null=True,
        help_text="Who runs the model: the service (scripted, openai, anthropic) or a host "
        "(external).",
    )
    name = serializers.CharField(allow_null=True)
    maxInputTokens = serializers.IntegerField(allow_null=True)
    maintenanceTriggerRatio = serializers.FloatField()
    config = AnyJSONField()
    promptCache = AnyJSONField(
        help_text="{mode: auto|off, ttl: 5m|1h}; {} (the default) means auto, 5m. Answered "
        "with every key: the setting in effect."
    )
    prices = AnyJSONField(
        allow_null=True,
        help_text="{input, cacheRead, cacheWrite, output} per million tokens, or null.",
    )


class AgentVersion(serializers.Serializer):
    id = serializers.UUIDField()
    agentId = serializers.UUIDField()
    number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AGENT_VERSION_STATUSES)
    systemPrompt = serializers.CharField(allow_blank=True)
    contextProtocolId = serializers.CharField()
    contextProtocolVersion = serializers.IntegerField()
    options = AnyJSONField(help_text="Stored normalized once published.")
    model = ModelSettings()
    tools = serializers.ListField(child=serializers.UUIDField(), help_text="Host tool ids.")
    maintainerAgentId = serializers.UUIDField(allow_null=True)
    maxTurnsPerRun = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    publishedAt = serializers.DateTimeField(allow_null=True)


class PublishWarning(serializers.Serializer):
    field = serializers.CharField(help_text="The setting it is about, e.g. model.config.apiKeyEnv.")
    code = serializers.CharField(help_text="api_key_env_unset")
    message = serializers.CharField()


class AgentVersionPublished(AgentVersion):
    """The published version, and what publish reports without refusing."""

    warnings = PublishWarning(
        many=True,
        help_text="[] when nothing: e.g. a model.config.apiKeyEnv unset on the node that "
        "published (the version is published all the same).",
    )


class ModelAlias(serializers.Serializer):
    pattern = serializers.CharField(
        help_text="An exact model name, or a glob whose only wildcard is * (e.g. claude-*)."
    )
    agentVersion = serializers.CharField(
        help_text="The version a new session of a matching model starts on: agent@N, an "
        "agent's name (its newest published version) or a version id."
    )


class GatewaySettings(serializers.Serializer):
    """The Application's gateway settings (contract §14)."""

    modelAliases = ModelAlias(
        many=True,
        help_text="In order: an exact pattern wins over globs, then the first glob that matches.",
    )
    sideModels = serializers.ListField(
        child=serializers.CharField(),
        help_text="Globs of model names clients use only for background requests (the default "
        "list when the Application set none).",
    )
    sideModelsDefault = serializers.BooleanField(
        help_text="True: sideModels is the service's default list."
    )


class ProtocolVersion(serializers.Serializer):
    """One catalog entry: option schema, defaults, prompt and tool schemas."""

    id = serializers.CharField()
    version = serializers.IntegerField()
    key = serializers.CharField(help_text="id@version")
    status = serializers.CharField()
    summary = serializers.CharField()
    optionSchema = serializers.DictField(help_text="JSON Schema of the options.")
    defaults = serializers.DictField()
    prompt = serializers.CharField()
    tools = serializers.ListField(
        child=serializers.DictField(), help_text="{name, description, inputSchema}"
    )
    mutatingTools = serializers.ListField(child=serializers.CharField())
    expectedWindowTools = serializers.ListField(child=serializers.CharField())


class ProtocolList(serializers.Serializer):
    protocols = ProtocolVersion(many=True)
    fingerprint = serializers.CharField(help_text="Hash of the whole catalog.")


class OptionError(serializers.Serializer):
    option = serializers.CharField(allow_null=True)
    code = serializers.CharField()
    message = serializers.CharField()


class OptionValidation(serializers.Serializer):
    valid = serializers.BooleanField()
    normalized = serializers.DictField(
        allow_null=True, help_text="Every option, defaults merged in; null when invalid."
    )
    # A declared field: DRF's metaclass moves it out of the class, so Serializer.errors (the
    # property the stubs see) stays as it is.
    errors = OptionError(many=True)  # type: ignore[assignment]


class ApiKey(serializers.Serializer):
    """An API key as listed: never the key itself, only its prefix."""

    id = serializers.IntegerField()
    prefix = serializers.CharField()
    createdAt = serializers.DateTimeField()
    revokedAt = serializers.DateTimeField(allow_null=True)


class ApiKeyCreated(ApiKey):
    key = serializers.CharField(help_text="The new key: shown once, only in this response.")


class ApiKeyList(serializers.Serializer):
    apiKeys = ApiKey(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class HostTool(serializers.Serializer):
    """A host tool of the Application: run by the host, bound to versions by id."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    inputSchema = serializers.DictField(help_text="JSON Schema of the arguments (an object).")
    createdAt = serializers.DateTimeField()


class HostToolList(serializers.Serializer):
    tools = HostTool(many=True)
    nextCursor = serializers.CharField(allow_null=True)
