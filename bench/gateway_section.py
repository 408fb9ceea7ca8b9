"""The gateway section of BENCHMARKS.md, from one run's figures (bench/bench_gateway.py).

The goals and the tables are gateway_report.py's; this module writes the text around them:
how each part is measured, why a goal was missed, where the time goes.
"""

from __future__ import annotations

import os
from typing import Any

from benchlib import goal_lines
from gateway_report import STREAM_MS, TRACING_RATIO, tracing_table
from gateway_sessions import TURN_CHARS, view_name
from gateway_setup import (
    API_CLIENTS,
    API_PAUSE,
    FIXED_DELAY,
    LITELLM_MODEL,
    POOL_SIZE,
    SLOW_COUNTS,
    SLOW_DELAY,
    STREAM_CHUNKS,
    STREAM_SECONDS,
    STREAM_WARMUP,
    VIEW_TOKENS,
    WARMUP,
)

HEADING = "## Gateway"
NAN = float("nan")

# What bench/gateway_profile.py found (py-spy on one worker; not rerun by `make bench`: it
# needs py-spy, which is no dependency). Rerun it and update this text when the gateway's
# request path changes.
PROFILE = (
    "Profiled before the two changes of the next paragraph (the view's body stored in the "
    "turn's second commit, the turn described after the reply), so the figures below still "
    "count both on the request's path. "
    "Profiled with `bench/gateway_profile.py`: py-spy samples one uvicorn worker at 250 Hz "
    "while a client sends incremental requests one after another (2026-12-07, load average "
    "about 2). py-spy stops the process for each sample, so a request takes about twice "
    "as long under it (the 1k request: 80 ms p50 against 41 ms in the run above); the "
    "shares hold. Milliseconds per request, under the profiler. The 1k session (209 "
    "requests): the request's database thread works 61 ms, the event loop 11.5 ms. Of the "
    "61: `open_request` 46 ms, of which `projection_build` 28 ms - `snapshot_create` 14.6 "
    "ms (the snapshot's body serialized for its hash and tokens, cut, delta-encoded and "
    "inserted), `assemble` 7.6 ms, `project` 6.4 ms (a dataclass per message of the view: "
    "3.4 ms of `__init__`) - and its reads and writes; after the model, the turn's commit "
    "12 "
    "ms (`turn_commit_locked` 6.8, `answer_record_locked` 5.3). psycopg sends and waits "
    "23 ms in all over the 25 statements (the two commits' WAL flushes among them). In "
    "the event loop, the upstream call through the `openai` SDK 5.5 ms, Django's handler "
    "4.3 ms. The 100k-token view (144 requests): the database thread works 106 ms, of "
    "which `snapshot_create` 39 ms (the body's JSON 13.8 ms, `encode_key` 5.8 ms, "
    "`encode_delta` 5.5 ms, `cut` 3 ms, sending the encoded body 11 ms), `assemble` 14 ms, "
    "`project` 13 ms, the commit after the model 16 ms; the event loop 18 ms, of which the "
    "SDK builds its request 5.7 ms - `openapi_dumps` serializing the same view again, 5.3 "
    "ms. With tracing on (`--tracing`, 168 requests): `turn_recorded` 9.4 ms a request on "
    "the database thread, between the turn's commit and the reply (`snapshot_effect` 9.2 "
    "ms, of which the window's message count 3.7 ms). LiteLLM parses and re-serializes the "
    "conversation it forwards; the gateway builds the view, serializes it twice and stores "
    "it (as a delta) before it calls the model."
)

