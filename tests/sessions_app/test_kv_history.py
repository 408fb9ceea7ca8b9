"""The KV history (contract §10): every committed KV change kept at its revision, and the state
at any revision read back, by the selector and by `GET sessions/{id}/kv/?revision=R`."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, AgentVersion, Application
from sessions_app.models import KVEntry, KVHistory, Message, Session
from sessions_app.reads.history import kv_at
from sessions_app.services.archive import archive_session
from sessions_app.store.state import KV_DELETE, kv_commit


def current_kv(session_id) -> dict:
    return dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))


def history(session_id) -> list[tuple]:
    return list(
        KVHistory.objects.filter(session_id=session_id)
        .order_by("revision", "key")
        .values_list("revision", "key", "value", "deleted")
    )


def test_every_commit_is_kept_and_every_revision_reads_back(session):
    states = {session.state_revision: current_kv(session.id)}
    for writes in (
        {"taskMemory": "first", "a": 1},
        {"taskMemory": "second"},
        {"a": KV_DELETE, "b": {"nested": ["x", "ü"]}},
        {"a": 3},
        {"b": KV_DELETE},
    ):
        revision = kv_commit(session_id=session.id, writes=writes)
        states[revision] = current_kv(session.id)
    assert [row for row in history(session.id) if row[0] > 1] == [
        (2, "a", 1, False),
        (2, "taskMemory", "first", False),
        (3, "taskMemory", "second", False),
        (4, "a", None, True),
        (4, "b", {"nested": ["x", "ü"]}, False),
        (5, "a", 3, False),
        (6, "b", None, True),
    ]
    for revision, state in states.items():
        assert kv_at(session.id, revision) == state, revision
    assert kv_at(session.id, 0) == {}
    assert kv_at(session.id, 4, keys=["a", "b"]) == {"b": {"nested": ["x", "ü"]}}


def test_the_state_at_a_revision_is_one_statement(session):
    for n in range(5):
        kv_commit(session_id=session.id, writes={"taskMemory": f"v{n}", f"k{n}": n})
    with CaptureQueriesContext(connection) as queries:
        state = kv_at(session.id, 4)
    assert len(queries.captured_queries) == 1
    assert state["taskMemory"] == "v2" and "k3" not in state


def test_a_refused_write_leaves_no_history(session, settings):
    settings.KV_MAX_VALUE_BYTES = 100
    before = history(session.id)
    with pytest.raises(Exception, match="limit"):
        kv_commit(session_id=session.id, writes={"taskMemory": "ok", "big": "x" * 500})
    assert history(session.id) == before
    assert Session.objects.get(pk=session.id).state_revision == session.state_revision


def test_a_dispatch_keeps_its_kv_changes_at_the_receipt_revision(api_session):
    s = api_session(version=2)
    s.input("go")
    call = s.call(
        "context_window_open", windowId="alpha", goal="g", input="x", expectedWindowId="main"
    )
    receipt = s.dispatch(call)
    revision = receipt["stateRevision"]
    keys = {k for r, k, _v, _d in history(s.id) if r == revision}
    assert keys == {"activeWindow", "window/alpha", "window/main", "currentWindowEntry"}
    assert kv_at(s.id, revision - 1)["activeWindow"] == "main"
    assert kv_at(s.id, revision)["activeWindow"] == "alpha"
    # The result message records the revision before the dispatch's own changes.
    result = Message.objects.get(session_id=s.id, kind="tool_result", tool_call_id=call)
    assert result.written_at_revision == revision - 1
    later = s.write(role="assistant", kind="text", content="done")
    assert Message.objects.get(session_id=s.id, index=later["index"]).written_at_revision == (
        revision
    )


# ---------------------------------------------------------------- the API


def kv_page(client, s, **params):
    return client.get(s.path("kv/"), **params)


def test_kv_endpoint_at_a_revision_has_the_shape_of_the_current_one(api_session):
    s = api_session(version=2)
    s.input("go")
    r1 = kv_commit(session_id=s.id, writes={"taskMemory": "old", "note/x": {"a": 1}})
    kv_commit(session_id=s.id, writes={"taskMemory": "new", "window/w2": {"status": "active"}})
    now = kv_page(s.client, s).json()
    then = kv_page(s.client, s, revision=r1).json()
    assert set(then) == set(now) == {"stateRevision", "entries", "nextCursor"}
    assert then["stateRevision"] == r1 and now["stateRevision"] == r1 + 1
    entries = {e["key"]: e for e in then["entries"]}
    assert entries["taskMemory"] == {"key": "taskMemory", "value": "old", "revision": r1}
    assert "window/w2" not in entries
    assert entries["activeWindow"]["revision"] == 1
    assert [e["key"] for e in then["entries"]] == sorted(entries)
    # Prefix and pages work as without the parameter; the session key may read it too.
    only = kv_page(s.app_client, s, revision=r1, prefix="note/").json()["entries"]
    assert [e["key"] for e in only] == ["note/x"]
    first = kv_page(s.client, s, revision=r1, limit=2).json()
    second = kv_page(s.client, s, revision=r1, limit=2, cursor=first["nextCursor"]).json()
    assert [e["key"] for e in first["entries"] + second["entries"]] == sorted(entries)[:4]
    # The current revision given explicitly is the current state.
    assert kv_page(s.client, s, revision=r1 + 1).json() == now


@pytest.mark.parametrize(
    "raw", ["-1", "+1", "01", "1.0", " 1", "1 ", "", "one", "0x1", "\uff11", "99999999999999999"]
)
def test_a_revision_that_is_not_a_canonical_integer_is_refused_naming_it(api_session, raw):
    s = api_session(version=2)
    response = kv_page(s.client, s, revision=raw)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["details"]["field"] == "revision"
    assert "revision" in error["message"]


def test_a_revision_above_the_current_one_is_out_of_range(api_session):
    s = api_session(version=2)
    current = Session.objects.get(pk=s.id).state_revision
    response = kv_page(s.client, s, revision=current + 1)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "revision_out_of_range"
    assert error["details"]["currentRevision"] == current
    assert kv_page(s.client, s, revision=0).json()["entries"] == []


def test_revisions_before_a_seeded_history_are_not_recorded(api_session):
    """Sessions older than the history know their state from the migration's revision on."""
    s = api_session(version=2)
    kv_commit(session_id=s.id, writes={"taskMemory": "before"})
    current = Session.objects.get(pk=s.id).state_revision
    Session.objects.filter(pk=s.id).update(kv_history_from=current)
    response = kv_page(s.client, s, revision=current - 1)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "revision_not_recorded"
    assert error["details"]["earliestRevision"] == current
    assert kv_page(s.client, s, revision=current).status_code == 200


