"""The gateway section's goals and tables, from one run's figures.

The figures are measured by bench/bench_gateway.py (gateway_overhead.py, gateway_stream.py,
gateway_slow.py); the BENCHMARKS.md text around them is gateway_section.py's.
"""

from __future__ import annotations

from typing import Any

import benchlib
from gateway_sessions import view_name
from gateway_setup import VIEW_TOKENS

NAN = float("nan")
OVERHEAD_RATIO = 2.0  # issue 38: the gateway's overhead within 2x LiteLLM's
SCALING_RATIO = 1.2  # issue 38: a 100k-message session within 1.2x of 1k
VIEW_RATIO = 2.0  # issue 38: at a ~100k-token view, within 2x LiteLLM resending it whole
STREAM_MS = 50.0  # issue 38: the client's first text within 50 ms of the upstream's
# Issue 41: tracing on leaves the overhead "unchanged within noise"; this benchmark's bound
# (docs/decisions.md): p50 within 10% of tracing off, every request answered.
TRACING_RATIO = 1.1
STREAMED = ("gw1:stream@1k", "gw1:stream-responses@1k")


def _rows(overhead: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in overhead["rows"]}


def peer_of(key: str) -> str:
    """The LiteLLM path a row is compared with: the same client API."""
    return "litellm-responses" if "responses" in key else "litellm"


def _ratio(a: dict[str, Any], b: dict[str, Any] | None, part: str = "p50") -> float:
    return a[part] / b[part] if b and b[part] else NAN


def _met(ok: bool) -> str:
    return "met" if ok else "missed"


def _litellm_goals(rows: dict[str, dict[str, Any]], error: Any) -> list[dict[str, str]]:
    litellm = rows.get("litellm")
    found = []
    for server, workers in (("gw1", "1 worker"), ("gw4", "4 workers")):
        one = rows[f"{server}:incremental@1k"]
        target = (
            f"gateway overhead per request (no protocol call), uvicorn {workers}, <= "
            f"{OVERHEAD_RATIO:g}x the LiteLLM proxy's at p50 and p95, side by side"
        )
        if litellm is None:
            found.append(
                {
                    "target": target,
                    "measured": f"LiteLLM not measured ({error})",
                    "status": "not measured",
                }
            )
            continue
        p50, p95 = _ratio(one, litellm), _ratio(one, litellm, "p95")
        found.append(
            {
                "target": target,
                "measured": f"{p50:.1f}x at p50 ({one['p50']:.1f} ms vs {litellm['p50']:.1f} "
                f"ms), {p95:.1f}x at p95 ({one['p95']:.1f} ms vs {litellm['p95']:.1f} ms)",
                "status": _met(p50 <= OVERHEAD_RATIO and p95 <= OVERHEAD_RATIO),
            }
        )
    return found