COSTS = (
    "The largest costs on the request's path that the contract does not need there, by these "
    "figures, and what became of them: (1) applied: the snapshot's body was encoded and "
    "stored inside the commit before the model call (`open_request` → `projection_build` → "
    "`snapshot_create`): a quarter of the database thread's time at 1k, more than a third at "
    "a 100k-token view. A gateway turn now writes the snapshot's row before the model call "
    "and its body in the turn's second commit (`projection_build(body_later=True)`), "
    "encoded in a worker thread while the model answers (sessions_app/gateway/drive.py). "
    "Against the run before it (15:06 UTC the same day, not side by side): gateway_ms p50 "
    "30.0 -> 28.0 ms at 1k, but the upstream call's own cost beyond the delay 6.0 -> 10.0 "
    "ms: the encoding thread holds the GIL while the event loop sends the request and reads "
    "the answer of this 50 ms model; a real model's seconds leave the encoding long done "
    "before its answer. 27 statements a request instead of 25 (the body's own writes in the "
    "second commit). "
    "(2) The view is serialized twice, for the body (`body_texts`) and by the SDK "
    "(`AsyncAPIClient.post` → `openapi_dumps`): posting the text already made would save 5 "
    "ms at 100k. (3) applied: with tracing on, the turn's description (`turn_recorded`: 4 "
    "statements, the stored body decoded) ran between the turn's commit and the reply; it "
    "now runs when Django closes the response, after the last byte is sent "
    "(`ExchangeRecord.after_reply`). (4) partly applied: 27 statements a request, each a "
    "round trip. The open read the client's state twice under the same lock and built its "
    "first view inside a savepoint; it reads it once and takes none (a refusal rolls the "
    "whole open back): 24 statements. The other reads of the open (`transcript_tail`, "
    "`body_base`, the run) could share some. On this machine, 1.5-3x slower than the "
    "earlier session's in every section, the ratio to LiteLLM stayed 2.7x at p50."
)

HISTORY = (
    "Fixed earlier (issue 31, each measured side by side with the code before it: two "
    "gateway workers, interleaved requests on fresh 1k sessions): the providers built an SDK "
    "client, and with it an SSL context from the CA bundle, per model call - one HTTP "
    "client per process now (cb7e32a: client overhead p50 194.7 -> 153.3 ms at load 2.8); "
    "the OpenAI provider's `chat.completions.create` walked every message of the view "
    "against the SDK's typed dicts, 110 ms for 350 messages, to send the same JSON - the "
    "body is posted as built now (cb6f958: 318.0 -> 181.0 ms at load 7.3). Issue 38 "
    "measured 48-56 ms p50 against LiteLLM's 14-17 ms (3.3-3.5x, 4 workers) before the "
    "gateway's rebuild (two commits a turn, async views without Django's middleware)."
)


def _f(value: Any, digits: int = 1) -> str:
    return "nan" if value != value else f"{value:.{digits}f}"


def _why(goal: dict[str, str], g: dict[str, Any]) -> str:
    """Why a goal was missed, from this run's own figures."""
    o = g["overhead"]
    rows = {r["key"]: r for r in o["rows"]}
    target = goal["target"]
    if target.startswith("gateway overhead per request"):
        server, workers = ("gw4", "4 workers") if "4 workers" in target else ("gw1", "1 worker")
        one = rows[f"{server}:incremental@1k"]
        b = o.get("breakdown") or {}
        return (
            f"Per request on the 1k incremental path with {workers} (p50 of each part): "
            f"{_f(one['edge_p50'])} ms outside the recorded span (uvicorn, the key lookup, "
            f"reading the body, sending the reply), {_f(one['recorded_p50'])} ms in the "
            f"service (gateway_ms) and {_f(one['upstream_extra_p50'])} ms in the upstream "
            "call beyond the model's delay. The service's part is the view built and stored "
            f"and the turn written: {_f(b.get('statements', NAN), 0)} SQL statements "
            f"({_f(b.get('sql_ms', NAN))} ms of SQL) in {_f(b.get('flushes', NAN), 0)} "
            "commits that write, and the projection (`contextproto_projection_seconds` of "
            f"the 1-worker server: {_f(o['projection']['mean_ms'])} ms on average); see "
            '"Where the time goes" below. LiteLLM forwards the body it is given and writes '
            "nothing; the gateway has the input, the view, the answer, its usage and the "
            "reply in the log before it answers (a retry is answered from there)."
        )
    if target.startswith("gateway overhead on a 100k"):
        return (
            "Every read of a gateway request is bounded by what the request or the view needs "
            "(the transcript tail, the window's rows, the last reply's messages), so the "
            "difference is the noise of a shared machine; rerun to compare."
        )
    if target.startswith("at a ~"):
        name = view_name(VIEW_TOKENS[-1])
        big = rows[f"gw1:view@{name}"]
        small = rows[f"gw1:view@{view_name(VIEW_TOKENS[0])}"]
        return (
            f"From the ~1k to the ~{name} view the gateway's overhead grows by "
            f"{_f(big['p50'] - small['p50'])} ms at p50 (gateway_ms by "
            f"{_f(big['recorded_p50'] - small['recorded_p50'])} ms): the view is read, "
            "assembled, serialized and stored as the snapshot's body before the model call, "
            "then serialized again by the SDK; LiteLLM parses and re-serializes what it is "
            'sent. See "Where the time goes" below.'
        )
    if target.startswith("a turn that writes"):
        return "tests/gateway/test_commits.py counts the same; see its failure."
    if target.startswith("streaming"):
        return "See the streaming table below: which path, and whether a stream failed."
    if target.startswith("tracing on"):
        return (
            "See the tracing table below. What tracing adds to the request's own path: "
            + _traced(o)
        )
    if target.startswith("issue 31 item 3"):
        worst = max(g["slow"], key=lambda r: r["waiting"])
        return (
            f"Beside {worst['waiting']} waiting requests: {worst['api_errors']} API errors, "
            f"{worst['in_transaction']} transactions open mid-wait; see the table below."
        )
    return ""


