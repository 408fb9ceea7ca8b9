"""The one error type services raise, and the one registry of the codes the API answers with.

Every code a refusal can carry is registered here once, with its HTTP status and what it
means: the services' own codes below, and the engine's codes (contextproto.protocol.errors,
400 unless a service gives one another status here). `ApplicationError` takes its status from
this registry. `ERRORS` (code -> ErrorCode) and `error_catalog()` (a list of plain dicts) are
for the OpenAPI description and the docs; tests/test_error_registry.py checks that every code
the code base raises is in it.

Kept free of Django and DRF imports so the engine side, authentication and services can
import it without cycles.
"""

from __future__ import annotations

from typing import Any, TypedDict

# The registry's machinery lives in error_registry; this module registers the codes and
# re-exports the lookups.
from contextproto.error_registry import ERRORS as ERRORS
from contextproto.error_registry import HTTP, RUN, TOOL_RESULT, status_of
from contextproto.error_registry import ErrorCode as ErrorCode
from contextproto.error_registry import codes_seen_in as codes_seen_in
from contextproto.error_registry import correctable as correctable
from contextproto.error_registry import error_catalog as error_catalog
from contextproto.error_registry import register as _code
from contextproto.error_registry import retryable as retryable
from contextproto.error_registry import tool_error as tool_error
from contextproto.protocol import errors as engine
from contextproto.protocol.errors import ErrorBody, ProtocolError

# ---------------------------------------------------------------- the API's edge
NOT_FOUND = _code("not_found", 404, "No such object for this key, or no such endpoint.")
NOT_AUTHENTICATED = _code("not_authenticated", 401, "No key, or an unknown or revoked key.")
PERMISSION_DENIED = _code("permission_denied", 403, "The key may not do this.")
METHOD_NOT_ALLOWED = _code("method_not_allowed", 405, "The endpoint does not take this method.")
NOT_ACCEPTABLE = _code("not_acceptable", 406, "No representation for the Accept header.")
UNSUPPORTED_MEDIA_TYPE = _code("unsupported_media_type", 415, "The body is not JSON.")
INVALID_REQUEST = _code(engine.INVALID_REQUEST, 400, "The body fails validation; details.errors.")
MALFORMED_JSON = _code("malformed_json", 400, "The body is not valid JSON.")
UNSUPPORTED_CHARACTER = _code(
    "unsupported_character", 400, "A NUL character or a lone surrogate in the body or URL."
)
BODY_TOO_DEEP = _code("body_too_deep", 400, "The JSON body nests deeper than the limit.")
NON_FINITE_NUMBER = _code(
    "non_finite_number", 400, "NaN, Infinity or a number too large for a float (1e999)."
)
REQUEST_TOO_LARGE = _code("request_too_large", 413, "The body exceeds the size limit.")
REQUEST_TIMEOUT = _code(
    "request_timeout", 408, "The request's headers or body did not arrive within the time limit."
)
HOST_NOT_ALLOWED = _code("host_not_allowed", 400, "The Host header names no host this serves.")
INVALID_CURSOR = _code("invalid_cursor", 400, "A list cursor that this service did not issue.")
RATE_LIMITED = _code("rate_limited", 429, "Too many requests for this key; Retry-After.")
DEPENDENCY_UNAVAILABLE = _code(
    "dependency_unavailable", 503, "The database or Redis is down; nothing was written."
)
INTERNAL_ERROR = _code("internal_error", 500, "A defect of the service; see the request id.")

