"""Gateway fixtures: an Application, scripted versions, and a client that speaks both APIs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from agents.services import application_create
from tests.gateway.live import Live, gateway_server

OPENAI_PATH = "/gateway/openai/v1/chat/completions"
ANTHROPIC_PATH = "/gateway/anthropic/v1/messages"
PROMPT = "You are a helpful agent.\n{{context_protocol}}\n{{client_system}}"


class Gateway:
    """Posts gateway requests through the Django test client (WSGI)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.client = Client()

    def post(
        self,
        path: str,
        body: Any,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        extra = {"HTTP_AUTHORIZATION": f"Bearer {key or self.key}"}
        for name, value in (headers or {}).items():
            extra["HTTP_" + name.upper().replace("-", "_")] = value
        return self.client.post(
            path, data=json.dumps(body), content_type="application/json", **extra
        )

    def openai(self, body: Any, **kwargs: Any) -> Any:
        return self.post(OPENAI_PATH, body, **kwargs)

    def anthropic(self, body: Any, **kwargs: Any) -> Any:
        return self.post(ANTHROPIC_PATH, body, **kwargs)


@pytest.fixture
def app_and_key(db):
    return application_create(name="Gateway Co")


@pytest.fixture
def gateway(app_and_key) -> Gateway:
    return Gateway(app_and_key[1])


@pytest.fixture
def scripted(app_and_key, make_version) -> Callable[..., Any]:
    """A published scripted version named `name` playing `steps`."""

    def build(
        steps: list[dict[str, Any]],
        *,
        name: str = "helper",
        wire: str = "openai-chat",
        protocol: str = "unified",
        version: int = 2,
        prompt: str = PROMPT,
        **fields: Any,
    ) -> Any:
        return make_version(
            app_and_key[0],
            name=name,
            protocol=protocol,
            version=version,
            provider="scripted",
            model_config={"steps": steps, "wireFormat": wire},
            system_prompt=prompt,
            **fields,
        )

    return build


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    """uvicorn serving the gateway on the test database, one per test module."""
    tmp = tmp_path_factory.mktemp("gateway")
    with gateway_server(tmp) as base:
        yield Live(base, tmp / "server.log")
