"""Host tools of an Application (contract §11): list, register, read, change, delete.

Application key only: a session key reaches none of this (404), nor does another
Application's key. Versions bind tools by id (`tools` of an AgentVersion).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import apis_shapes as shapes
from agents import selectors, services_tools
from agents.models import Tool
from agents.wire import HostToolWire
from contextproto.api import AnyJSONField, StrictSerializer, application_of, page_limit
from contextproto.api_schema import PAGE

NAME = OpenApiParameter(
    "name",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="Only the tool with this name (the list is empty when there is none).",
)

SCHEMA_HELP = (
    'Any JSON Schema 2020-12 object schema ("type": "object" at the root), as frameworks '
    "generate it (anyOf/oneOf/allOf, $defs, format, nullable types); $ref only local "
    "(#/$defs/...), nothing is fetched. The runtime checks every call against all of it."
)


def tool_to_wire(tool: Tool) -> HostToolWire:
    return {
        "id": str(tool.id),
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "createdAt": tool.created_at.isoformat(),
    }


class ToolInput(StrictSerializer):
    # Name rules are the service's (400 tool_name_invalid), so the admin gets the same.
    name = serializers.CharField(trim_whitespace=False, allow_blank=True)
    description = serializers.CharField(trim_whitespace=False, allow_blank=True, required=False)
    inputSchema = AnyJSONField(help_text=SCHEMA_HELP)


class ToolsApi(APIView):
    @extend_schema(parameters=[*PAGE, NAME], responses={200: shapes.HostToolList})
    def get(self, request: Request) -> Response:
        application = application_of(request, "Tool")
        page = selectors.tool_page(
            application=application,
            cursor=request.query_params.get("cursor"),
            limit=page_limit(request.query_params.get("limit")),
            name=request.query_params.get("name"),
        )
        return Response(
            {"tools": [tool_to_wire(t) for t in page.items], "nextCursor": page.next_cursor}
        )

    @extend_schema(
        request=ToolInput,
        responses={201: shapes.HostTool, 200: shapes.HostTool},
    )
    def post(self, request: Request) -> Response:
        application = application_of(request, "Tool")
        data = ToolInput.parse(request.data)
        tool, created = services_tools.tool_register(
            application=application,
            name=data["name"],
            description=data.get("description", ""),
            input_schema=data["inputSchema"],
        )
        # 201 for a new tool; 200 with the same tool when it was already registered as is.
        return Response(
            tool_to_wire(tool), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class ToolDetailApi(APIView):
    @extend_schema(responses={200: shapes.HostTool})
    def get(self, request: Request, tool_id: str) -> Response:
        tool = selectors.tool_get(application=application_of(request, "Tool"), tool_id=tool_id)
        return Response(tool_to_wire(tool))

    @extend_schema(request=ToolInput, responses={200: shapes.HostTool})
    def patch(self, request: Request, tool_id: str) -> Response:
        tool = selectors.tool_get(application=application_of(request, "Tool"), tool_id=tool_id)
        data = ToolInput.parse(request.data, partial=True)
        names = {"name": "name", "description": "description", "inputSchema": "input_schema"}
        changes = {names[key]: value for key, value in data.items()}
        tool = services_tools.tool_update(tool=tool, changes=changes)
        return Response(tool_to_wire(tool))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, tool_id: str) -> Response:
        tool = selectors.tool_get(application=application_of(request, "Tool"), tool_id=tool_id)
        services_tools.tool_delete(tool=tool)
        return Response(status=status.HTTP_204_NO_CONTENT)
