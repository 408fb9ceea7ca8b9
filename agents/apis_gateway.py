"""An Application's gateway settings over the API (contract §14): `GET|PUT gateway-settings/`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import apis_shapes as shapes
from agents import selectors, services_gateway
from contextproto.api import AnyJSONField, StrictSerializer, application_of


class GatewaySettingsApi(APIView):
    """Model aliases and side models of the key's Application; PUT replaces both."""

    class Input(StrictSerializer):
        """What the schema documents; the service checks every entry (one list of problems)."""

        modelAliases = shapes.ModelAlias(
            many=True, required=False, help_text="Absent: none. At most 100."
        )
        sideModels = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            allow_null=True,
            help_text="Absent or null: the service's default list. At most 100.",
        )

    # Parses only the body's keys: the values go to the service as sent, so every problem
    # of the settings comes back at once, as `gateway_settings_invalid`.
    class Body(StrictSerializer):
        modelAliases = AnyJSONField(required=False)
        sideModels = AnyJSONField(required=False, allow_null=True)

    @extend_schema(responses={200: shapes.GatewaySettings})
    def get(self, request: Request) -> Response:
        application = application_of(request, "Gateway settings")
        settings = selectors.gateway_settings_of(application)
        return Response(selectors.gateway_settings_to_wire(settings))

    @extend_schema(request=Input, responses={200: shapes.GatewaySettings})
    def put(self, request: Request) -> Response:
        application = application_of(request, "Gateway settings")
        data = self.Body.parse(request.data)
        services_gateway.gateway_settings_set(
            application=application,
            model_aliases=data.get("modelAliases", []),
            side_models=data.get("sideModels"),
        )
        settings = selectors.gateway_settings_of(application)
        return Response(selectors.gateway_settings_to_wire(settings))
