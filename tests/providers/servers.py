"""A local HTTP server that speaks a provider API's shape and records what it received."""

from __future__ import annotations

import json
import select
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
    """One answer of the fake API. A request with `stream: true` gets a 200 JSON `body` as
    its API's event stream (`stream_events`): `chunks` text pieces, `chunk_delay` seconds
    apart. `drop`: the connection is closed without an answer; a str `body` goes as is (a
    cut-off JSON, an HTML page: set its content type in `headers`)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: int = 1
    chunk_delay: float = 0.0
    drop: bool = False


class FakeAPI:
    """Records every request; answers from `queue` (first in, first out), else `default`.

    `closed` counts streamed answers whose client closed the connection before the end.
    """

    def __init__(self, default: Answer) -> None:
        self.default = default
        self.queue: list[Answer] = []
        self.received: list[Received] = []
        self.closed = 0
        self.first_chunk_at: list[float] = []  # time.monotonic() of each stream's first text
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
            if answer.delay and self._client_left(answer.delay):
                with api._lock:
                    api.closed += 1
                return
            if answer.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(body, dict) and body.get("stream") and answer.status == 200:
                self._stream(answer, body)
                return
            payload = (
                answer.body.encode()
                if isinstance(answer.body, str)
                else json.dumps(answer.body).encode()
            )
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def _client_left(self, seconds: float) -> bool:
            """Wait `seconds` (a slow model); True as soon as the client closes the connection."""
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                if ready:
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return True  # EOF: the caller gave up on this request
                    except OSError:
                        return True
                    time.sleep(min(left, 0.05))  # bytes of another request: keep waiting
            return False

        def _stream(self, answer: Answer, request: dict[str, Any]) -> None:
            events = stream_events(answer.body, request, answer.chunks)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")  # the body ends with the connection
            self.end_headers()
            self.close_connection = True
            first = True
            try:
                for text, is_text in events:
                    if is_text:
                        if first:
                            api.first_chunk_at.append(time.monotonic())
                            first = False
                        elif answer.chunk_delay:
                            time.sleep(answer.chunk_delay)
                    self.wfile.write(text.encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with api._lock:
                    api.closed += 1

    return Handler


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(pieces, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return head + f"data: {json.dumps(data)}\n\n"


def stream_events(body: Any, request: dict[str, Any], chunks: int) -> list[tuple[str, bool]]:
    """A Chat Completions, Messages or Responses answer as that API's event stream: (event
    text, whether it carries answer text), the text in `chunks` pieces. A str body that is
    Server-Sent Events already (`responses_sse`: a stream that fails or stops short) is sent as
    it is; any other str cannot be streamed (the connection drops, as a broken upstream's)."""
    if isinstance(body, str) and body.startswith("event: "):
        return [(body, False)]
    if isinstance(body, dict) and body.get("object") == "chat.completion":
        return _openai_events(body, request, chunks)
    if isinstance(body, dict) and body.get("type") == "message":
        return _anthropic_events(body, chunks)
    if isinstance(body, dict) and body.get("object") == "response":
        return _responses_events(body, chunks)
    raise AssertionError(f"the fake API cannot stream {body!r}")


def _openai_events(
    body: dict[str, Any], request: dict[str, Any], chunks: int
) -> list[tuple[str, bool]]:
    head = {k: body[k] for k in ("id", "created", "model")}
    usage_wanted = (request.get("stream_options") or {}).get("include_usage")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return _sse(data)

    message = body["choices"][0]["message"]
    out = [(chunk({"role": "assistant", "content": ""}), False)]
    for piece in _split(message.get("content") or "", chunks) if message.get("content") else []:
        out.append((chunk({"content": piece}), True))
    for n, call in enumerate(message.get("tool_calls") or []):
        out.append(
            (
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": n,
                                "id": call["id"],
                                "type": "function",
                                "function": {
                                    "name": call["function"]["name"],
                                    "arguments": call["function"]["arguments"],
                                },
                            }
                        ]
                    }
                ),
                False,
            )
        )
    out.append((chunk({}, body["choices"][0]["finish_reason"]), False))
    if usage_wanted and body.get("usage"):
        out.append(
            (
                _sse(
                    {
                        **head,
                        "object": "chat.completion.chunk",
                        "choices": [],
                        "usage": body["usage"],
                    }
                ),
                False,
            )
        )
    out.append(("data: [DONE]\n\n", False))
    return out


def _anthropic_events(body: dict[str, Any], chunks: int) -> list[tuple[str, bool]]:
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    out = [(_sse({"type": "message_start", "message": start}, "message_start"), False)]
    for n, block in enumerate(body["content"]):
        kind = block["type"]
        empty = {
            "text": {"type": "text", "text": ""},
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        }
        opening = empty.get(kind, {**block, "input": {}} if kind == "tool_use" else block)
        out.append(
            (
                _sse(
                    {"type": "content_block_start", "index": n, "content_block": opening},
                    "content_block_start",
                ),
                False,
            )
        )
        if kind == "text":
            for piece in _split(block["text"], chunks):
                delta = {"type": "text_delta", "text": piece}
                out.append(
                    (
                        _sse(
                            {"type": "content_block_delta", "index": n, "delta": delta},
                            "content_block_delta",
                        ),
                        True,
                    )
                )
        elif kind == "thinking":
            for delta in (
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ):
                out.append(
                    (
                        _sse(
                            {"type": "content_block_delta", "index": n, "delta": delta},
                            "content_block_delta",
                        ),
                        False,
                    )
                )
        elif kind == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            out.append(
                (
                    _sse(
                        {"type": "content_block_delta", "index": n, "delta": delta},
                        "content_block_delta",
                    ),
                    False,
                )
            )
        out.append((_sse({"type": "content_block_stop", "index": n}, "content_block_stop"), False))
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": body.get("stop_sequence")}
    out.append(
        (_sse({"type": "message_delta", "delta": delta, "usage": usage}, "message_delta"), False)
    )
    out.append((_sse({"type": "message_stop"}, "message_stop"), False))
    return out


def responses_sse(events: list[dict[str, Any]]) -> str:
    """Responses API events as the stream's text, numbered as OpenAI numbers them."""
    return "".join(
        _sse({**event, "sequence_number": n}, event["type"]) for n, event in enumerate(events)
    )


def responses_events(body: dict[str, Any], chunks: int = 2) -> list[dict[str, Any]]:
    """A `response` object as the Responses API streams it: created, in progress, each output
    item added, a message's text as deltas, each item done, then the response completed (or
    incomplete) carrying the whole object."""
    shell = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": shell},
        {"type": "response.in_progress", "response": shell},
    ]
    for index, item in enumerate(body["output"]):
        added = {**item, "content": []} if item["type"] == "message" else item
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append({"type": "response.content_part.added", **where, "part": part})
            for piece in _split(text, chunks):
                events.append({"type": "response.output_text.delta", **where, "delta": piece})
            events.append({"type": "response.output_text.done", **where, "text": text})
            events.append(
                {"type": "response.content_part.done", **where, "part": item["content"][0]}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    end = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    events.append({"type": end, "response": body})
    return events


def _responses_events(body: dict[str, Any], chunks: int) -> list[tuple[str, bool]]:
    return [
        (_sse({**event, "sequence_number": n}, event["type"]), event["type"].endswith(".delta"))
        for n, event in enumerate(responses_events(body, chunks))
    ]


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
