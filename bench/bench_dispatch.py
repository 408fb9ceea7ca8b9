"""Dispatch latency and throughput: `tool_dispatch` against a bare SQL transaction.

Clients are threads, each with its own database connection (closed when it ends). Each
round, every client prepares one protocol tool call (a snapshot row at the session's
current revision and the tool_call message, written with `message_write`), waits at a
barrier, then dispatches; only the dispatch is timed. Throughput is the number of
dispatches over the summed wall time of the dispatch phases (first start to last end).

Distinct-session runs use fresh 1k-message sessions (bench_data: 200 visible messages in
the active window above a checkpoint, 50 windows). The contended run has 4 clients on one
session: all prepare calls from the same revision, so one wins and the others must get
`context_state_stale` (the session row lock serialises them).

The bare transaction does the same writes in raw SQL: lock the session row FOR NO KEY
UPDATE, upsert the KV rows and their index rows (FoldRecord / WindowRecord), insert the
tool_result message and the receipt, update the session counters.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bench_data
from benchlib import banner, log, median, ms, p95, table

APPLICATION = "bench-dispatch"
TOOLS = ("context_fold_create", "context_window_open")
# (label, clients, sessions, rounds)
CONFIGS = (
    ("1 client", 1, 1, 40),
    ("4 clients, 4 sessions", 4, 4, 25),
    ("16 clients, 16 sessions", 16, 16, 12),
    ("4 clients, 1 session", 4, 1, 25),
)
BARRIER_TIMEOUT = 120


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    phases: list[float] = field(default_factory=list)
    codes: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        total = sum(self.phases)
        return len(self.latencies) / total if total else float("nan")


@dataclass
class Target:
    """One session a client works on, and what it may fold."""

    session_id: Any
    free_pairs: list[tuple[int, int]]


# --------------------------------------------------------------------------- harness


def _run_clients(
    clients: list[Target],
    rounds: int,
    prepare: Callable[[Target, int, int], Any],
    execute: Callable[[Target, Any], str],
) -> Outcome:
    """Run `rounds` barrier-synchronised rounds; time only `execute`."""
    from django.db import connection

    outcome = Outcome()
    lock = threading.Lock()
    barrier = threading.Barrier(len(clients), timeout=BARRIER_TIMEOUT)
    starts: list[list[float]] = [[0.0] * len(clients) for _ in range(rounds)]
    ends: list[list[float]] = [[0.0] * len(clients) for _ in range(rounds)]

    def client(slot: int, target: Target) -> None:
        try:
            for number in range(rounds):
                prepared = prepare(target, slot, number)
                barrier.wait()
                start = time.perf_counter()
                code = execute(target, prepared)
                end = time.perf_counter()
                starts[number][slot], ends[number][slot] = start, end
                with lock:
                    outcome.latencies.append(end - start)
                    outcome.codes[code] += 1
                barrier.wait()
        except threading.BrokenBarrierError:
            pass
        except Exception as exc:
            with lock:
                outcome.errors.append(f"{type(exc).__name__}: {exc}")
            barrier.abort()
        finally:
            connection.close()

    threads = [
        threading.Thread(target=client, args=(slot, target), name=f"bench-client-{slot}")
        for slot, target in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if outcome.errors:
        raise RuntimeError(f"a client failed: {outcome.errors[0]}")
    outcome.phases = [max(e) - min(s) for s, e in zip(starts, ends, strict=True)]
    return outcome


# --------------------------------------------------------------------------- dispatch


def _arguments(tool: str, session: Any, target: Target, slot: int, number: int) -> dict:
    if tool == "context_fold_create":
        first, last = target.free_pairs[number]
        return {
            "purpose": "fold a finished lookup",
            "expectedWindowId": session.active_window,
            "fromIndex": first,
            "throughIndex": last,
            "summary": f"Lookup {number} done: price and stock noted for the quote.",
        }
    return {
        "purpose": "start a sub-task",
        "expectedWindowId": session.active_window,
        "windowId": f"d{slot:02d}-{number:03d}",
        "goal": f"Sub-task {number}: check the delivery slot for order {number}.",
        "input": "Quote done in the previous window; check the slot, then come back.",
    }


def _prepare_call(tool: str) -> Callable[[Target, int, int], Any]:
    def prepare(target: Target, slot: int, number: int) -> str:
        from sessions_app.models import Session
        from sessions_app.services.messages import NewMessage, message_write
        from sessions_app.store.body_writer import snapshot_create

        session = Session.objects.get(pk=target.session_id)
        # The dispatcher reads only id, revision and upper bound of the call's snapshot.
        snapshot = snapshot_create(
            body={"messages": [], "sources": [], "request": {}},
            session=session,
            run_id=session.current_run_id,
            revision=session.state_revision,
            upper_bound=session.last_index,
            window_id=session.active_window,
            protocol="unified@2",
            provider="neutral",
        )
        call_id = f"bench-{tool}-{slot}-{number}-{uuid.uuid4().hex[:8]}"
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id=call_id,
                tool_name=tool,
                arguments=_arguments(tool, session, target, slot, number),
                snapshot_id=str(snapshot.id),
            ),
            host=True,
        )
        return call_id

    return prepare


def _dispatch(target: Target, call_id: str) -> str:
    from sessions_app.services.dispatch import tool_dispatch

    result = tool_dispatch(session_id=target.session_id, tool_call_id=call_id).result
    return "ok" if result.get("success") else result["error"]["code"]


# --------------------------------------------------------------------------- bare SQL

LOCK_SQL = """
SELECT state_revision, next_message_index, active_window FROM sessions_app_session
WHERE id = %s FOR NO KEY UPDATE
"""
KV_SQL = """
INSERT INTO sessions_app_kventry (session_id, key, value, revision) VALUES {values}
ON CONFLICT (session_id, key) DO UPDATE SET value = EXCLUDED.value, revision = EXCLUDED.revision
"""
FOLD_SQL = """
INSERT INTO sessions_app_foldrecord (session_id, fold_id, window_id, first_index, last_index)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (session_id, fold_id) DO UPDATE SET window_id = EXCLUDED.window_id,
    first_index = EXCLUDED.first_index, last_index = EXCLUDED.last_index
