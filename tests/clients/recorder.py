"""A recording fake model endpoint: what real clients send, seen on the wire.

One server speaks the three client APIs well enough for a real client to finish a multi-turn
task with a tool round trip: Chat Completions (`…/chat/completions`), the Responses API
(`…/responses`, `…/responses/compact`) and Anthropic Messages (`…/messages`,
`…/messages/count_tokens`), each streamed (SSE, in the order the official SDKs' stream helpers
require) or not. Every request is recorded whole: method, path, query, every header, the body.

Each client gets a base URL of its own, `recorder.base(tag)` = `http://127.0.0.1:<port>/<tag>`:
the first path segment files a request under its client, and the rest is the path the client
chose. What the model answers comes from the tag's `Brain`, a function of the request alone (so
a client's background requests, arriving in any order, get a sensible answer too).
"""

from __future__ import annotations

import gzip
import itertools
import json
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    """One request as it arrived."""

    tag: str  # the client's first path segment
    method: str
    path: str  # after the tag, without the query
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, else the text, else None
    api: str  # chat | responses | compact | messages | count_tokens | other
    at: float = field(default_factory=time.monotonic)

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


@dataclass
class Call:
    """A tool call the fake model makes: a function's JSON arguments, or a custom tool's text."""

    name: str
    arguments: dict[str, Any] | str


@dataclass
class Reply:
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    input_tokens: int = 40  # reported usage: Codex compacts past its token limit
    compaction: bool = False  # answer one opaque `compaction` item (Codex's compaction_trigger)


@dataclass
class Turn:
    """A request read the same way whatever its API, for a Brain to decide on."""

    seen: Seen
    model: str
    system: str
    tools: list[str]
    last: str  # "user" (the user's words), "tool" (a tool's result), "compaction_trigger"
    user_texts: list[str]
    tool_results: list[str]


Brain = Callable[[Turn], Reply]


def plain(turn: Turn) -> Reply:
    """The default brain: one short answer."""
    return Reply(text="OK.")


def tool_loop(name: str, arguments: dict[str, Any] | str, final: str) -> Brain:
    """Call `name` after each user message when offered; answer `final` after its result.

    Requests without the tool (titles, summaries) are answered with a short title.
    """

    def brain(turn: Turn) -> Reply:
        if name not in turn.tools:
            return Reply(text="A short title")
        if turn.last == "tool":
            return Reply(text=f"{final} ({turn.tool_results[-1][:60]})")
        return Reply(text="", calls=[Call(name, arguments)])

    return brain


# ---------------------------------------------------------------------- reading requests


