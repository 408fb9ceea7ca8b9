"""What the gateway section (bench/bench_gateway.py) sets up: settings, servers, sessions.

Its settings, the servers it starts (the fake model, the gateway, the LiteLLM proxy), one
keep-alive HTTP client, and the sessions its requests continue.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_data
import benchlib
import hostloops

FIXED_DELAY = 0.05  # seconds the fake model takes per call in the overhead part
SLOW_DELAY = 5.0  # seconds per call in the slow-upstream part
ROUNDS = 40
WARMUP = 5
SIZES = (1_000, 100_000)
SLOW_COUNTS = (8, 16)
POOL_SIZE = "8"  # what `make serve` sets
API_CLIENTS = 2  # threads of "normal" API traffic
API_PAUSE = 0.05  # seconds between one API client's requests
VAR = benchlib.ROOT / "var" / "bench" / "gateway"
LITELLM_VENV = benchlib.ROOT / "var" / "bench-litellm"
APPLICATION = "bench-gateway"
GATEWAY_PATH = "/gateway/openai/v1/chat/completions"
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


@contextmanager
def fake_upstream(delay: float) -> Iterator[Process]:
    """bench/fake_upstream.py in a process of its own (the client threads here hold the GIL)."""
    log = VAR / f"fake-{delay:g}.log"
    process = subprocess.Popen(
        [sys.executable, str(benchlib.BENCH_DIR / "fake_upstream.py"), "--delay", str(delay)],
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        if line[:1] != ["ready"]:
            raise RuntimeError(f"the fake upstream did not start: {log.read_text()}")
        yield Process(process, int(line[1]), log)
    finally:
        _stop(process)


@contextmanager
def gateway_server(metrics_token: str) -> Iterator[Process]:
    """uvicorn with one worker, as `make serve` runs it (its limits, pool of 8)."""
    port = hostloops.free_port()
    log = VAR / "server.log"
    env = hostloops.server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url="",  # as the rest of make bench: no broker, nothing is queued here
        var_dir=VAR,
        DATABASE_POOL_SIZE=POOL_SIZE,
        METRICS_TOKEN=metrics_token,
    )
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--proxy-headers", "--http", "contextproto.serving:H11Protocol"]
    command += ["--timeout-keep-alive", "5", "--timeout-graceful-shutdown", "20"]
    process = subprocess.Popen(
        command, cwd=benchlib.ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    try:
        _wait_http(port, "/api/v1/health/live/", process, log, 60)
        yield Process(process, port, log)
    finally:
        _stop(process)


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
    """`litellm --config` (one process) forwarding `bench-model` to the fake upstream."""
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
        _wait_http(port, "/health/liveliness", process, log, 120)
        yield Process(process, port, log)
    finally:
        _stop(process)


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
    """One keep-alive connection; reconnects after a failure."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.connection: http.client.HTTPConnection | None = None

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
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self.connection.request(
                method, path, body=data, headers={**self.headers, **(headers or {})}
            )
            response = self.connection.getresponse()
            raw = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, raw
        except (OSError, http.client.HTTPException):
            self.close()
            return None, {}, b""

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


# --------------------------------------------------------------------------- sessions


@dataclass
class GatewaySession:
    built: bench_data.Built
    full_history: list[dict[str, Any]] | None = None  # the full-history client's messages


def _openai_messages(items: Any) -> list[dict[str, Any]]:
    """A transcript as the OpenAI messages a client that kept everything holds."""
    from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL

    messages: list[dict[str, Any]] = []
    for item in items:
        if item.role == ROLE_ASSISTANT:
            message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
            if item.calls:
                message["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in item.calls
                ]
            messages.append(message)
        elif item.role == ROLE_TOOL:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.content})
        else:
            messages.append({"role": "user", "content": item.content})
    return messages


def transcript_messages(session_id: Any) -> list[dict[str, Any]]:
    """The session's whole transcript (contract §14) read off its log, as OpenAI messages."""
    from contextproto.protocol import catalog
    from contextproto.protocol.gateway.transcript import transcript_of_log
    from sessions_app.models import Session
    from sessions_app.reads import raw_log

    last = Session.objects.get(pk=session_id).last_index
    messages = raw_log.log_page(session_id, window_id=None, after_index=-1, limit=last + 1)
    transcript = transcript_of_log(messages, catalog.PROTOCOL_TOOL_NAMES, from_start=True)
    return _openai_messages(transcript.items)


def prepare(fake_base: str, slow_base: str) -> dict[str, Any]:
    """The Application, its key, the two versions and fresh sessions of this run."""
    from django.utils import timezone

    from agents.models import Agent, AgentVersion, ApiKey, Application
    from agents.services import api_key_revoke, application_key_issue
    from sessions_app.models import Run
    from sessions_app.services.runs import runs_driven_here

    nonce = secrets.token_hex(4)
    application, _ = Application.objects.get_or_create(name=APPLICATION)
    # The keys of earlier runs are gone with their runs (only their hashes were kept).
    for stale in ApiKey.objects.filter(application=application, revoked_at__isnull=True):
        api_key_revoke(api_key=stale)
    key = application_key_issue(application=application)
    versions = {}
    for name, base in (("overhead", fake_base), ("slow", slow_base)):
        version = bench_data.bench_version(APPLICATION, name, provider="openai")
        AgentVersion.objects.filter(pk=version.pk).update(
            model_config={"baseUrl": base + "/v1"}, model_provider="openai"
        )
        versions[name] = version
    agent_names = {k: Agent.objects.get(pk=v.agent_id).name for k, v in versions.items()}
    started = time.perf_counter()
    sessions: dict[str, GatewaySession] = {}
    # The sessions are written here; no worker may take the run each build starts.
    with runs_driven_here():
        for name, size in (
            ("incremental@1k", SIZES[0]),
            ("full@1k", SIZES[0]),
            ("protocol@1k", SIZES[0]),
            ("incremental@100k", SIZES[1]),
        ):
            built = bench_data.build_session(
                versions["overhead"], size, nonce=f"gw-{nonce}-{name}", analyze=False
            )
            sessions[name] = GatewaySession(built)
        api = bench_data.build_session(versions["slow"], SIZES[0], nonce=f"gw-{nonce}-api")
    # The run each build started is over (as if a worker had driven it): a queued run would
    # make the session busy for the gateway.
    Run.objects.filter(
        session_id__in=[s.built.session_id for s in sessions.values()] + [api.session_id],
        status=Run.Status.QUEUED,
    ).update(status=Run.Status.COMPLETED, finished_at=timezone.now())
    sessions["full@1k"].full_history = transcript_messages(sessions["full@1k"].built.session_id)
    full_messages = len(sessions["full@1k"].full_history or [])
    return {
        "key": key,
        "sessions": sessions,
        "api_session": api.session_id,
        "slow_model": agent_names["slow"],
        "slow_version": versions["slow"].pk,
        "full_messages": full_messages,
        "seconds": time.perf_counter() - started,
    }
