"""What the gateway section (bench/bench_gateway.py) sets up: settings, servers, a client.

Its settings, the servers it starts (the fake model, the trace sink, the gateways, the LiteLLM
proxy) and one keep-alive HTTP client that also reads a stream as it arrives. The sessions
its requests continue are gateway_sessions.py's.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import hostloops

FIXED_DELAY = 0.05  # seconds the fake model takes per call in the overhead part
SLOW_DELAY = 5.0  # seconds per call in the slow-upstream part
STREAM_CHUNKS = 20  # text pieces of a streamed answer ...
STREAM_SECONDS = 2.0  # ... spread over this long (issue 38's streaming goal)
ROUNDS = 30
WARMUP = 3
STREAM_ROUNDS = 6
STREAM_WARMUP = 1
SIZES = (1_000, 100_000)
VIEW_TOKENS = (1_000, 10_000, 50_000, 100_000)  # transcripts of the view-size comparison
SLOW_COUNTS = (8, 16)
POOL_SIZE = "8"  # what `make serve` sets
API_CLIENTS = 2  # threads of "normal" API traffic
API_PAUSE = 0.05  # seconds between one API client's requests
VAR = benchlib.ROOT / "var" / "bench" / "gateway"
LITELLM_VENV = benchlib.ROOT / "var" / "bench-litellm"
APPLICATION = "bench-gateway"
GATEWAY_PATH = "/gateway/openai/v1/chat/completions"
RESPONSES_PATH = "/gateway/openai/v1/responses"
LITELLM_MODEL = "bench-model"


# --------------------------------------------------------------------------- processes


@dataclass
class Process:
    """A server this section started; stopped (terminate, then kill) on exit."""

    process: subprocess.Popen
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def _wait_http(port: int, path: str, process: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", path)
            connection.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"{process.args[0]} did not start:\n{tail}") from None
            time.sleep(0.2)
        finally:
            connection.close()


def _wait_workers(workers: int, process: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until every worker of a server has started (the first one answers health alone)."""
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count("Application startup complete") < workers:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"not all {workers} workers started: {log.read_text()[-3000:]}")
        time.sleep(0.2)


