"""An application key rotates or revokes the session key of one of its sessions.

Only the application key may: a session key reaches its session's work, not the
credential that grants it (404, see docs/decisions.md).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import StrictSerializer, application_of
from sessions_app.models import Session
from sessions_app.reads import lists
from sessions_app.services import sessions


def _own_session(request: Request, session_id: str) -> Session:
    application = application_of(request, "Session")
    session = lists.session_get(session_id=session_id, application_id=application.id)
    # These operations take no input; an unexpected field is refused, not ignored.
    if request.data not in ({}, None):
        StrictSerializer.parse(request.data)
    return session


class SessionKeyRotateApi(APIView):
    class Output(serializers.Serializer):
        sessionId = serializers.UUIDField()
        sessionKey = serializers.CharField(help_text="The new session key: shown once.")

    @extend_schema(request=None, responses={200: Output})
    def post(self, request: Request, session_id: str) -> Response:
        session = _own_session(request, session_id)
        raw = sessions.session_key_rotate(session=session)
        return Response({"sessionId": str(session.id), "sessionKey": raw})


class SessionKeyRevokeApi(APIView):
    class Output(serializers.Serializer):
        sessionId = serializers.UUIDField()
        revoked = serializers.BooleanField()

    @extend_schema(request=None, responses={200: Output})
    def post(self, request: Request, session_id: str) -> Response:
        session = _own_session(request, session_id)
        sessions.session_key_revoke(session=session)
        return Response({"sessionId": str(session.id), "revoked": True})
