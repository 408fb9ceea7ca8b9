"""OpenAPI plumbing for drf-spectacular: the bearer scheme, component names, query parameters.

Settings name `AutoSchema` as DEFAULT_SCHEMA_CLASS, which also imports this module early
enough for the authentication extension to register before any schema is generated.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from contextproto.api import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <key>`: an application key or a session key (SPEC §9)."""

    target_class = "contextproto.api.BearerKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An application key (cpa_…) or, for sessions/{id}/…, that "
            "session's key (cps_…).",
        }


class AutoSchema(SpectacularAutoSchema):
    """Name a view's nested `Input` serializer after its view: `SessionCreateApi.Input` →
    `SessionCreateInput`, so the many `Input` classes do not collide as one component."""

    def get_serializer_name(self, serializer: serializers.Serializer, direction: Any) -> str:
        outer, _, inner = type(serializer).__qualname__.rpartition(".")
        if not outer:
            return super().get_serializer_name(serializer, direction)
        return outer.rpartition(".")[2].removesuffix("Api") + inner


# Query parameters, declared on the operations that read them.
LIMIT = OpenApiParameter(
    "limit",
    OpenApiTypes.INT,
    OpenApiParameter.QUERY,
    description=f"Page size, 1..{PAGE_LIMIT_MAX} (default {PAGE_LIMIT_DEFAULT}).",
)
CURSOR = OpenApiParameter(
    "cursor",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="`nextCursor` of the previous page, as is; leave out for the first page.",
)
AFTER_INDEX = OpenApiParameter(
    "afterIndex",
    OpenApiTypes.INT,
    OpenApiParameter.QUERY,
    description="Only messages with a larger MessageIndex (default 0).",
)
WINDOW = OpenApiParameter(
    "window", OpenApiTypes.STR, OpenApiParameter.QUERY, description="Only this window's messages."
)
PREFIX = OpenApiParameter(
    "prefix", OpenApiTypes.STR, OpenApiParameter.QUERY, description="Only keys with this prefix."
)
PAGE = [CURSOR, LIMIT]
