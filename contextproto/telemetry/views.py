"""A Django view whose every request is a trace of its own (contract §22).

`TracedView` goes before the view's base class (`class TurnApi(TracedView, APIView)`): its
`dispatch` runs the whole request, DRF's error handling included, inside `request_span`,
and sets the response's status and error code on it. Spans the view starts are its children.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, HttpResponseBase

from contextproto.telemetry.setup import enabled
from contextproto.telemetry.spans import http_response, request_span

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def route_of(request: HttpRequest) -> str:
    """The request's URL pattern as `http.route` spells it (`/api/v1/sessions/{session_id}/`):
    low-cardinality, no ids; the path itself when the request was not resolved."""
    match = request.resolver_match
    if match is None or not match.route:
        return request.path
    return "/" + _CONVERTER.sub(r"{\1}", match.route).lstrip("/")


def error_code_of(response: HttpResponseBase) -> str | None:
    """The `error.code` of the API's one error shape, if the response is one."""
    data = getattr(response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


class TracedView:
    """Mixin: each request of this view is a root SERVER span (continuing a `traceparent`)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        parent: Any = super()
        if not enabled():
            response: HttpResponseBase = parent.dispatch(request, *args, **kwargs)
            return response
        with request_span(
            request.method or "GET", route_of(request), request.headers, path=request.path
        ) as span:
            response = parent.dispatch(request, *args, **kwargs)
            http_response(span, response.status_code, error_code=error_code_of(response))
        return response
