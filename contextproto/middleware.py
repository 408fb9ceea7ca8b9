"""Request-scoped plumbing of the JSON API: request ids, refusals before routing, JSON 4xx/500.

Everything under `/api/` answers the one error shape, whether a view ran or not: an unrouted
path is a JSON 404 `not_found`, a Host header outside ALLOWED_HOSTS a JSON 400
`host_not_allowed`, a crash a JSON 500 `internal_error` carrying the request id that the
service log also names (see contextproto.api_errors). An API path sent without its trailing
slash is routed as if it had one (no redirect, which would drop a POST's body).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import is_valid_path

# metrics imports nothing of this module: middleware -> metrics -> errors, one-way.
from contextproto import metrics
from contextproto.errors import (
    HOST_NOT_ALLOWED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    NOT_FOUND,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_CHARACTER,
    ErrorResponseBody,
    error_body,
)

logger = logging.getLogger("contextproto.requests")

API_PREFIX = "/api/"
REQUEST_ID_HEADER = "X-Request-Id"
# A caller's own id is kept when it looks like one (so logs join across services).
_CALLER_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")


def request_id_of(request: HttpRequest) -> str:
    """The id of this request: set by RequestIdMiddleware, or made up on the spot."""
    found = getattr(request, "request_id", None)
    if not isinstance(found, str):
        found = _set_request_id(request, uuid.uuid4().hex)
    return found


def _set_request_id(request: HttpRequest, request_id: str) -> str:
    # Our own attribute on Django's request; the stubs do not know it.
    request.request_id = request_id  # type: ignore[attr-defined]
    return request_id


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


class RequestIdMiddleware:
    """Give each request an id (X-Request-Id in and out) and refuse NUL in paths and queries.

    PostgreSQL refuses NUL in text, so a `%00` in a path segment or a query value would
    fail inside a query as a 500; it is refused here, before routing, with a 400.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = _set_request_id(
            request, incoming if _CALLER_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        )
        if not is_api(request):
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            return response
        started = time.perf_counter()
        refused = _refuse_nul(request) or _refuse_host(request)
        if refused is None:
            _add_missing_slash(request)
        response = refused if refused is not None else self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        _log_request(request, response, time.perf_counter() - started)
        return response


def _log_request(request: HttpRequest, response: HttpResponse, seconds: float) -> None:
    """One structured line per API request (JSON in `extra`, key=value in the message)."""
    credential = getattr(request, "credential", None)
    match = getattr(request, "resolver_match", None)
    data = getattr(response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    fields = {
        "requestId": request_id_of(request),
        "method": request.method,
        "path": request.path,
        "status": response.status_code,
        "ms": round(seconds * 1000, 1),
        "application": str(credential.application.id) if credential else None,
        "session": str(credential.session_id) if credential and credential.session_id else None,
        "toolCallId": match.kwargs.get("tool_call_id") if match else None,
        "outcome": error.get("code") if isinstance(error, dict) else "ok",
    }
    metrics.REQUESTS.labels(method=request.method, status=str(response.status_code)).inc()
    level = logging.WARNING if response.status_code >= 500 else logging.INFO
    logger.log(
        level,
        " ".join(f"{k}={v}" for k, v in fields.items() if v is not None),
        extra={"request": fields},
    )


def _refuse_nul(request: HttpRequest) -> HttpResponse | None:
    where = None
    if "\x00" in request.path:
        where = "path"
    else:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                where = name.replace("\x00", "\\u0000")
                break
    if where is None:
        return None
    return JsonResponse(
        error_body(
            UNSUPPORTED_CHARACTER,
            f"{where}: contains a NUL character (%00), which no id, key or filter can hold.",
            400,
            {"field": where},
        ),
        status=400,
    )


def _refuse_host(request: HttpRequest) -> HttpResponse | None:
    # Django would raise DisallowedHost later (CommonMiddleware) and answer an HTML 400.
    try:
        request.get_host()
    except DisallowedHost:
        return host_not_allowed_response(request)
    return None


def host_not_allowed_response(request: HttpRequest) -> JsonResponse:
    # The header is the client's own text: shown escaped and cut, never the allowed list.
    sent = request.META.get("HTTP_X_FORWARDED_HOST") or request.META.get("HTTP_HOST", "")
    shown = sent[:100].encode("ascii", "backslashreplace").decode("ascii")
    return JsonResponse(
        error_body(
            HOST_NOT_ALLOWED,
            f"The Host header {shown!r} names no host this service answers for; send the "
            "service's own host name.",
            400,
            {"field": "Host"},
        ),
        status=400,
    )


def _add_missing_slash(request: HttpRequest) -> None:
    """Route `/api/v1/x` as `/api/v1/x/` when only the latter is an endpoint.

    Django's APPEND_SLASH answers a 301 instead, which clients follow with a GET and without
    the body; every API route ends with a slash, so the one spelling is tolerated here.
    """
    path = request.path_info
    if path.endswith("/"):
        return
    urlconf = getattr(request, "urlconf", None)
    if not is_valid_path(path, urlconf) and is_valid_path(f"{path}/", urlconf):
        request.path_info = f"{path}/"


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON for the API, Django's page for the admin and the rest."""
    if is_api(request):
        return JsonResponse(
            error_body(
                NOT_FOUND,
                f"No API endpoint at {request.path}; see /api/v1/schema/ for the routes.",
                404,
            ),
            status=404,
        )
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def api_bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: JSON for the API (a SuspiciousOperation outside a view), else Django's page."""
    if is_api(request):
        if isinstance(exception, DisallowedHost):
            return host_not_allowed_response(request)
        if isinstance(exception, RequestDataTooBig):
            return JsonResponse(
                error_body(
                    REQUEST_TOO_LARGE,
                    "The request body exceeds the size limit; send less data per request.",
                    413,
                ),
                status=413,
            )
        return JsonResponse(
            error_body(
                INVALID_REQUEST, "The request is malformed; check the URL and headers.", 400
            ),
            status=400,
        )
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def api_server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON with the request id for the API, Django's page elsewhere."""
    if is_api(request):
        return internal_error_response(request)
    from django.views.defaults import server_error

    return server_error(request)


def internal_error_body(request_id: str) -> ErrorResponseBody:
    return error_body(
        INTERNAL_ERROR,
        "The service failed while handling this request; nothing you sent was at fault as "
        f"far as it can tell. Report request id {request_id} to the operator.",
        500,
        {"requestId": request_id},
    )


def internal_error_response(request: HttpRequest) -> JsonResponse:
    return JsonResponse(internal_error_body(request_id_of(request)), status=500)
