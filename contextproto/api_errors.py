"""The one error type of the services and the one JSON error shape of the API.

Every refusal renders as `{"error": {"code", "message", "details"}}` (plus the RFC 9457
fields `type`, `title` and `status`, which clients may ignore).
"""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404
from django_redis.exceptions import ConnectionInterrupted
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import RedisError
from rest_framework import exceptions as drf_exceptions
from rest_framework import status as http_status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from contextproto.errors import (
    DEPENDENCY_UNAVAILABLE,
    INVALID_REQUEST,
    MALFORMED_JSON,
    NOT_AUTHENTICATED,
    NOT_FOUND,
    RATE_LIMITED,
    REQUEST_TOO_LARGE,
    ApplicationError,
    NotFound,
    error_body,
    status_of,
)
from contextproto.middleware import internal_error_body, request_id_of
from contextproto.protocol.errors import ProtocolError

__all__ = ["ApplicationError", "NotFound", "api_exception_handler", "error_response"]

logger = logging.getLogger("contextproto.api")
BEARER_CHALLENGE = 'Bearer realm="api"'


def error_response(
    code: str, message: str, status: int, details: dict[str, Any] | None = None
) -> Response:
    response = Response(error_body(code, message, status, details), status=status)
    if status == 401:
        # RFC 9110 §11.6.1: a 401 names its challenge. DRF sets it on the response its own
        # handler builds, not on ours; keep it equal to BearerKeyAuthentication's.
        response["WWW-Authenticate"] = BEARER_CHALLENGE
    return response


def _flatten_validation(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """Turn DRF's nested validation errors into `[{field, code, message}]`."""
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":
                name = prefix or "body"
            out.extend(_flatten_validation(value, name))
        return out
    if isinstance(detail, list):
        out = []
        for position, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                out.extend(_flatten_validation(value, f"{prefix}[{position}]"))
            else:
                out.extend(_flatten_validation(value, prefix))
        return out
    code = getattr(detail, "code", "invalid") or "invalid"
    return [{"field": prefix or "body", "code": str(code), "message": str(detail)}]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Render every API error in the one shape; never let a known refusal become a 500."""
    if isinstance(exc, ApplicationError):
        return error_response(exc.code, exc.message, exc.status, exc.details)
    if isinstance(exc, ProtocolError):
        # The engine's codes are registered too, most with 400; the registry's status wins.
        return error_response(exc.code, exc.message, status_of(exc.code), exc.details)
    if isinstance(exc, RequestDataTooBig):
        return error_response(
            REQUEST_TOO_LARGE,
            "The request body exceeds the size limit; send less data per request.",
            http_status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, drf_exceptions.Throttled):
        # DRF sets `wait` (seconds, or None); djangorestframework-stubs does not declare it.
        wait = max(1, math.ceil(exc.wait or 1))  # type: ignore[attr-defined]
        response = error_response(
            RATE_LIMITED,
            f"Too many requests for this key; retry in {wait} s.",
            http_status.HTTP_429_TOO_MANY_REQUESTS,
            {"retryAfterSeconds": wait},
        )
        response["Retry-After"] = str(wait)
        return response
    if isinstance(exc, Http404):
        return error_response(NOT_FOUND, "Not found.", 404)
    if isinstance(exc, drf_exceptions.ValidationError):
        errors = _flatten_validation(exc.detail)
        first = errors[0] if errors else {"field": "body", "message": "Invalid input."}
        return error_response(
            INVALID_REQUEST,
            f"{first['field']}: {first['message']}",
            400,
            {"errors": errors},
        )
    if isinstance(exc, drf_exceptions.ParseError):
        return error_response(MALFORMED_JSON, f"The body is not valid JSON: {exc.detail}", 400)
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        return error_response(
            NOT_AUTHENTICATED,
            "Send 'Authorization: Bearer <key>' with an application key or a session key.",
            401,
        )
    if isinstance(exc, drf_exceptions.APIException):
        drf_response = drf_exception_handler(exc, context)
        status = drf_response.status_code if drf_response is not None else exc.status_code
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return error_response(str(code), str(exc.detail), status)
    if isinstance(exc, OperationalError | InterfaceError):
        # The database is unreachable or the connection died: nothing was committed, and
        # the same request can be sent again once it is back.
        logger.warning("database unavailable: %s", exc)
        return error_response(
            DEPENDENCY_UNAVAILABLE,
            "The database is unavailable; nothing was written. Retry the same request later.",
            http_status.HTTP_503_SERVICE_UNAVAILABLE,
            {"dependency": "database"},
        )
    if isinstance(exc, RedisError | ConnectionInterrupted | BrokerUnavailable):
        # The cache or the task broker is down. Whatever the request wrote in the database
        # is committed or not as a whole; a retry with the same clientMessageId/toolCallId
        # replays instead of writing twice.
        logger.warning("redis unavailable: %s", exc)
        return error_response(
            DEPENDENCY_UNAVAILABLE,
            "Redis (cache and task broker) is unavailable. Retry the same request later.",
            http_status.HTTP_503_SERVICE_UNAVAILABLE,
            {"dependency": "redis"},
        )
    # Anything else is a defect of ours: log it with the request id, answer the one shape.
    request = getattr(context.get("request"), "_request", None)
    request_id = request_id_of(request) if request is not None else uuid.uuid4().hex
    logger.error(
        "unhandled error in %s %s (request id %s)",
        getattr(request, "method", "?"),
        getattr(request, "path", "?"),
        request_id,
        exc_info=exc,
    )
    return Response(internal_error_body(request_id), status=500)