def _traced(o: dict[str, Any]) -> str:
    """What tracing adds to a request's own path, from this run's figures."""
    rows = {r["key"]: r for r in o["rows"]}
    off, up = rows["trace-off:incremental@1k"], rows["trace-up:incremental@1k"]
    b = o.get("breakdown") or {}
    on = b.get("traced") or {}
    return (
        f"the gateway's own record stays put ({_f(up['recorded_p50'])} ms gateway_ms p50 "
        f"traced against {_f(off['recorded_p50'])} off) while the time outside it grows "
        f"({_f(up['edge_p50'])} ms against {_f(off['edge_p50'])}), and the same request "
        f"through the test client makes {_f(on.get('statements', NAN), 0)} statements with "
        f"tracing on against {_f(b.get('statements', NAN), 0)} off. The turn's description "
        "(sessions_app/gateway/drive.py → `turn_recorded` → `snapshot_effect`: the raw "
        "messages behind its folds read, the window's messages counted) runs after the "
        "reply is sent, when Django closes the response; on the path remain the session "
        "facts (the agent read) and the spans' own creation."
    )


def _intro(g: dict[str, Any]) -> list[str]:
    o = g["overhead"]
    fake = o.get("fake") or {}
    litellm = (
        f"LiteLLM {o['litellm_version']} (`litellm[proxy]`, the `bench` extra of "
        "pyproject.toml, in its own virtualenv var/bench-litellm)"
        if o.get("litellm_version")
        else f"LiteLLM not measured: {o.get('litellm_error')}"
    )
    return [
        HEADING,
        "",
        "What the gateway (contract §14, §21, §22) costs a request, against the LiteLLM proxy "
        "and a direct call (issues 31, 38, 39, 41); `bench/bench_gateway.py`. A fake "
        f"OpenAI-compatible model (`bench/fake_upstream.py`, stdlib HTTP server with "
        f"TCP_NODELAY, its own process) answers every call after {FIXED_DELAY * 1000:.0f} ms, "
        "Chat Completions and the Responses API; its own cost beyond that delay, measured "
        f"inside it, was {_f(fake.get('p50_ms') or NAN, 2)} ms p50 / "
        f"{_f(fake.get('p95_ms') or NAN, 2)} ms p95 over {fake.get('count', 0)} calls. Every "
        "path gets one keep-alive connection from this process; a request is timed from its "
        "first byte sent to its reply's last byte read (the connection is made and the body "
        f"encoded before). {g['rounds']} interleaved rounds after {WARMUP} warm-up rounds: "
        "every path once per round, in an order shuffled anew each round (so no path always "
        "follows the same one). Direct: the "
        f"client calls the fake. {litellm}: `litellm --config` with one "
        f"`openai/{LITELLM_MODEL}` model whose api_base is the fake, a master key, one "
        "process; its Chat Completions and its own `/v1/responses` (which it forwards to the "
        "fake's `/responses`). The gateway: `uvicorn contextproto.asgi:application` with "
        f"`make serve`'s limits and DATABASE_POOL_SIZE={POOL_SIZE}, on this PostgreSQL, as "
        "five servers side by side: one worker (most paths), four workers (issue 38's "
        "measurement), and three single workers that differ only in tracing - off, exporting "
        "to a collector that answers at once (`bench/otlp_sink.py`), exporting to a port "
        "nothing listens on. Their requests continue sessions built by `bench/bench_data.py` "
        "(the projection section's layout: a 200-message window above its checkpoint, folds, "
        "50 windows) of 1k and 100k messages, one session per path, whose published `openai` "
        "version calls the fake (Chat Completions; one version with `api: responses`). The "
        "incremental client sends one new user message per request (Chat Completions, or the "
        "Responses API's `input`); the full-history client sends the whole transcript it "
        f"holds ({o.get('full_messages', 0)} messages read off the session's log at the "
        "start, growing by two per request; at 100k messages that body would be far past the "
        "2 MB limit, so that client exists only at 1k); the protocol row's model calls "
        "`context_task_memory_set` and then answers, so one client request makes two model "
        f"calls. Overhead = the client's latency - {FIXED_DELAY * 1000:.0f} ms per model call.",
        "",
        f"* Measured: {g.get('started', '?')}; load average (1/5/15 min) before / after the "
        f"section: {g['load_before']} / {g['load_after']} on {os.cpu_count()} CPUs shared "
        "with other work; the figures are medians of interleaved rounds, so the ratios are "
        "steadier than the absolute times",
        f"* Section {g['seconds']:.0f} s (sessions built in {g['prepare_seconds']:.0f} s, "
        "while the servers started)",
        "",
    ]


