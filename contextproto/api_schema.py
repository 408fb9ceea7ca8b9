"""OpenAPI plumbing for drf-spectacular: the bearer scheme, component names, query parameters,
the one error shape on every operation and the list of error codes in the description.

Settings name `AutoSchema` as DEFAULT_SCHEMA_CLASS, which also imports this module early
enough for the authentication extension to register before any schema is generated.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.drainage import warn
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from contextproto import errors as e
from contextproto.api import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX
from contextproto.errors import ERRORS, HTTP, RUN, TOOL_RESULT, codes_seen_in
from contextproto.protocol import errors as engine
from contextproto.protocol.adapters import PROVIDERS
from contextproto.protocol.messages import (
    DERIVED_FOLD,
    DERIVED_HEADER,
    DERIVED_MASKED,
    DERIVED_RAW,
    DERIVED_STATE,
    DERIVED_SYSTEM,
    ROLE_OF_KIND,
)

API_PREFIX = "/api/v1/"
# (operation id, the codes particular to the operation): what a generated client names the
# call, and what it may answer on top of the common codes below. The contract's tables
# (docs/contract.md §12.2) say the same in prose.
Operation = tuple[str, tuple[str, ...]]
_S = "sessions/{session_id}/"
_CALL = (e.NOT_FOUND, e.NOT_A_PROTOCOL_TOOL, e.TOOL_CALL_ALREADY_ANSWERED)
_ABANDON = (e.NOT_FOUND, e.TOOL_CALL_ANSWERED)
_TOOL = (e.TOOL_NAME_INVALID, e.TOOL_NAME_RESERVED, e.INVALID_INPUT_SCHEMA, e.TOOL_NAME_TAKEN)
_BINDINGS = (e.TOOL_NOT_FOUND, e.MAINTAINER_NOT_FOUND, e.CROSS_APPLICATION_TOOL_FORBIDDEN)
_PAGE = (e.NOT_FOUND, e.INVALID_CURSOR)
_JOB = (
    e.NOT_FOUND,
    e.MAINTENANCE_NOT_PLANNED,
    e.MAINTENANCE_STATE_CHANGED,
    e.MAINTENANCE_JOB_FINISHED,
)
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "protocols/"): ("protocol_list", ()),
    ("GET", "protocols/{protocol_id}/{version}/"): ("protocol_get", (e.NOT_FOUND,)),
    ("POST", "protocols/{protocol_id}/{version}/validate/"): (
        "protocol_options_validate",
        (e.NOT_FOUND,),
    ),
    ("GET", "api-keys/"): ("api_key_list", (e.INVALID_CURSOR,)),
    ("POST", "api-keys/"): ("api_key_create", (e.TOO_MANY_API_KEYS,)),
    ("POST", "api-keys/{key_id}/revoke/"): (
        "api_key_revoke",
        (e.NOT_FOUND, e.LAST_ACTIVE_API_KEY),
    ),
    ("GET", "tools/"): ("tool_list", (e.INVALID_CURSOR,)),
    ("POST", "tools/"): ("tool_register", _TOOL),
    ("GET", "tools/{tool_id}/"): ("tool_get", (e.NOT_FOUND,)),
    ("PATCH", "tools/{tool_id}/"): ("tool_update", (e.NOT_FOUND, *_TOOL, e.TOOL_IN_USE)),
    ("DELETE", "tools/{tool_id}/"): ("tool_delete", (e.NOT_FOUND, e.TOOL_IN_USE)),
    ("GET", "gateway-settings/"): ("gateway_settings_get", ()),
    ("PUT", "gateway-settings/"): ("gateway_settings_put", (e.GATEWAY_SETTINGS_INVALID,)),
    ("GET", "agents/"): ("agent_list", ()),
    ("POST", "agents/"): ("agent_create", (e.AGENT_NAME_TAKEN,)),
    ("POST", "agents/{agent_id}/versions/"): (
        "agent_version_create",
        (e.NOT_FOUND, *_BINDINGS),
    ),
    ("GET", "agent-versions/{version_id}/"): ("agent_version_get", (e.NOT_FOUND,)),
    ("PATCH", "agent-versions/{version_id}/"): (
        "agent_version_update",
        (e.NOT_FOUND, e.AGENT_VERSION_IMMUTABLE, *_BINDINGS),
    ),
    ("POST", "agent-versions/{version_id}/publish/"): (
        "agent_version_publish",
        (e.NOT_FOUND, e.AGENT_VERSION_INVALID, e.AGENT_VERSION_IMMUTABLE),
    ),
    ("POST", "agent-versions/{version_id}/duplicate/"): (
        "agent_version_duplicate",
        (e.NOT_FOUND,),
    ),
    ("POST", "agent-versions/{version_id}/archive/"): (
        "agent_version_archive",
        (e.NOT_FOUND, e.AGENT_VERSION_NOT_PUBLISHED),
    ),
    ("POST", "sessions/"): (
        "session_create",
        (e.NOT_FOUND, e.AGENT_VERSION_NOT_PUBLISHED, e.AGENT_VERSION_ARCHIVED),
    ),
    ("GET", _S): ("session_get", (e.NOT_FOUND,)),
    ("GET", "gateway-conversations/{conversation_id}/"): (
        "gateway_conversation_get",
        (e.NOT_FOUND,),
    ),
    ("POST", _S + "session-key/rotate/"): ("session_key_rotate", (e.NOT_FOUND,)),
    ("POST", _S + "session-key/revoke/"): ("session_key_revoke", (e.NOT_FOUND,)),
    ("POST", _S + "inputs/"): (
        "session_input_create",
        (e.NOT_FOUND, e.CONTENT_INVALID, e.SESSION_BUSY, e.CLIENT_MESSAGE_ID_REUSED),
    ),
    ("POST", _S + "messages/"): (
        "message_create",
        (
            e.NOT_FOUND,
            e.MESSAGE_KIND_INVALID,
            e.MESSAGE_KIND_NOT_WRITABLE,
            e.MESSAGE_ROLE_MISMATCH,
            e.CONTENT_INVALID,
            e.TOOL_CALL_INCOMPLETE,
            e.TOOL_CALL_ID_INVALID,
            e.ARGUMENTS_INVALID,
            e.SNAPSHOT_REQUIRED,
            e.SNAPSHOT_NOT_FOUND,
            e.TOOL_CALL_DUPLICATE,
            e.TOOL_CALL_NOT_FOUND,
            e.TOOL_CALL_ALREADY_ANSWERED,
            e.PROTOCOL_TOOL_RESULT_FORBIDDEN,
            e.CLIENT_MESSAGE_ID_REUSED,
        ),
    ),
    ("GET", _S + "messages/"): ("message_list", (e.NOT_FOUND,)),
    ("POST", _S + "projection/"): (
        "projection_create",
        (
            e.NOT_FOUND,
            e.RUN_NOT_FOUND,
            engine.PAIRING_VIOLATION,
            engine.PROJECTION_FOLD_CONFLICT,
            e.CONTEXT_CAPACITY_EXCEEDED,
        ),
    ),
    ("GET", _S + "tools/"): ("session_tool_list", (e.NOT_FOUND,)),
    ("POST", _S + "tool-calls/dispatch/"): ("tool_call_dispatch_from_body", _CALL),
    ("POST", _S + "tool-calls/{tool_call_id}/dispatch/"): ("tool_call_dispatch", _CALL),
    ("POST", _S + "tool-calls/abandon/"): ("tool_call_abandon_from_body", _ABANDON),
    ("POST", _S + "tool-calls/{tool_call_id}/abandon/"): ("tool_call_abandon", _ABANDON),
    ("POST", _S + "turns/"): (
        "turn_record",
        (
            e.NOT_FOUND,
            e.SNAPSHOT_NOT_FOUND,
            e.ANSWER_SHAPE_UNKNOWN,
            e.ANSWER_INVALID,
            e.TOOL_CALL_ID_INVALID,
            engine.USAGE_INVALID,
            e.SNAPSHOT_ALREADY_ANSWERED,
            e.USAGE_ALREADY_REPORTED,
        ),
    ),
    ("POST", _S + "snapshots/{snapshot_id}/usage/"): (
        "snapshot_usage_report",
        (e.NOT_FOUND, engine.USAGE_INVALID, e.USAGE_ALREADY_REPORTED),
    ),
    ("GET", _S + "windows/"): ("window_list", _PAGE),
    ("GET", _S + "folds/"): ("fold_list", _PAGE),
    ("GET", _S + "snapshots/"): ("snapshot_list", _PAGE),
    ("GET", _S + "snapshots/{snapshot_id}/"): ("snapshot_retrieve", (e.NOT_FOUND,)),
    ("GET", _S + "kv/"): (
        "kv_list",
        (*_PAGE, e.REVISION_OUT_OF_RANGE, e.REVISION_NOT_RECORDED),
    ),
    ("POST", _S + "fork/"): (
        "session_fork",
        (
            e.NOT_FOUND,
            e.AGENT_VERSION_NOT_PUBLISHED,
            e.FORK_BOUND_OUT_OF_RANGE,
            e.FORK_PROTOCOL_INCOMPATIBLE,
            e.FORK_AGENT_MISMATCH,
        ),
    ),
    ("GET", _S + "maintenance/"): ("maintenance_job_list", (e.NOT_FOUND,)),
    ("POST", _S + "windows/{window_id}/maintenance/"): (
        "maintenance_request",
        (e.NOT_FOUND, e.MAINTAINER_NOT_BOUND),
    ),
    ("POST", _S + "windows/{window_id}/maintenance/plan/"): (
        "maintenance_plan",
        (
            e.NOT_FOUND,
            engine.MAINTENANCE_BOUNDARY_INVALID,
            engine.MAINTENANCE_NOTHING_TO_COMPRESS,
            e.MAINTENANCE_BUSY,
        ),
    ),
    ("GET", _S + "windows/{window_id}/maintenance/{job_id}/pages/{page}/"): (
        "maintenance_page_get",
        (*_JOB, e.MAINTENANCE_PAGE_OUT_OF_RANGE),
    ),
    ("POST", _S + "windows/{window_id}/maintenance/{job_id}/commit/"): (
        "maintenance_commit",
        (*_JOB, engine.CHECKPOINT_INVALID, engine.CHECKPOINT_EMPTY, engine.CHECKPOINT_TOO_LONG),
    ),
    ("GET", "health/"): ("health_get", ()),
    ("GET", "health/live/"): ("health_live", ()),
    ("GET", "health/ready/"): ("health_ready", ()),
}
# Answered without a credential.
PUBLIC_OPERATIONS = {("GET", "health/"), ("GET", "health/live/"), ("GET", "health/ready/")}
# What any request may meet: a Host header the service does not serve, a NUL in the path or
# query, a bad list parameter, a defect, the database or Redis down.
COMMON_CODES = (
    e.HOST_NOT_ALLOWED,
    e.UNSUPPORTED_CHARACTER,
    e.INVALID_REQUEST,
    e.INTERNAL_ERROR,
    e.DEPENDENCY_UNAVAILABLE,
)
# A key outside its reach (a session key on an application path, another Application's
# object) meets 404, as if the object did not exist.
AUTHENTICATED_CODES = (e.NOT_AUTHENTICATED, e.RATE_LIMITED, e.NOT_FOUND)
# What a request with a body may meet on top (contract §12: bodies are bounded and checked).
BODY_CODES = (
    e.MALFORMED_JSON,
    e.UNSUPPORTED_MEDIA_TYPE,
    e.NON_FINITE_NUMBER,
    e.BODY_TOO_DEEP,
    e.REQUEST_TOO_LARGE,
    e.REQUEST_TIMEOUT,
)


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <key>`: an application key or a session key (contract §12)."""

    target_class = "sessions_app.auth.BearerKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An application key (cpa_…) or, for sessions/{id}/…, that "
            "session's key (cps_…).",
        }