# ---------------------------------------------------------------- applications and agents
TOO_MANY_API_KEYS = _code("too_many_api_keys", 409, "The application has its maximum of keys.")
LAST_ACTIVE_API_KEY = _code("last_active_api_key", 409, "The last active key is not revoked.")
AGENT_NAME_TAKEN = _code("agent_name_taken", 409, "Another agent of the application has it.")
AGENT_VERSION_INVALID = _code(
    "agent_version_invalid", 400, "The version cannot be published; details.errors lists why."
)
AGENT_VERSION_IMMUTABLE = _code(
    "agent_version_immutable", 409, "A published or archived version is not edited."
)
AGENT_VERSION_NOT_PUBLISHED = _code(
    "agent_version_not_published", 400, "Only a published version is archived or starts sessions."
)
AGENT_VERSION_ARCHIVED = _code("agent_version_archived", 409, "It takes no new sessions.")
TOOL_NOT_FOUND = _code("tool_not_found", 400, "A bound tool id that does not exist.")
MAINTAINER_NOT_FOUND = _code("maintainer_not_found", 400, "A maintainer agent id not found.")
CROSS_APPLICATION_TOOL_FORBIDDEN = _code(
    "cross_application_tool_forbidden", 400, "A bound tool or maintainer of another application."
)

# ---------------------------------------------------------------- host tools (contract §11)
TOOL_NAME_TAKEN = _code("tool_name_taken", 409, "Another host tool of the application has it.")
TOOL_NAME_RESERVED = _code(
    "tool_name_reserved", 400, "The name of a protocol tool of some catalog version."
)
TOOL_NAME_INVALID = _code(
    "tool_name_invalid", 400, "A tool name outside 1-64 of a-z, A-Z, 0-9, '_' and '-'."
)
INVALID_INPUT_SCHEMA = _code(
    "invalid_input_schema", 400, "Not a JSON Schema object the runtime checks; details.path."
)
TOOL_IN_USE = _code(
    "tool_in_use", 409, "A published or archived version binds the tool; details.versions."
)

# ---------------------------------------------------------------- messages and runs
MESSAGE_KIND_NOT_WRITABLE = _code(
    "message_kind_not_writable", 400, "User input is POSTed to inputs/, not messages/."
)
MESSAGE_KIND_INVALID = _code("message_kind_invalid", 400, "A kind the host may not write.")
MESSAGE_ROLE_MISMATCH = _code("message_role_mismatch", 400, "The role does not fit the kind.")
CONTENT_INVALID = _code("content_invalid", 400, "Content is not a string or valid parts.")
TOOL_CALL_INCOMPLETE = _code("tool_call_incomplete", 400, "A tool_call without id or name.")
ARGUMENTS_INVALID = _code("arguments_invalid", 400, "A host tool_call's arguments not an object.")
SNAPSHOT_REQUIRED = _code("snapshot_required", 400, "A tool_call needs a snapshot of the session.")
SNAPSHOT_NOT_FOUND = _code(
    "snapshot_not_found", 400, "A snapshotId in a body names no snapshot of the session."
)
TOOL_CALL_DUPLICATE = _code("tool_call_duplicate", 409, "The toolCallId is already recorded.")
TOOL_CALL_NOT_FOUND = _code("tool_call_not_found", 400, "No tool_call with this id here.")
TOOL_CALL_ALREADY_ANSWERED = _code(
    "tool_call_already_answered", 400, "The call already has its result (contract §12.1: a 400)."
)
PROTOCOL_TOOL_RESULT_FORBIDDEN = _code(
    "protocol_tool_result_forbidden", 400, "Results of protocol tools come from dispatch only."
)
CLIENT_MESSAGE_ID_REUSED = _code(
    "client_message_id_reused", 409, "A clientMessageId already used for another write."
)
SESSION_BUSY = _code(
    "session_busy",
    409,
    "A run or a gateway request is working on the session; Retry-After.",
    retryable=True,
)
RUN_NOT_FOUND = _code("run_not_found", 400, "The runId is not a run of this session.")
MODEL_EMPTY_ANSWER = _code(
    "model_empty_answer",
    400,
    "Run failure: the model gave neither text nor a tool call.",
    seen_in=(RUN,),
)
EXPERIMENT_BUDGET_EXHAUSTED = _code(
    "experiment_budget_exhausted",
    400,
    "Run failure: the experiment's token budget is spent.",
    seen_in=(RUN,),
)

