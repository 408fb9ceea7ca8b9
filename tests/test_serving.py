"""contextproto.serving in process: request limits and the lifespan's node registry.

The same behaviour over the real uvicorn server is tests/e2e/test_production_limits.py;
these drive the ASGI wrappers directly, with a stand-in app that reads its body as Django's
handler does, so they run without PostgreSQL or Redis.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time

from django.conf import settings

from contextproto import serving
from sessions_app import nodes
from tests.servers import ROOT, run_coroutine

LIMIT = 1000


def serve_flags() -> list[str]:
    """The uvicorn flags `make serve` passes (SERVE_LIMITS in the Makefile)."""
    text = (ROOT / "Makefile").read_text()
    found = re.search(r"^SERVE_LIMITS := ((?:.*\\\n)*.*)$", text, re.MULTILINE)
    assert found, "SERVE_LIMITS is gone from the Makefile"
    return shlex.split(found.group(1).replace("\\\n", " "))


def test_make_serve_and_the_readme_run_uvicorn_with_the_same_limits() -> None:
    flags = serve_flags()
    assert "--http" in flags and "contextproto.serving:H11Protocol" in flags
    assert "--timeout-graceful-shutdown" in flags
    readme = (ROOT / "README.md").read_text()
    production = readme[readme.index("## Production") : readme.index("### Several machines")]
    command = production[production.index("uvicorn contextproto.asgi") :]
    command = " ".join(command[: command.index("```")].replace("\\\n", " ").split())
    for flag, value in zip(flags, [*flags[1:], ""], strict=True):
        if flag.startswith("--"):
            wanted = flag if value.startswith("--") or not value else f"{flag} {value}"
            assert wanted in command, f"README's production command lacks {wanted}"


def http_scope(path: str = "/api/v1/agents/", headers: list | None = None) -> dict:
    return {"type": "http", "method": "POST", "path": path, "headers": headers or []}


class BodyReadingApp:
    """Reads the body like Django's ASGIHandler, then answers 201 and listens for disconnect."""

    def __init__(self) -> None:
        self.called = False
        self.body = b""
        self.aborted = False

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.aborted = True
                # Starlette would answer something here; the refusal must win.
                await send({"type": "http.response.start", "status": 500, "headers": []})
                await send({"type": "http.response.body", "body": b"app", "more_body": False})
                return
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        disconnect = asyncio.ensure_future(receive())  # Django's listen_for_disconnect
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})
        self.after_body = await disconnect


def drive(scope: dict, messages: list, *, app=None, timeout: float = 5.0, gap: float = 0.0):
    """Run RequestLimits(app) on `scope`; `messages` arrive `gap` seconds apart.

    Returns (app, sent messages, receive calls made, seconds taken).
    """
    app = app or BodyReadingApp()
    limits = serving.RequestLimits(app, max_body_bytes=LIMIT, body_timeout=timeout)
    queue = list(messages)
    sent: list[dict] = []
    calls = {"receive": 0}

    async def receive() -> dict:
        calls["receive"] += 1
        if queue:
            await asyncio.sleep(gap)
            return queue.pop(0)
        await asyncio.sleep(0.5)  # the client stays connected, then leaves
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    started = time.monotonic()
    run_coroutine(limits(scope, receive, send))
    return app, sent, calls["receive"], time.monotonic() - started


def answer(sent: list[dict]) -> tuple[int, dict | bytes, dict]:
    status = sent[0]["status"]
    headers = dict(sent[0]["headers"])
    body = b"".join(m.get("body", b"") for m in sent[1:])
    if headers.get(b"content-type") == b"application/json":
        return status, json.loads(body), headers
    return status, body, headers


def chunk(size: int, more: bool = True) -> dict:
    return {"type": "http.request", "body": b"x" * size, "more_body": more}


def test_an_announced_oversized_body_is_refused_before_reading_it() -> None:
    scope = http_scope(headers=[(b"content-length", str(3 * 1024 * 1024).encode())])
    app, sent, receives, _seconds = drive(scope, [chunk(10)])
    assert not app.called and receives == 0
    status, body, headers = answer(sent)
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert f"{LIMIT} bytes" in body["error"]["message"]
    assert headers[b"connection"] == b"close"


def test_a_body_within_the_limit_reaches_the_app_whole() -> None:
    scope = http_scope(headers=[(b"content-length", str(LIMIT).encode())])
    app, sent, _receives, _seconds = drive(scope, [chunk(600), chunk(400, more=False)])
    assert app.body == b"x" * LIMIT and answer(sent)[0] == 201
    # The disconnect listener after the body is not bound by the read deadline.
    assert app.after_body == {"type": "http.disconnect"}


def test_a_chunked_body_growing_past_the_limit_is_refused_as_it_does() -> None:
    app, sent, receives, _seconds = drive(http_scope(), [chunk(600), chunk(600), chunk(600)])
    assert app.aborted and receives == 2  # the third chunk is never read
    status, body, _headers = answer(sent)
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert len(sent) == 2  # the app's own answer to the disconnect was not sent


def test_outside_the_api_the_size_is_left_to_the_app() -> None:
    scope = http_scope("/admin/login/", [(b"content-length", b"5000")])
    app, sent, _receives, _seconds = drive(scope, [chunk(5000, more=False)])
    assert app.body == b"x" * 5000 and answer(sent)[0] == 201


def test_a_body_that_trickles_past_the_deadline_is_a_408() -> None:
    trickle = [chunk(1) for _ in range(20)]
    app, sent, _receives, seconds = drive(http_scope("/mcp/"), trickle, timeout=0.3, gap=0.1)
    assert app.aborted
    status, body, headers = answer(sent)
    assert status == 408 and body["error"]["code"] == "request_timeout"
    assert "0.3 s" in body["error"]["message"] and headers[b"connection"] == b"close"
    assert 0.3 <= seconds < 1.0


def test_lifespan_registers_the_node_at_startup_and_removes_it_at_shutdown(monkeypatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(nodes, "heartbeat_start", lambda role: events.append(f"start {role}"))
    monkeypatch.setattr(nodes, "heartbeat_stop", lambda: events.append("stop"))

    async def lifespan_app(scope, receive, send) -> None:
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.complete"})
        assert (await receive())["type"] == "lifespan.shutdown"
        events.append("app shut down")
        await send({"type": "lifespan.shutdown.complete"})

    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict:
        return incoming.pop(0)

    async def send(message: dict) -> None:
        events.append(f"server told {message['type']}")

    run_coroutine(serving.with_node_registry(lifespan_app)({"type": "lifespan"}, receive, send))
    assert events == [
        f"start {settings.NODE_ROLE}",
        "server told lifespan.startup.complete",
        "app shut down",
        "stop",
        "server told lifespan.shutdown.complete",
    ]