def _scaling_goal(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    one, big = rows["gw1:incremental@1k"], rows["gw1:incremental@100k"]
    four_one, four_big = rows["gw4:incremental@1k"], rows["gw4:incremental@100k"]
    scaling = _ratio(big, one)
    return {
        "target": f"gateway overhead on a 100k-message session within {SCALING_RATIO:g}x of 1k "
        "(p50)",
        "measured": f"{scaling:.2f}x at p50 with 1 worker ({big['p50']:.1f} ms vs "
        f"{one['p50']:.1f} ms; p95 {_ratio(big, one, 'p95'):.2f}x), "
        f"{_ratio(four_big, four_one):.2f}x with 4 workers",
        "status": _met(scaling <= SCALING_RATIO),
    }


def _view_goal(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    name = view_name(VIEW_TOKENS[-1])
    gateway, litellm = rows[f"gw1:view@{name}"], rows.get(f"litellm:view@{name}")
    target = (
        f"at a ~{name}-token view, the gateway's overhead (client sending only its new "
        f"message) <= {VIEW_RATIO:g}x LiteLLM's forwarding the same conversation resent whole"
    )
    if litellm is None:
        return {"target": target, "measured": "LiteLLM not measured", "status": "not measured"}
    ratio = _ratio(gateway, litellm)
    return {
        "target": target,
        "measured": f"{ratio:.1f}x at p50 ({gateway['p50']:.1f} ms vs {litellm['p50']:.1f} ms; "
        f"p95 {_ratio(gateway, litellm, 'p95'):.1f}x)",
        "status": _met(ratio <= VIEW_RATIO),
    }


def _writes_goal(overhead: dict[str, Any]) -> dict[str, str]:
    b = overhead.get("breakdown") or {}
    flushes, reads = b.get("flushes", NAN), b.get("session_reads", NAN)
    return {
        "target": "a turn that writes: <= 2 commits, the session row read once",
        "measured": f"{flushes:.1f} commits that write; the session row read whole {reads:.1f} "
        f"times ({b.get('session_selects', NAN):.1f} statements read it whole or in part, "
        f"{b.get('session_locks', NAN):.1f} of them locking it); "
        f"{b.get('statements', NAN):.0f} statements per request ({b.get('requests', 0)} "
        "requests, 1k incremental)",
        "status": _met(flushes <= 2 and reads <= 1),
    }


def _stream_goal(stream: list[dict[str, Any]]) -> dict[str, str]:
    rows = {r["key"]: r for r in stream}
    measured = [rows[k] for k in STREAMED if k in rows]
    problems = sum(sum(r["problems"].values()) for r in measured)
    parts = [
        f"{r['label'].split(', ')[-1]}: p50 {r['first_p50']:.1f} ms, p95 {r['first_p95']:.1f} ms"
        for r in measured
    ]
    ok = bool(measured) and not problems and all(r["first_p95"] <= STREAM_MS for r in measured)
    return {
        "target": f"streaming: the client's first text within {STREAM_MS:g} ms of the "
        "upstream's first (uvicorn, 20 pieces over 2 s; p50 and p95)",
        "measured": "; ".join(parts) + (f"; {problems} streams failed" if problems else ""),
        "status": _met(ok),
    }


def _tracing_goal(rows: dict[str, dict[str, Any]], tracing: dict[str, Any]) -> dict[str, str]:
    off = rows["trace-off:incremental@1k"]
    parts, ok = [], True
    for name, what in (("trace-up", "collector up"), ("trace-down", "collector down")):
        row = rows[f"{name}:incremental@1k"]
        ratio = _ratio(row, off)
        ok = ok and ratio <= TRACING_RATIO and not row["problems"]
        parts.append(f"{what} {ratio:.2f}x ({row['p50']:.1f} ms)")
    down = tracing.get("trace-down") or {}
    dropped = down.get("contextproto_trace_spans_dropped_total", 0)
    ok = ok and dropped > 0
    return {
        "target": f"tracing on, its collector up or down: every request answered, the overhead "
        f"within {TRACING_RATIO:g}x of tracing off at p50, a down collector's spans counted "
        "dropped",
        "measured": f"{', '.join(parts)} vs off {off['p50']:.1f} ms; {dropped:.0f} spans "
        "counted dropped with the collector down",
        "status": _met(ok),
    }


def _protocol_goal(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    protocol = rows["gw1:protocol@1k"]
    return {
        "target": "a request whose model makes one protocol call and then answers costs the "
        "client one request",
        "measured": f"{protocol['requests']} of {protocol['requests']} measured requests "
        "answered in one HTTP request with 2 model calls"
        + (f" (problems: {protocol['problems']})" if protocol["problems"] else ""),
        "status": _met(not protocol["problems"] and bool(protocol["requests"])),
    }


def _slow_goal(slow: list[dict[str, Any]]) -> dict[str, str]:
    worst = max(slow, key=lambda r: r["waiting"])
    errors = sum(r["api_errors"] for r in slow)
    failed = sum(r["waiting"] - r["gateway_ok"] for r in slow)
    held = sum(r["in_transaction"] or 0 for r in slow)
    alone = slow[0]
    return {
        "target": f"issue 31 item 3: the API stays responsive while {worst['waiting']} "
        "gateway requests wait on a slow upstream (one worker; this benchmark's bound: no "
        "error, no transaction held through the wait, p95 within 2x of alone + 50 ms)",
        "measured": f"p95 {worst['api_p95']:.1f} ms vs {alone['api_p95']:.1f} ms alone; "
        f"{errors} API errors, {failed} gateway requests not answered 200, {held} "
        "transactions open mid-wait",
        "status": _met(
            not (errors or failed or held) and worst["api_p95"] <= 2 * alone["api_p95"] + 50
        ),
    }


def goals(
    overhead: dict[str, Any], stream: list[dict[str, Any]], slow: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """Issue 38's goals, then issue 41's (tracing) and issue 31's (a protocol call, slow
    upstreams), each met or missed by this run's figures."""
    rows = _rows(overhead)
    return [
        *_litellm_goals(rows, overhead.get("litellm_error")),
        _scaling_goal(rows),
        _view_goal(rows),
        _writes_goal(overhead),
        _stream_goal(stream),
        _tracing_goal(rows, overhead.get("tracing") or {}),
        _protocol_goal(rows),
        _slow_goal(slow),
    ]


# --------------------------------------------------------------------------- tables


def overhead_table(overhead: dict[str, Any]) -> str:
    """Every path but the view sizes' (view_table)."""
    rows = _rows(overhead)
    table_rows = []
    for r in overhead["rows"]:
        if ":view@" in r["key"]:
            continue
        peer = rows.get(peer_of(r["key"]))
        table_rows.append(
            [
                r["label"],
                r["calls"],
                r["requests"],
                r["p50"],
                r["p95"],
                _ratio(r, peer),
                _ratio(r, peer, "p95"),
                r["recorded_p50"],
                r["recorded_p95"],
                r["upstream_extra_p50"],
            ]
        )
    return benchlib.table(
        [
            "path",
            "model calls",
            "requests",
            "overhead p50 ms",
            "overhead p95 ms",
            "p50 / LiteLLM",
            "p95 / LiteLLM",
            "gateway_ms p50",
            "gateway_ms p95",
            "upstream_ms - delay p50",
        ],
        table_rows,
    )


def view_table(overhead: dict[str, Any]) -> str:
    rows = _rows(overhead)
    tokens = overhead.get("view_tokens") or {}
    table_rows = []
    for size in VIEW_TOKENS:
        name = view_name(size)
        gateway = rows[f"gw1:view@{name}"]
        litellm = rows.get(f"litellm:view@{name}")
        nan_row = {"p50": NAN, "p95": NAN}
        peer = litellm or nan_row
        table_rows.append(
            [
                f"~{name}",
                tokens.get(name, NAN),
                gateway["p50"],
                gateway["p95"],
                gateway["recorded_p50"],
                peer["p50"],
                peer["p95"],
                _ratio(gateway, litellm),
                _ratio(gateway, litellm, "p95"),
            ]
        )
    return benchlib.table(
        [
            "conversation (tokens)",
            "gateway view sent upstream (tokens)",
            "gateway p50 ms",
            "gateway p95 ms",
            "gateway_ms p50",
            "LiteLLM resent whole p50 ms",
            "LiteLLM p95 ms",
            "p50 ratio",
            "p95 ratio",
        ],
        table_rows,
    )


def stream_table(stream: list[dict[str, Any]]) -> str:
    return benchlib.table(
        [
            "path",
            "streams",
            "first text after upstream's p50 ms",
            "p95 ms",
            "last text after upstream's p50 ms",
            "p95 ms",
            "time to first text beyond the model's p50 ms",
            "p95 ms",
        ],
        [
            [
                r["label"],
                r["requests"],
                r["first_p50"],
                r["first_p95"],
                r["last_p50"],
                r["last_p95"],
                r["ttft_p50"],
                r["ttft_p95"],
            ]
            for r in stream
        ],
    )


def tracing_table(overhead: dict[str, Any]) -> str:
    rows = _rows(overhead)
    off = rows["trace-off:incremental@1k"]
    tracing = overhead.get("tracing") or {}
    table_rows = [
        ["off", off["p50"], off["p95"], 1.0, off["recorded_p50"], off["edge_p50"], "-", "-", "-"]
    ]
    for name, what in (("trace-up", "on, collector up"), ("trace-down", "on, collector down")):
        row = rows[f"{name}:incremental@1k"]
        counts = tracing.get(name) or {}
        sink = counts.get("sink") or {}
        table_rows.append(
            [
                what,
                row["p50"],
                row["p95"],
                _ratio(row, off),
                row["recorded_p50"],
                row["edge_p50"],
                f"{counts.get('contextproto_trace_spans_exported_total', 0):.0f}",
                f"{counts.get('contextproto_trace_spans_dropped_total', 0):.0f}",
                f"{sink.get('spans', 0)} in {sink.get('requests', 0)} batches" if sink else "-",
            ]
        )
    return benchlib.table(
        [
            "tracing (1 worker, 1k incremental)",
            "overhead p50 ms",
            "overhead p95 ms",
            "p50 / off",
            "gateway_ms p50",
            "outside gateway_ms p50",
            "spans exported",
            "spans dropped",
            "received by the collector",
        ],
        table_rows,
    )


def slow_table(slow: list[dict[str, Any]]) -> str:
    return benchlib.table(
        [
            "phase",
            "API requests",
            "API p50 ms",
            "API p95 ms",
            "API max ms",
            "API errors",
            "gateway 200s",
            "gateway wall p50 s",
            "gateway wall max s",
            "open transactions mid-wait",
        ],
        [
            [
                r["phase"],
                r["api_requests"],
                r["api_p50"],
                r["api_p95"],
                r["api_max"],
                r["api_errors"],
                f"{r['gateway_ok']}/{r['waiting']}",
                r["gateway_p50_s"],
                r["gateway_max_s"],
                "-" if r["in_transaction"] is None else r["in_transaction"],
            ]
            for r in slow
        ],
    )
