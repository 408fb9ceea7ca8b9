"""A live gateway for SDK tests: uvicorn on the test database, and a fake upstream model.

The server runs in a subprocess (as `make serve` runs it) against this test's PostgreSQL; the
upstream is a FakeAPI in the test process that answers in the OpenAI or Anthropic format and
records what the gateway sent it. Versions point at it through their model config's baseUrl.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from agents.models import Agent, AgentVersion
from agents.services import application_create
from tests.providers.servers import SDK_ENV, Answer, FakeAPI, serve_api
from tests.servers import current_database_url, free_port, running_server

PROMPT = "You are a helpful agent.\n{{context_protocol}}\n{{client_system}}"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Live:
    """A running gateway server: its base URL and its log file."""

    base: str
    log: Path


def server_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", *SDK_ENV)}
    env.update(
        DATABASE_URL=current_database_url(),
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOW_DEV_SECRET_KEY="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        VAR_DIR=str(tmp),
        RUNTIME_AUTOSTART="false",
        DATABASE_POOL_SIZE="4",
        GATEWAY_UPSTREAM_TIMEOUT_SECONDS="3",
        LOG_LEVEL="DEBUG",
    )
    env.update(extra)  # a test may set any of the above (the pool size, the timeout)
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    return env


@contextmanager
def gateway_server(tmp: Path, *, workers: int = 1, **extra: str) -> Iterator[str]:
    """uvicorn serving the ASGI app (API, admin, MCP, gateway) on a free port."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    command += ["--http", "contextproto.serving:H11Protocol"]
    with running_server(
        command,
        env=server_env(tmp, **extra),
        log=tmp / "server.log",
        base=f"http://127.0.0.1:{port}",
        probe="/api/v1/health/live/",
    ) as base:
        yield base


class Upstream(FakeAPI):
    """A fake model endpoint in `wire` format ("openai" or "anthropic").

    Queue answers with `say`, `call` (or both: `answer_with`), `fail`; each model call the
    gateway makes takes the next one. `requests` are the request bodies it received.
    """

    def __init__(self, wire: str) -> None:
        super().__init__(Answer(status=500, body={"error": {"message": "nothing queued"}}))
        self.wire = wire

    @property
    def requests(self) -> list[Any]:
        return [r.body for r in self.received]

    def answer_with(
        self,
        text: str | None = None,
        calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
        *,
        usage: tuple[int, int] = (100, 10),
        cached: int = 0,
        stop: str | None = None,
        thinking: list[dict[str, Any]] = (),  # type: ignore[assignment]
        delay: float = 0.0,
        chunks: int = 1,
        chunk_delay: float = 0.0,
    ) -> None:
        """One answer: `text` and/or `calls` as (id, name, arguments). A streamed request
        gets the text in `chunks` pieces, `chunk_delay` seconds apart."""
        if self.wire == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": _json(arguments)},
                    }
                    for call_id, name, arguments in calls
                ]
            body: dict[str, Any] = {
                "id": f"chatcmpl-{next(_ids)}",
                "object": "chat.completion",
                "created": 1_767_225_600,
                "model": "upstream-model",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": stop or ("tool_calls" if calls else "stop"),
                    }
                ],
                "usage": {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": usage[0] + usage[1],
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            }
        else:
            content: list[dict[str, Any]] = [*thinking]
            if text:
                content.append({"type": "text", "text": text})
            content += [
                {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                for call_id, name, arguments in calls
            ]
            body = {
                "id": f"msg_{next(_ids)}",
                "type": "message",
                "role": "assistant",
                "model": "upstream-model",
                "content": content,
                "stop_reason": stop or ("tool_use" if calls else "end_turn"),
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage[0] - cached,
                    "output_tokens": usage[1],
                    "cache_read_input_tokens": cached,
                    "cache_creation_input_tokens": 0,
                },
            }
        self.answer(200, body, delay=delay, chunks=chunks, chunk_delay=chunk_delay)

    def say(self, text: str, **kwargs: Any) -> None:
        self.answer_with(text, **kwargs)

    def call(self, name: str, arguments: dict[str, Any], call_id: str = "", **kw: Any) -> None:
        self.answer_with(None, [(call_id or f"call_{next(_ids)}", name, arguments)], **kw)

    def fail(self, status: int, message: str, **kwargs: Any) -> None:
        if self.wire == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": "error", "code": None}}
        else:
            body = {"type": "error", "error": {"type": "api_error", "message": message}}
        self.answer(status, body, **kwargs)


def _json(value: Any) -> str:
    return json.dumps(value)


@contextmanager
def upstream(wire: str) -> Iterator[Upstream]:
    with serve_api(Upstream(wire)) as api:
        yield api


def make_app(name: str = "gateway-live") -> tuple[Any, str]:
    return application_create(name=f"{name}-{secrets.token_hex(3)}")


def make_version(
    application: Any,
    *,
    name: str = "helper",
    provider: str = "openai",
    upstream_url: str = "",
    steps: list[dict[str, Any]] | None = None,
    wire: str = "openai-chat",
    prompt: str = PROMPT,
    protocol: str = "unified",
    version: int = 2,
    config: dict[str, Any] | None = None,
    **fields: Any,
) -> Any:
    """A published version whose model is `provider`: the fake upstream or a script."""
    agent, _ = Agent.objects.get_or_create(application=application, name=name)
    if provider == "scripted":
        model_config: dict[str, Any] = {"steps": steps or [], "wireFormat": wire}
    else:
        base = upstream_url + ("/v1" if provider == "openai" else "")
        model_config = {"baseUrl": base, **(config or {})}
    return AgentVersion.objects.create(
        agent=agent,
        number=agent.versions.count() + 1,
        status=AgentVersion.Status.PUBLISHED,
        system_prompt=prompt,
        context_protocol_id=protocol,
        context_protocol_version=version,
        options={},
        model_provider=provider,
        model_name=f"{provider}-model",
        max_input_tokens=fields.pop("max_input_tokens", 32000),
        model_config=model_config,
        **fields,
    )


def start_session(base: str, key: str, version_id: str) -> dict[str, Any]:
    """`POST /api/v1/sessions/` with the application key, as the README says: the session
    (its `id`, and its `sessionKey` shown once) a framework's requests then continue."""
    request = urllib.request.Request(
        f"{base}/api/v1/sessions/",
        data=json.dumps({"agentVersionId": version_id}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
