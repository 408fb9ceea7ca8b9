"""Agent, AgentVersion and catalog endpoints (contract §12): thin views over services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import apis_shapes as shapes
from agents import selectors, services
from agents.model_schema import model_warnings
from agents.models import AgentVersion
from contextproto.api import (
    AnyJSONField,
    IdField,
    StrictIntegerField,
    StrictSerializer,
    application_of,
)
from contextproto.protocol import catalog
from contextproto.protocol.options import validate_options

# The columns are PositiveIntegerField: a larger number would fail in the database as a 500.
POSITIVE_INT_MAX = 2**31 - 1


class ModelInput(StrictSerializer):
    provider = serializers.ChoiceField(choices=AgentVersion.Provider.values)
    name = serializers.CharField(max_length=200, allow_blank=True, required=False)
    maxInputTokens = StrictIntegerField(
        min_value=0, max_value=POSITIVE_INT_MAX, required=False, allow_null=True
    )
    maintenanceTriggerRatio = serializers.FloatField(required=False)
    config = serializers.DictField(required=False)
    # Checked at publish (contract §8), like the options.
    promptCache = serializers.DictField(required=False)
    prices = serializers.DictField(required=False, allow_null=True)


class VersionInput(StrictSerializer):
    systemPrompt = serializers.CharField(
        allow_blank=True, trim_whitespace=False, max_length=100_000
    )
    contextProtocolId = serializers.CharField(max_length=64)
    contextProtocolVersion = StrictIntegerField(min_value=0, max_value=POSITIVE_INT_MAX)
    options = AnyJSONField(required=False)
    model = ModelInput()
    tools = serializers.ListField(child=IdField(), required=False, max_length=128)
    maintainerAgentId = IdField(required=False, allow_null=True)
    maxTurnsPerRun = StrictIntegerField(min_value=1, max_value=1000, required=False)


def version_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Map the camelCase wire fields to model fields (only those present)."""
    mapping = {
        "systemPrompt": "system_prompt",
        "contextProtocolId": "context_protocol_id",
        "contextProtocolVersion": "context_protocol_version",
        "options": "options",
        "maxTurnsPerRun": "max_turns_per_run",
    }
    fields = {mapping[k]: v for k, v in data.items() if k in mapping}
    model = data.get("model")
    if model is not None:
        model_map = {
            "provider": "model_provider",
            "name": "model_name",
            "maxInputTokens": "max_input_tokens",
            "maintenanceTriggerRatio": "maintenance_trigger_ratio",
            "config": "model_config",
            "promptCache": "prompt_cache",
            "prices": "prices",
        }
        fields.update({model_map[k]: v for k, v in model.items()})
    return fields


class AgentCreateApi(APIView):
    class Input(StrictSerializer):
        name = serializers.CharField(max_length=200)

    @extend_schema(request=Input, responses={201: shapes.Agent})
    def post(self, request: Request) -> Response:
        application = application_of(request)
        data = self.Input.parse(request.data)
        agent = services.agent_create(application=application, name=data["name"])
        return Response({"id": str(agent.id), "name": agent.name}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: shapes.AgentList})
    def get(self, request: Request) -> Response:
        application = application_of(request)
        agents = selectors.agent_list(application=application)
        return Response({"agents": [{"id": str(a.id), "name": a.name} for a in agents]})


class AgentVersionCreateApi(APIView):
    @extend_schema(request=VersionInput, responses={201: shapes.AgentVersion})
    def post(self, request: Request, agent_id: str) -> Response:
        application = application_of(request, "Agent")
        agent = selectors.agent_get(application=application, agent_id=agent_id)
        data = VersionInput.parse(request.data)
        fields = version_fields(data)
        fields.setdefault("options", {})
        version = services.agent_version_create(
            agent=agent,
            fields=fields,
            tool_ids=data.get("tools"),
            maintainer_agent_id=data.get("maintainerAgentId"),
        )
        return Response(selectors.agent_version_to_wire(version), status=status.HTTP_201_CREATED)


class AgentVersionDetailApi(APIView):
    @extend_schema(responses={200: shapes.AgentVersion})
    def get(self, request: Request, version_id: str) -> Response:
        version = selectors.agent_version_get(
            application=application_of(request, "AgentVersion"), version_id=version_id
        )
        return Response(selectors.agent_version_to_wire(version))

    @extend_schema(request=VersionInput, responses={200: shapes.AgentVersion})
    def patch(self, request: Request, version_id: str) -> Response:
        version = selectors.agent_version_get(
            application=application_of(request, "AgentVersion"), version_id=version_id
        )
        data = VersionInput.parse(request.data, partial=True)
        kwargs: dict[str, Any] = {}
        if "maintainerAgentId" in data:
            kwargs["maintainer_agent_id"] = data["maintainerAgentId"]
        version = services.agent_version_update_draft(
            version=version, fields=version_fields(data), tool_ids=data.get("tools"), **kwargs
        )
        return Response(selectors.agent_version_to_wire(version))


class AgentVersionPublishApi(APIView):
    @extend_schema(request=None, responses={200: shapes.AgentVersionPublished})
    def post(self, request: Request, version_id: str) -> Response:
        version = selectors.agent_version_get(
            application=application_of(request, "AgentVersion"), version_id=version_id
        )
        version = services.agent_version_publish(version=version)
        warnings = model_warnings(version)
        return Response(selectors.agent_version_published_to_wire(version, warnings))


class AgentVersionDuplicateApi(APIView):
    @extend_schema(request=None, responses={201: shapes.AgentVersion})
    def post(self, request: Request, version_id: str) -> Response:
        version = selectors.agent_version_get(
            application=application_of(request, "AgentVersion"), version_id=version_id
        )
        copy = services.agent_version_duplicate(version=version)
        return Response(selectors.agent_version_to_wire(copy), status=status.HTTP_201_CREATED)


class AgentVersionArchiveApi(APIView):
    """Archive a published version: no new sessions on it; its sessions go on (idempotent)."""

    @extend_schema(request=None, responses={200: shapes.AgentVersion})
    def post(self, request: Request, version_id: str) -> Response:
        version = selectors.agent_version_get(
            application=application_of(request, "AgentVersion"), version_id=version_id
        )
        if request.data not in ({}, None):
            StrictSerializer.parse(request.data)
        version = services.agent_version_archive(version=version)
        return Response(selectors.agent_version_to_wire(version))


class ProtocolListApi(APIView):
    @extend_schema(responses={200: shapes.ProtocolList})
    def get(self, request: Request) -> Response:
        application_of(request, "Protocol")  # a session key reaches only its session
        return Response(
            {
                "protocols": [v.to_public() for v in catalog.all_versions()],
                "fingerprint": catalog.fingerprint(),
            }
        )


class ProtocolDetailApi(APIView):
    @extend_schema(responses={200: shapes.ProtocolVersion})
    def get(self, request: Request, protocol_id: str, version: str) -> Response:
        application_of(request, "Protocol")  # a session key reaches only its session
        return Response(selectors.protocol_version_get(protocol_id, version).to_public())


class ProtocolValidateApi(APIView):
    class Input(StrictSerializer):
        options = AnyJSONField()

    @extend_schema(request=Input, responses={200: shapes.OptionValidation})
    def post(self, request: Request, protocol_id: str, version: str) -> Response:
        application_of(request, "Protocol")  # a session key reaches only its session
        found = selectors.protocol_version_get(protocol_id, version)
        data = self.Input.parse(request.data)
        result = validate_options(found.protocol_id, found.version, data["options"])
        return Response(
            {"valid": result.valid, "normalized": result.normalized, "errors": result.errors}
        )
