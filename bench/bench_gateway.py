"""`make bench` section `gateway` (issue 31 items 3 and 10): what the gateway costs a request.

1. Overhead. Every client request goes to one local fake model (bench/fake_upstream.py, a
   fixed FIXED_DELAY per call, its own cost measured and reported) in three ways, side by
   side in interleaved rounds of one run: straight to the fake (the floor), through the
   LiteLLM proxy (`litellm --config`, one process, from its own virtualenv: see
   `litellm_venv`), and through the gateway (uvicorn, one worker, PostgreSQL, as `make serve`
   runs it). The gateway's requests continue real sessions of 1k and 100k messages
   (bench_data's layout, a runnable `openai` version whose baseUrl is the fake): an
   incremental client sending one new user message, a full-history client resending the
   whole transcript (1k only: at 100k the body is far above the 2 MB limit), and a request
   whose model makes one protocol call and then answers (two model calls, one request).
   Overhead = the client's latency - FIXED_DELAY x the model calls. The gateway's own record
   (`GatewayExchange.gateway_ms`, the `contextproto_gateway_overhead_seconds` histogram) is
   read back and compared.
2. Slow upstreams beside normal traffic. One gateway worker with DATABASE_POOL_SIZE=8, a
   fake that answers after SLOW_DELAY seconds, and API traffic (health, a session read, a
   projection of another session) measured alone, then while 8 and then 16 gateway
   requests wait on that fake at once.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/run.py --only gateway [--refresh]

This module runs the section; its parts: gateway_setup.py (settings, servers, client,
sessions), gateway_overhead.py (part 1), gateway_slow.py (part 2), gateway_report.py (goals,
tables, the BENCHMARKS.md text).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import benchlib
from gateway_overhead import breakdown, measure_overhead, variants
from gateway_report import goals, overhead_table, slow_table
from gateway_setup import (
    FIXED_DELAY,
    ROUNDS,
    SLOW_DELAY,
    VAR,
    Process,
    fake_upstream,
    gateway_server,
    litellm_proxy,
    litellm_version,
    prepare,
)
from gateway_slow import measure_slow

# --------------------------------------------------------------------------- the section


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    benchlib.banner(
        f"Gateway (issue 31): overhead against LiteLLM and a direct call ({rounds} interleaved "
        f"rounds, fake model {FIXED_DELAY * 1000:.0f} ms), then slow upstreams "
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
        prepared = prepare(fake.base, slow_fake.base)
        prepared["master_key"] = master_key
        benchlib.log(f"sessions built in {prepared['seconds']:.1f} s")
        gateway = stack.enter_context(gateway_server(metrics_token))
        litellm: Process | None = None
        litellm_error = None
        try:
            litellm = stack.enter_context(litellm_proxy(fake.base, master_key))
        except (OSError, RuntimeError, subprocess.CalledProcessError, KeyError) as exc:
            litellm_error = f"{exc.__class__.__name__}: {str(exc)[:300]}"
            benchlib.log(f"LiteLLM not measured: {litellm_error}")
        found = variants(fake, litellm, gateway, prepared, prepared["key"])
        overhead = measure_overhead(found, fake, gateway, metrics_token, rounds)
        overhead["litellm_error"] = litellm_error
        overhead["litellm_version"] = litellm_version() if litellm is not None else None
        overhead["full_messages"] = prepared["full_messages"]
        for row in overhead["rows"]:
            benchlib.log(
                f"{row['label']}: overhead p50 {row['p50']:.1f} ms, p95 {row['p95']:.1f} ms"
                f" (recorded {row['recorded_p50']:.1f} / {row['recorded_p95']:.1f} ms)"
                + (f" problems {row['problems']}" if row["problems"] else "")
            )
        slow = measure_slow(gateway.base, prepared["key"], prepared)
        overhead["breakdown"] = breakdown(prepared)
        benchlib.log(f"where the time goes: {overhead['breakdown']}")
    result.update(
        overhead=overhead,
        slow=slow,
        prepare_seconds=prepared["seconds"],
        load_after=_loadavg(),
        seconds=time.perf_counter() - started,
    )
    result["goals"] = goals(overhead, slow)
    result["table"] = overhead_table(overhead)
    result["slow_table"] = slow_table(slow)
    print(result["table"])
    print(result["slow_table"])
    return result


if __name__ == "__main__":
    benchlib.refuse_unless_postgres()
    benchlib.django_setup()
    run(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)
