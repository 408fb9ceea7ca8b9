"""Prototype fixes for the slow paths the benchmarks show, measured side by side.

Nothing here changes application code: each prototype runs the current path and a
candidate replacement on the same data, and every write happens inside a transaction
that is rolled back (or into a TEMP table), so the benchmark database is left as it was.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from typing import Any

import bench_data
from benchlib import banner, median, ms, table

REPS = 30

NARROW_SQL = """
SELECT id, index, window_id, role, kind, tool_call_id, is_error
FROM sessions_app_message
WHERE session_id = %s AND window_id = %s AND index > %s AND index <= %s
ORDER BY index
"""


class _Rollback(Exception):
    pass


def _time(function: Callable[[], Any], reps: int = REPS) -> float:
    function()  # warm up
    spent = []
    for _ in range(reps):
        start = time.perf_counter()
        function()
        spent.append(time.perf_counter() - start)
    return median(spent)


def _rolled_back(function: Callable[[], Any]) -> Callable[[], Any]:
    from django.db import transaction

    def run() -> None:
        try:
            with transaction.atomic():
                function()
                raise _Rollback
        except _Rollback:
            pass

    return run


def window_read(built: bench_data.Built) -> list[tuple[str, float]]:
    """The view's window read: the selector (ORM rows) vs raw rows turned into RawMessage."""
    from django.db import connection

    from contextproto.protocol.messages import RawMessage
    from sessions_app.reads import hot_sql, raw_log
    from sessions_app.store.codec import sql_columns
    from sessions_app.store.cold_store import archived_through

    sid, window, covered, bound = (
        built.session_id,
        built.window_id,
        built.covered_through,
        built.upper_bound,
    )
    sql = (
        f"SELECT {sql_columns()} FROM sessions_app_message "
        "WHERE session_id = %s AND window_id = %s AND index > %s AND index <= %s ORDER BY index"
    )

    def raw() -> list[RawMessage]:
        if archived_through(sid) > covered:  # the cold part would be merged here
            raise RuntimeError("prototype assumes a session without cold chunks")
        with connection.cursor() as cursor:
            cursor.execute(sql, [sid, window, covered, bound])
            return [
                RawMessage(
                    id=str(r[0]),
                    index=r[1],
                    window_id=r[2],
                    role=r[3],
                    kind=r[4],
                    content=json.loads(r[5]),
                    run_id=r[6].hex if r[6] else None,
                    input_run=r[7],
                    tool_call_id=r[8],
                    tool_name=r[9],
                    arguments=None if r[10] is None else json.loads(r[10]),
                    is_error=r[11],
                    snapshot_id=str(r[12]) if r[12] else None,
                    created_at=r[13].isoformat() if r[13] else None,
                )
                for r in cursor.fetchall()
            ]

    def narrow() -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(NARROW_SQL, [sid, window, covered, bound])
            return cursor.fetchall()

    current = raw_log.log_window(sid, window, covered, bound)
    assert [m.to_wire() for m in raw()] == [m.to_wire() for m in current], "raw read differs"
    return [
        (
            "raw_log.log_window (ORM rows -> RawMessage, archive merge; before #13)",
            _time(lambda: raw_log.log_window(sid, window, covered, bound)),
        ),
        ("raw cursor rows -> RawMessage (same rows, same values)", _time(raw)),
        (
            "hot_sql.view_rows (applied: window + run inputs + B, one statement)",
            _time(lambda: hot_sql.view_rows(sid, window, covered, bound, built.run_hex)),
        ),
        ("narrow rows (no content/arguments): enough for group boundaries", _time(narrow)),
        (
            "hot_sql.window_outline (applied: fold_create's group scan)",
            _time(lambda: hot_sql.window_outline(sid, window, covered, bound)),
        ),
    ]


