"""A fake OpenAI-compatible model for the gateway benchmark: answers after a delay, or streams.

    python bench/fake_upstream.py --delay 0.05      # prints "ready <port>" once it listens

`POST …/chat/completions` answers a `chat.completion` after `--delay` seconds, and
`POST …/responses` a Responses API `response` (each connection has its own thread, so
concurrent calls wait side by side). The answer is text, except for a request that holds an
unserved mark `[protocol:<n>]` (a user message asking for a protocol call): that one gets a
call of `context_task_memory_set`, and the next request that carries the call's id gets text
again, so one client request makes two model calls.

A request whose body says `"stream": true` is answered as that API's event stream instead:
the opening events at once, then the text in `--stream-chunks` pieces spread evenly over
`--stream-seconds` (the first piece one interval after the request), then the closing events
(Chat Completions: the finish chunk, the usage chunk when `stream_options.include_usage`
asks for it, `[DONE]`; Responses: `response.completed` with the whole object). When the
request's last user message carries a mark `[stream:<id>]`, the fake records when it sent
that stream's first and last text piece (just before writing it, with `time.monotonic()`,
the system-wide clock the benchmark's client reads too) and `GET /stream-marks` reports
them, so the client's first piece can be compared with the upstream's own through any
proxy in between.

The body is searched as bytes, never parsed, so the fake's own cost does not follow the
size of what it is sent. `GET /stats` reports that cost (time from the request's headers to
its answer written, less the delay or the stream's pauses) and `POST /stats/reset` clears it
and the stream marks.

Its sockets set TCP_NODELAY (`disable_nagle_algorithm`): without it every keep-alive answer
waits about 40 ms for the client's delayed ACK (docs/decisions.md, the LiteLLM benchmark entry).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARK = re.compile(rb"\[protocol:(\d+)\]")
STREAM_MARK = re.compile(rb"\[stream:([0-9A-Za-z_-]+)\]")
# `"stream": true` as a top-level field of the JSON text (a message quoting it is escaped).
STREAMED = re.compile(rb'(?<!\\)"stream"\s*:\s*true')
USAGE_WANTED = re.compile(rb'(?<!\\)"include_usage"\s*:\s*true')
PROTOCOL_CALL = ("context_task_memory_set", {"purpose": "note the request", "memory": "noted"})
CREATED = 1_767_225_600
MODEL = "bench-model"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005}


@dataclass(frozen=True)
class Answer:
    """What the fake answers, before any API's shape: text, or one protocol call."""

    n: int
    text: str | None = None
    call_id: str | None = None


class Fake:
    """What the fake remembers: marks it answered with a call, calls it saw answered, its
    own cost, and when each marked stream's first and last text piece went out."""

    def __init__(self, delay: float, stream_chunks: int = 20, stream_seconds: float = 2.0) -> None:
        self.delay = delay
        self.stream_chunks = stream_chunks
        self.stream_seconds = stream_seconds
        self.lock = threading.Lock()
        self.served_marks: set[bytes] = set()
        self.open_calls: dict[str, bytes] = {}  # call id -> the mark it answered
        self.costs: list[float] = []
        self.streams: dict[str, list[float]] = {}  # stream mark -> [first piece, last piece]
        self.calls = 0

    def answer(self, raw: bytes, streamed: bool) -> Answer:
        with self.lock:
            self.calls += 1
            n = self.calls
            for call_id in list(self.open_calls):
                if call_id.encode() in raw:  # the call and its result are in the view now
                    del self.open_calls[call_id]
                    return Answer(n, text="Noted.")
            for mark in MARK.findall(raw):
                if mark not in self.served_marks:
                    self.served_marks.add(mark)
                    call_id = f"fake_call_{mark.decode()}"
                    self.open_calls[call_id] = mark
                    return Answer(n, call_id=call_id)
        if streamed:
            return Answer(n, text="".join(f"piece{k} " for k in range(self.stream_chunks)))
        return Answer(n, text="OK.")

    def pieces(self, text: str) -> list[str]:
        """The text in `stream_chunks` pieces (fewer for a short text)."""
        size = max(1, -(-len(text) // self.stream_chunks))
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# --------------------------------------------------------------------------- Chat Completions


def _tool_call(call_id: str) -> dict[str, Any]:
    name, arguments = PROTOCOL_CALL
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _completion(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.call_id is not None:
        message["tool_calls"] = [_tool_call(answer.call_id)]
    return {
        "id": f"chatcmpl-fake{answer.n}",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer.call_id else "stop",
            }
        ],
        "usage": USAGE,
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + f"data: {json.dumps(data)}\n\n").encode()


def chat_stream(
    answer: Answer, pieces: list[str], usage: bool
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """A Chat Completions stream: (opening events, one event per text piece, closing events)."""
    head = {"id": f"chatcmpl-fake{answer.n}", "created": CREATED, "model": MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**head, "object": "chat.completion.chunk", "choices": [choice]})

    opening = [chunk({"role": "assistant", "content": ""})]
    texts = [chunk({"content": piece}) for piece in pieces] if answer.text else []
    closing = []
    if answer.call_id is not None:
        closing.append(chunk({"tool_calls": [{"index": 0, **_tool_call(answer.call_id)}]}))
    closing.append(chunk({}, "tool_calls" if answer.call_id else "stop"))
    if usage:
        closing.append(
            _sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": USAGE})
        )
    closing.append(b"data: [DONE]\n\n")
    return opening, texts, closing


# --------------------------------------------------------------------------- Responses API


def _response(answer: Answer, status: str = "completed", text: str | None = None) -> dict[str, Any]:
    said = answer.text if text is None else text
    if answer.call_id is not None:
        name, arguments = PROTOCOL_CALL
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_fake{answer.n}",
            "call_id": answer.call_id,
            "name": name,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": f"msg_fake{answer.n}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": said or "", "annotations": []}],
        }
    return {
        "id": f"resp_fake{answer.n}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": MODEL,
        "output": [item],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": USAGE["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": USAGE["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE["total_tokens"],
        },
    }


