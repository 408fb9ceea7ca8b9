"""Shared fixtures. The database comes from DATABASE_URL (PostgreSQL in CI, SQLite otherwise)."""

from __future__ import annotations

import os

import pytest
from django.db import connection


def _is_postgres() -> bool:
    from django.conf import settings

    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # CI sets REQUIRE_POSTGRES/REQUIRE_REDIS so a misconfigured run fails instead of skipping.
    from django.conf import settings

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


@pytest.fixture
def application(db):
    from agents.services import application_create

    app, _key = application_create(name="Acme")
    return app


@pytest.fixture
def make_version(db):
    """Build a published AgentVersion directly (publish validation has its own tests)."""
    from agents.models import Agent, AgentVersion, Application

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
            system_prompt="You are a helpful agent.\n{{context_protocol}}",
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
    from sessions_app.services.sessions import session_create

    created, _key = session_create(agent_version=make_version(application), inputs={"user": "x"})
    return created


@pytest.fixture
def on_postgres() -> bool:
    return connection.vendor == "postgresql"