def content_text(content: Any) -> str:
    """The text in a message's content, whatever its API's shape (parts joined by lines)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(content_text(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "content", "output", "input"):
            if key in content:
                return content_text(content[key])
    return ""


def _names(tools: list[dict[str, Any]]) -> list[str]:
    """Tool names, namespaces (Codex's) opened."""
    names = []
    for tool in tools:
        if tool.get("type") == "namespace":
            names.extend(_names(tool.get("tools") or []))
        else:
            names.append(tool.get("name") or (tool.get("function") or {}).get("name") or "")
    return names


def read_turn(seen: Seen) -> Turn:
    body = seen.body if isinstance(seen.body, dict) else {}
    tools = _names(body.get("tools") or [])
    system, users, results, last = "", [], [], "user"
    if seen.api == "chat":
        for message in body.get("messages") or []:
            role = message.get("role")
            if role in ("system", "developer"):
                system += content_text(message.get("content"))
            elif role == "user":
                users.append(content_text(message.get("content")))
                last = "user"
            elif role == "tool":
                results.append(content_text(message.get("content")))
                last = "tool"
            elif role == "assistant":
                last = "assistant"
    elif seen.api in ("responses", "compact"):
        system = content_text(body.get("instructions"))
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        for item in items or []:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") in ("system", "developer"):
                system += content_text(item.get("content"))
            elif kind == "message" and item.get("role") == "user":
                users.append(content_text(item.get("content")))
                last = "user"
            elif kind.endswith("_call_output"):
                results.append(content_text(item.get("output")))
                last = "tool"
            elif kind == "compaction_trigger":
                last = "compaction_trigger"
            elif kind == "additional_tools":  # Codex's code mode: tools as an input item
                tools.extend(_names(item.get("tools") or []))
            else:
                last = "assistant"
    elif seen.api in ("messages", "count_tokens"):
        system = content_text(body.get("system"))
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            if message.get("role") == "system":
                # Claude Code puts system messages between turns: context, not a turn.
                system += content_text(blocks)
            elif message.get("role") == "user":
                tool_results = [b for b in blocks if b.get("type") == "tool_result"]
                if tool_results:
                    results.extend(content_text(b.get("content")) for b in tool_results)
                    last = "tool"
                else:
                    users.append(content_text(blocks))
                    last = "user"
            else:
                last = "assistant"
    return Turn(seen, str(body.get("model", "")), system, tools, last, users, results)


# ---------------------------------------------------------------------- answering


class Ids:
    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self, prefix: str) -> str:
        return f"{prefix}_{next(self._next):04d}"


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def _chunks(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _json_args(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def chat_answer(seen: Seen, reply: Reply, ids: Ids) -> tuple[str, bytes]:
    model = seen.body.get("model", "fake")
    calls = [
        {
            "id": ids("call"),
            "type": "function",
            "function": {"name": c.name, "arguments": _json_args(c)},
        }
        for c in reply.calls
    ]
    finish = "tool_calls" if calls else "stop"
    usage = {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": 5,
        "total_tokens": reply.input_tokens + 5,
    }
    head = {"id": ids("chatcmpl"), "created": int(time.time()), "model": model}
    if not seen.streamed:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        body = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return "application/json", json.dumps(body).encode()
    chunk = {**head, "object": "chat.completion.chunk"}
    events: list[tuple[str | None, Any]] = [
        (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    ]
    for piece in _chunks(reply.text):
        events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"content": piece}}]}))
    for index, call in enumerate(calls):
        start = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        events.append(
            (None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [start]}}]})
        )
        rest = {"index": index, "function": {"arguments": call["function"]["arguments"]}}
        events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [rest]}}]}))
    events.append(
        (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    )
    if (seen.body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**chunk, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return "text/event-stream", _sse(events)


def _compaction(ids: Ids) -> dict[str, Any]:
    return {"id": ids("cmp"), "type": "compaction", "encrypted_content": "opaque-" + ids("blob")}


def _response_items(reply: Reply, ids: Ids, tools: dict[str, str]) -> list[dict[str, Any]]:
    if reply.compaction:
        return [_compaction(ids)]
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "id": ids("msg"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    for call in reply.calls:
        if tools.get(call.name) == "custom":
            items.append(
                {
                    "id": ids("ctc"),
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": ids("call"),
                    "name": call.name,
                    "input": _json_args(call),
                }
            )
        else:
            items.append(
                {
                    "id": ids("fc"),
                    "type": "function_call",
                    "status": "completed",
                    "call_id": ids("call"),
                    "name": call.name,
                    "arguments": _json_args(call),
                }
            )
    return items


def responses_answer(seen: Seen, reply: Reply, ids: Ids) -> tuple[str, bytes]:
    body = seen.body
    tools = {t.get("name", ""): t.get("type", "") for t in body.get("tools") or []}
    items = _response_items(reply, ids, tools)
    response = {
        "id": ids("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": body.get("model", "fake"),
        "output": items,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "store": body.get("store", True),
        "temperature": None,
        "top_p": None,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + 5,
        },
    }
    if not seen.streamed:
        return "application/json", json.dumps(response).encode()
    seq = itertools.count(0)
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(seq), **data}))

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in _chunks(text):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": text},
            )
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            emit(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        elif item["type"] == "compaction":
            emit("response.output_item.added", output_index=index, item=item)
        else:  # custom_tool_call
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "input": ""},
            )
            emit(
                "response.custom_tool_call_input.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["input"],
            )
            emit(
                "response.custom_tool_call_input.done",
                item_id=item["id"],
                output_index=index,
                input=item["input"],
            )
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return "text/event-stream", _sse(events)


