"""The end-to-end gate (issue 14): `CONTEXTPROTO_E2E=1` switches the `e2e` tests on.

Unset, they are skipped like any other test that needs services a laptop may not run. Set
(CI's PostgreSQL pass sets it), they run on PostgreSQL + Redis with a real Celery worker,
and a missing service FAILS them with the reason: a CI run without PostgreSQL or Redis must
not turn green by skipping the very suite that proves the roundtrips.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from django.conf import settings

from contextproto.celery import app
from tests.providers.servers import SDK_ENV
from tests.servers import start_celery_worker, stop_process, worker_env

E2E_FLAG = "CONTEXTPROTO_E2E"
# The key the provider SDKs send to the local fake endpoints; never a real credential.
FAKE_KEY_ENV = "CONTEXTPROTO_E2E_FAKE_KEY"
FAKE_KEY = "sk-e2e-local-fake"


def e2e_enabled() -> bool:
    return os.environ.get(E2E_FLAG) == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if e2e_enabled():
        return
    skip = pytest.mark.skip(reason=f"end-to-end suite: set {E2E_FLAG}=1 (CI does)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


def services_problem() -> str | None:
    """Why PostgreSQL + Redis are not usable for the e2e suite, or None when they are."""
    engine = settings.DATABASES["default"]["ENGINE"]
    if not engine.endswith("postgresql"):
        return (
            f"{E2E_FLAG}=1 but DATABASE_URL is not PostgreSQL (engine {engine}): the "
            "end-to-end suite needs PostgreSQL, Redis and a Celery worker; point DATABASE_URL "
            "at PostgreSQL or unset the flag."
        )
    if not settings.REDIS_URL:
        return (
            f"{E2E_FLAG}=1 but REDIS_URL is not set: the end-to-end suite needs Redis as the "
            "Celery broker; set REDIS_URL or unset the flag."
        )

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=3).ping()
    except redis.RedisError as exc:
        return f"{E2E_FLAG}=1 but Redis at {settings.REDIS_URL} does not answer: {exc}"
    return None


@dataclass
class Worker:
    """The shared Celery worker, or the reason there is none (each test then fails)."""

    process: subprocess.Popen | None
    log: Path | None
    problem: str | None

    def require(self) -> None:
        if self.problem is not None:
            pytest.fail(self.problem, pytrace=False)
        assert self.process is not None
        if self.process.poll() is not None:
            pytest.fail(f"the Celery worker exited ({self.process.returncode}):\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log else ""


@pytest.fixture(scope="module")
def e2e_worker(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Worker]:
    """One real solo-pool Celery worker on the test database and Redis, for the module.

    The worker compresses with no recent tail kept (MAINTENANCE_TAIL_SHARE=0), so a
    maintenance job covers everything up to the newest finished group and the tests know
    the boundary in advance.
    """
    problem = services_problem() if e2e_enabled() else "e2e disabled"
    if problem is not None:
        yield Worker(None, None, problem)
        return

    with django_db_blocker.unblock():
        env = worker_env(
            MAINTENANCE_TAIL_SHARE="0",
            MAINTENANCE_RETRY_BASE_SECONDS="1",
            RUNTIME_AUTOSTART="true",
            **{FAKE_KEY_ENV: FAKE_KEY},
        )
    for name in SDK_ENV:
        env.pop(name, None)
    app.control.purge()
    log = tmp_path_factory.mktemp("e2e-worker") / "worker.log"
    process = start_celery_worker(log, env=env)
    try:
        yield Worker(process, log, None)
    finally:
        stop_process(process, 30)
        app.control.purge()
