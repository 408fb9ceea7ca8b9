"""Protocol error type and the stable machine codes the engine raises."""

from __future__ import annotations

from typing import Any, TypedDict


class ErrorBody(TypedDict):
    """The `error` object of an API error response (contract §12)."""

    code: str
    message: str
    details: dict[str, Any]


class ProtocolError(Exception):
    """A refusal by the engine: a stable snake_case `code`, a message saying what to fix."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    def as_dict(self) -> ErrorBody:
        return {"code": self.code, "message": self.message, "details": self.details}


# Codes are listed here so callers and docs have one place to look.
PROTOCOL_UNKNOWN = "protocol_unknown"
OPTION_UNKNOWN = "option_unknown"
OPTION_WRONG_TYPE = "option_wrong_type"
OPTION_OUT_OF_RANGE = "option_out_of_range"
OPTION_BAD_ENUM = "option_bad_enum"
OPTIONS_NOT_OBJECT = "options_not_object"
PAIRING_VIOLATION = "projection_pairing_violation"
INTEGRITY_ORPHAN_RESULT = "integrity_orphan_tool_result"

# catalog / options / arguments
INVALID_ARGUMENTS = "invalid_arguments"
TOOL_UNKNOWN = "tool_unknown"

# groups / folds / projection
FOLD_RANGE_INVALID = "context_fold_range_invalid"
FOLD_BELOW_CHECKPOINT = "context_fold_below_checkpoint"
FOLD_ABOVE_BOUND = "context_fold_above_bound"
FOLD_INDEX_NOT_FOUND = "context_fold_index_not_found"
FOLD_OTHER_WINDOW = "context_fold_other_window"
FOLD_PARTIAL_GROUP = "context_fold_partial_group"
FOLD_CONTAINS_USER_INPUT = "context_fold_contains_user_input"
FOLD_UNANSWERED_CALL = "context_fold_unanswered_call"
FOLD_ORPHAN_RESULT = "context_fold_orphan_result"
FOLD_NESTED = "context_fold_nested"
FOLD_OVERLAP = "context_fold_overlap"
FOLD_LIMIT_REACHED = "context_fold_limit_reached"
PROJECTION_FOLD_CONFLICT = "projection_fold_conflict"
PROVIDER_UNKNOWN = "provider_unknown"
CONTEXT_CAPACITY_EXCEEDED = "context_capacity_exceeded"

# model.promptCache (contract §8)
PROMPT_CACHE_NOT_OBJECT = "prompt_cache_not_object"
PROMPT_CACHE_UNKNOWN_KEY = "prompt_cache_unknown_key"
PROMPT_CACHE_INVALID_VALUE = "prompt_cache_invalid_value"

# tools
WINDOW_EXPECTATION_REQUIRED = "context_window_expectation_required"
STATE_STALE = "context_state_stale"
WINDOW_MISMATCH = "context_window_mismatch"
WINDOW_ALREADY_ACTIVE = "context_window_already_active"
WINDOW_EXISTS = "context_window_exists"
WINDOW_NOT_FOUND = "context_window_not_found"
WINDOW_GOAL_REQUIRED = "context_window_goal_required"
WINDOW_LIMIT_REACHED = "context_window_limit_reached"
WINDOW_MAIN_NOT_COMPLETABLE = "context_window_main_not_completable"
WINDOW_RETURN_TO_SELF = "context_window_return_to_self"
WINDOW_RETURN_COMPLETED = "context_window_return_completed"
WINDOW_STATE_INCONSISTENT = "context_window_state_inconsistent"
FOLD_NOT_FOUND = "context_fold_not_found"
FOLD_MESSAGES_MISSING = "context_fold_messages_missing"
MAINTAINER_NOT_BOUND = "context_maintainer_not_bound"
HISTORY_INDEX_OUT_OF_RANGE = "history_index_out_of_range"
HISTORY_MESSAGE_MISSING = "history_message_missing"

# the gateway's reconciliation (contract §14)
GATEWAY_TRANSCRIPT_MISMATCH = "gateway_transcript_mismatch"
# A gateway request body the wire formats cannot take (contract §14).
INVALID_REQUEST = "invalid_request"
GATEWAY_PARAMETER_UNSUPPORTED = "gateway_parameter_unsupported"
GATEWAY_NOTHING_NEW = "gateway_nothing_new"
TOOL_CALL_PENDING = "tool_call_pending"
# A Responses `compaction` item this service did not sign for the Application, or altered.
INVALID_COMPACTION_ITEM = "invalid_compaction_item"

# what hosts send (contract §5.2)
USAGE_INVALID = "usage_invalid"
TOOL_CALL_ID_INVALID = "tool_call_id_invalid"
ANSWER_SHAPE_UNKNOWN = "answer_shape_unknown"
ANSWER_INVALID = "answer_invalid"

# maintenance
MAINTENANCE_NOTHING_TO_COMPRESS = "maintenance_nothing_to_compress"
MAINTENANCE_BOUNDARY_INVALID = "maintenance_boundary_invalid"
MAINTENANCE_PAGE_OUT_OF_RANGE = "maintenance_page_out_of_range"
CHECKPOINT_EMPTY = "checkpoint_empty"
CHECKPOINT_INVALID = "checkpoint_invalid"
CHECKPOINT_TOO_LONG = "checkpoint_too_long"

# The engine's refusals a model cannot fix by calling differently: its tool results say
# `correctable: false` for these and only these. The service registry (contextproto.errors)
# takes each engine code's flag from here.
NOT_CORRECTABLE = frozenset(
    {
        FOLD_LIMIT_REACHED,
        WINDOW_LIMIT_REACHED,
        WINDOW_STATE_INCONSISTENT,
        FOLD_MESSAGES_MISSING,
        MAINTAINER_NOT_BOUND,
        HISTORY_MESSAGE_MISSING,
    }
)


def correctable(code: str) -> bool:
    """Whether an engine refusal with `code` can succeed when the call is made differently."""
    return code not in NOT_CORRECTABLE


# Every code above, for the service registry (contextproto.errors) and the docs.
CODES: tuple[str, ...] = tuple(
    value
    for name, value in list(globals().items())
    if name.isupper() and not name.startswith("_") and isinstance(value, str)
)
