"""The error registry's machinery: one entry per code (status, meaning, where a client meets
it, whether it is correctable) and the lookups. The codes themselves are registered in
contextproto.errors, which re-exports all of this; import from there.

Kept free of Django and DRF imports, like contextproto.errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextproto.protocol import errors as engine
from contextproto.protocol.tool_results import ToolFailure, tool_failure

# Where a code reaches a client: as an HTTP refusal's `error.code`, inside a tool result
# (`result.error.code` of a 200 receipt, or an MCP tool error), or as a run's / maintenance
# job's failure. The OpenAPI description lists the three apart (contract §5.2).
HTTP = "http"
TOOL_RESULT = "tool_result"
RUN = "run"
_HTTP_ONLY = frozenset({HTTP})


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    meaning: str
    seen_in: frozenset[str] = _HTTP_ONLY
    # Whether the caller can succeed by calling differently: a tool result's, an MCP tool
    # error's `error.correctable` is this flag, on every path.
    correctable: bool = True
    # Whether the same request, sent again later, may succeed (a busy session, a rate limit,
    # an upstream or dependency failure): a gateway reply says `Retry-After` for it, and a
    # 4xx that is not retryable says `x-should-retry: false`, which the official SDKs obey
    # before their own status rules (contract §14).
    retryable: bool = False


ERRORS: dict[str, ErrorCode] = {}


def register(
    code: str,
    status: int,
    meaning: str,
    *,
    seen_in: tuple[str, ...] = (HTTP,),
    correctable: bool | None = None,
    retryable: bool | None = None,
) -> str:
    """Register `code`. Unless given, `correctable` is the engine's for its codes
    (`engine.NOT_CORRECTABLE`), else follows the status: a 4xx other than a refused key
    (401, 403) or a missing object (404) names something the caller can fix. Unless given,
    `retryable` follows the status: 408, 429 and 5xx."""
    if code in ERRORS:
        raise ValueError(f"error code {code} is registered twice")
    if correctable is None and code in engine.CODES:
        correctable = engine.correctable(code)
    elif correctable is None:
        correctable = 400 <= status < 500 and status not in (401, 403, 404)
    if retryable is None:
        retryable = status in (408, 429) or status >= 500
    ERRORS[code] = ErrorCode(code, status, meaning, frozenset(seen_in), correctable, retryable)
    return code


def codes_seen_in(where: str) -> list[ErrorCode]:
    """The registered codes a client meets `where` (HTTP, TOOL_RESULT, RUN), by code."""
    return sorted((e for e in ERRORS.values() if where in e.seen_in), key=lambda e: e.code)


def error_catalog() -> list[dict[str, Any]]:
    """Every registered code as `{code, status, meaning}`, by status then code (for the schema)."""
    return [
        {"code": e.code, "status": e.status, "meaning": e.meaning}
        for e in sorted(ERRORS.values(), key=lambda e: (e.status, e.code))
    ]


def status_of(code: str) -> int:
    """The HTTP status of a registered code (400 for an unregistered one, which a test bans)."""
    entry = ERRORS.get(code)
    return entry.status if entry is not None else 400


def correctable(code: str) -> bool:
    """The registry's `correctable` flag of `code` (False for an unregistered one)."""
    entry = ERRORS.get(code)
    return entry is not None and entry.correctable


def retryable(code: str) -> bool:
    """The registry's `retryable` flag of `code` (False for an unregistered one)."""
    entry = ERRORS.get(code)
    return entry is not None and entry.retryable


def tool_error(code: str, message: str, details: dict[str, Any] | None = None) -> ToolFailure:
    """A tool's refusal result with the registry's `correctable` for `code` (any path: a
    receipt, an MCP tool error, the runtime's or the gateway's answer to the model)."""
    return tool_failure(code, message, correctable=correctable(code), details=details)