def _overhead_text(g: dict[str, Any]) -> list[str]:
    o = g["overhead"]
    rows = {r["key"]: r for r in o["rows"]}
    one = rows["gw1:incremental@1k"]
    edge = (
        f"{_f(one['edge_p50'])} ms at p50 on the 1k incremental path."
        if one["edge_p50"] == one["edge_p50"]
        else "not computed in this run (a request failed, so records and latencies do not line up)."
    )
    lines = [
        g["table"],
        "",
        '"overhead" is what the client waited beyond the model; "p50 / LiteLLM" compares '
        "with LiteLLM's path of the same client API (Chat Completions, or its Responses API); "
        '"gateway_ms" is what the gateway records for the same requests '
        "(GatewayExchange.gateway_ms: from the request's parsing to its reply stored, less "
        'the upstream calls, which `upstream_ms` times around the provider call); "upstream_ms '
        "- delay\" is the upstream call's own cost beyond the model's delay (the SDK building "
        "the request, the HTTP exchange, parsing the answer). The recorded figure leaves out "
        "what comes before the gateway's code and after it (uvicorn, the key lookup, reading "
        f"the body, sending the reply): {edge} The `contextproto_gateway_overhead_seconds` "
        "histogram (/metrics of the 1-worker server) agrees with the records: mean "
        f"{_f(o['histogram']['mean_ms'])} ms over {o['histogram']['count']} Chat Completions "
        f"requests, against {_f(o['recorded']['mean_ms'])} ms over {o['recorded']['count']} "
        "records (the same figure, observed when the record is written).",
        "",
    ]
    full = rows.get("gw1:full@1k")
    if full is not None and full["p50"] == full["p50"]:
        lines += [
            f"The full-history client pays {_f(full['p50'] - one['p50'])} ms more than the "
            "incremental one at p50 on the same size: parsing and hashing its body and "
            "reading back as many transcript items as it sends to reconcile them. The "
            f"Responses API client: {_f(rows['gw1:responses@1k']['p50'])} ms p50 on the "
            f"same server against the Chat Completions client's {_f(one['p50'])} ms "
            f"({_f(rows['gw1:responses-upstream@1k']['p50'])} ms with a Responses "
            "upstream); LiteLLM's own: "
            f"{_f(rows.get('litellm-responses', {}).get('p50', NAN))} ms on its "
            f"/v1/responses against {_f(rows.get('litellm', {}).get('p50', NAN))} ms on "
            "its Chat Completions.",
            "",
        ]
    return lines


def _view_text(g: dict[str, Any]) -> list[str]:
    sizes = ", ".join(f"~{view_name(t)}" for t in VIEW_TOKENS)
    return [
        "### Overhead against view size",
        "",
        f"Sessions whose view holds a whole conversation of {sizes} tokens (user and "
        f"assistant messages of {TURN_CHARS:,} characters; no checkpoint: nothing in them asks "
        "the protocol for one), each started by one gateway request that sent the "
        "conversation (1 worker, a version with a large maxInputTokens), then continued in "
        "the rounds above by a client that sends only its new message. Beside each, LiteLLM "
        "forwarding the same conversation resent whole, growing by each exchange as the "
        "session does - the fair peer of issue 38: a client of LiteLLM must resend it all. "
        '"gateway view sent upstream" is the estimate (characters / 4) of the request the '
        "gateway's last turn sent: the conversation plus the protocol's prompt, state and "
        "tool schemas.",
        "",
        g["view_table"],
        "",
    ]