def test_the_state_at_a_revision_of_an_archived_session(api_session):
    s = api_session(version=2)
    s.input("go")
    for n in range(4):
        s.host_tool_work("lookup", f"r{n}")
    r = kv_commit(session_id=s.id, writes={"taskMemory": "archived era"})
    s.tool("context_task_memory_set", memory="later")
    assert archive_session(session_id=s.id, keep_last=1, chunk_size=4)
    body = kv_page(s.client, s, revision=r).json()
    assert {e["key"]: e["value"] for e in body["entries"]}["taskMemory"] == "archived era"


def test_other_applications_and_sessions_get_404(api_session, tenant):
    s = api_session(version=2)
    _app, other = tenant("Other")
    assert kv_page(other, s, revision=1).status_code == 404


# ---------------------------------------------------------------- the migration


@pytest.mark.django_db(transaction=True)
def test_the_migration_seeds_existing_sessions_and_sets_their_baseline():
    """Before 0011 a session has KV but no history: afterwards its current KV is its history
    at the entries' revisions, and revisions below its revision then are not recorded."""
    app = Application.objects.create(name="old")
    agent = Agent.objects.create(application=app, name="a")
    version = AgentVersion.objects.create(
        agent=agent,
        number=1,
        status="published",
        system_prompt="p {{context_protocol}}",
        context_protocol_id="unified",
        context_protocol_version=2,
        model_provider="external",
        model_name="m",
        max_input_tokens=8000,
    )
    before = [("sessions_app", "0010_snapshot_usage_columns")]
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        OldSession = apps.get_model("sessions_app", "Session")
        OldEntry = apps.get_model("sessions_app", "KVEntry")
        old = OldSession.objects.create(
            application_id=app.id,
            agent_version_id=version.id,
            state_revision=7,
            session_key_hash="h",
        )
        OldEntry.objects.create(session=old, key="activeWindow", value="main", revision=1)
        OldEntry.objects.create(session=old, key="taskMemory", value="t", revision=7)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(leaves)
    seeded = Session.objects.get(pk=old.pk)
    assert seeded.kv_history_from == 7
    assert history(old.pk) == [(1, "activeWindow", "main", False), (7, "taskMemory", "t", False)]
    assert kv_at(old.pk, 7) == {"activeWindow": "main", "taskMemory": "t"}
    # From now on the trigger keeps the history.
    kv_commit(session_id=old.pk, writes={"taskMemory": "u"})
    assert kv_at(old.pk, 8) == {"activeWindow": "main", "taskMemory": "u"}
    assert kv_at(old.pk, 7)["taskMemory"] == "t"
