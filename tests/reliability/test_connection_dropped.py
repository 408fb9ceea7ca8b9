"""The database connection dropped inside a dispatch transaction (issue 15).

On the production server: the test holds an uncommitted receipt row with the same
toolCallId, so the server's dispatch transaction, having written the KV change and the
tool_result message, waits on the receipt's unique index; the test then terminates that
backend (pg_terminate_backend). In process: the same failure injected right after the KV
write. Either way the answer is 503 `dependency_unavailable`, nothing of the transaction
remains (revision, KV, MessageIndex counter, messages, receipts), and the retry applies
the call exactly once.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError

from agents.services import application_create
from bench import hostloops
from sessions_app.models import KVEntry, Message, Session, ToolReceipt
from sessions_app.services import dispatch
from tests.reliability.conftest import call, database_url
from tests.servers import wait_for

MEMORY = "budget 9000, quote first"


def state_of(session_id: str) -> dict:
    session = Session.objects.get(pk=session_id)
    return {
        "revision": session.state_revision,
        "nextIndex": session.next_message_index,
        "kv": dict(KVEntry.objects.filter(session=session).values_list("key", "revision")),
        "messages": Message.objects.filter(session=session).count(),
        "receipts": ToolReceipt.objects.filter(session=session).count(),
    }


def backend_waiting_on_receipt_insert(conn: psycopg.Connection) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE %s",
        (f'INSERT INTO "{ToolReceipt._meta.db_table}"%',),
    ).fetchone()
    return row[0] if row else None


def tables_written_by(conn: psycopg.Connection, pid: int) -> set[str]:
    rows = conn.execute(
        "SELECT relation::regclass::text FROM pg_locks "
        "WHERE pid = %s AND mode = 'RowExclusiveLock' AND relation IS NOT NULL",
        (pid,),
    ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_connection_killed_inside_the_dispatch_transaction_leaves_nothing_and_retry_applies_once(
    tmp_path,
):
    server = hostloops.Server(
        env=hostloops.server_env(
            database_url=database_url(), redis_url=settings.REDIS_URL, var_dir=tmp_path
        ),
        log_path=tmp_path / "server.log",
        workers=1,
    ).start()
    try:
        _app, key = application_create(name="connection-drop")
        setup = hostloops.HttpClient(server.base_url, key, hostloops.Stats())
        run = hostloops.create_session(setup, hostloops.setup_agent_version(setup))
        setup.close()
        base = f"sessions/{run.session_id}/"
        assert call(server.base_url, run.key, "POST", base + "inputs/", {"content": "go"})[0] == 201
        status, view = call(server.base_url, run.key, "POST", base + "projection/", {})
        assert status == 201, view
        status, written = call(
            server.base_url,
            run.key,
            "POST",
            base + "messages/",
            {
                "role": "assistant",
                "kind": "tool_call",
                "content": "",
                "toolCallId": "c1",
                "toolName": "context_task_memory_set",
                "arguments": {"purpose": "remember", "memory": MEMORY},
                "snapshotId": view["snapshotId"],
            },
        )
        assert status == 201, written
        before = state_of(run.session_id)

        outcome: dict = {}
        with (
            psycopg.connect(database_url()) as blocker,
            psycopg.connect(database_url(), autocommit=True) as observer,
        ):
            # An uncommitted receipt for c1: the server's receipt INSERT waits for it.
            blocker.execute(
                f'INSERT INTO "{ToolReceipt._meta.db_table}" (session_id, tool_call_id, '
                "tool_name, result, success, state_revision, result_message_id, created_at) "
                "VALUES (%s, 'c1', 'context_task_memory_set', '{}', true, 0, %s, now())",
                (run.session_id, written["id"]),
            )
            dispatcher = threading.Thread(
                target=lambda: outcome.update(
                    answer=call(server.base_url, run.key, "POST", base + "tool-calls/c1/dispatch/")
                )
            )
            dispatcher.start()
            pid = wait_for(
                lambda: backend_waiting_on_receipt_insert(observer), 30, "the dispatch to wait"
            )
            # The transaction got past the KV write and the result message.
            written_tables = tables_written_by(observer, pid)
            assert {KVEntry._meta.db_table, Message._meta.db_table} <= written_tables
            observer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            dispatcher.join(30)
            blocker.rollback()

        status, body = outcome["answer"]
        assert status == 503, body
        assert body["error"]["code"] == "dependency_unavailable"
        assert state_of(run.session_id) == before  # nothing half-written

        status, first = call(server.base_url, run.key, "POST", base + "tool-calls/c1/dispatch/")
        assert status == 200, first
        assert first["replayed"] is False and first["result"]["success"] is True
        status, again = call(server.base_url, run.key, "POST", base + "tool-calls/c1/dispatch/")
        assert status == 200 and again["replayed"] is True
        assert again["stateRevision"] == first["stateRevision"]
        assert again["result"] == first["result"]
        after = state_of(run.session_id)
        assert after["revision"] == before["revision"] + 1 == first["stateRevision"]
        assert after["nextIndex"] == before["nextIndex"] + 1  # one tool_result, no gap
        assert after["receipts"] == before["receipts"] + 1
        kv = dict(KVEntry.objects.filter(session_id=run.session_id).values_list("key", "value"))
        assert kv["taskMemory"] == MEMORY
    finally:
        server.stop()


def test_a_database_failure_after_the_kv_write_rolls_back_the_dispatch(api_session, monkeypatch):
    """In process, any database: the failure right after the KV write is a 503; retry once."""
    s = api_session()
    s.input("go")
    call_id = s.call("context_task_memory_set", memory=MEMORY)
    before = state_of(s.id)
    real_apply = dispatch.kv_apply_locked

    def apply_then_lose_the_connection(*args, **kwargs):
        real_apply(*args, **kwargs)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dispatch, "kv_apply_locked", apply_then_lose_the_connection)
    response = s.client.post(s.path(f"tool-calls/{call_id}/dispatch/"))
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "dependency_unavailable"
    assert state_of(s.id) == before

    monkeypatch.setattr(dispatch, "kv_apply_locked", real_apply)
    first = s.dispatch(call_id)
    assert first["replayed"] is False and first["result"]["success"] is True
    assert s.dispatch(call_id)["replayed"] is True
    after = state_of(s.id)
    assert after["revision"] == before["revision"] + 1
    assert after["receipts"] == before["receipts"] + 1
    assert after["nextIndex"] == before["nextIndex"] + 1