# ---------------------------------------------------------------- projection and dispatch
CONTEXT_CAPACITY_EXCEEDED = _code(
    "context_capacity_exceeded",
    422,
    "The view does not fit the model's input budget.",
    seen_in=(HTTP, RUN),
)
NOT_A_PROTOCOL_TOOL = _code(
    "not_a_protocol_tool", 400, "Only protocol tools are dispatched.", seen_in=(HTTP, TOOL_RESULT)
)
TOOL_CALL_ANSWERED = _code(
    "tool_call_answered", 409, "Abandon: the call already has its result; details.abandoned."
)
TOOL_CALL_ID_REUSED = _code(
    "tool_call_id_reused",
    409,
    "A toolCallId already used for another tool or arguments.",
    seen_in=(TOOL_RESULT,),
)
STATE_STALE = _code(
    engine.STATE_STALE,
    409,
    "The KV revision moved (compare-and-set failed).",
    seen_in=(TOOL_RESULT,),
)
STATE_REVISION_INVALID = _code(
    "state_revision_invalid",
    400,
    "MCP _meta.stateRevision: not an integer >= 0, or ahead.",
    seen_in=(TOOL_RESULT,),
)
TOOL_CALL_ID_INVALID = _code(
    engine.TOOL_CALL_ID_INVALID,
    400,
    "A toolCallId (or MCP _meta.toolCallId) outside 1-256 code points or with a control character.",
    seen_in=(HTTP, TOOL_RESULT),
)
KV_KEY_INVALID = _code("kv_key_invalid", 400, "A KV key that is empty, too long or malformed.")
KV_VALUE_TOO_LARGE = _code(
    "kv_value_too_large", 400, "A KV value above the size limit.", seen_in=(HTTP, TOOL_RESULT)
)
KV_KEY_LIMIT_REACHED = _code(
    "kv_key_limit_reached",
    400,
    "The session has its maximum of keys.",
    seen_in=(HTTP, TOOL_RESULT),
    correctable=False,  # the model cannot fix it by writing less
)
USAGE_ALREADY_REPORTED = _code(
    "usage_already_reported", 409, "The snapshot's usage was reported with other values."
)
ANSWER_SHAPE_UNKNOWN = _code(
    engine.ANSWER_SHAPE_UNKNOWN,
    400,
    "A turn's answer is none of the shapes taken (OpenAI completion or message, Anthropic "
    "message, neutral).",
)
ANSWER_INVALID = _code(
    engine.ANSWER_INVALID,
    400,
    "A field of a turn's answer is malformed, or the answer is empty; details.field.",
)
SNAPSHOT_ALREADY_ANSWERED = _code(
    "snapshot_already_answered",
    409,
    "The snapshot already has its model answer (another body); project again for the next turn.",
)
HISTORY_INDEX_OUT_OF_RANGE = _code(
    engine.HISTORY_INDEX_OUT_OF_RANGE,
    400,
    "context_history_read: an index above the frozen upper bound of the call's view.",
    seen_in=(TOOL_RESULT,),
)
HISTORY_MESSAGE_MISSING = _code(
    engine.HISTORY_MESSAGE_MISSING,
    400,
    "context_history_read: a message up to the bound that the log cannot load (a damaged log).",
    seen_in=(TOOL_RESULT,),
)
ARCHIVE_RESTORE_CONFLICT = _code(
    "archive_restore_conflict", 409, "A hot row already holds an index being restored."
)

