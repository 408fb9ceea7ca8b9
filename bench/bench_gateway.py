"""`make bench` section `gateway` (issues 31, 38, 39, 41): what the gateway costs a request.

1. Overhead. Every client request goes to one local fake model (bench/fake_upstream.py, a
   fixed FIXED_DELAY per call, its own cost measured and reported) in interleaved rounds of
   one run: straight to the fake (the floor), through the LiteLLM proxy (`litellm
   --config`, one process, from its own virtualenv: see `litellm_venv`; its Chat
   Completions and its /v1/responses), and through the gateway under uvicorn on PostgreSQL
   as `make serve` runs it: one worker, four workers (issue 38's measurement), and one
   worker with tracing on, its collector up (bench/otlp_sink.py) or down (issue 41). The
   gateway's requests continue real sessions of 1k and 100k messages (bench_data's layout,
   runnable `openai` versions whose baseUrl is the fake, one session per path): an
   incremental client sending one new user message (Chat Completions; the Responses API
   with a Chat Completions and with a Responses upstream), a full-history client resending
   the whole transcript (1k only), and a request whose model makes one protocol call and
   then answers. Overhead = the client's latency - FIXED_DELAY x the model calls. The
   gateway's own record (`GatewayExchange.gateway_ms`, the
   `contextproto_gateway_overhead_seconds` histogram) is read back and compared.
2. Overhead against view size, in the same rounds: sessions whose view holds a whole
   conversation of ~1k, 10k, 50k and 100k tokens (no checkpoint) continued by a client that
   sends only its new message, beside LiteLLM forwarding the same conversation resent whole.
3. Streaming (bench/gateway_stream.py): the fake streams STREAM_CHUNKS pieces over
   STREAM_SECONDS; the client's first text against the fake's first piece, through
   LiteLLM and the gateway (Chat Completions and Responses clients).
4. Slow upstreams beside normal traffic (bench/gateway_slow.py). One gateway worker with
   DATABASE_POOL_SIZE=8, a fake that answers after SLOW_DELAY seconds, and API traffic
   (health, a session read, a projection of another session) measured alone, then while 8
   and then 16 gateway requests wait on that fake at once.
5. Where the time of one request goes: statements, session-row reads, commits that write
   (`breakdown`, through Django's test client in this process).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/run.py --only gateway [--refresh]

This module runs the section; its parts: gateway_setup.py (settings, servers, client),
gateway_sessions.py (sessions), gateway_overhead.py (parts 1, 2 and 5), gateway_stream.py
(part 3), gateway_slow.py (part 4), gateway_report.py and gateway_section.py (goals,
tables, the BENCHMARKS.md text).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import benchlib
import hostloops
from gateway_overhead import SERVER_LABELS, breakdown, counters, measure_overhead, variants
from gateway_report import (
    goals,
    overhead_table,
    slow_table,
    stream_table,
    tracing_table,
    view_table,
)
from gateway_sessions import prepare, start_view_sessions, view_name, view_tokens
from gateway_setup import (
    FIXED_DELAY,
    ROUNDS,
    SLOW_DELAY,
    STREAM_CHUNKS,
    STREAM_SECONDS,
    VAR,
    VIEW_TOKENS,
    Client,
    GatewaySpec,
    Process,
    fake_upstream,
    gateway_servers,
    litellm_proxy,
    litellm_ready,
    litellm_version,
    otlp_sink,
    servers_ready,
)
from gateway_slow import measure_slow
from gateway_stream import measure_stream, stream_paths

TRACE_COUNTERS = (
    "contextproto_trace_spans_exported_total",
    "contextproto_trace_spans_dropped_total",
    "contextproto_trace_exports_failed_total",
)

# --------------------------------------------------------------------------- the section


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _specs(sink: Process) -> list[GatewaySpec]:
    down = f"http://127.0.0.1:{hostloops.free_port()}"  # nothing listens there
    return [
        GatewaySpec("gw1"),
        GatewaySpec("gw4", workers=4),
        GatewaySpec("trace-off"),
        GatewaySpec("trace-up", otlp_endpoint=sink.base),
        GatewaySpec("trace-down", otlp_endpoint=down),
    ]


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    benchlib.banner(
        f"Gateway (issues 31, 38, 39, 41): overhead against LiteLLM and a direct call ({rounds} "
        f"interleaved rounds, fake model {FIXED_DELAY * 1000:.0f} ms), view sizes, streaming "
        f"({STREAM_CHUNKS} pieces over {STREAM_SECONDS:g} s), tracing, then slow upstreams "
        f"({SLOW_DELAY:g} s) beside API traffic"
    )
    VAR.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_before = _loadavg()
    metrics_token = secrets.token_urlsafe(16)
    master_key = "sk-bench-" + secrets.token_hex(8)
    result: dict[str, Any] = {
        "load_before": load_before,
        "rounds": rounds,
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    with ExitStack() as stack:
        fake = stack.enter_context(fake_upstream(FIXED_DELAY))
        slow_fake = stack.enter_context(fake_upstream(SLOW_DELAY))
        sink = stack.enter_context(otlp_sink())
        specs = _specs(sink)
        servers_started = time.perf_counter()
        gateways = stack.enter_context(gateway_servers(metrics_token, specs))
        litellm: Process | None = None
        litellm_error = None
        try:
            litellm = stack.enter_context(litellm_proxy(fake.base, master_key))
        except (OSError, RuntimeError, subprocess.CalledProcessError, KeyError) as exc:
            litellm_error = f"{exc.__class__.__name__}: {str(exc)[:300]}"
        prepared = prepare(fake.base, slow_fake.base)
        prepared["master_key"] = master_key
        benchlib.log(f"sessions built in {prepared['seconds']:.1f} s")
        servers_ready(gateways, specs)
        if litellm is not None:
            try:
                litellm_ready(litellm)
            except RuntimeError as exc:
                litellm_error = f"{exc.__class__.__name__}: {str(exc)[:300]}"
                litellm = None
        if litellm_error:
            benchlib.log(f"LiteLLM not measured: {litellm_error}")
        benchlib.log(f"servers ready {time.perf_counter() - servers_started:.1f} s after start")
        start_view_sessions(gateways["gw1"], prepared)
        gw1 = gateways["gw1"]
        found = variants(fake, litellm, gateways, prepared)
        overhead = measure_overhead(found, fake, gw1, metrics_token, rounds)
        overhead["litellm_error"] = litellm_error
        overhead["litellm_version"] = litellm_version() if litellm is not None else None
        overhead["full_messages"] = prepared["full_messages"]
        overhead["view_tokens"] = {
            view_name(t): view_tokens(prepared["view_sessions"][view_name(t)].session_id)
            for t in VIEW_TOKENS
        }
        for row in overhead["rows"]:
            benchlib.log(
                f"{row['label']}: overhead p50 {row['p50']:.1f} ms, p95 {row['p95']:.1f} ms"
                f" (recorded {row['recorded_p50']:.1f} / {row['recorded_p95']:.1f} ms)"
                + (f" problems {row['problems']}" if row["problems"] else "")
            )
        stream = measure_stream(stream_paths(fake, litellm, gw1, prepared), fake.base)
        for row in stream:
            benchlib.log(
                f"stream, {row['label']}: first text +{row['first_p50']:.1f} ms p50, "
                f"+{row['first_p95']:.1f} ms p95 after the upstream's"
                + (f" problems {row['problems']}" if row["problems"] else "")
            )
        overhead["tracing"] = {
            name: {
                **counters(gateways[name], metrics_token, *TRACE_COUNTERS),
                "sink": sink_stats(sink) if name == "trace-up" else None,
            }
            for name in ("trace-up", "trace-down")
        }
        benchlib.log(f"tracing: {overhead['tracing']}")
        slow = measure_slow(gw1.base, prepared["key"], prepared)
        overhead["breakdown"] = breakdown(prepared)
        benchlib.log(f"where the time goes: {overhead['breakdown']}")
    result.update(
        overhead=overhead,
        stream=stream,
        slow=slow,
        servers=SERVER_LABELS,
        prepare_seconds=prepared["seconds"],
        load_after=_loadavg(),
        seconds=time.perf_counter() - started,
    )
    result["goals"] = goals(overhead, stream, slow)
    result["table"] = overhead_table(overhead)
    result["view_table"] = view_table(overhead)
    result["stream_table"] = stream_table(stream)
    result["tracing_table"] = tracing_table(overhead)
    result["slow_table"] = slow_table(slow)
    for name in ("table", "view_table", "stream_table", "tracing_table", "slow_table"):
        print(result[name])
    return result


def sink_stats(sink: Process) -> dict[str, Any]:
    """What the trace sink received (batches, spans, bytes)."""
    _status, _headers, raw = Client(sink.base).request("GET", "/stats")
    return json.loads(raw or b"{}")


if __name__ == "__main__":
    benchlib.refuse_unless_postgres()
    benchlib.django_setup()
    run(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)