def _stream_text(g: dict[str, Any]) -> list[str]:
    interval = STREAM_SECONDS / STREAM_CHUNKS * 1000
    rounds = {r["requests"] for r in g["stream"]}
    return [
        "### Streaming",
        "",
        f"The fake streams its answer (`stream: true`) in {STREAM_CHUNKS} text pieces over "
        f"{STREAM_SECONDS:g} s, one every {interval:.0f} ms, and stamps when it wrote each "
        "stream's first and last piece (`time.monotonic()`, one clock for every process of "
        "the machine); the client stamps when each arrived, reading the Server-Sent Events as "
        f"they come. {max(rounds or {0})} interleaved rounds after {STREAM_WARMUP} warm-up "
        "round; the gateway's clients continue their own 1k sessions with their new message "
        "and `stream: true` (so the gateway streams its upstream call: Chat Completions "
        'chunks re-encoded for each client API). "first text after upstream\'s": the '
        "client's first text piece after the fake's first, the goal's figure; \"last\": the "
        "same for the last piece (the stream is passed on as it comes, not gathered); "
        "\"time to first text beyond the model's\": from the request's first byte to the "
        f"first text, less the fake's {interval:.0f} ms before its first piece (the gateway "
        "opens the request, writes its input and builds the view first).",
        "",
        g["stream_table"],
        "",
        f"Goal: the gateway's first text within {STREAM_MS:g} ms of the upstream's, at p95.",
        "",
    ]


def _tracing_text(g: dict[str, Any]) -> list[str]:
    tracing = g["overhead"].get("tracing") or {}
    down = tracing.get("trace-down") or {}
    return [
        "### Tracing on and off",
        "",
        "Three single-worker servers that differ only in `OTEL_EXPORTER_OTLP_ENDPOINT`: "
        "unset (tracing off), a collector that answers 200 at once (`bench/otlp_sink.py`, "
        "counting what it receives), and a port nothing listens on. Spans go through the "
        "bounded export queue (contextproto/telemetry/export.py: a request's thread only "
        "appends; one background thread exports a batch every 5 s, the SDK's default "
        "schedule), each server's counters read from its /metrics after the rounds. The "
        f'bound here for "unchanged within noise" (issue 41): p50 within {TRACING_RATIO:g}x '
        "of tracing off, every request answered.",
        "",
        tracing_table(g["overhead"]),
        "",
        "The export is off the request's path; describing a turn is not: "
        + _traced(g["overhead"])
        + " The profile below puts it at 9 ms a request under the profiler.",
        "",
        f"With the collector down, {down.get('contextproto_trace_exports_failed_total', 0):.0f} "
        "batches failed and their spans were counted dropped "
        '(`contextproto_trace_spans_dropped_total{reason="export_failed"}`), none exported.',
        "",
    ]


def _breakdown_text(g: dict[str, Any]) -> list[str]:
    b = g["overhead"].get("breakdown") or {}
    probe = b.get("probe") or {}
    return [
        "### Where the time goes",
        "",
        f"The 1k incremental request run {b.get('requests', 0)} times through Django's test "
        "client in the bench's own process (no HTTP server), every statement counted and "
        f"timed: {_f(b.get('statements', NAN), 0)} statements ({_f(b.get('sql_ms', NAN))} ms "
        f"of SQL), {_f(b.get('flushes', NAN), 0)} commits that write (each waits for the WAL "
        f"to reach the disk: {_f(probe.get('flushed_ms', NAN), 2)} ms a commit here, "
        f"{_f(probe.get('unflushed_ms', NAN), 2)} ms with synchronous_commit off), the "
        f"session row read whole {_f(b.get('session_reads', NAN), 0)} time(s) and by "
        f"{_f(b.get('session_selects', NAN), 0)} statements in all "
        f"({_f(b.get('session_locks', NAN), 0)} locking it: the open and the answer's "
        "commit; tests/gateway/test_commits.py counts the same).",
        "",
        PROFILE,
        "",
        COSTS,
        "",
        HISTORY,
        "",
    ]


