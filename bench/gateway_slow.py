"""Part 4 of the gateway section (bench/bench_gateway.py): slow upstreams beside API traffic.

API traffic alone, then beside gateway requests waiting on a slow model, and what each
phase recorded.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import benchlib
from benchlib import median, p95
from gateway_setup import API_CLIENTS, API_PAUSE, GATEWAY_PATH, SLOW_COUNTS, SLOW_DELAY, Client

# --------------------------------------------------------------------------- slow upstreams


@dataclass
class Phase:
    name: str
    waiting: int
    api: list[tuple[str, int | None, float]] = field(default_factory=list)
    gateway: list[tuple[int | None, float]] = field(default_factory=list)
    seconds: float = 0.0
    started_at: Any = None
    in_transaction: int | None = None  # transactions open > 1 s mid-wait


def _api_loop(
    base: str, key: str, session_id: Any, stop: threading.Event, out: list, lock: threading.Lock
) -> None:
    client = Client(base, {"Authorization": f"Bearer {key}"})
    targets = [
        ("health", "GET", "/api/v1/health/live/", None),
        ("session read", "GET", f"/api/v1/sessions/{session_id}/", None),
        ("projection", "POST", f"/api/v1/sessions/{session_id}/projection/", {}),
    ]
    n = 0
    while not stop.is_set():
        name, method, path, body = targets[n % len(targets)]
        n += 1
        started = time.perf_counter()
        status, _headers, _raw = client.request(method, path, body, timeout=30)
        with lock:
            out.append((name, status, time.perf_counter() - started))
        stop.wait(API_PAUSE)
    client.close()


def _slow_request(base: str, key: str, model: str, n: int, out: list, lock: threading.Lock) -> None:
    client = Client(base, {"Authorization": f"Bearer {key}"})
    body = {"model": model, "messages": [{"role": "user", "content": f"Slow request {n}."}]}
    started = time.perf_counter()
    status, _headers, _raw = client.request("POST", GATEWAY_PATH, body, timeout=SLOW_DELAY * 6)
    with lock:
        out.append((status, time.perf_counter() - started))
    client.close()


def run_phase(base: str, key: str, prepared: dict[str, Any], waiting: int) -> Phase:
    """API traffic for SLOW_DELAY + 1 s alone, or while `waiting` slow gateway requests run."""
    phase = Phase(
        "API alone" if not waiting else f"beside {waiting} slow gateway requests", waiting
    )
    lock = threading.Lock()
    stop = threading.Event()
    api = [
        threading.Thread(
            target=_api_loop,
            args=(base, key, prepared["api_session"], stop, phase.api, lock),
            daemon=True,
        )
        for _ in range(API_CLIENTS)
    ]
    from django.utils import timezone

    phase.started_at = timezone.now()
    started = time.perf_counter()
    for thread in api:
        thread.start()
    slow = [
        threading.Thread(
            target=_slow_request,
            args=(base, key, prepared["slow_model"], n, phase.gateway, lock),
            daemon=True,
        )
        for n in range(waiting)
    ]
    for thread in slow:
        thread.start()
    if slow:
        time.sleep(SLOW_DELAY / 2)  # every gateway request is waiting on the model now
        phase.in_transaction = _in_transaction()
        for thread in slow:
            thread.join(SLOW_DELAY * 6)
    else:
        time.sleep(SLOW_DELAY + 1)
    stop.set()
    for thread in api:
        thread.join(35)
    phase.seconds = time.perf_counter() - started
    return phase


def _in_transaction() -> int:
    """Transactions on this database (not ours) open for more than a second, mid-wait: a
    waiting gateway request that kept its transaction (and the session's row lock) shows."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start < now() - interval '1 second'"
        )
        return int(cursor.fetchone()[0])


def _slow_recorded(version_id: Any, phase: Phase) -> dict[str, float]:
    """The slow requests' own records: time in the gateway and in the upstream call (ms)."""
    from sessions_app.models import GatewayExchange

    rows = list(
        GatewayExchange.objects.filter(
            session__agent_version_id=version_id, finished_at__gte=phase.started_at
        ).values_list("gateway_ms", "upstream_ms")
    )
    if not rows:
        return {}
    gateway = [g or 0 for g, _u in rows]
    upstream = [u or 0 for _g, u in rows]
    return {
        "gateway_p50": median(gateway),
        "gateway_max": max(gateway),
        "upstream_p50": median(upstream),
        "upstream_max": max(upstream),
    }


def measure_slow(base: str, key: str, prepared: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for waiting in (0, *SLOW_COUNTS):
        phase = run_phase(base, key, prepared, waiting)
        answered = [s * 1000 for _n, status, s in phase.api if status is not None]
        errors = sum(1 for _n, status, _s in phase.api if status is None or status >= 400)
        gateway_ok = sum(1 for status, _s in phase.gateway if status == 200)
        gateway_s = [s for _status, s in phase.gateway]
        by_name: dict[str, list[float]] = {}
        for name, status, seconds in phase.api:
            if status is not None:
                by_name.setdefault(name, []).append(seconds * 1000)
        rows.append(
            {
                "phase": phase.name,
                "waiting": waiting,
                "seconds": phase.seconds,
                "api_requests": len(phase.api),
                "api_p50": median(answered),
                "api_p95": p95(answered),
                "api_max": max(answered) if answered else float("nan"),
                "api_errors": errors,
                "by_name": {k: (median(v), p95(v), max(v)) for k, v in sorted(by_name.items())},
                "recorded": _slow_recorded(prepared["slow_version"], phase),
                "in_transaction": phase.in_transaction,
                "gateway_ok": gateway_ok,
                "gateway_statuses": dict(Counter(str(s) for s, _t in phase.gateway)),
                "gateway_p50_s": median(gateway_s) if gateway_s else float("nan"),
                "gateway_max_s": max(gateway_s) if gateway_s else float("nan"),
            }
        )
        benchlib.log(
            f"{phase.name}: API {len(phase.api)} requests, p50 {rows[-1]['api_p50']:.1f} ms, "
            f"p95 {rows[-1]['api_p95']:.1f} ms, max {rows[-1]['api_max']:.1f} ms, "
            f"{errors} errors; gateway {gateway_ok}/{waiting} answered 200; by path "
            f"{rows[-1]['by_name']}; gateway records {rows[-1]['recorded']}"
        )
    return rows