# ---------------------------------------------------------------- time travel (contract §10)
REVISION_OUT_OF_RANGE = _code(
    "revision_out_of_range", 400, "A revision above the session's current state revision."
)
REVISION_NOT_RECORDED = _code(
    "revision_not_recorded",
    400,
    "A revision older than the session's KV history (sessions started before it existed).",
)
FORK_BOUND_OUT_OF_RANGE = _code(
    "fork_bound_out_of_range", 400, "A fork's throughIndex below 0 or beyond the log."
)
FORK_PROTOCOL_INCOMPATIBLE = _code(
    "fork_protocol_incompatible", 400, "The fork's version keeps state another protocol's way."
)
FORK_AGENT_MISMATCH = _code(
    "fork_agent_mismatch", 400, "The fork's agentVersionId is a version of another Agent."
)
REPLAY_PROTOCOL_INCOMPATIBLE = _code(
    "replay_protocol_incompatible",
    400,
    "A replay target whose protocol keeps state another protocol's way (prefix@2 <-> unified).",
)
REPLAY_OPTIONS_INVALID = _code(
    "replay_options_invalid", 400, "Replay options fail the target schema; details.errors."
)

# ---------------------------------------------------------------- maintenance and nodes
MAINTAINER_NOT_BOUND = _code(
    "maintainer_not_bound", 400, "Built-in maintenance needs a maintainer Agent bound."
)
MAINTENANCE_BUSY = _code("maintenance_busy", 409, "The built-in maintainer works on the window.")
MAINTENANCE_NOT_PLANNED = _code("maintenance_not_planned", 400, "Plan the job first.")
MAINTENANCE_STATE_CHANGED = _code(
    "maintenance_state_changed", 409, "The revision or source hash moved since the plan."
)
MAINTENANCE_JOB_FINISHED = _code(
    "maintenance_job_finished", 409, "The job is finished, expired or taken over."
)
MAINTENANCE_PAGE_OUT_OF_RANGE = _code(
    engine.MAINTENANCE_PAGE_OUT_OF_RANGE, 404, "No such page of the job."
)
PROTOCOL_UNKNOWN_ON_WORKER = _code(
    "protocol_unknown_on_worker",
    409,
    "This node's catalog lacks the protocol version.",
    seen_in=(RUN,),
)

# ---------------------------------------------------------------- results and run failures
# Codes a client sees inside a tool result (`result.error.code`) or a run's / maintenance
# job's `error.code`, never as an HTTP error of their own. The status is the one they would
# answer with were they raised: 400 for what the caller or the model can fix, 502 for a
# model provider that failed upstream, 500 for a defect of ours.
SNAPSHOT_MISSING = _code(
    "snapshot_missing",
    400,
    "Tool result: the call names no projection snapshot.",
    seen_in=(TOOL_RESULT,),
)
SINGLE_TOOL_CALL_PER_TURN = _code(
    "single_tool_call_per_turn",
    400,
    "Tool result: a later call of one model answer.",
    seen_in=(TOOL_RESULT,),
)
TOOL_CALL_ABANDONED = _code(
    "tool_call_abandoned",
    400,
    "Tool result: the host abandoned the call (its result is lost).",
    seen_in=(TOOL_RESULT,),
)
TOOL_INTERNAL_ERROR = _code(
    "tool_internal_error",
    500,
    "Tool result: the handler failed inside the service.",
    seen_in=(TOOL_RESULT,),
)
TOOL_NOT_AVAILABLE = _code(
    "tool_not_available",
    400,
    "Tool result: the model called a tool the agent does not bind.",
    seen_in=(TOOL_RESULT,),
)
MAX_TURNS_REACHED = _code(
    "max_turns_reached",
    422,
    "Run stop: the run used its maxTurnsPerRun (a gateway request answers it with 422).",
    seen_in=(RUN, HTTP),
)
PROVIDER_INVALID = _code(
    "provider_invalid",
    400,
    "Run failure: the version's model could not be set up.",
    seen_in=(RUN,),
)
PROVIDER_NOT_RUNNABLE = _code(
    "provider_not_runnable",
    400,
    "Run failure: provider 'external' is driven by a host.",
    seen_in=(RUN,),
)
PROVIDER_NOT_CONFIGURED = _code(
    "provider_not_configured",
    400,
    "Run failure: the provider lacks its key or base URL.",
    seen_in=(RUN,),
)
PROVIDER_UNAVAILABLE = _code(
    "provider_unavailable",
    502,
    "Run failure: the model endpoint failed (retried first).",
    seen_in=(RUN,),
)
PROVIDER_RATE_LIMITED = _code(
    "provider_rate_limited",
    502,
    "Run failure: the model endpoint kept answering 429.",
    seen_in=(RUN,),
)
PROVIDER_REQUEST_REJECTED = _code(
    "provider_request_rejected",
    502,
    "Run failure: the model endpoint refused the request.",
    seen_in=(RUN,),
    retryable=False,
)
PROVIDER_RESPONSE_INVALID = _code(
    "provider_response_invalid",
    502,
    "Run failure: an answer of the model that is unreadable.",
    seen_in=(RUN,),
    retryable=False,
)
SCRIPT_INVALID = _code(
    "script_invalid", 400, "Run failure: a malformed scripted-model script.", seen_in=(RUN,)
)
SCRIPT_STEP_REQUIRED = _code(
    "script_step_required",
    400,
    "Run failure: the scripted model was called without a step.",
    seen_in=(RUN,),
)
SCRIPT_EXHAUSTED = _code(
    "script_exhausted", 400, "Run failure: the script has no step left.", seen_in=(RUN,)
)
SCRIPT_EXPECTATION_FAILED = _code(
    "script_expectation_failed",
    400,
    "Run failure: a script step's expectation on the view failed.",
    seen_in=(RUN,),
)