@contextmanager
def _script(name: str, *args: str) -> Iterator[Process]:
    """bench/<name>.py in a process of its own (the client threads here hold the GIL), which
    prints "ready <port>" once it listens."""
    log = VAR / f"{name}-{'_'.join(a.lstrip('-') for a in args) or 'default'}.log"
    process = subprocess.Popen(
        [sys.executable, str(benchlib.BENCH_DIR / f"{name}.py"), *args],
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        if line[:1] != ["ready"]:
            raise RuntimeError(f"{name} did not start: {log.read_text()}")
        yield Process(process, int(line[1]), log)
    finally:
        _stop(process)


def fake_upstream(delay: float) -> Any:
    """The fake model (bench/fake_upstream.py): answers after `delay`, streams STREAM_CHUNKS
    pieces over STREAM_SECONDS."""
    return _script(
        "fake_upstream",
        "--delay",
        str(delay),
        "--stream-chunks",
        str(STREAM_CHUNKS),
        "--stream-seconds",
        str(STREAM_SECONDS),
    )


def otlp_sink() -> Any:
    """A trace collector that answers 200 at once (bench/otlp_sink.py)."""
    return _script("otlp_sink")


@dataclass(frozen=True)
class GatewaySpec:
    """One gateway server of the run: its name, worker processes and trace endpoint."""

    name: str
    workers: int = 1
    otlp_endpoint: str | None = None  # None: tracing off


@contextmanager
def gateway_servers(metrics_token: str, specs: list[GatewaySpec]) -> Iterator[dict[str, Process]]:
    """uvicorn per spec, started side by side, with `make serve`'s limits and pool of 8,
    `spec.workers` processes, tracing to `spec.otlp_endpoint` (the standard OTEL_* variables)
    or off. Yields them by name at once (they boot while the sessions are built):
    `servers_ready` waits for them."""
    started: dict[str, Process] = {}
    try:
        for spec in specs:
            port = hostloops.free_port()
            log = VAR / f"server-{spec.name}.log"
            env = hostloops.server_env(
                database_url=os.environ["DATABASE_URL"],
                redis_url="",  # as the rest of make bench: no broker, nothing is queued here
                var_dir=VAR,
                DATABASE_POOL_SIZE=POOL_SIZE,
                METRICS_TOKEN=metrics_token,
            )
            env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
            if spec.otlp_endpoint is not None:
                env.update(
                    OTEL_EXPORTER_OTLP_ENDPOINT=spec.otlp_endpoint, OTEL_SERVICE_NAME="bench"
                )
            command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
            command += ["--host", "127.0.0.1", "--port", str(port)]
            command += ["--workers", str(spec.workers)]
            command += ["--proxy-headers", "--http", "contextproto.serving:H11Protocol"]
            command += ["--timeout-keep-alive", "5", "--timeout-graceful-shutdown", "20"]
            process = subprocess.Popen(
                command, cwd=benchlib.ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
            )
            started[spec.name] = Process(process, port, log)
        yield started
    finally:
        for server in started.values():
            _stop(server.process)


def servers_ready(servers: dict[str, Process], specs: list[GatewaySpec]) -> None:
    """Until every worker of every server answers."""
    for spec in specs:
        server = servers[spec.name]
        _wait_http(server.port, "/api/v1/health/live/", server.process, server.log, 120)
        _wait_workers(spec.workers, server.process, server.log, 120)


def bench_requirements() -> list[str]:
    """The `bench` extra of pyproject.toml: what the LiteLLM virtualenv installs."""
    with (benchlib.ROOT / "pyproject.toml").open("rb") as handle:
        project = tomllib.load(handle)["project"]
    return list(project["optional-dependencies"]["bench"])


def litellm_venv() -> Path:
    """The LiteLLM proxy's own virtualenv (var/bench-litellm), made or updated when needed.

    Not the project's .venv: litellm[proxy] brings uvloop and httptools, which uvicorn would
    then pick for the project's own server (`--loop auto`), and some 70 other packages.
    """
    requirements = bench_requirements()
    stamp = LITELLM_VENV / ".bench-requirements"
    binary = LITELLM_VENV / "bin" / "litellm"
    if binary.exists() and stamp.exists() and stamp.read_text() == "\n".join(requirements):
        return binary
    benchlib.log(f"installing {' '.join(requirements)} into {LITELLM_VENV} (once)")
    if not (LITELLM_VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    installed = subprocess.run(
        [str(LITELLM_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", *requirements],
        capture_output=True,
        text=True,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(requirements)}: {installed.stderr[-500:]}")
    stamp.write_text("\n".join(requirements))
    return binary


@contextmanager
def litellm_proxy(upstream: str, master_key: str) -> Iterator[Process]:
    """`litellm --config` (one process) forwarding `bench-model` to the fake upstream, yielded
    at once (it boots while the sessions are built): `litellm_ready` waits for it."""
    binary = litellm_venv()
    config = VAR / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {LITELLM_MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{LITELLM_MODEL}\n"
        f"      api_base: {upstream}/v1\n"
        "      api_key: none\n"
        "general_settings:\n"
        f"  master_key: {master_key}\n"
    )
    port = hostloops.free_port()
    log = VAR / "litellm.log"
    # A clean environment: LiteLLM would take DATABASE_URL for its own (Prisma) database.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of the price list at start
    }
    command = [str(binary), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--num_workers", "1"]
    process = subprocess.Popen(
        command, cwd=VAR, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    try:
        yield Process(process, port, log)
    finally:
        _stop(process)


def litellm_ready(litellm: Process) -> None:
    _wait_http(litellm.port, "/health/liveliness", litellm.process, litellm.log, 180)


def litellm_version() -> str:
    try:
        out = subprocess.run(
            [str(LITELLM_VENV / "bin" / "python"), "-m", "pip", "show", "litellm"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    found = re.search(r"^Version: (.+)$", out, flags=re.MULTILINE)
    return found.group(1) if found else "unknown"


# --------------------------------------------------------------------------- HTTP


class Client:
    """One keep-alive connection; reconnects after a failure, and before a request when it
    has been idle long enough for the server to have closed it. `elapsed` is the last
    exchange's time: from the request's first byte to the reply's last (the connection made
    and the body encoded before it, so a path pays for its server, not for this client)."""

    IDLE_SECONDS = 4.0  # the servers close a keep-alive connection idle for 5 s

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.connection: http.client.HTTPConnection | None = None
        self.used = 0.0
        self.elapsed = 0.0

    def _connected(self, timeout: float) -> http.client.HTTPConnection:
        if self.connection is not None and time.monotonic() - self.used > self.IDLE_SECONDS:
            self.close()
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self.connection.connect()
        return self.connection

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> tuple[int | None, dict[str, str], bytes]:
        data = json.dumps(body).encode() if body is not None else None
        try:
            connection = self._connected(timeout)
            started = time.perf_counter()
            connection.request(method, path, body=data, headers={**self.headers, **(headers or {})})
            response = connection.getresponse()
            raw = response.read()
            self.elapsed = time.perf_counter() - started
            self.used = time.monotonic()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, raw
        except (OSError, http.client.HTTPException):
            self.close()
            return None, {}, b""

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def stream(
        self, path: str, body: Any, is_text: Callable[[dict[str, Any]], str], timeout: float = 60
    ) -> Streamed:
        """POST `body` and read its Server-Sent Events as they arrive: when the first and the
        last text came (`time.monotonic()`, the clock bench/fake_upstream.py stamps its
        pieces with), the text, and how the stream ended. `is_text` gives an event's text."""
        streamed = Streamed()
        data = json.dumps(body).encode()
        try:
            connection = self._connected(timeout)
            streamed.started = time.monotonic()
            connection.request("POST", path, body=data, headers=self.headers)
            response = connection.getresponse()
            streamed.status = response.status
            if response.status != 200:
                streamed.error = response.read()[:300].decode(errors="replace")
                return streamed
            while line := response.readline():
                if not line.startswith(b"data: {"):
                    continue
                text = is_text(json.loads(line[6:]))
                if text:
                    now = time.monotonic()
                    streamed.first = streamed.first or now
                    streamed.last = now
                    streamed.text += text
            response.read()
            self.used = time.monotonic()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            streamed.error = f"{type(exc).__name__}: {exc}"
            self.close()
        return streamed


@dataclass
class Streamed:
    """What a client saw of one streamed reply."""

    status: int | None = None
    started: float = 0.0
    first: float = 0.0
    last: float = 0.0
    text: str = ""
    error: str = ""


def chat_text(event: dict[str, Any]) -> str:
    """The text a Chat Completions chunk carries."""
    choices = event.get("choices") or [{}]
    return (choices[0].get("delta") or {}).get("content") or ""


def responses_text(event: dict[str, Any]) -> str:
    """The text a Responses API event carries."""
    return event.get("delta") or "" if event.get("type") == "response.output_text.delta" else ""
