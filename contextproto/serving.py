"""What the production server adds around the app: limits on requests, the node registry.

Three pieces, each self-contained:

* `H11Protocol`: uvicorn's h11 protocol with a deadline on a request's headers. uvicorn has
  no header read timeout (its keep-alive timer only runs between requests, and any byte
  resets it), and no ASGI code runs before the headers are complete, so a client trickling
  headers would hold its connection for as long as it trickles. Selected with
  `uvicorn --http contextproto.serving:H11Protocol` (`make serve`, the README).
* `RequestLimits`: ASGI middleware in front of both apps (Django and MCP). Under /api/ a
  body announced larger than MAX_BODY_BYTES is refused with 413 before a byte of it is
  read, and a chunked body that grows past the limit as soon as it does; every request's
  body must arrive within BODY_READ_TIMEOUT_SECONDS (408 otherwise). Django's handler
  would spool the whole body first, however large and however slow.
* `with_node_registry`: this process joins the node registry when the server starts it and
  leaves it when the server stops it (lifespan), instead of lingering for a TTL: uvicorn's
  worker processes end without running atexit handlers.

The refusals use the API's one error shape and close the connection, since the rest of the
request is never read.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import h11
from django.conf import settings
from uvicorn.protocols.http import h11_impl

from contextproto.errors import REQUEST_TIMEOUT, REQUEST_TOO_LARGE, ErrorResponseBody, error_body
from contextproto.middleware import API_PREFIX
from contextproto.protocol.gateway.wires import wire_for
from sessions_app import nodes
from sessions_app.gateway.paths import GATEWAY_PREFIX, client_format_of_path

logger = logging.getLogger("contextproto.serving")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Refusal = tuple[int, list[tuple[bytes, bytes]], bytes]  # status, headers, body


def _refusal(error: ErrorResponseBody) -> Refusal:
    """Status, headers and body of a refusal in the API's error shape (`error_body`)."""
    body = json.dumps(error).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The unread rest of the request would be taken for the next one: close instead.
        (b"connection", b"close"),
    ]
    return error["status"], headers, body


def headers_too_slow(seconds: float) -> Refusal:
    message = (
        f"The request headers did not arrive within {seconds:g} s; send the whole request at once."
    )
    return _refusal(error_body(REQUEST_TIMEOUT, message, 408))


def body_too_slow(seconds: float) -> Refusal:
    message = f"The request body did not arrive within {seconds:g} s; send it at once."
    return _refusal(error_body(REQUEST_TIMEOUT, message, 408))


def body_too_large(limit: int, path: str = API_PREFIX) -> Refusal:
    message = (
        f"The request body exceeds the size limit of {limit} bytes; send less data per request."
    )
    if path.startswith(GATEWAY_PREFIX):
        # A gateway client reads its own API's error shape (contract §14).
        wire = wire_for(client_format_of_path(path))
        body = json.dumps(wire.error_reply_body(413, REQUEST_TOO_LARGE, message, {})).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"x-should-retry", b"false"),
        ]
        return 413, headers, body
    return _refusal(error_body(REQUEST_TOO_LARGE, message, 413))


# ---------------------------------------------------------------- headers: the protocol


class H11Protocol(h11_impl.H11Protocol):
    """uvicorn's h11 protocol, plus HEADER_READ_TIMEOUT_SECONDS for each request's headers.

    The deadline runs from the connection's start, and on a kept-alive connection from the
    first byte of the next request, until its headers are complete; then 408 and close.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # loads the app, and with it the settings
        self.header_timeout = float(settings.HEADER_READ_TIMEOUT_SECONDS)
        self.header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self.header_deadline is None:
            self._arm()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the headers are in (or the connection is done)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self.header_timeout > 0:
            self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_late(self) -> None:
        self.header_deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        logger.info("request headers not complete after %g s: 408, closing", self.header_timeout)
        _status, headers, body = headers_too_slow(self.header_timeout)
        head = b"HTTP/1.1 408 Request Timeout\r\n"
        head += b"".join(name + b": " + value + b"\r\n" for name, value in headers)
        self.transport.write(head + b"\r\n" + body)
        self.transport.close()


# ---------------------------------------------------------------- bodies: ASGI middleware


class RequestLimits:
    """Bound the size (API and gateway paths) and the arrival time (every path) of a body."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        body_timeout: float,
        prefixes: tuple[str, ...] = (API_PREFIX, GATEWAY_PREFIX),
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        sized = path.startswith(self.prefixes)
        if sized and self._announced_too_large(scope):
            await self._refuse(send, body_too_large(self.max_body_bytes, path))
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        state: dict[str, Any] = {"received": 0, "done": False, "refusal": None, "started": False}

        async def limited_receive() -> Message:
            if state["refusal"] is not None:
                return {"type": "http.disconnect"}
            if state["done"]:
                # Django listens for the client's disconnect while the view runs: no deadline.
                return await receive()
            try:
                async with asyncio.timeout_at(deadline if self.body_timeout > 0 else None):
                    message = await receive()
            except TimeoutError:
                state["refusal"] = body_too_slow(self.body_timeout)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if sized and state["received"] > self.max_body_bytes:
                    state["refusal"] = body_too_large(self.max_body_bytes, path)
                    return {"type": "http.disconnect"}
                state["done"] = not message.get("more_body", False)
            return message

        async def tracked_send(message: Message) -> None:
            if state["refusal"] is not None and not state["started"]:
                return  # the app's answer to the "disconnect": the refusal goes out instead
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        # Told of a "disconnect", Django stops reading and answers nothing; the refusal is ours.
        await self.app(scope, limited_receive, tracked_send)
        if state["refusal"] is not None and not state["started"]:
            await self._refuse(send, state["refusal"])

    def _announced_too_large(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                # h11 has checked it is a number; a huge one is simply too large.
                return value.strip().isdigit() and int(value) > self.max_body_bytes
        return False

    @staticmethod
    async def _refuse(send: Send, refusal: Refusal) -> None:
        status, headers, body = refusal
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


# ---------------------------------------------------------------- the node registry


def with_node_registry(app: ASGIApp) -> ASGIApp:
    """Wrap `app`'s lifespan: register this API process at startup, unregister at shutdown.

    The node is registered once the app reports its startup complete and removed before its
    shutdown is reported complete, so the registry never lists a process that cannot serve.
    """

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def registering_send(message: Message) -> None:
            kind = message["type"]
            if kind == "lifespan.startup.complete":
                nodes.heartbeat_start(settings.NODE_ROLE)
            elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                # Joins the heartbeat thread and deletes the key: off the event loop.
                await asyncio.to_thread(nodes.heartbeat_stop)
            await send(message)

        await app(scope, receive, registering_send)

    return wrapped
