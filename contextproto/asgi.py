"""ASGI entry point: Django (API, admin, static files), the gateway at /gateway/ and MCP at /mcp/.

Serve it with uvicorn (see the README's production section and `make serve`). Both apps sit
behind contextproto.serving's request limits (body size and read time); the lifespan also
registers this process in the node registry and removes it at shutdown.
"""

import json
import os
from typing import Any

from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402 (needs the settings module set above)

from contextproto.checks import refuse_dev_key_when_serving  # noqa: E402
from contextproto.serving import ASGIApp, RequestLimits, with_node_registry  # noqa: E402
from sessions_app.gateway.paths import GATEWAY_PREFIX  # noqa: E402
from sessions_app.mcp_server import mcp_http_app  # noqa: E402

refuse_dev_key_when_serving()
mcp_application = mcp_http_app(settings.ALLOWED_HOSTS, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
MCP_PREFIX = "/mcp"


class GatewayHandler(ASGIHandler):
    """Django's ASGI handler without the middleware chain, for /gateway/.

    The gateway's endpoints are machine-to-machine (contract §14): none of the browser
    middleware applies (sessions, CSRF, messages, static files), and a sync-only one in the
    chain would run the gateway's async views through a thread hop each way and keep a client
    that goes away from cancelling them. The gateway sets its own request id, counts and logs
    its own answers (sessions_app/gateway/record.py).
    """

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        # Django's own async core (URL resolution, the view); the stubs do not declare it.
        core = self._get_response_async  # type: ignore[attr-defined]
        self._middleware_chain = convert_exception_to_response(core)


gateway_application = GatewayHandler()


async def refuse_websocket(scope: Any, send: Any) -> None:
    """No WebSocket is served: a client that tries one on `…/responses` (Codex) gets 404 in the
    OpenAI error shape and falls back to HTTP streaming at once (contract §21). Without the
    server's denial-response extension, the upgrade is closed (uvicorn answers 403)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps(
        {
            "error": {
                "message": "No WebSocket here: use HTTP (stream: true streams).",
                "type": "not_found_error",
                "code": "not_found",
                "details": {},
            }
        }
    ).encode()
    await send(
        {
            "type": "websocket.http.response.start",
            "status": 404,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "websocket.http.response.body", "body": body})


# Any: Django's and Starlette's stubs spell the ASGI scope and callables differently.
async def route(scope: Any, receive: Any, send: Any) -> None:
    """Route /mcp and /mcp/… to the MCP app, everything else to Django.

    The lifespan belongs to the MCP app (its session manager); Django has none.
    """
    if scope["type"] == "lifespan":
        await mcp_application(scope, receive, send)
        return
    path = scope.get("path", "")
    if scope["type"] == "http" and (path == MCP_PREFIX or path.startswith(MCP_PREFIX + "/")):
        if path == MCP_PREFIX:
            scope = {**scope, "path": MCP_PREFIX + "/", "raw_path": b"/mcp/"}
        await mcp_application(scope, receive, send)
        return
    if scope["type"] == "http" and path.startswith(GATEWAY_PREFIX):
        await gateway_application(scope, receive, send)
        return
    if scope["type"] == "websocket":
        await refuse_websocket(scope, send)
        return
    await django_application(scope, receive, send)


# Around everything: bodies bounded in size (/api/) and read time (all paths), before either
# app reads them; the lifespan keeps this process in the node registry while it serves.
application: ASGIApp = with_node_registry(
    RequestLimits(
        route,
        max_body_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        body_timeout=settings.BODY_READ_TIMEOUT_SECONDS,
    )
)
