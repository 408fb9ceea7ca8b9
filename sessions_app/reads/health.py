"""The health probes' reads: is the database reachable, the cache answering, every migration
applied. Each check reports a short status string ("ok", "error: <class>", "pending: <n>");
none raises, because a probe must answer even when its dependency is gone."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The cache probe's key: a throw-away entry that expires on its own.
_PING_KEY = "health:ping"


def database_check() -> str:
    """ "ok" when the database answers `SELECT 1`."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # report, don't crash: health must answer
        return f"error: {exc.__class__.__name__}"
    return "ok"


def cache_check() -> str:
    """ "ok" when the cache/broker gives back what was just put in it (a round trip is the
    only way to see a Redis that accepts connections but cannot store)."""
    try:
        cache.set(_PING_KEY, "1", 5)
        return "ok" if cache.get(_PING_KEY) == "1" else "error"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def migrations_check() -> str:
    """ "ok" when no migration is left to apply, else how many are."""
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"
    return "ok" if not pending else f"pending: {len(pending)}"


def dependency_checks(*, migrations: bool = False) -> dict[str, str]:
    """Reachability of the database and the cache/broker (and, asked, applied migrations,
    only checked when the database answers)."""
    checks = {"database": database_check(), "cache": cache_check()}
    if migrations and checks["database"] == "ok":
        checks["migrations"] = migrations_check()
    return checks
