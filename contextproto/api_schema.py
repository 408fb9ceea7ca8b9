"""OpenAPI plumbing for drf-spectacular: the bearer scheme, component names, query parameters,
the one error shape on every operation and the list of error codes in the description.

Settings name `AutoSchema` as DEFAULT_SCHEMA_CLASS, which also imports this module early
enough for the authentication extension to register before any schema is generated.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from contextproto.api import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX
from contextproto.errors import ERRORS


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <key>`: an application key or a session key (SPEC §9)."""

    target_class = "sessions_app.auth.BearerKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An application key (cpa_…) or, for sessions/{id}/…, that "
            "session's key (cps_…).",
        }


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine code (listed in the description).")
    message = serializers.CharField(help_text="What went wrong and how to fix it.")
    details = serializers.DictField(help_text="Structured context, e.g. `field`.")


class Error(serializers.Serializer):
    """The one error shape (SPEC §9), with the RFC 9457 fields `type`, `title`, `status`."""

    error = ErrorDetail()
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()


ERROR_RESPONSE = OpenApiResponse(
    Error, description="A refusal or failure; `error.code` is one of the API's error codes."
)


class AutoSchema(SpectacularAutoSchema):
    """Name a view's nested `Input` serializer after its view: `SessionCreateApi.Input` →
    `SessionCreateInput`, so the many `Input` classes do not collide as one component.

    Every operation also answers its errors in the one shape: `4XX` and `5XX` responses
    state it, unless the operation declares that status itself (health/ready's 503).
    """

    # `@extend_schema(responses=…)` replaces get_response_serializers in a subclass, so the
    # error responses are added where the response bodies are assembled.
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        bodies = super()._get_response_bodies(direction)
        for code in ("4XX", "5XX"):
            bodies.setdefault(code, self._get_response_for_code(ERROR_RESPONSE, code))
        return bodies

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
REVISION = OpenApiParameter(
    "revision",
    OpenApiTypes.INT,
    OpenApiParameter.QUERY,
    description="Read the state as it was at this state revision (0 up to the current one); "
    "leave out for the current state.",
)
PAGE = [CURSOR, LIMIT]


# ---------------------------------------------------------------- error codes


def error_codes() -> list[tuple[str, int, str]]:
    """(code, HTTP status, meaning) of every code in the registry (contextproto.errors), by code."""
    return sorted((entry.code, entry.status, entry.meaning) for entry in ERRORS.values())


def api_description(intro: str) -> str:
    """`intro` followed by the error shape and the table of error codes (Markdown)."""
    rows = "\n".join(
        f"| `{code}` | {status} | {meaning.replace('|', '\\|')} |"
        for code, status, meaning in error_codes()
    )
    return (
        f"{intro}\n\n"
        "## Errors\n\n"
        'Every refusal answers `{"error": {"code", "message", "details"}}` (plus the RFC 9457 '
        "fields `type`, `title` and `status`) with the HTTP status of its code. `code` is "
        "stable; `details` carries structured context such as `field`.\n\n"
        "| code | status | meaning |\n|---|---|---|\n"
        f"{rows}\n"
    )


def error_codes_hook(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: end `info.description` with the error codes.

    A hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]) rather than a view setting, so the
    served schema (/api/v1/schema/) and `manage.py spectacular` describe the same codes.
    """
    info = result.setdefault("info", {})
    info["description"] = api_description(info.get("description", ""))
    return result
