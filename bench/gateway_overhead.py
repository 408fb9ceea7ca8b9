"""Parts 1, 2 and 5 of the gateway section (bench/bench_gateway.py): what a request costs.

Every path to the fake model (direct, LiteLLM, the gateway servers; the view-size pairs
included) in interleaved rounds, the gateway's own record read back, and where the time of
one gateway request goes (statements, SQL, commits that flush the WAL, the session row's
reads), with tracing off and on.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchlib import median, p95
from gateway_sessions import GatewaySession, view_name
from gateway_setup import (
    FIXED_DELAY,
    GATEWAY_PATH,
    LITELLM_MODEL,
    RESPONSES_PATH,
    VIEW_TOKENS,
    WARMUP,
    Client,
    Process,
)
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# --------------------------------------------------------------------------- overhead

Reply = tuple[int | None, dict[str, str], bytes]


@dataclass
class Variant:
    key: str
    label: str
    calls: int  # model calls per request
    send: Callable[[int], Reply]
    check: Callable[[int | None, dict[str, str], bytes], str | None]
    client: Client  # its `elapsed` times each request
    session_id: Any = None
    latencies: list[float] = field(default_factory=list)
    problems: Counter = field(default_factory=Counter)

    def overheads_ms(self) -> list[float]:
        return [(s - self.calls * FIXED_DELAY) * 1000 for s in self.latencies]


def _ok(status: int | None, headers: dict[str, str], raw: bytes) -> str | None:
    return None if status == 200 else f"status {status}: {raw[:200]!r}"


def _turns(expected: int) -> Callable[[int | None, dict[str, str], bytes], str | None]:
    def check(status: int | None, headers: dict[str, str], raw: bytes) -> str | None:
        if status != 200:
            return f"status {status}: {raw[:200]!r}"
        if headers.get("x-contextproto-turns") != str(expected):
            return f"{headers.get('x-contextproto-turns')} model calls, not {expected}"
        return None

    return check


def _chat_text(raw: bytes) -> str:
    return json.loads(raw)["choices"][0]["message"]["content"]


def user(n: int, tag: str, extra: str = "") -> dict[str, Any]:
    return {"role": "user", "content": f"Request {n} ({tag}){extra}: check the ACME quote."}


# The gateway servers of a run (bench_gateway.SERVERS): name -> label.
SERVER_LABELS = {
    "gw1": "gateway (1 worker)",
    "gw4": "gateway (4 workers)",
    "trace-off": "gateway (1 worker), tracing off",
    "trace-up": "gateway (1 worker), tracing on, collector up",
    "trace-down": "gateway (1 worker), tracing on, collector down",
}


def _gateway_variant(
    gateways: dict[str, Process],
    key: str,
    name: str,
    session: GatewaySession,
    label: str,
    *,
    calls: int = 1,
    responses: bool = False,
) -> Variant:
    """A client of `gateways[<server>:…]` continuing `session`: its new message only, or its
    whole history when the session has one; the Responses API when `responses`."""
    client = Client(
        gateways[name.split(":")[0]].base,
        {"Authorization": f"Bearer {key}", "X-Contextproto-Session": str(session.session_id)},
    )

    def send(n: int) -> Reply:
        mark = f" [protocol:{n}]" if calls == 2 else ""
        message = user(n, name, mark)
        if responses:
            return client.request("POST", RESPONSES_PATH, {"model": "x", "input": [message]})
        if session.full_history is None:
            return client.request("POST", GATEWAY_PATH, {"model": "x", "messages": [message]})
        session.full_history.append(message)
        status, headers, raw = client.request(
            "POST", GATEWAY_PATH, {"model": "x", "messages": session.full_history}
        )
        if status == 200:
            session.full_history.append({"role": "assistant", "content": _chat_text(raw)})
        else:  # the client drops what was not answered and sends it again next round
            session.full_history.pop()
        return status, headers, raw

    return Variant(name, label, calls, send, _turns(calls), client, session.session_id)


def _resending(base: str, master_key: str, name: str, messages: list[dict[str, Any]]) -> Variant:
    """A LiteLLM client that resends its whole conversation, growing by each exchange."""
    client = Client(base, {"Authorization": f"Bearer {master_key}"})

    def send(n: int) -> Reply:
        messages.append(user(n, name))
        status, headers, raw = client.request(
            "POST", "/v1/chat/completions", {"model": LITELLM_MODEL, "messages": messages}
        )
        if status == 200:
            messages.append({"role": "assistant", "content": _chat_text(raw)})
        else:
            messages.pop()
        return status, headers, raw

    label = f"LiteLLM proxy, whole {name.split('@')[1]} conversation"
    return Variant(name, label, 1, send, _ok, client)


def variants(
    fake: Process, litellm: Process | None, gateways: dict[str, Process], prepared: dict[str, Any]
) -> list[Variant]:
    """Every path of the overhead rounds, the view-size comparison's included."""
    key = prepared["key"]
    found: list[Variant] = []
    direct = Client(fake.base)
    found.append(
        Variant(
            "direct",
            "direct to the fake model",
            1,
            lambda n: direct.request(
                "POST",
                "/v1/chat/completions",
                {"model": LITELLM_MODEL, "messages": [user(n, "direct")]},
            ),
            _ok,
            direct,
        )
    )
    if litellm is not None:
        proxy = Client(litellm.base, {"Authorization": f"Bearer {prepared['master_key']}"})
        found.append(
            Variant(
                "litellm",
                "LiteLLM proxy, Chat Completions",
                1,
                lambda n: proxy.request(
                    "POST",
                    "/v1/chat/completions",
                    {"model": LITELLM_MODEL, "messages": [user(n, "litellm")]},
                ),
                _ok,
                proxy,
            )
        )
        found.append(
            Variant(
                "litellm-responses",
                "LiteLLM proxy, Responses API (its /v1/responses)",
                1,
                lambda n: proxy.request(
                    "POST",
                    "/v1/responses",
                    {"model": LITELLM_MODEL, "input": [user(n, "litellm-responses")]},
                ),
                _ok,
                proxy,
            )
        )
    sessions: dict[str, GatewaySession] = prepared["sessions"]
    full = prepared["full_messages"]

    def gateway(name: str, what: str, **kwargs: Any) -> Variant:
        label = f"{SERVER_LABELS[name.split(':')[0]]}, {what}"
        return _gateway_variant(gateways, key, name, sessions[name], label, **kwargs)

    found += [
        gateway("gw1:incremental@1k", "1k session, incremental client"),
        gateway("gw1:incremental@100k", "100k session, incremental client"),
        gateway("gw4:incremental@1k", "1k session, incremental client"),
        gateway("gw4:incremental@100k", "100k session, incremental client"),
        gateway("gw1:full@1k", f"1k session, full-history client ({full}+ messages)"),
        gateway("gw1:protocol@1k", "1k session, one protocol call then the answer", calls=2),
        gateway("gw1:responses@1k", "1k session, Responses API client", responses=True),
        gateway(
            "gw1:responses-upstream@1k",
            "1k session, Responses API client and upstream",
            responses=True,
        ),
        gateway("trace-off:incremental@1k", "1k session, incremental client"),
        gateway("trace-up:incremental@1k", "1k session, incremental client"),
        gateway("trace-down:incremental@1k", "1k session, incremental client"),
    ]
    for tokens in VIEW_TOKENS:
        name = view_name(tokens)
        session = prepared["view_sessions"][name]
        found.append(
            _gateway_variant(
                gateways,
                key,
                f"gw1:view@{name}",
                session,
                f"gateway (1 worker), {name}-token view, incremental client",
            )
        )
        if litellm is not None:
            conversation = list(prepared["view_conversations"][name])
            found.append(
                _resending(
                    litellm.base, prepared["master_key"], f"litellm:view@{name}", conversation
                )
            )
    return found


