"""Parallel test workers never share a Redis database (tests/worker_redis.py)."""

from __future__ import annotations

import pytest

from tests.worker_redis import worker_redis_url


def test_each_worker_moves_up_from_the_configured_database() -> None:
    assert worker_redis_url("redis://127.0.0.1:6379/12", "gw0") == "redis://127.0.0.1:6379/12"
    assert worker_redis_url("redis://127.0.0.1:6379/12", "gw1") == "redis://127.0.0.1:6379/13"
    assert worker_redis_url("redis://h:1", "gw2") == "redis://h:1/2"
    assert worker_redis_url("redis://h:1/3?timeout=1", "gw1") == "redis://h:1/4?timeout=1"


def test_a_worker_beyond_the_last_database_is_refused_not_wrapped_onto_another_runs() -> None:
    with pytest.raises(ValueError, match="needs database 16"):
        worker_redis_url("redis://127.0.0.1:6379/15", "gw1")
