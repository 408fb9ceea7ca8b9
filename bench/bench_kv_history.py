"""KV history storage (issue 28): how many bytes each KV write adds on PostgreSQL.

Builds the 300-turn unified@2 session of the token economy (bench/bench_tokens.py: ten task
windows, folds every five lookups, working memories, checkpoints by the maintainer), whose
KV writes are those of a real session. Then it commits that session's KV transactions again,
value for value and in order, into `--copies` new sessions through `kv_commit` (the one KV
write path, so the history rows come from the same trigger), and measures how much the
history table grew: heap + TOAST (`pg_table_size`) and its primary-key index
(`pg_indexes_size`), divided by the rows and by the KV transactions added. Sizes are taken
before and after, so other sessions in the database do not count.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/bench_kv_history.py [--copies 50] [--write]

`--write` replaces this section of BENCHMARKS.md (between its markers; bench/run.py keeps
it when it rewrites the file). The database must be migrated (`manage.py migrate`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

SECTION = benchlib.Section("<!-- kv-history:begin -->", "<!-- kv-history:end -->")
TABLE = "sessions_app_kvhistory"


def _sizes() -> tuple[int, int, int]:
    """(heap + TOAST bytes, index bytes, rows) of the history table."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_table_size('{TABLE}'), pg_indexes_size('{TABLE}'), "
            f"(SELECT count(*) FROM {TABLE})"
        )
        table, index, rows = cursor.fetchone()
    return int(table), int(index), int(rows)


def _transactions(session_id: Any) -> list[dict[str, Any]]:
    """The session's KV transactions after its initial state, in revision order."""
    from sessions_app.models import KVHistory
    from sessions_app.store.state import KV_DELETE

    found: dict[int, dict[str, Any]] = {}
    rows = KVHistory.objects.filter(session_id=session_id, revision__gt=1).order_by("revision")
    for row in rows:
        found.setdefault(row.revision, {})[row.key] = KV_DELETE if row.deleted else row.value
    return [found[r] for r in sorted(found)]


def _row_bytes(session_id: Any) -> tuple[int, int]:
    """Tuple bytes of the session's history rows and of its raw log (no pages, no index)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT coalesce(sum(pg_column_size(h.*)), 0) FROM {TABLE} h "
            "WHERE h.session_id = %s), "
            "(SELECT coalesce(sum(pg_column_size(m.*)), 0) FROM sessions_app_message m "
            "WHERE m.session_id = %s)",
            [session_id, session_id],
        )
        history, log = cursor.fetchone()
    return int(history), int(log)


def run(copies: int) -> dict[str, Any]:
    import bench_tokens
    from django.test.utils import override_settings

    from sessions_app.services.sessions import session_create
    from sessions_app.store.state import kv_commit

    benchlib.banner(f"KV history: bytes per KV write ({copies} copies of the 300-turn session)")
    started = time.perf_counter()
    _unified, _prefix, inputs = bench_tokens.build_scripts()
    with override_settings(RUNTIME_AUTOSTART=False, CELERY_TASK_ALWAYS_EAGER=True):
        version = bench_tokens._versions()["unified@2"]
        story = bench_tokens._drive(version, inputs)
    story.refresh_from_db()
    transactions = _transactions(story.pk)
    writes = sum(len(t) for t in transactions)
    history_bytes, log_bytes = _row_bytes(story.pk)
    benchlib.log(
        f"story session {story.pk}: {story.last_index} messages, revision "
        f"{story.state_revision}, {writes} key writes in {len(transactions)} transactions"
    )
    table0, index0, rows0 = _sizes()
    for _copy in range(copies):
        session, _key = session_create(agent_version=version, inputs={"customer": "ACME"})
        for transaction_writes in transactions:
            kv_commit(session_id=session.pk, writes=transaction_writes)
    table1, index1, rows1 = _sizes()
    rows = rows1 - rows0
    # Each copy also wrote its initial KV at session_create.
    added_transactions = copies * (len(transactions) + 1)
    table, index = table1 - table0, index1 - index0
    result = {
        "copies": copies,
        "story_messages": story.last_index,
        "story_revision": story.state_revision,
        "story_transactions": len(transactions) + 1,
        "rows": rows,
        "transactions": added_transactions,
        "table_bytes": table,
        "index_bytes": index,
        "per_row": (table + index) / rows,
        "per_row_table": table / rows,
        "per_row_index": index / rows,
        "per_transaction": (table + index) / added_transactions,
        "rows_per_transaction": rows / added_transactions,
        "history_vs_log": history_bytes / log_bytes if log_bytes else 0.0,
        "seconds": time.perf_counter() - started,
    }
    print(benchlib.table(["measure", "value"], _rows(result)))
    return result


def _rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        ["history rows added", f"{r['rows']:,}"],
        ["KV transactions added", f"{r['transactions']:,}"],
        ["rows per transaction", f"{r['rows_per_transaction']:.2f}"],
        ["table (heap + TOAST) bytes added", f"{r['table_bytes']:,}"],
        ["primary-key index bytes added", f"{r['index_bytes']:,}"],
        ["bytes per history row (table + index)", f"{r['per_row']:.0f}"],
        ["  of which table", f"{r['per_row_table']:.0f}"],
        ["  of which index", f"{r['per_row_index']:.0f}"],
        ["bytes per KV transaction (table + index)", f"{r['per_transaction']:.0f}"],
        [
            "the story's history rows / its raw log rows (tuple bytes)",
            f"{100 * r['history_vs_log']:.1f}%",
        ],
    ]


def render_section(r: dict[str, Any]) -> str:
    machine = benchlib.machine()
    return "\n".join(
        [
            "## KV history storage (issue 28)",
            "",
            f"`bench/bench_kv_history.py --copies {r['copies']}` on "
            f"{machine.get('postgres', 'PostgreSQL')}. The 300-turn unified@2 session of the token "
            f"economy ({r['story_messages']} messages, {r['story_transactions']} KV "
            "transactions: window opens and completes, folds, working memories, task memory, "
            f"checkpoints) is built by the runtime; its KV transactions are then committed "
            f"again, value for value, into {r['copies']} new sessions through `kv_commit`, and "
            "the growth of `sessions_app_kvhistory` is measured before/after: "
            "`pg_table_size` (heap + TOAST) and `pg_indexes_size` (its primary key "
            "(session, key, revision)), divided by the rows and the transactions added.",
            "",
            benchlib.table(["measure", "value"], _rows(r)),
            "",
            "A KV write (one key of one transaction) costs about "
            f"{r['per_row']:.0f} bytes of history; a dispatch that changes state about "
            f"{r['per_transaction']:.0f} bytes. In the story session the history's rows are "
            f"{100 * r['history_vs_log']:.0f}% of the raw log's row bytes (whose bulky tool "
            "results PostgreSQL compresses); it grows only with state changes, never with host "
            "tool work.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    benchlib.refuse_unless_postgres()
    benchlib.django_setup()
    result = run(args.copies)
    if args.write:
        path = benchlib.ROOT / "BENCHMARKS.md"
        SECTION.write(path, render_section(result))
        print(f"\nbench: wrote the KV history section of {path}")
    print(f"bench: {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
