"""Liveness and readiness are separate probes; neither needs a key nor refuses a stray one."""

from __future__ import annotations

from django.core.cache import cache
from django.db.migrations.executor import MigrationExecutor
from django.test import Client


def test_liveness_answers_without_touching_dependencies(db):
    response = Client().get("/api/v1/health/live/", HTTP_AUTHORIZATION="Bearer stale-key")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readiness_checks_database_cache_and_migrations(db):
    response = Client().get("/api/v1/health/ready/")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "cache": "ok", "migrations": "ok"}


def test_readiness_is_503_with_pending_migrations(db, monkeypatch):
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [object()])
    response = Client().get("/api/v1/health/ready/")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == "pending: 1"


def test_readiness_is_503_when_the_cache_is_down(db, monkeypatch):
    def down(*_args, **_kwargs):
        raise ConnectionError("unreachable")

    monkeypatch.setattr(cache, "set", down)
    response = Client().get("/api/v1/health/ready/")
    assert response.status_code == 503
    assert response.json()["checks"]["cache"] == "error: ConnectionError"


def test_health_ignores_a_stray_authorization_header(db):
    assert Client().get("/api/v1/health/", HTTP_AUTHORIZATION="Bearer nope").status_code == 200
