"""A gateway request before the service runs (contract §14): its key, its body, its wire.

Small stages with one exception type: each refuses with `Refused` (carrying the registered
error and, once known, the Application), which the edge renders in the client's wire and
records. What passes is an `Incoming`, the frozen value the next stage takes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from agents.models import Application
from contextproto.errors import (
    BODY_TOO_DEEP,
    INVALID_REQUEST,
    MALFORMED_JSON,
    NOT_AUTHENTICATED,
    REQUEST_TOO_LARGE,
    ApplicationError,
)
from contextproto.parsers import check_storable
from contextproto.protocol.gateway.conversations import (
    ConversationHeaderInvalid,
    ConversationRef,
    conversation_of,
)
from contextproto.protocol.gateway.wire import ClientWire, GatewayRequest, WireError
from sessions_app.auth import credential_for_key
from sessions_app.gateway.references import with_references_resolved

SESSION_HEADER = "X-Contextproto-Session"
SESSION_KEY_HEADER = "X-Contextproto-Session-Key"
UPSTREAM_KEY_HEADER = "X-Contextproto-Upstream-Key"
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255
USER_AGENT_MAX = 256


class Refused(Exception):
    """A request the gateway answers with an error: the registered `error`, and the
    Application once the key named it (so the refusal is counted as that Application's)."""

    def __init__(self, error: ApplicationError, application: Application | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.application = application


@dataclass(frozen=True)
class Caller:
    """Who sent the request: the key's Application and, for a session key, its session."""

    application: Application
    session_key_of: UUID | None


@dataclass(frozen=True)
class Incoming:
    """A request the gateway can serve: who sent it, what it asks, in which wire."""

    wire: ClientWire
    application: Application
    request: GatewayRequest
    body_hash: str
    # The session a session key names, or the one X-Contextproto-Session names (with an
    # application key): at most one of the two.
    session_key_of: UUID | None
    named_session: str | None
    idempotency_key: str | None
    # The client's provider key for this request's model calls: never stored or logged.
    upstream_key: str | None = None
    user_agent: str = ""
    # The request's headers, lower-cased names.
    headers: Mapping[str, str] = ()  # type: ignore[assignment]
    # The conversation id the client sends on its own (an application key's request).
    conversation: ConversationRef | None = None


def key_of(request: HttpRequest) -> str | None:
    """The key a request carries: `Authorization: Bearer <key>` or `x-api-key: <key>`."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def caller_of(request: HttpRequest) -> Caller:
    """The key's Application and, for a session key, its session (401 otherwise)."""
    raw = key_of(request)
    credential = credential_for_key(raw) if raw else None
    if credential is None:
        raise Refused(
            ApplicationError(
                NOT_AUTHENTICATED,
                "Send an application key or a session key as 'Authorization: Bearer <key>' "
                "or 'x-api-key: <key>'."
                if raw is None
                else "Unknown or revoked key.",
            )
        )
    return Caller(credential.application, credential.session_id)


def body_of(request: HttpRequest) -> Any:
    """The JSON body, refused when too large, not JSON, too deep or not storable."""
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise Refused(
            ApplicationError(
                REQUEST_TOO_LARGE,
                f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; send "
                "fewer or shorter messages (the session keeps the history: a client may send "
                "only the new ones).",
            )
        ) from exc
    try:
        body = json.loads(raw)
    except RecursionError as exc:
        raise Refused(ApplicationError(BODY_TOO_DEEP, "The JSON body nests too deeply.")) from exc
    except ValueError as exc:
        raise Refused(
            ApplicationError(MALFORMED_JSON, f"The body is not valid JSON: {exc}.")
        ) from exc
    try:
        check_storable(body)
    except ApplicationError as exc:
        raise Refused(exc) from exc
    return body


def request_hash(body: Any) -> str:
    """The identity of a request body (key order does not count): an identical request in
    flight, an Idempotency-Key used again."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def idempotency_key_of(request: HttpRequest) -> str | None:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None and not 0 < len(key) <= IDEMPOTENCY_KEY_MAX:
        raise Refused(
            ApplicationError(
                INVALID_REQUEST,
                f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters.",
                {"field": IDEMPOTENCY_HEADER},
            )
        )
    return key


def read_incoming(request: HttpRequest, wire: ClientWire) -> Incoming:
    """Every check before the service runs, in order: key, body, the wire's parse, headers."""
    caller = caller_of(request)
    try:
        body = body_of(request)
        try:
            parsed = wire.parse(with_references_resolved(wire, body, caller.application))
        except WireError as exc:
            # Computed: the wire modules raise INVALID_REQUEST or GATEWAY_PARAMETER_UNSUPPORTED.
            raise Refused(ApplicationError(exc.code, exc.message, exc.details)) from exc
        idempotency_key = idempotency_key_of(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        conversation = conversation_in(headers) if caller.session_key_of is None else None
    except Refused as refused:
        raise Refused(refused.error, caller.application) from refused
    named = request.headers.get(SESSION_HEADER) if caller.session_key_of is None else None
    return Incoming(
        wire=wire,
        application=caller.application,
        request=parsed,
        body_hash=request_hash(body),
        session_key_of=caller.session_key_of,
        named_session=named,
        idempotency_key=idempotency_key,
        upstream_key=request.headers.get(UPSTREAM_KEY_HEADER) or None,
        user_agent=request.headers.get("User-Agent", "")[:USER_AGENT_MAX],
        headers=headers,
        conversation=conversation,
    )


def conversation_in(headers: Mapping[str, str]) -> ConversationRef | None:
    try:
        return conversation_of(headers)
    except ConversationHeaderInvalid as exc:
        raise Refused(ApplicationError(INVALID_REQUEST, str(exc), {"field": exc.header})) from exc
