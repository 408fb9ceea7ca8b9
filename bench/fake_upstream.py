"""A fake OpenAI-compatible model for the gateway benchmark: every answer after a fixed delay.

    python bench/fake_upstream.py --delay 0.05      # prints "ready <port>" once it listens

`POST …/chat/completions` answers a `chat.completion` after `--delay` seconds (each
connection has its own thread, so concurrent calls wait side by side). The answer is text,
except for a request that holds an unserved mark `[protocol:<n>]` (a user message asking for
a protocol call): that one gets a call of `context_task_memory_set`, and the next request
that carries the call's id gets text again, so one client request makes two model calls.
The body is searched as bytes, never parsed, so the fake's own cost does not follow the
size of what it is sent. `GET /stats` reports that cost (time from the request's headers to
its answer written, less the delay) and `POST /stats/reset` clears it.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARK = re.compile(rb"\[protocol:(\d+)\]")
PROTOCOL_CALL = ("context_task_memory_set", {"purpose": "note the request", "memory": "noted"})


class Fake:
    """What the fake remembers: marks it answered with a call, calls it saw answered."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.served_marks: set[bytes] = set()
        self.open_calls: dict[str, bytes] = {}  # call id -> the mark it answered
        self.costs: list[float] = []
        self.calls = 0

    def answer(self, raw: bytes) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            for call_id in list(self.open_calls):
                if call_id.encode() in raw:  # the call and its result are in the view now
                    del self.open_calls[call_id]
                    return _completion("Noted.", None, self.calls)
            for mark in MARK.findall(raw):
                if mark not in self.served_marks:
                    self.served_marks.add(mark)
                    call_id = f"fake_call_{mark.decode()}"
                    self.open_calls[call_id] = mark
                    return _completion(None, call_id, self.calls)
        return _completion("OK.", None, self.calls)


def _completion(text: str | None, call_id: str | None, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call_id is not None:
        name, arguments = PROTOCOL_CALL
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    return {
        "id": f"chatcmpl-fake{n}",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if call_id else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005},
    }


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
            if self.path.rstrip("/").endswith("/stats"):
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
            elif self.path.rstrip("/").endswith("/models"):
                self._send(200, b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}')
            else:
                self._send(404, b'{"error":{"message":"not found"}}')

        def do_POST(self) -> None:
            started = time.perf_counter()
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/").endswith("/stats/reset"):
                with fake.lock:
                    fake.costs.clear()
                self._send(200, b"{}")
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error":{"message":"not found"}}')
                return
            payload = json.dumps(fake.answer(raw)).encode()
            slept = time.perf_counter()
            time.sleep(fake.delay)
            slept = time.perf_counter() - slept
            try:
                self._send(200, payload)
            except (BrokenPipeError, ConnectionResetError):
                return
            with fake.lock:
                fake.costs.append(time.perf_counter() - started - slept)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # concurrent slow calls connect at once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.05, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), handler(Fake(args.delay)))
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
