"""Shared fixtures. The database comes from DATABASE_URL (PostgreSQL in CI, SQLite otherwise)."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent, AgentVersion, Application
from agents.services import application_create
from sessions_app.services.sessions import session_create


def _is_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # CI sets REQUIRE_POSTGRES/REQUIRE_REDIS so a misconfigured run fails instead of skipping.
    on_pg = _is_postgres()
    on_redis = bool(settings.REDIS_URL)
    if os.environ.get("REQUIRE_POSTGRES") == "1" and not on_pg:
        raise pytest.UsageError("REQUIRE_POSTGRES=1 but DATABASE_URL is not PostgreSQL")
    if os.environ.get("REQUIRE_REDIS") == "1" and not on_redis:
        raise pytest.UsageError("REQUIRE_REDIS=1 but REDIS_URL is not set")
    skip_pg = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL (runs in CI)")
    skip_redis = pytest.mark.skip(reason="needs Redis: set REDIS_URL (runs in CI)")
    for item in items:
        if "postgres" in item.keywords and not on_pg:
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not on_redis:
            item.add_marker(skip_redis)


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """Rate limits off: tests drive the API far faster than any host; test_throttling sets them."""
    settings.API_THROTTLE_RATES = {"application": None, "session": None}


@pytest.fixture
def application(db):
    app, _key = application_create(name="Acme")
    return app


@pytest.fixture
def make_version(db):
    """Build a published AgentVersion directly (publish validation has its own tests)."""

    def build(
        application: Application,
        *,
        protocol: str = "unified",
        version: int = 2,
        options: dict | None = None,
        provider: str = "external",
        name: str = "assistant",
        **fields,
    ) -> AgentVersion:
        agent, _ = Agent.objects.get_or_create(application=application, name=name)
        number = (agent.versions.count() or 0) + 1
        return AgentVersion.objects.create(
            agent=agent,
            number=number,
            status=AgentVersion.Status.PUBLISHED,
            system_prompt=fields.pop(
                "system_prompt", "You are a helpful agent.\n{{context_protocol}}"
            ),
            context_protocol_id=protocol,
            context_protocol_version=version,
            options=options or {},
            model_provider=provider,
            model_name="test-model",
            max_input_tokens=fields.pop("max_input_tokens", 8000),
            **fields,
        )

    return build


@pytest.fixture
def session(application, make_version):
    created, _key = session_create(agent_version=make_version(application), inputs={"user": "x"})
    return created


@pytest.fixture
def on_postgres() -> bool:
    return connection.vendor == "postgresql"


class KeyClient:
    """An API client that sends `Authorization: Bearer <key>` and JSON bodies."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    def get(self, path: str, **params):
        return self.client.get("/api/v1/" + path, params)

    def post(self, path: str, body=None):
        return self.client.post("/api/v1/" + path, body if body is not None else {}, format="json")

    def patch(self, path: str, body):
        return self.client.patch("/api/v1/" + path, body, format="json")

    def put(self, path: str, body):
        return self.client.put("/api/v1/" + path, body, format="json")

    def delete(self, path: str):
        return self.client.delete("/api/v1/" + path)


@pytest.fixture
def tenant(db):
    """An Application with its key and a client speaking with that key."""

    def build(name: str = "Acme"):
        app, key = application_create(name=name)
        return app, KeyClient(key)

    return build


@pytest.fixture
def api_session(tenant, make_version):
    """A unified session started through the API; returns a small bundle of handles."""

    def build(protocol: str = "unified", version: int = 2, options: dict | None = None, **fields):
        app, client = tenant(f"tenant-{protocol}-{version}")
        agent_version = make_version(
            app, protocol=protocol, version=version, options=options, **fields
        )
        created = client.post("sessions/", {"agentVersionId": str(agent_version.id), "inputs": {}})
        assert created.status_code == 201, created.content
        body = created.json()
        return SessionHandle(app, client, KeyClient(body["sessionKey"]), body["id"], agent_version)

    return build


class SessionHandle:
    def __init__(self, app, app_client, session_client, session_id, agent_version):
        self.app = app
        self.app_client = app_client
        self.client = session_client
        self.id = session_id
        self.agent_version = agent_version
        self.calls = 0

    def path(self, tail: str = "") -> str:
        return f"sessions/{self.id}/{tail}"

    def input(self, content: str) -> dict:
        response = self.client.post(self.path("inputs/"), {"content": content})
        assert response.status_code == 201, response.content
        return response.json()

    def write(self, **message) -> dict:
        response = self.client.post(self.path("messages/"), message)
        assert response.status_code == 201, response.content
        return response.json()

    def project(self, provider: str = "neutral") -> dict:
        response = self.client.post(self.path("projection/"), {"provider": provider})
        assert response.status_code == 201, response.content
        return response.json()

    def call(self, tool: str, snapshot: dict | None = None, **arguments) -> str:
        """Record a tool_call generated from `snapshot` (a fresh projection by default)."""
        snapshot = snapshot or self.project()
        self.calls += 1
        call_id = f"call_{self.calls}_{tool}"
        arguments.setdefault("purpose", "test")
        self.write(
            role="assistant",
            kind="tool_call",
            content="",
            toolCallId=call_id,
            toolName=tool,
            arguments=arguments,
            snapshotId=snapshot["snapshotId"],
        )
        return call_id

    def dispatch(self, call_id: str) -> dict:
        response = self.client.post(self.path(f"tool-calls/{call_id}/dispatch/"))
        assert response.status_code == 200, response.content
        return response.json()

    def tool(self, tool: str, snapshot: dict | None = None, **arguments) -> dict:
        """Call and dispatch; return the tool result."""
        return self.dispatch(self.call(tool, snapshot, **arguments))["result"]

    def host_tool_work(self, name: str = "lookup", result: str = "42") -> tuple[int, int]:
        """A finished host tool call + result; returns their indices."""
        snapshot = self.project()
        self.calls += 1
        call_id = f"host_{self.calls}"
        call = self.write(
            role="assistant",
            kind="tool_call",
            content="",
            toolCallId=call_id,
            toolName=name,
            arguments={"q": "x"},
            snapshotId=snapshot["snapshotId"],
        )
        res = self.write(role="tool", kind="tool_result", content=result, toolCallId=call_id)
        return call["index"], res["index"]
