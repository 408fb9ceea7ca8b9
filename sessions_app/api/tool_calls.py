"""A tool call's dispatch and abandonment (contract §5.3a), each in a path form (the id in the
path) and a body form (the id in the JSON body)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import StrictSerializer
from sessions_app.api import shapes
from sessions_app.api.views import session_for
from sessions_app.services import dispatch

TOOL_CALL_ID = serializers.CharField(
    trim_whitespace=False,
    help_text="The call's id as the provider made it (1-256 characters, no control characters).",
)


class ToolDispatchApi(APIView):
    @extend_schema(request=None, responses={200: shapes.Receipt})
    def post(self, request: Request, session_id: str, tool_call_id: str) -> Response:
        session = session_for(request, session_id)
        if request.data not in ({}, None):
            StrictSerializer.parse(request.data)
        receipt = dispatch.tool_dispatch(session_id=session.id, tool_call_id=tool_call_id)
        return Response(receipt.to_wire())


class ToolDispatchByBodyApi(APIView):
    """The dispatch of the call named in the body: the same as the path form, for any id
    (a proxy may rewrite `%2F` or `//` in a path, never a JSON string)."""

    class Input(StrictSerializer):
        toolCallId = TOOL_CALL_ID

    @extend_schema(request=Input, responses={200: shapes.Receipt})
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        receipt = dispatch.tool_dispatch(session_id=session.id, tool_call_id=data["toolCallId"])
        return Response(receipt.to_wire())


ABANDON_REASON = serializers.CharField(
    max_length=2000,
    required=False,
    allow_null=True,
    help_text="Why the result will never come (shown to the model with the error).",
)


class ToolAbandonApi(APIView):
    """Answer a call whose result will never come with the error `tool_call_abandoned`."""

    class Input(StrictSerializer):
        reason = ABANDON_REASON

    @extend_schema(request=Input, responses={200: shapes.Receipt})
    def post(self, request: Request, session_id: str, tool_call_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data if request.data is not None else {})
        receipt = dispatch.tool_call_abandon(
            session_id=session.id, tool_call_id=tool_call_id, reason=data.get("reason")
        )
        return Response(receipt.to_wire())


class ToolAbandonByBodyApi(APIView):
    """The abandonment of the call named in the body: the same as the path form."""

    class Input(StrictSerializer):
        toolCallId = TOOL_CALL_ID
        reason = ABANDON_REASON

    @extend_schema(request=Input, responses={200: shapes.Receipt})
    def post(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        data = self.Input.parse(request.data)
        receipt = dispatch.tool_call_abandon(
            session_id=session.id, tool_call_id=data["toolCallId"], reason=data.get("reason")
        )
        return Response(receipt.to_wire())