def responses_stream(
    answer: Answer, pieces: list[str]
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """A Responses API stream in the order the official SDK's helper requires, numbered."""
    whole = _response(answer)
    shell = {**whole, "status": "in_progress", "output": [], "usage": None}
    item = whole["output"][0]
    numbered = iter(range(10_000))

    def event(data: dict[str, Any]) -> bytes:
        return _sse({**data, "sequence_number": next(numbered)}, data["type"])

    opening = [
        event({"type": "response.created", "response": shell}),
        event({"type": "response.in_progress", "response": shell}),
    ]
    if item["type"] != "message":
        added = event({"type": "response.output_item.added", "output_index": 0, "item": item})
        done = event({"type": "response.output_item.done", "output_index": 0, "item": item})
        completed = event({"type": "response.completed", "response": whole})
        return [*opening, added], [], [done, completed]
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    opening += [
        event(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            }
        ),
        event({"type": "response.content_part.added", **where, "part": part}),
    ]
    texts = [event({"type": "response.output_text.delta", **where, "delta": p}) for p in pieces]
    closing = [
        event({"type": "response.output_text.done", **where, "text": answer.text}),
        event({"type": "response.content_part.done", **where, "part": item["content"][0]}),
        event({"type": "response.output_item.done", "output_index": 0, "item": item}),
        event({"type": "response.completed", "response": whole}),
    ]
    return opening, texts, closing


# --------------------------------------------------------------------------- HTTP


def handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if path.endswith("/stats"):
                with fake.lock:
                    costs = sorted(fake.costs)
                body = {
                    "count": len(costs),
                    "p50_ms": statistics.median(costs) * 1000 if costs else None,
                    "p95_ms": costs[max(0, -(-95 * len(costs) // 100) - 1)] * 1000
                    if costs
                    else None,
                }
                self._send(200, json.dumps(body).encode())
            elif path.endswith("/stream-marks"):
                with fake.lock:
                    marks = dict(fake.streams)
                self._send(200, json.dumps(marks).encode())
            elif path.endswith("/models"):
                self._send(200, b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}')
            else:
                self._send(404, b'{"error":{"message":"not found"}}')

        def do_POST(self) -> None:
            started = time.perf_counter()
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = self.path.rstrip("/")
            if path.endswith("/stats/reset"):
                with fake.lock:
                    fake.costs.clear()
                    fake.streams.clear()
                self._send(200, b"{}")
                return
            chat = path.endswith("/chat/completions")
            if not chat and not path.endswith("/responses"):
                self._send(404, b'{"error":{"message":"not found"}}')
                return
            streamed = STREAMED.search(raw) is not None
            answer = fake.answer(raw, streamed)
            try:
                if streamed:
                    marks = STREAM_MARK.findall(raw)
                    mark = marks[-1].decode() if marks else None
                    paused = self._stream(answer, chat, USAGE_WANTED.search(raw) is not None, mark)
                else:
                    payload = json.dumps(_completion(answer) if chat else _response(answer))
                    paused = time.perf_counter()
                    time.sleep(fake.delay)
                    paused = time.perf_counter() - paused
                    self._send(200, payload.encode())
            except (BrokenPipeError, ConnectionResetError):
                return
            with fake.lock:
                fake.costs.append(time.perf_counter() - started - paused)

        def _stream(self, answer: Answer, chat: bool, usage: bool, mark: str | None) -> float:
            """Send the answer as its API's stream; returns the seconds spent pausing."""
            pieces = fake.pieces(answer.text or "")
            opening, texts, closing = (
                chat_stream(answer, pieces, usage) if chat else responses_stream(answer, pieces)
            )
            # The whole stream's length is known before its first byte: no chunked encoding.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(sum(len(e) for e in opening + texts + closing)))
            self.end_headers()
            self.wfile.write(b"".join(opening))
            interval = fake.stream_seconds / max(1, len(texts) or 1)
            paused = 0.0
            for k, text in enumerate(texts):
                pause = time.perf_counter()
                time.sleep(interval)
                paused += time.perf_counter() - pause
                sent = time.monotonic()  # stamped as it goes out: no reader can be earlier
                self.wfile.write(text)
                if mark is not None:
                    with fake.lock:
                        times = fake.streams.setdefault(mark, [sent, sent])
                        times[1] = sent
                        if k == 0:
                            times[0] = sent
            if not texts:  # a call, not text: the model's time all the same
                pause = time.perf_counter()
                time.sleep(fake.delay)
                paused += time.perf_counter() - pause
            self.wfile.write(b"".join(closing))
            return paused

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # concurrent slow calls connect at once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.05, help="seconds before each answer")
    parser.add_argument("--stream-chunks", type=int, default=20, help="text pieces of a stream")
    parser.add_argument("--stream-seconds", type=float, default=2.0, help="a stream's duration")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    fake = Fake(args.delay, args.stream_chunks, args.stream_seconds)
    server = Server(("127.0.0.1", args.port), handler(fake))
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