# ---------------------------------------------------------------- the gateway (contract §14)
GATEWAY_MODEL_NOT_FOUND = _code(
    "gateway_model_not_found",
    404,
    "`model` names no published version of the Application, and no model alias takes it.",
)
GATEWAY_SETTINGS_INVALID = _code(
    "gateway_settings_invalid",
    400,
    "Gateway settings (model aliases, side models) refused; details.errors lists why.",
)
GATEWAY_MODEL_NOT_RUNNABLE = _code(
    "gateway_model_not_runnable", 400, "The version's model is `external`: a host drives it."
)
GATEWAY_SYSTEM_NOT_ACCEPTED = _code(
    "gateway_system_not_accepted", 400, "System text for a prompt without {{client_system}}."
)
GATEWAY_PARAMETER_UNSUPPORTED = _code(
    engine.GATEWAY_PARAMETER_UNSUPPORTED, 400, "A request field the gateway cannot honour (n, any)."
)
GATEWAY_TRANSCRIPT_MISMATCH = _code(
    engine.GATEWAY_TRANSCRIPT_MISMATCH, 409, "The messages do not continue the session."
)
TOOL_CALL_PENDING = _code(
    engine.TOOL_CALL_PENDING, 409, "A user message while a client tool call awaits its result."
)
GATEWAY_NOTHING_NEW = _code(
    engine.GATEWAY_NOTHING_NEW, 400, "The messages end with the session's last reply."
)
IDEMPOTENCY_KEY_REUSED = _code(
    "idempotency_key_reused", 409, "An Idempotency-Key used before with another body."
)
GATEWAY_UPSTREAM_UNAUTHORIZED = _code(
    "gateway_upstream_unauthorized", 401, "The upstream provider refused the key."
)
GATEWAY_UPSTREAM_RATE_LIMITED = _code(
    "gateway_upstream_rate_limited", 429, "The upstream provider rate-limited the call."
)
GATEWAY_UPSTREAM_REJECTED = _code(
    "gateway_upstream_rejected", 400, "The upstream provider refused the request (a 4xx)."
)
GATEWAY_CLIENT_DISCONNECTED = _code(
    "gateway_client_disconnected",
    499,
    "Record only: the client went away before its reply; the unfinished turn left nothing.",
    retryable=True,
)
GATEWAY_UPSTREAM_FAILED = _code(
    "gateway_upstream_failed", 502, "The upstream failed: a 5xx, no connection, an unreadable body."
)
GATEWAY_UPSTREAM_TIMEOUT = _code(
    "gateway_upstream_timeout", 504, "No upstream answer within GATEWAY_UPSTREAM_TIMEOUT_SECONDS."
)
# The Responses API (contract §21).
PREVIOUS_RESPONSE_NOT_FOUND = _code(
    "previous_response_not_found",
    404,
    "previous_response_id names no stored response of the Application (unknown, another "
    "Application's, deleted, or sent with store: false).",
)
RESPONSE_NOT_FOUND = _code(
    "response_not_found",
    404,
    "No stored response of the Application has this id (unknown, deleted, or store: false).",
)
INVALID_COMPACTION_ITEM = _code(
    engine.INVALID_COMPACTION_ITEM,
    400,
    "A compaction item this service did not sign for the Application, or altered.",
)