def _slow_text(g: dict[str, Any]) -> list[str]:
    slow = g["slow"]
    lines = [
        "### Slow upstreams beside normal traffic",
        "",
        f"The 1-worker gateway (one process, DATABASE_POOL_SIZE={POOL_SIZE}) and a second "
        f"fake model answering after {SLOW_DELAY:g} s. {API_CLIENTS} API clients loop over "
        "`GET /api/v1/health/live/`, `GET /api/v1/sessions/<id>/` and `POST "
        f".../projection/` of a 1k-message session, {API_PAUSE * 1000:.0f} ms apart, alone for "
        f"{SLOW_DELAY + 1:g} s, then while {' and then '.join(str(n) for n in SLOW_COUNTS)} "
        "gateway requests (each starting a new session) wait on the slow model at once; the "
        "API figures of a phase cover every API request of it, from the gateway requests' "
        "start to the last one's reply. An error is a 4xx/5xx or no answer. \"open "
        'transactions mid-wait": transactions on the database open for more than a second, '
        f"sampled {SLOW_DELAY / 2:g} s into the wait (a request that kept its transaction, and "
        "so its session's row lock, through the model call would show there).",
        "",
        g["slow_table"],
        "",
    ]
    for row in slow[1:]:
        recorded = row.get("recorded") or {}
        by = row.get("by_name") or {}
        parts = ", ".join(
            f"{name} p95 {v[1]:.0f} ms (max {v[2]:.0f})" for name, v in sorted(by.items())
        )
        lines.append(
            f"* Beside {row['waiting']}: {parts}; the gateway requests spent "
            f"{_f(recorded.get('gateway_p50', NAN), 0)} ms p50 (max "
            f"{_f(recorded.get('gateway_max', NAN), 0)}) in the gateway and "
            f"{_f(recorded.get('upstream_p50', NAN), 0)} ms in the upstream call."
        )
    return [*lines, "", _slow_summary(g), ""]


def _slow_summary(g: dict[str, Any]) -> str:
    slow = g["slow"]
    alone = slow[0]
    errors = sum(r["api_errors"] for r in slow)
    held = [r["in_transaction"] for r in slow[1:] if r["in_transaction"]]
    failed = sum(r["waiting"] - r["gateway_ok"] for r in slow)
    worst = max(slow, key=lambda r: r["waiting"])
    if errors or held or failed:
        return (
            f"It did not hold in this run: {errors} API errors, {failed} gateway requests not "
            f"answered 200, transactions open mid-wait {held or 0}. Look at var/bench/gateway/"
            "server-gw1.log for the errors."
        )
    return (
        "No API request failed and no transaction stayed open through the wait: a gateway "
        "request holds no database connection and no lock while it waits (the open commits "
        "before the model call and the connection goes back to the pool; the answer's commit "
        "comes after it), and the waiting requests are coroutines of the worker's event "
        f"loop, not threads ({POOL_SIZE} connections for {worst['waiting']} waiting requests "
        f"and the API). The API's p95 went from {alone['api_p95']:.0f} ms alone to "
        f"{worst['api_p95']:.0f} ms beside {worst['waiting']}, its max to "
        f"{worst['api_max']:.0f} ms: what it loses comes from the moments the gateway requests "
        "work in the same process (their sessions started, views built, answers written, all "
        "at once on 2 CPUs), not from their wait. tests/gateway/test_slow_upstream.py asserts "
        "the same for 8 waiting requests (API p95 under 1 s, no error, no transaction open)."
    )


def section_lines(g: dict[str, Any]) -> list[str]:
    """The gateway section of BENCHMARKS.md from one run's figures."""
    goals = [dict(goal, why=_why(goal, g)) for goal in g["goals"]]
    lines = _intro(g)
    lines += goal_lines(
        "Goals of issue 38 (and 41's tracing, 31's protocol call and slow upstreams; reported, "
        "not CI-gated):",
        goals,
    )
    lines += _overhead_text(g)
    lines += _view_text(g)
    lines += _stream_text(g)
    lines += _tracing_text(g)
    lines += _breakdown_text(g)
    lines += _slow_text(g)
    return lines