# Enums of the schema, named by ENUM_NAME_OVERRIDES (settings) so that generated clients get
# one type per vocabulary, not one per field.
ERROR_CODES = [entry.code for entry in codes_seen_in(HTTP)]
TOOL_RESULT_CODES = [entry.code for entry in codes_seen_in(TOOL_RESULT)]
MESSAGE_ROLES = ["user", "assistant", "tool"]
VIEW_ROLES = ["system", *MESSAGE_ROLES]
MESSAGE_KINDS = list(ROLE_OF_KIND)
WRITABLE_KINDS = [kind for kind in MESSAGE_KINDS if kind != "input"]
DERIVED_TYPES = [
    DERIVED_SYSTEM,
    DERIVED_RAW,
    DERIVED_HEADER,
    DERIVED_FOLD,
    DERIVED_STATE,
    DERIVED_MASKED,
]
VIEW_KINDS = [*MESSAGE_KINDS, DERIVED_SYSTEM, DERIVED_HEADER, DERIVED_FOLD, DERIVED_STATE]
WIRE_FORMATS = list(PROVIDERS)
# Run.Status's values (sessions_app.models; the project base imports no app).
RUN_STATUSES = [
    "queued",
    "running",
    "waiting_for_host_tool",
    "completed",
    "failed",
    "max_turns_reached",
    "external",
]