# ---------------------------------------------------------------- the engine's codes
# Refusals of the engine reach the API through ApplicationError.from_protocol or as a
# ProtocolError (both 400); the ones given another status above keep it.
# The engine's tool refusals reach a client only inside a tool result (a receipt, an MCP tool
# error, the built-in runtime's answer to the model); its other refusals are HTTP 400s.
ENGINE_TOOL_RESULT_CODES = frozenset(
    {
        engine.INVALID_ARGUMENTS,
        engine.TOOL_UNKNOWN,
        engine.WINDOW_EXPECTATION_REQUIRED,
        engine.WINDOW_MISMATCH,
        engine.WINDOW_ALREADY_ACTIVE,
        engine.WINDOW_EXISTS,
        engine.WINDOW_NOT_FOUND,
        engine.WINDOW_GOAL_REQUIRED,
        engine.WINDOW_LIMIT_REACHED,
        engine.WINDOW_MAIN_NOT_COMPLETABLE,
        engine.WINDOW_RETURN_TO_SELF,
        engine.WINDOW_RETURN_COMPLETED,
        engine.WINDOW_STATE_INCONSISTENT,
        engine.FOLD_NOT_FOUND,
        engine.FOLD_MESSAGES_MISSING,
        engine.MAINTAINER_NOT_BOUND,
        *(code for code in engine.CODES if code.startswith("context_fold_")),
    }
)
for _engine_code in engine.CODES:
    if _engine_code not in ERRORS:
        if _engine_code in ENGINE_TOOL_RESULT_CODES:
            _code(
                _engine_code,
                400,
                "Tool result: a refusal of the engine's tool rules (contextproto.protocol).",
                seen_in=(TOOL_RESULT,),
            )
        else:
            _code(_engine_code, 400, "A refusal of the engine (contextproto.protocol.errors).")
PROVIDER_UNKNOWN = engine.PROVIDER_UNKNOWN
PROTOCOL_UNKNOWN = engine.PROTOCOL_UNKNOWN


class ApplicationError(Exception):
    """A refusal by a service: a registered `code`, a message saying what to fix.

    The HTTP status is the registry's for the code; `status` is only for callers outside
    this repository's services that still pass one (tests check it equals the registry's).
    """

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status if status is not None else status_of(code)

    @classmethod
    def from_protocol(cls, exc: ProtocolError) -> ApplicationError:
        return cls(exc.code, exc.message, exc.details)


class NotFound(ApplicationError):
    def __init__(self, what: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(NOT_FOUND, f"{what} not found.", details)


class ErrorResponseBody(TypedDict):
    """Every API error's JSON: `error` (contract §12) and the RFC 9457 problem fields."""

    error: ErrorBody
    type: str
    title: str
    status: int


def error_body(
    code: str, message: str, status: int, details: dict[str, Any] | None = None
) -> ErrorResponseBody:
    """The one error shape (contract §12), with the RFC 9457 fields."""
    return {
        "error": {"code": code, "message": message, "details": details or {}},
        "type": f"about:blank#{code}",
        "title": code.replace("_", " "),
        "status": status,
    }
