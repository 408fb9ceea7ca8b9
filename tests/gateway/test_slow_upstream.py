"""A gateway worker stays responsive while its requests wait on a slow upstream (issue 31
item 3).

One uvicorn worker with `make serve`'s pool (DATABASE_POOL_SIZE=8), and WAITING gateway
requests that each wait UPSTREAM_SECONDS on the fake model at once, as many as the pool has
connections. While they all wait, API requests (health, a session read) keep their usual
latency and none fails: a waiting request holds no connection (the pool would be empty
and the API would wait its 10 s pool timeout) and no transaction, so no session row lock.
The benchmark's figures for 8 and 16 are in BENCHMARKS.md ("Gateway").
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from django.db import connection

from sessions_app.services.sessions import session_create
from tests.gateway.clients import post
from tests.gateway.live import gateway_server, make_app, make_version, upstream
from tests.servers import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WAITING = 8
UPSTREAM_SECONDS = 8.0
# Generous: these requests take tens of milliseconds; a pool exhausted by waiting requests
# makes them wait 10 s (its timeout) and fail.
API_P95_BOUND = 1.0


def _get(url: str, key: str) -> tuple[int | None, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, time.perf_counter() - started
    except urllib.error.HTTPError as exc:
        return exc.code, time.perf_counter() - started
    except OSError:
        return None, time.perf_counter() - started


def _open_transactions() -> int:
    """Transactions on the test database (not this test's own) open for over a second."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start < now() - interval '1 second'"
        )
        return int(cursor.fetchone()[0])


def test_the_api_stays_responsive_while_gateway_requests_wait_on_a_slow_upstream(
    django_db_setup, django_db_blocker, transactional_db, tmp_path
):
    application, key = make_app()
    with upstream("openai") as model:
        for _ in range(WAITING):
            model.say("Done at last.", delay=UPSTREAM_SECONDS)
        version = make_version(application, upstream_url=model.url)
        other, _session_key = session_create(agent_version=version)
        with gateway_server(
            tmp_path, DATABASE_POOL_SIZE="8", GATEWAY_UPSTREAM_TIMEOUT_SECONDS="60"
        ) as base:
            api = [f"{base}/api/v1/health/live/", f"{base}/api/v1/sessions/{other.id}/"]
            for url in api:  # warm: the worker imports and connects lazily
                assert _get(url, key)[0] == 200

            replies: list[tuple[int, Any]] = []
            lock = threading.Lock()

            def ask(n: int) -> None:
                status, _headers, raw = post(
                    f"{base}/gateway/openai/v1/chat/completions",
                    {"model": "helper@1", "messages": [{"role": "user", "content": f"Q{n}"}]},
                    {"Authorization": f"Bearer {key}"},
                )
                with lock:
                    replies.append((status, raw))

            threads = [threading.Thread(target=ask, args=(n,)) for n in range(WAITING)]
            started = time.monotonic()  # the model answers the first at the earliest then
            for thread in threads:
                thread.start()
            wait_for(
                lambda: len(model.received) >= WAITING,
                UPSTREAM_SECONDS,
                f"{WAITING} gateway requests waiting on the model",
            )
            waiting_since = time.monotonic()
            measured: list[tuple[int | None, float]] = []
            open_transactions = None
            # From the moment all of them wait until the first one is answered.
            while not replies and time.monotonic() < started + UPSTREAM_SECONDS + 10:
                for url in api:
                    measured.append(_get(url, key))
                if open_transactions is None and time.monotonic() > waiting_since + 1.2:
                    open_transactions = _open_transactions()
            for thread in threads:
                thread.join(UPSTREAM_SECONDS + 30)

    assert [status for status, _raw in replies] == [200] * WAITING, replies
    assert len(measured) >= 10, (
        f"only {len(measured)} API requests answered while the gateway requests waited "
        f"({waiting_since - started:.1f} s until all {WAITING} were waiting; latencies "
        f"{[round(s, 2) for _status, s in measured]} s): is the pool held through the wait?"
    )
    statuses = [status for status, _seconds in measured]
    assert statuses == [200] * len(measured), statuses
    latencies = sorted(seconds for _status, seconds in measured)
    p95 = latencies[max(0, int(0.95 * len(latencies)) - 1)]
    assert p95 < API_P95_BOUND, f"API p95 {p95 * 1000:.0f} ms beside {WAITING} waiting requests"
    assert open_transactions == 0, "a waiting gateway request kept a transaction open"