class ErrorDetail(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=ERROR_CODES,
        help_text="Stable machine code; each operation lists the ones it answers with.",
    )
    message = serializers.CharField(help_text="What went wrong and how to fix it.")
    details = serializers.DictField(help_text="Structured context, e.g. `field`.")


class Error(serializers.Serializer):
    """The one error shape, with the RFC 9457 fields `type`, `title`, `status`."""

    error = ErrorDetail()
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()


ERROR_RESPONSE = OpenApiResponse(
    Error, description="A refusal or failure; `error.code` is one of the API's error codes."
)


class AutoSchema(SpectacularAutoSchema):
    """Operation ids and error responses from OPERATIONS; component names from the views.

    A view's nested `Input` serializer is named after its view: `SessionCreateApi.Input` →
    `SessionCreateInput`, so the many `Input` classes do not collide as one component. Every
    operation lists, per status, the error codes it answers with (the common ones and its
    own), in the one error shape, unless it declares that status itself (health/ready's 503).
    """

    def _operation(self) -> Operation | None:
        return OPERATIONS.get((self.method, self.path.removeprefix(API_PREFIX)))

    def get_operation_id(self) -> str:
        operation = self._operation()
        if operation is None:
            # A default id (`agents_retrieve` for a list) tells a client nothing: name it.
            warn(f"{self.method} {self.path} has no entry in contextproto.api_schema.OPERATIONS")
            return super().get_operation_id()
        return operation[0]

    # `@extend_schema(responses=…)` replaces get_response_serializers in a subclass, so the
    # error responses are added where the response bodies are assembled.
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        bodies = super()._get_response_bodies(direction)
        if direction != "response":
            return bodies
        for status, codes in sorted(self._error_codes().items()):
            key = str(status)
            if key in bodies:
                continue
            listed = ", ".join(f"`{code}`" for code in codes)
            response = self._get_response_for_code(
                OpenApiResponse(Error, description=f"`error.code`: {listed}."), key
            )
            response["x-error-codes"] = codes
            bodies[key] = response
        return bodies

    def _error_codes(self) -> dict[int, list[str]]:
        """status -> the codes this operation answers with, by code."""
        operation = self._operation()
        own = operation[1] if operation is not None else ()
        public = (self.method, self.path.removeprefix(API_PREFIX)) in PUBLIC_OPERATIONS
        codes = set(own) | set(COMMON_CODES)
        if not public:
            codes |= set(AUTHENTICATED_CODES)
        if self.method in ("POST", "PUT", "PATCH"):
            codes |= set(BODY_CODES)
        by_status: dict[int, list[str]] = {}
        for code in sorted(codes):
            by_status.setdefault(ERRORS[code].status, []).append(code)
        return by_status

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
    """(code, HTTP status, meaning) of every HTTP refusal code in the registry, by code."""
    return [(entry.code, entry.status, entry.meaning) for entry in codes_seen_in(HTTP)]


