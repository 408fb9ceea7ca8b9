"""The production server against bad clients and at shutdown (issue 23, items 6-9 and 11).

uvicorn is started as `make serve` starts it (the flags are read from the Makefile), with
small bounds so the tests are quick: 64 KiB bodies, 2 s for headers and for a body. Raw
sockets play the clients an HTTP library would not: a body announced too large, a chunked
body that keeps growing, headers or a body trickled a byte at a time.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

from agents.models import Agent
from agents.services import application_create
from tests.e2e.test_production_server import Http, server_env
from tests.servers import ROOT, free_port, running_server, stop_process, wait_for
from tests.test_serving import serve_flags

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

MAX_BODY = 64 * 1024
BOUND = 2  # seconds, for headers and for bodies


def limits_env(tmp_path: Path) -> dict[str, str]:
    return {
        **server_env(tmp_path),
        "MAX_BODY_BYTES": str(MAX_BODY),
        "HEADER_READ_TIMEOUT_SECONDS": str(BOUND),
        "BODY_READ_TIMEOUT_SECONDS": str(BOUND),
        # Far longer than any test waits: a record that goes away was removed, not expired.
        "NODE_TTL_SECONDS": "300",
        "NODE_REFRESH_SECONDS": "5",
    }


def uvicorn_command(port: int, workers: int = 2) -> list[str]:
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    return command + serve_flags()


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("limits")
    port = free_port()
    with django_db_blocker.unblock():
        env = limits_env(tmp_path)
    with running_server(
        uvicorn_command(port),
        env=env,
        log=tmp_path / "server.log",
        base=f"http://127.0.0.1:{port}",
        probe="/api/v1/health/live/",
    ) as base:
        yield port, base


class Answer:
    def __init__(self, raw: bytes, seconds: float) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines[0] else 0
        self.headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        self.seconds = seconds

    def error(self) -> dict:
        assert self.headers.get("content-type") == "application/json", self.headers
        return json.loads(self.body)["error"]


def exchange(port: int, first: bytes, pieces=(), every: float = 0.0, give_up: float = 15):
    """Send `first`, then each of `pieces` `every` seconds until the server answers.

    Returns the server's answer (read to the end of the connection) and the seconds from
    the first byte sent to the first byte of the answer.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=give_up)
    try:
        started = time.monotonic()
        sock.sendall(first)
        pending = list(pieces)
        while True:
            readable, _, _ = select.select([sock], [], [], every if pending else give_up)
            if readable:
                break
            if time.monotonic() - started > give_up:
                raise AssertionError(f"no answer within {give_up} s")
            if pending:
                try:
                    sock.sendall(pending.pop(0))
                except (BrokenPipeError, ConnectionResetError):
                    break
        answered = time.monotonic() - started
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk  # the server closes after a refusal: read to the end
        return Answer(raw, answered)
    finally:
        sock.close()


def post_head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode()


# ---------------------------------------------------------------- 6. sizes, from the headers


def test_a_body_announced_too_large_is_refused_before_it_is_sent(server):
    port, _base = server
    answer = exchange(port, post_head("/api/v1/agents/", "Content-Length: 3145728"))
    assert answer.status == 413
    assert answer.error()["code"] == "request_too_large"
    assert answer.seconds < 1.0  # at once: not a byte of the body was sent
    assert answer.headers["connection"] == "close"


def test_a_chunked_body_growing_past_the_limit_is_refused_as_it_grows(server):
    port, _base = server
    piece = 16 * 1024
    chunk = f"{piece:x}\r\n".encode() + b"x" * piece + b"\r\n"
    head = post_head("/api/v1/agents/", "Transfer-Encoding: chunked")
    answer = exchange(port, head + chunk, [chunk] * 40, every=0.05)
    assert answer.status == 413, answer.body
    assert answer.error()["code"] == "request_too_large"
    # Refused at the fifth chunk (80 KiB > 64 KiB), long before the 40 on offer.
    assert answer.seconds < 1.5


# ---------------------------------------------------------------- 7. slow clients


def test_trickled_headers_get_a_408_within_the_bound(server):
    port, _base = server
    answer = exchange(port, b"POST /api/v1/agents/ HTTP/1.1\r\n", [b"X"] * 100, every=0.3)
    assert answer.status == 408
    assert answer.error()["code"] == "request_timeout"
    assert BOUND - 0.2 <= answer.seconds <= BOUND + 2