HISTOGRAMS = {
    "overhead": 'contextproto_gateway_overhead_seconds_{part}{{format="openai"}}',
    "projection": "contextproto_projection_seconds_{part}",
}


def _metrics(gateway: Process, token: str) -> dict[str, tuple[float, float]]:
    """Sum and count of the gateway overhead (OpenAI format) and projection histograms."""
    _status, _headers, raw = Client(gateway.base).request(
        "GET", "/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    text = raw.decode()
    found: dict[str, tuple[float, float]] = {}
    for name, pattern in HISTOGRAMS.items():
        values = []
        for part in ("sum", "count"):
            line = re.search(
                "^" + re.escape(pattern.format(part=part)) + r" (\S+)$", text, flags=re.MULTILINE
            )
            values.append(float(line.group(1)) if line else 0.0)
        found[name] = (values[0], values[1])
    return found


def _mean_ms(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], name: str
) -> tuple[float, int]:
    total = after[name][0] - before[name][0]
    count = after[name][1] - before[name][1]
    return (total / count * 1000 if count else float("nan")), int(count)


def counters(gateway: Process, token: str, *names: str) -> dict[str, float]:
    """Counters of a server's /metrics, summed over their labels (0 when absent)."""
    _status, _headers, raw = Client(gateway.base).request(
        "GET", "/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    found = dict.fromkeys(names, 0.0)
    for line in raw.decode().splitlines():
        for name in names:
            if re.match(re.escape(name) + r"(\{[^}]*\})? ", line):
                found[name] += float(line.rsplit(" ", 1)[1])
    return found


def _recorded(variant: Variant, since: Any) -> list[tuple[int, int]]:
    """(gateway_ms, upstream_ms) of the variant's measured requests, from their records."""
    from sessions_app.models import GatewayExchange

    rows = list(
        GatewayExchange.objects.filter(
            session_id=variant.session_id, http_status=200, created_at__gte=since
        )
        .order_by("created_at")
        .values_list("gateway_ms", "upstream_ms")
    )
    return [(g or 0, u or 0) for g, u in rows]


def _row(variant: Variant, since: Any) -> dict[str, Any]:
    overheads = variant.overheads_ms()
    recorded = _recorded(variant, since) if variant.session_id is not None else []
    gateway_ms = [g for g, _u in recorded]
    upstream_extra = [u - variant.calls * FIXED_DELAY * 1000 for _g, u in recorded]
    # Request by request (the records in the order the requests were sent): what the client
    # waited beyond the model = outside the recorded span + gateway_ms + the upstream call's
    # own time beyond the model's delay.
    aligned = len(recorded) == len(overheads) and not variant.problems
    edge = (
        [o - g - x for o, g, x in zip(overheads, gateway_ms, upstream_extra, strict=True)]
        if aligned
        else []
    )
    nan = float("nan")
    return {
        "key": variant.key,
        "label": variant.label,
        "calls": variant.calls,
        "requests": len(overheads),
        "p50": median(overheads),
        "p95": p95(overheads),
        "recorded_p50": median(gateway_ms) if gateway_ms else nan,
        "recorded_p95": p95(gateway_ms) if gateway_ms else nan,
        "recorded": gateway_ms,
        "upstream_extra_p50": median(upstream_extra) if upstream_extra else nan,
        "edge_p50": median(edge) if edge else nan,
        "problems": dict(variant.problems),
    }


def round_order[T](paths: list[T], n: int) -> list[T]:
    """Round `n`'s order of the paths: shuffled anew each round (seeded by `n`), so no path
    always follows the same one - a server still finishing the request before (its record,
    its logs, a collection) would otherwise slow the same neighbour every round."""
    return random.Random(f"gateway-round-{n}").sample(paths, len(paths))


def measure_overhead(
    found: list[Variant], fake: Process, gateway: Process, metrics_token: str, rounds: int
) -> dict[str, Any]:
    """Interleaved rounds of every variant (`round_order`); the records and the histograms of
    `gateway` (the 1-worker server) beside them."""
    from django.utils import timezone

    fake_client = Client(fake.base)
    histogram_before: dict[str, tuple[float, float]] = {}
    since = timezone.now()
    for n in range(WARMUP + rounds):
        if n == WARMUP:
            fake_client.request("POST", "/stats/reset", {})
            histogram_before = _metrics(gateway, metrics_token)
            since = timezone.now()
        for variant in round_order(found, n):
            status, headers, raw = variant.send(n)
            seconds = variant.client.elapsed
            problem = variant.check(status, headers, raw)
            if problem:
                variant.problems[problem] += 1
            elif n >= WARMUP:
                variant.latencies.append(seconds)
    histogram_after = _metrics(gateway, metrics_token)
    _status, _headers, raw = fake_client.request("GET", "/stats")
    rows = [_row(variant, since) for variant in found]
    # The histogram counts the 1-worker server's Chat Completions requests.
    recorded_all = [
        g
        for row in rows
        if row["key"].startswith("gw1:") and "responses" not in row["key"]
        for g in row.pop("recorded")
    ]
    for row in rows:
        row.pop("recorded", None)
    histogram, histogram_count = _mean_ms(histogram_before, histogram_after, "overhead")
    projection, projection_count = _mean_ms(histogram_before, histogram_after, "projection")
    return {
        "rows": rows,
        "fake": json.loads(raw or b"{}"),
        "histogram": {"count": histogram_count, "mean_ms": histogram},
        "projection": {"count": projection_count, "mean_ms": projection},
        "recorded": {
            "count": len(recorded_all),
            "mean_ms": sum(recorded_all) / len(recorded_all) if recorded_all else float("nan"),
        },
    }


# --------------------------------------------------------------------------- where the time goes

BREAKDOWN_REQUESTS = 20
WRITES = ("INSERT", "UPDATE", "DELETE")
# As tests/gateway/test_commits.py counts them: a read of the session row whole is a SELECT
# from its table with its version joined; any SELECT from its table reads it in part.
SESSION_TABLE = '"sessions_app_session"'
VERSION_TABLE = '"agents_agentversion"'


def flush_cost_ms(repeat: int = 30) -> dict[str, float]:
    """What one commit that writes costs on this database (it waits for the WAL to reach the
    disk), against the same statement with synchronous_commit off: a scratch table's row."""
    from django.db import connection

    def timed(sql: str) -> float:
        times = []
        with connection.cursor() as cursor:
            for _ in range(repeat):
                started = time.perf_counter()
                cursor.execute(sql)
                times.append(time.perf_counter() - started)
        return median(times) * 1000

    # A regular table (a temporary one writes no WAL), dropped afterwards.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_gateway_flush (id int PRIMARY KEY, n int)")
        cursor.execute("INSERT INTO bench_gateway_flush VALUES (1, 0) ON CONFLICT DO NOTHING")
    update = "UPDATE bench_gateway_flush SET n = n + 1 WHERE id = 1"
    flushed = timed(update)
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
    unflushed = timed(update)
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = on")
        cursor.execute("DROP TABLE bench_gateway_flush")
    return {"flushed_ms": flushed, "unflushed_ms": unflushed, "select_ms": timed("SELECT 1")}


def breakdown(prepared: dict[str, Any]) -> dict[str, Any]:
    """Statements, SQL time and WAL-flushing commits of one gateway request, in this process,
    with tracing off (the figures at the top level) and on (`traced`: spans to an in-memory
    exporter, so what tracing adds to the request's own path shows)."""
    from contextproto import telemetry

    found = _counted(prepared)
    telemetry.configure(SimpleSpanProcessor(InMemorySpanExporter()))
    try:
        found["traced"] = _counted(prepared)
    finally:
        telemetry.configure(None)
    found["probe"] = flush_cost_ms()
    return found


def _counted(prepared: dict[str, Any]) -> dict[str, Any]:
    """The same view through Django's test client (no HTTP server) on the 1k incremental
    session, BREAKDOWN_REQUESTS requests after one warm-up: every statement is counted and
    timed; a commit flushes the WAL when its transaction wrote (or locked) a row, which is
    an atomic block with such a statement or a write run outside any."""
    from django.db import connection
    from django.test import Client as TestClient
    from django.test.utils import override_settings

    session = prepared["sessions"]["gw1:incremental@1k"].session_id
    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {prepared['key']}",
        "HTTP_X_CONTEXTPROTO_SESSION": str(session),
    }
    client = TestClient()
    counts: Counter = Counter()
    seconds = {"sql": 0.0}
    pending = {"write": False}

    def send(n: int) -> int:
        body = {"model": "x", "messages": [{"role": "user", "content": f"Profiled {n}."}]}
        return client.post(
            GATEWAY_PATH, data=json.dumps(body), content_type="application/json", **headers
        ).status_code

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        head = sql.lstrip().split(None, 1)[0].upper()
        writes = head in WRITES or " FOR UPDATE" in sql or " FOR NO KEY UPDATE" in sql
        counts["statements"] += 1
        if head == "SELECT" and f"FROM {SESSION_TABLE}" in sql:
            counts["session_selects"] += 1
            counts["session_reads"] += VERSION_TABLE in sql
            counts["session_locks"] += " FOR UPDATE" in sql or " FOR NO KEY UPDATE" in sql
        if writes and not connection.in_atomic_block:
            counts["flushes"] += 1
        elif writes:
            pending["write"] = True
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            seconds["sql"] += time.perf_counter() - started

    commit = connection.commit

    def counted_commit() -> None:
        if pending["write"]:
            counts["flushes"] += 1
            pending["write"] = False
        commit()

    with override_settings(ALLOWED_HOSTS=["testserver"]):
        send(0)
        connection.commit = counted_commit  # type: ignore[method-assign]
        started = time.perf_counter()
        try:
            with connection.execute_wrapper(wrapper):
                statuses = [send(n) for n in range(1, BREAKDOWN_REQUESTS + 1)]
        finally:
            del connection.commit
        wall = time.perf_counter() - started
    n = BREAKDOWN_REQUESTS
    return {
        "requests": n,
        "ok": sum(1 for status in statuses if status == 200),
        "statements": counts["statements"] / n,
        "flushes": counts["flushes"] / n,
        "session_reads": counts["session_reads"] / n,
        "session_selects": counts["session_selects"] / n,
        "session_locks": counts["session_locks"] / n,
        "sql_ms": seconds["sql"] / n * 1000,
        "overhead_ms": (wall / n - FIXED_DELAY) * 1000,
    }