def compact_answer(seen: Seen, reply: Reply, ids: Ids) -> tuple[str, bytes]:
    """`responses/compact`: the input's user messages, then one opaque compaction item."""
    items = seen.body.get("input") or []
    users = [i for i in items if i.get("type", "message") == "message" and i.get("role") == "user"]
    compaction = _compaction(ids)
    body = {
        "id": ids("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*users, compaction],
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + 5,
        },
    }
    return "application/json", json.dumps(body).encode()


def messages_answer(seen: Seen, reply: Reply, ids: Ids) -> tuple[str, bytes]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        arguments = (
            call.arguments if isinstance(call.arguments, dict) else {"input": call.arguments}
        )
        content.append(
            {"type": "tool_use", "id": ids("toolu"), "name": call.name, "input": arguments}
        )
    stop = "tool_use" if reply.calls else "end_turn"
    usage = {
        "input_tokens": reply.input_tokens,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    message = {
        "id": ids("msg"),
        "type": "message",
        "role": "assistant",
        "model": seen.body.get("model", "fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not seen.streamed:
        return "application/json", json.dumps(message).encode()
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
        ),
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in _chunks(block["text"]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "text/event-stream", _sse(events)


# ---------------------------------------------------------------------- the server


def api_of(method: str, path: str) -> str:
    if method != "POST":
        return "other"
    for suffix, api in (
        ("/chat/completions", "chat"),
        ("/responses/compact", "compact"),
        ("/responses", "responses"),
        ("/messages/count_tokens", "count_tokens"),
        ("/messages", "messages"),
    ):
        if path.endswith(suffix):
            return api
    return "other"


class Recorder:
    """Records every request; answers each tag's requests from its Brain."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.brains: dict[str, Brain] = {}
        self.url = ""
        self.ids = Ids()
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()

    def base(self, tag: str) -> str:
        return f"{self.url}/{tag}"

    def requests(self, tag: str, api: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.tag == tag and (api is None or s.api == api)]

    def answer(self, seen: Seen) -> tuple[int, str, bytes]:
        if seen.api == "other":
            if seen.method == "HEAD" and seen.path in ("", "/"):
                return 200, "text/plain", b""
            body = {
                "error": {
                    "message": f"no fake endpoint at {seen.method} {seen.path}",
                    "type": "not_found",
                }
            }
            return 404, "application/json", json.dumps(body).encode()
        turn = read_turn(seen)
        if seen.api == "count_tokens":
            size = len(json.dumps(seen.body)) // 4
            return 200, "application/json", json.dumps({"input_tokens": size}).encode()
        reply = self.brains.get(seen.tag, plain)(turn)
        render = {
            "chat": chat_answer,
            "responses": responses_answer,
            "compact": compact_answer,
            "messages": messages_answer,
        }[seen.api]
        kind, payload = render(seen, reply, self.ids)
        return 200, kind, payload


def _decode(raw: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    return raw


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else 40 ms per answer (delayed ACK)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            with recorder.lock:
                recorder.connections.add(self.connection)

        def finish(self) -> None:
            with recorder.lock:
                recorder.connections.discard(self.connection)
            super().finish()

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                raw = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return raw
                    raw += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            raw = self._body()
            encoding = self.headers.get("Content-Encoding", "").lower()
            body: Any = None
            if raw:
                try:
                    body = json.loads(_decode(raw, encoding))
                except (ValueError, OSError, zlib.error):
                    body = raw.decode("utf-8", "replace") if not encoding else f"<{encoding} body>"
            parts = urlsplit(self.path)
            tag, _, rest = parts.path.lstrip("/").partition("/")
            path = "/" + rest if rest else ""
            seen = Seen(
                tag=tag,
                method=self.command,
                path=path,
                query=parse_qs(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                api=api_of(self.command, path),
            )
            with recorder.lock:
                recorder.seen.append(seen)
            status, kind, payload = recorder.answer(seen)
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = _serve

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client closing a kept-alive connection (Codex, Claude Code) is no error


@contextmanager
def recording() -> Iterator[Recorder]:
    """Run a Recorder on 127.0.0.1 (a free port) in a daemon thread."""
    recorder = Recorder()
    server = _Server(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        with recorder.lock:
            for connection in recorder.connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        thread.join(timeout=5)
