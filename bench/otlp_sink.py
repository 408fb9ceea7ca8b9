"""A trace collector for the gateway benchmark that accepts everything at once and keeps nothing.

    python bench/otlp_sink.py      # prints "ready <port>" once it listens

`POST /v1/traces` (OTLP/HTTP, protobuf) answers 200 with an empty
`ExportTraceServiceResponse` as soon as the body is read, and counts the batch and its spans;
`GET /stats` reports `{"requests", "spans", "bytes"}`. It stands for a collector that is up
and fast, so the benchmark measures what exporting costs the gateway, not a collector.
"""

from __future__ import annotations

import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.spans = 0
        self.bytes = 0

    def add(self, raw: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(raw)
        spans = sum(
            len(scope.spans)
            for resource in request.resource_spans
            for scope in resource.scope_spans
        )
        with self.lock:
            self.requests += 1
            self.spans += spans
            self.bytes += len(raw)

    def as_json(self) -> bytes:
        with self.lock:
            return json.dumps(
                {"requests": self.requests, "spans": self.spans, "bytes": self.bytes}
            ).encode()


def handler(counts: Counts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as bench/fake_upstream.py: no delayed-ACK waits

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":  # OTEL_EXPORTER_OTLP_COMPRESSION
                raw = gzip.decompress(raw)
            if self.path.rstrip("/") != "/v1/traces":
                self._send(404, b"", "text/plain")
                return
            self._send(200, b"", "application/x-protobuf")  # an empty response: all accepted
            counts.add(raw)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/stats":
                self._send(200, counts.as_json(), "application/json")
            else:
                self._send(404, b"", "text/plain")

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), handler(Counts()))
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
