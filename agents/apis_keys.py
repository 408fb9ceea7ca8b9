"""An application key manages its own Application's API keys: list, create, revoke.

Rotation without downtime: create a new key, switch the host to it, revoke the old one.
A session key reaches none of this (404), and neither does another Application's key.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import apis_shapes as shapes
from agents import selectors, services
from agents.models import ApiKey
from agents.wire import ApiKeyWire
from contextproto.api import StrictSerializer, application_of, page_limit
from contextproto.api_schema import PAGE


def api_key_to_wire(key: ApiKey) -> ApiKeyWire:
    """Never the key itself: only its hash is stored, and the prefix recognises it."""
    return {
        "id": key.pk,
        "prefix": key.prefix,
        "createdAt": key.created_at.isoformat(),
        "revokedAt": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def _no_body(request: Request) -> None:
    # These operations take no input; an unexpected field is refused, not ignored.
    if request.data not in ({}, None):
        StrictSerializer.parse(request.data)


class ApiKeysApi(APIView):
    @extend_schema(parameters=PAGE, responses={200: shapes.ApiKeyList})
    def get(self, request: Request) -> Response:
        application = application_of(request, "API key")
        page = selectors.api_key_page(
            application=application,
            cursor=request.query_params.get("cursor"),
            limit=page_limit(request.query_params.get("limit")),
        )
        return Response(
            {
                "apiKeys": [api_key_to_wire(k) for k in page.items],
                "nextCursor": page.next_cursor,
            }
        )

    @extend_schema(request=None, responses={201: shapes.ApiKeyCreated})
    def post(self, request: Request) -> Response:
        application = application_of(request, "API key")
        _no_body(request)
        key, raw = services.api_key_issue(application=application)
        return Response({**api_key_to_wire(key), "key": raw}, status=status.HTTP_201_CREATED)


class ApiKeyRevokeApi(APIView):
    @extend_schema(request=None, responses={200: shapes.ApiKey})
    def post(self, request: Request, key_id: str) -> Response:
        application = application_of(request, "API key")
        _no_body(request)
        key = selectors.api_key_get(application=application, key_id=key_id)
        # keep_one_active: a key may revoke itself, but never the Application's last one.
        key = services.api_key_revoke(api_key=key, keep_one_active=True)
        return Response(api_key_to_wire(key))
