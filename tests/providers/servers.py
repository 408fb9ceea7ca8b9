"""A local HTTP server that speaks a provider API's shape and records what it received."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Variables the provider SDKs read on their own; none may steer a test or a test worker.
SDK_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_CONFIG_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)

OPENAI_TOOL_CALL_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1_767_225_600,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "context_window_open",
                            "arguments": '{"purpose":"x"}',
                        },
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130},
}

ANTHROPIC_TOOL_USE_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Opening a window for the quote."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "context_window_open",
            "input": {"purpose": "x", "windowId": "alpha", "goal": "prepare the quote"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 321, "output_tokens": 9},
}


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


@dataclass
class Answer:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "application/json"


def sse(events: list[dict[str, Any]]) -> str:
    """`events` as a Server-Sent Events body (`event: <type>` / `data: <json>`), as the
    Responses API streams them; an Answer with `content_type=SSE` sends it."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


SSE = "text/event-stream"


class FakeAPI:
    """Records every request; answers from `queue` (first in, first out), else `default`."""

    def __init__(self, default: Answer) -> None:
        self.default = default
        self.queue: list[Answer] = []
        self.received: list[Received] = []
        self.url = ""
        self._lock = threading.Lock()
        # Open client connections, closed when the server stops: a keep-alive connection a
        # client pools (the providers share one HTTP client per process) must not reach a
        # stopped server's handler thread if a later server gets the same port.
        self.connections: set[socket.socket] = set()

    def answer(self, status: int = 200, body: Any = None, **kwargs: Any) -> None:
        self.queue.append(Answer(status=status, body=body, **kwargs))

    def next_answer(self) -> Answer:
        with self._lock:
            return self.queue.pop(0) if self.queue else self.default

    @property
    def last(self) -> Received:
        assert self.received, "the server received no request"
        return self.received[-1]


def _handler(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def setup(self) -> None:
            super().setup()
            with api._lock:
                api.connections.add(self.connection)

        def finish(self) -> None:
            with api._lock:
                api.connections.discard(self.connection)
            super().finish()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            api.received.append(
                Received(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
            )
            answer = api.next_answer()
            if answer.delay:
                time.sleep(answer.delay)
            payload = (
                answer.body.encode()
                if isinstance(answer.body, str)
                else json.dumps(answer.body).encode()
            )
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

    return Handler


@contextmanager
def serve(default: Answer) -> Iterator[FakeAPI]:
    """Run a FakeAPI on 127.0.0.1 (a free port) in a daemon thread."""
    with serve_api(FakeAPI(default)) as api:
        yield api


@contextmanager
def serve_api[API: FakeAPI](api: API) -> Iterator[API]:
    """Run `api` (a FakeAPI or a subclass) on 127.0.0.1 (a free port) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        with api._lock:
            for connection in api.connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        thread.join(timeout=5)