"""
WINDOW_SQL = """
INSERT INTO sessions_app_windowrecord (session_id, window_id, status, created_at_index)
VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)
ON CONFLICT (session_id, window_id) DO UPDATE SET status = EXCLUDED.status
"""
MESSAGE_SQL = """
INSERT INTO sessions_app_message (id, session_id, index, window_id, role, kind, content,
    tool_call_id, tool_name, is_error, created_at)
VALUES (%s, %s, %s, %s, 'tool', 'tool_result', %s, %s, %s, false, now())
"""
RECEIPT_SQL = """
INSERT INTO sessions_app_toolreceipt (session_id, tool_call_id, tool_name, result, success,
    state_revision, result_message_id, created_at)
VALUES (%s, %s, %s, %s, true, %s, %s, now())
"""
SESSION_SQL = """
UPDATE sessions_app_session SET state_revision = %s, next_message_index = %s,
    active_window = %s WHERE id = %s
"""


def _bare_prepare(tool: str) -> Callable[[Target, int, int], Any]:
    def prepare(target: Target, slot: int, number: int) -> tuple[str, str, int]:
        return tool, f"bare-{tool}-{slot}-{number}-{uuid.uuid4().hex[:8]}", number

    return prepare


def _bare(target: Target, prepared: tuple[str, str, int]) -> str:
    from django.db import connection, transaction

    tool, call_id, number = prepared
    sid = target.session_id
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, [sid])
        revision, next_index, window = cursor.fetchone()
        revision += 1
        if tool == "context_fold_create":
            fold_id = "f_" + uuid.uuid4().hex[:12]
            first, last = 1000 + 2 * number, 1001 + 2 * number
            value = {
                "windowId": window,
                "firstIndex": first,
                "lastIndex": last,
                "messageIds": [str(uuid.uuid4()), str(uuid.uuid4())],
                "summary": f"Lookup {number} done: price and stock noted for the quote.",
                "createdAtIndex": next_index - 1,
            }
            kv = [(f"fold/{fold_id}", value)]
            result = {"success": True, "foldId": fold_id, "firstIndex": first, "lastIndex": last}
            active = window
        else:
            active = f"b{number:03d}-{uuid.uuid4().hex[:6]}"
            record = {
                "goal": f"Sub-task {number}: check the delivery slot for order {number}.",
                "status": "active",
                "input": "Quote done in the previous window; check the slot, then come back.",
                "memory": "",
                "outcomes": [],
                "openedFrom": window,
                "createdAtIndex": next_index - 1,
            }
            kv = [
                (f"window/{active}", record),
                (f"window/{window}", {**record, "status": "suspended"}),
                ("activeWindow", active),
                (
                    "currentWindowEntry",
                    {
                        "windowId": active,
                        "fromWindowId": window,
                        "upperBoundBeforeEntry": next_index - 2,
                        "input": record["input"],
                        "enteredAtRevision": revision,
                    },
                ),
            ]
            result = {"success": True, "windowId": active, "previousWindowId": window}
        values = ", ".join(["(%s, %s, %s, %s)"] * len(kv))
        params: list[Any] = []
        for key, value in kv:
            params += [sid, key, json.dumps(value), revision]
        cursor.execute(KV_SQL.format(values=values), params)
        if tool == "context_fold_create":
            cursor.execute(FOLD_SQL, [sid, fold_id, window, first, last])
        else:
            cursor.execute(
                WINDOW_SQL,
                [sid, active, "active", next_index, sid, window, "suspended", 0],
            )
        message_id = uuid.uuid4()
        content = json.dumps(result, sort_keys=True)
        cursor.execute(MESSAGE_SQL, [message_id, sid, next_index, window, content, call_id, tool])
        cursor.execute(RECEIPT_SQL, [sid, call_id, tool, json.dumps(result), revision, message_id])
        cursor.execute(SESSION_SQL, [revision, next_index + 1, active, sid])
    return "ok"


# --------------------------------------------------------------------------- breakdown


BREAKDOWN_OPS = 20


class _CommitClock:
    """Times COMMIT, which Django issues outside execute wrappers."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> _CommitClock:
        from django.db.backends.base.base import BaseDatabaseWrapper

        self._saved = BaseDatabaseWrapper._commit
        saved, clock = self._saved, self

        def timed(wrapper: Any) -> Any:
            start = time.perf_counter()
            try:
                return saved(wrapper)
            finally:
                clock.seconds += time.perf_counter() - start

        BaseDatabaseWrapper._commit = timed
        return self

    def __exit__(self, *exc: object) -> None:
        from django.db.backends.base.base import BaseDatabaseWrapper

        BaseDatabaseWrapper._commit = self._saved