def snapshot_write(built: bench_data.Built) -> tuple[list[tuple[str, float]], dict[str, int]]:
    """The snapshot INSERT: 3 jsonb documents vs the request only vs one compressed blob."""
    from django.db import connection

    from sessions_app.models import ProjectionSnapshot

    snapshot = (
        ProjectionSnapshot.objects.filter(session_id=built.session_id)
        .order_by("-created_at")
        .first()
    )
    documents = {
        "messages": json.dumps(snapshot.messages),
        "sources": json.dumps(snapshot.sources),
        "request": json.dumps(snapshot.request),
    }
    blob = zlib.compress(
        json.dumps(
            {
                "messages": snapshot.messages,
                "sources": snapshot.sources,
                "request": snapshot.request,
            }
        ).encode(),
        1,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS bench_snapshot "
            "(messages jsonb, sources jsonb, request jsonb, body bytea)"
        )

    def insert(sql: str, params: list[Any]) -> Callable[[], None]:
        def run() -> None:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)

        return _rolled_back(run)

    three = insert(
        "INSERT INTO bench_snapshot (messages, sources, request) VALUES (%s, %s, %s)",
        [documents["messages"], documents["sources"], documents["request"]],
    )
    request_only = insert(
        "INSERT INTO bench_snapshot (request) VALUES (%s)", [documents["request"]]
    )

    def compressed() -> None:
        body = zlib.compress(
            json.dumps(
                {
                    "messages": snapshot.messages,
                    "sources": snapshot.sources,
                    "request": snapshot.request,
                }
            ).encode(),
            1,
        )
        insert("INSERT INTO bench_snapshot (body) VALUES (%s)", [body])()

    sizes = {name: len(text) for name, text in documents.items()}
    sizes["zlib(all three)"] = len(blob)
    return (
        [
            ("INSERT messages + sources + request as jsonb (before #13)", _time(three)),
            ("INSERT request only as jsonb (messages/sources re-derivable)", _time(request_only)),
            ("json.dumps + zlib level 1 + INSERT one bytea (applied)", _time(compressed)),
        ],
        sizes,
    )


def kv_writes() -> list[tuple[str, float]]:
    """window_open's 4 KV writes: kv_apply_locked vs one upsert per table (rolled back)."""
    from contextproto.protocol.state import new_window_record
    from sessions_app.models import KVEntry, Session, WindowRecord
    from sessions_app.services.sessions import session_create
    from sessions_app.store.state import kv_apply_locked, session_lock

    version = bench_data.bench_version("bench-dispatch", "dispatch")

    def writes(number: int) -> dict[str, Any]:
        record = new_window_record(goal=f"Sub-task {number}", input="handoff", opened_from="main")
        return {
            f"window/p{number}": record,
            "window/main": {**record, "status": "suspended"},
            "activeWindow": f"p{number}",
            "currentWindowEntry": {"windowId": f"p{number}", "fromWindowId": "main"},
        }

    counter = iter(range(10**9))

    def current() -> None:
        session, _ = session_create(agent_version=version)
        session = session_lock(session.id)
        kv_apply_locked(session, writes(next(counter)))

    def upsert() -> None:
        session, _ = session_create(agent_version=version)
        session = Session.objects.select_for_update(no_key=True).get(pk=session.id)
        batch = writes(next(counter))
        revision = session.state_revision + 1
        KVEntry.objects.bulk_create(
            [KVEntry(session=session, key=k, value=v, revision=revision) for k, v in batch.items()],
            update_conflicts=True,
            unique_fields=["session", "key"],
            update_fields=["value", "revision"],
        )
        WindowRecord.objects.bulk_create(
            [
                WindowRecord(
                    session=session, window_id=k.removeprefix("window/"), status=v["status"]
                )
                for k, v in batch.items()
                if k.startswith("window/")
            ],
            update_conflicts=True,
            unique_fields=["session", "window_id"],
            update_fields=["status"],
        )
        Session.objects.filter(pk=session.pk).update(
            state_revision=revision, active_window=batch["activeWindow"]
        )

    baseline = _rolled_back(lambda: session_create(agent_version=version))
    base = _time(baseline)
    return [
        (
            "kv_apply_locked as it is (limit checks + upserts + index sync)",
            _time(_rolled_back(current)) - base,
        ),
        (
            "bulk_create(update_conflicts=True) per table + one UPDATE",
            _time(_rolled_back(upsert)) - base,
        ),
    ]


def run(built: bench_data.Built) -> dict[str, Any]:
    banner("Prototypes: candidate fixes measured side by side (nothing persisted)")
    started = time.perf_counter()
    reads = window_read(built)
    writes, sizes = snapshot_write(built)
    kv = kv_writes()
    rows = [("window read, 200 visible rows", name, ms(t)) for name, t in reads]
    rows += [("projection snapshot write", name, ms(t)) for name, t in writes]
    rows += [("window_open KV writes (4 keys)", name, ms(t)) for name, t in kv]
    text = table(("path", "variant", "median ms"), rows)
    print(text)
    size_text = ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items())
    print(f"  snapshot payload: {size_text}")
    return {
        "table": text,
        "sizes": size_text,
        "reads": reads,
        "writes": writes,
        "kv": kv,
        "seconds": time.perf_counter() - started,
    }