def _rows(entries: list[e.ErrorCode], *, status: bool) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    if status:
        return "\n".join(f"| `{x.code}` | {x.status} | {cell(x.meaning)} |" for x in entries)
    return "\n".join(f"| `{x.code}` | {cell(x.meaning)} |" for x in entries)


def api_description(intro: str) -> str:
    """`intro` followed by the error shape and the tables of codes (Markdown): HTTP refusals
    with their status, then the codes met inside tool results and failed runs, which have
    none (contract §5.2)."""
    return (
        f"{intro}\n\n"
        "## Errors\n\n"
        'Every refusal answers `{"error": {"code", "message", "details"}}` (plus the RFC 9457 '
        "fields `type`, `title` and `status`) with the HTTP status of its code. `code` is "
        "stable; `details` carries structured context such as `field`. Each operation lists "
        "the codes it answers with, per status.\n\n"
        "| code | status | meaning |\n|---|---|---|\n"
        f"{_rows(codes_seen_in(HTTP), status=True)}\n\n"
        "## Codes inside a tool result\n\n"
        "A protocol tool's refusal is data, not an HTTP error: it arrives with status 200 in "
        'a receipt\'s `result`, `{"success": false, "error": {"code", "message", '
        '"correctable", …}}` (over MCP: a tool result with `isError`).\n\n'
        "| code | meaning |\n|---|---|\n"
        f"{_rows(codes_seen_in(TOOL_RESULT), status=False)}\n\n"
        "## Codes of a failed run or maintenance job\n\n"
        "A run of the built-in runtime, or a maintenance job, that fails records one of these "
        "in its `error.code` (or reason); no request answers with them.\n\n"
        "| code | meaning |\n|---|---|\n"
        f"{_rows(codes_seen_in(RUN), status=False)}\n"
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


# Shapes whose named properties are the ones every instance has, followed by others (a tool's
# own result fields, an error's context); a client must keep what it does not know.
OPEN_COMPONENTS = ("ToolResult", "ToolError")


def open_components_hook(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: mark OPEN_COMPONENTS `additionalProperties: true`."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in OPEN_COMPONENTS:
        if name in schemas:
            schemas[name]["additionalProperties"] = True
    return result