def breakdown(tool: str, target: Target, bare_target: Target) -> dict[str, Any]:
    """One client, one session: where a dispatch spends its time (SQL, COMMIT, Python)."""
    from benchlib import sql_clock

    prepare = _prepare_call(tool)
    totals, sql, commits, statements, bare, bare_sql = [], [], [], [], [], []
    for number in range(BREAKDOWN_OPS):
        call_id = prepare(target, 0, number)
        with sql_clock() as clock, _CommitClock() as commit:
            start = time.perf_counter()
            code = _dispatch(target, call_id)
            totals.append(time.perf_counter() - start)
        if code != "ok":
            raise RuntimeError(f"{tool} breakdown: {code}")
        sql.append(clock.seconds)
        commits.append(commit.seconds)
        statements.append(clock.queries)
        with sql_clock() as clock:
            start = time.perf_counter()
            _bare(bare_target, (tool, f"bare-b-{number}-{uuid.uuid4().hex[:8]}", number))
            bare.append(time.perf_counter() - start)
        bare_sql.append(clock.queries)
    total, in_sql, commit = median(totals), median(sql), median(commits)
    return {
        "tool": tool,
        "total": total,
        "sql": in_sql,
        "commit": commit,
        "python": total - in_sql - commit,
        "statements": int(median(statements)),
        "bare": median(bare),
        "bare_statements": int(median(bare_sql)) + 2,  # + BEGIN and COMMIT
    }


# --------------------------------------------------------------------------- runner