def test_an_idle_connection_is_closed_within_the_header_bound(server):
    port, _base = server
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        started = time.monotonic()
        raw = sock.recv(65536)  # nothing sent: the server speaks first, then closes
        assert raw.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started <= BOUND + 2
    finally:
        sock.close()


def test_the_next_request_on_a_kept_alive_connection_is_bounded_too(server):
    port, _base = server
    first = b"GET /api/v1/health/live/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        sock.sendall(first)
        raw = b""
        while b'"ok"' not in raw:
            raw += sock.recv(65536)
        assert raw.startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        sock.sendall(b"GET /api/v1/health/live/ HTTP/1.1\r\n")
        answer = b""
        while True:
            readable, _, _ = select.select([sock], [], [], 0.3)
            if readable:
                answer = sock.recv(65536)
                break
            sock.sendall(b"X")  # each byte resets uvicorn's own keep-alive timer
            assert time.monotonic() - started < 15
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started <= BOUND + 2
    finally:
        sock.close()


def test_a_trickled_body_gets_a_408_within_the_bound(server):
    port, _base = server
    head = post_head("/api/v1/agents/", "Content-Length: 100")
    answer = exchange(port, head + b"{", [b" "] * 100, every=0.3)
    assert answer.status == 408, answer.body
    error = answer.error()
    assert error["code"] == "request_timeout" and f"within {BOUND} s" in error["message"]
    assert BOUND - 0.2 <= answer.seconds <= BOUND + 2


# ---------------------------------------------------------------- 8 and 11: Host, the slash


def test_a_wrong_host_under_the_api_gets_the_json_error(server):
    port, _base = server
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        connection.putrequest("GET", "/api/v1/health/", skip_host=True)
        connection.putheader("Host", "evil.example")
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 400
        assert response.getheader("Content-Type") == "application/json"
        assert json.loads(response.read())["error"]["code"] == "host_not_allowed"
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_post_without_its_trailing_slash_keeps_its_body(server):
    _port, base = server
    app, key = application_create(name="no-slash")
    api = Http(base + "/api/v1/", key)
    status, agent = api.call("POST", "agents", {"name": "kept"})
    assert status == 201, agent
    assert Agent.objects.get(application=app, id=agent["id"]).name == "kept"
    assert api.call("GET", "health/live")[0] == 200


# ---------------------------------------------------------------- 9. shutdown


def node_records(client, parent_pid: int) -> dict[bytes, dict]:
    """The registry records of the API processes whose parent is `parent_pid`."""
    found = {}
    for key in client.scan_iter(match="contextproto:node:api:*"):
        raw = client.get(key)
        if raw is None:
            continue
        record = json.loads(raw)
        try:
            stat = Path(f"/proc/{record['pid']}/stat").read_text()
        except OSError:
            continue  # not a live process of this machine
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent_pid:
            found[key] = record
    return found


@pytest.mark.django_db(transaction=True)
def test_sigterm_removes_every_workers_node_record_at_once(tmp_path):
    client = redis.Redis.from_url(settings.REDIS_URL)
    port = free_port()
    log = tmp_path / "server.log"
    process = subprocess.Popen(
        uvicorn_command(port, workers=2),
        cwd=ROOT,
        env=limits_env(tmp_path),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        # Each worker registers when its lifespan starts, before any request.
        records = wait_for(
            lambda: (found := node_records(client, process.pid)) and len(found) == 2 and found,
            60,
            "both uvicorn workers in the node registry",
        )
        assert all(client.ttl(key) > 200 for key in records), "they would not expire soon"
        assert {r["role"] for r in records.values()} == {"api"}
        stopped = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        assert time.monotonic() - stopped < 25
        assert not any(client.exists(key) for key in records), log.read_text()[-3000:]
        assert b"Application shutdown complete" in log.read_bytes()
    finally:
        if process.poll() is None:
            stop_process(process, 5)
        for pid in (r["pid"] for r in locals().get("records", {}).values()):
            try:
                os.kill(pid, 0)
            except OSError:
                continue
            os.kill(pid, signal.SIGKILL)  # a worker left behind by a failed test
