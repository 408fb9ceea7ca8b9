"""KV commits: one revision per transaction, limits refused with their own codes, all or nothing."""

from __future__ import annotations

import pytest
from django.test import override_settings

from contextproto.errors import ApplicationError
from sessions_app.models import FoldRecord, KVEntry, WindowRecord
from sessions_app.store.state import KV_DELETE, kv_commit


def kv(session) -> dict:
    return dict(KVEntry.objects.filter(session=session).values_list("key", "value"))


def test_new_session_starts_with_main_active_at_revision_one(session):
    state = kv(session)
    assert state["activeWindow"] == "main"
    assert state["window/main"]["status"] == "active"
    assert session.state_revision == 1
    assert WindowRecord.objects.filter(session=session, window_id="main").exists()


def test_each_commit_raises_the_revision_by_exactly_one(session):
    start = session.state_revision
    assert (
        kv_commit(session_id=session.id, writes={"taskMemory": "a", "x": 1, "y": [1]}) == start + 1
    )
    assert kv_commit(session_id=session.id, writes={"taskMemory": "b"}) == start + 2
    session.refresh_from_db()
    assert session.state_revision == start + 2
    revisions = dict(KVEntry.objects.filter(session=session).values_list("key", "revision"))
    assert revisions["x"] == start + 1 and revisions["taskMemory"] == start + 2


def test_an_empty_commit_changes_nothing(session):
    start = session.state_revision
    assert kv_commit(session_id=session.id, writes={}) == start
    session.refresh_from_db()
    assert session.state_revision == start


def test_delete_removes_the_key(session):
    kv_commit(session_id=session.id, writes={"x": 1})
    kv_commit(session_id=session.id, writes={"x": KV_DELETE})
    assert "x" not in kv(session)


def test_value_over_64_kib_is_refused_and_nothing_is_written(session):
    before, start = kv(session), session.state_revision
    # A JSON string of n characters encodes to n + 2 bytes (the quotes).
    too_big = "a" * (64 * 1024 - 2 + 1)
    with pytest.raises(ApplicationError) as refused:
        kv_commit(session_id=session.id, writes={"fine": 1, "taskMemory": too_big})
    assert refused.value.code == "kv_value_too_large"
    assert refused.value.details["limit"] == 64 * 1024
    assert kv(session) == before
    session.refresh_from_db()
    assert session.state_revision == start


def test_value_of_exactly_64_kib_is_accepted(session):
    kv_commit(session_id=session.id, writes={"taskMemory": "a" * (64 * 1024 - 2)})
    assert len(kv(session)["taskMemory"]) == 64 * 1024 - 2


@override_settings(KV_MAX_KEYS_PER_SESSION=4096)
def test_the_4097th_key_is_refused_and_nothing_is_written(session):
    existing = len(kv(session))
    kv_commit(session_id=session.id, writes={f"k{i}": i for i in range(4096 - existing)})
    assert len(kv(session)) == 4096
    start = KVEntry.objects.filter(session=session).count()
    session.refresh_from_db()
    revision = session.state_revision
    with pytest.raises(ApplicationError) as refused:
        kv_commit(session_id=session.id, writes={"k0": "changed", "one-more": 1})
    assert refused.value.code == "kv_key_limit_reached"
    assert KVEntry.objects.filter(session=session).count() == start
    assert kv(session)["k0"] == 0
    session.refresh_from_db()
    assert session.state_revision == revision
    # Overwriting an existing key is still allowed at the limit.
    kv_commit(session_id=session.id, writes={"k0": "changed"})


def test_compare_and_set_refuses_a_stale_revision(session):
    with pytest.raises(ApplicationError) as refused:
        kv_commit(
            session_id=session.id, writes={"x": 1}, expected_revision=session.state_revision - 1
        )
    assert refused.value.code == "context_state_stale"
    assert refused.value.details["currentRevision"] == session.state_revision
    assert "x" not in kv(session)


def test_fold_and_window_keys_keep_their_index_tables_in_step(session):
    fold = {
        "windowId": "main",
        "firstIndex": 3,
        "lastIndex": 5,
        "messageIds": [],
        "summary": "s",
        "createdAtIndex": 6,
    }
    kv_commit(
        session_id=session.id,
        writes={
            "fold/f_1": fold,
            "window/alpha": {"goal": "g", "status": "suspended", "createdAtIndex": 4},
        },
    )
    record = FoldRecord.objects.get(session=session, fold_id="f_1")
    assert (record.window_id, record.first_index, record.last_index) == ("main", 3, 5)
    assert WindowRecord.objects.get(session=session, window_id="alpha").status == "suspended"
    kv_commit(session_id=session.id, writes={"activeWindow": "alpha"})
    session.refresh_from_db()
    assert session.active_window == "alpha"