def _targets(version: Any, count: int) -> list[Target]:
    built = []
    for _ in range(count):
        b = bench_data.build_session(version, 1000, nonce=uuid.uuid4().hex, analyze=False)
        built.append(Target(b.session_id, b.free_pairs))
    return built


def _bare_targets(version: Any, count: int) -> list[Target]:
    from sessions_app.services.sessions import session_create

    return [Target(session_create(agent_version=version)[0].id, []) for _ in range(count)]


def run() -> dict[str, Any]:
    banner("2. Dispatch: tool_dispatch vs a bare SQL transaction doing the same writes")
    started = time.perf_counter()
    version = bench_data.bench_version(APPLICATION, "dispatch")
    needed = sum(sessions for _label, _clients, sessions, _rounds in CONFIGS) + 1
    log(f"building {needed * len(TOOLS)} fresh 1k-message sessions ...")
    pools = {tool: _targets(version, needed) for tool in TOOLS}
    bare_pools = {tool: _bare_targets(version, needed) for tool in TOOLS}
    bench_data.analyze_tables()
    log(f"built in {time.perf_counter() - started:.1f} s")
    rows = []
    summary: list[dict[str, Any]] = []
    for tool in TOOLS:
        pool, bare_pool = list(pools[tool]), list(bare_pools[tool])
        for label, clients, sessions, rounds in CONFIGS:
            chosen, pool = pool[:sessions], pool[sessions:]
            bare_chosen, bare_pool = bare_pool[:sessions], bare_pool[sessions:]
            targets = [chosen[n % sessions] for n in range(clients)]
            bare_targets = [bare_chosen[n % sessions] for n in range(clients)]
            real = _run_clients(targets, rounds, _prepare_call(tool), _dispatch)
            bare = _run_clients(bare_targets, rounds, _bare_prepare(tool), _bare)
            ratio = median(real.latencies) / median(bare.latencies)
            codes = ", ".join(f"{c} {n}" for c, n in sorted(real.codes.items()))
            rows.append(
                (
                    tool.removeprefix("context_"),
                    label,
                    len(real.latencies),
                    codes,
                    ms(median(real.latencies)),
                    ms(p95(real.latencies)),
                    real.throughput,
                    ms(median(bare.latencies)),
                    ms(p95(bare.latencies)),
                    bare.throughput,
                    ratio,
                    real.throughput / bare.throughput,
                )
            )
            summary.append(
                {
                    "tool": tool,
                    "label": label,
                    "contended": sessions < clients,
                    "clients": clients,
                    "ratio": ratio,
                    "codes": dict(real.codes),
                }
            )
            log(f"{tool} / {label}: {codes}; {ratio:.2f}x the bare transaction")
    headers = (
        "tool",
        "clients",
        "ops",
        "results",
        "median ms",
        "p95 ms",
        "ops/s",
        "bare median ms",
        "bare p95 ms",
        "bare ops/s",
        "latency / bare",
        "ops/s / bare",
    )
    text = table(headers, rows)
    print(text)
    parts = [breakdown(tool, pools[tool][-1], bare_pools[tool][-1]) for tool in TOOLS]
    parts_text = table(
        (
            "tool (1 client, sequential)",
            "dispatch ms",
            "statements",
            "SQL ms",
            "COMMIT ms",
            "Python ms",
            "bare ms",
            "bare statements",
        ),
        [
            (
                p["tool"],
                ms(p["total"]),
                p["statements"],
                ms(p["sql"]),
                ms(p["commit"]),
                ms(p["python"]),
                ms(p["bare"]),
                p["bare_statements"],
            )
            for p in parts
        ],
    )
    print(parts_text)
    uncontended = [s["ratio"] for s in summary if not s["contended"]]
    return {
        "table": text,
        "breakdown": parts,
        "breakdown_table": parts_text,
        "summary": summary,
        "worst_uncontended": max(uncontended),
        "worst_clients": max((s for s in summary if not s["contended"]), key=lambda s: s["ratio"])[
            "clients"
        ],
        "best_uncontended": min(uncontended),
        "seconds": time.perf_counter() - started,
    }
