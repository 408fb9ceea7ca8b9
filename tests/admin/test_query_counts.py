"""The session pages issue the same number of queries for 10k messages as for 100."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Application
from agents.services import agent_version_duplicate
from contextproto.admin_site import COUNT_CAP
from contextproto.protocol.state import new_window_record
from sessions_app.models import MaintenanceJob, ProjectionSnapshot
from sessions_app.services.projection import projection_build
from sessions_app.store.state import kv_commit
from tests.builders.bulk import bulk_messages, sql_bulk_messages
from tests.builders.sessions import build_session

PAGES = (
    "",
    "windows/",
    "messages/",
    "messages/?window=w1",
    "messages/?after=50&limit=20",
    "messages/?before=60",
    "messages/?run={run}",
    "runs/{run_id}/",
    "folds/",
    "folds/{fold}/",
    "snapshots/",
    "snapshots/{snapshot}/",
    "kv/",
    "receipts/",
    "maintenance/",
)


def big_session(published_version, app_name: str, size: int):
    session, fold_id, _ = build_session(published_version(app_name, version=2))
    kv_commit(
        session_id=session.id,
        writes={
            "window/w1": new_window_record(goal="one"),
            "window/w2": new_window_record(goal="two"),
            "coveredThrough/w1": 40,
            "checkpoint/w1": "earlier work",
        },
    )
    bulk_messages(session, size)
    snapshot = projection_build(session_id=session.id)
    ProjectionSnapshot.objects.filter(session=session).update(
        usage={"inputTokens": 1234}, input_tokens=1234
    )
    MaintenanceJob.objects.create(session=session, window_id="w1", status="committed")
    session.refresh_from_db()
    return session, fold_id, snapshot


def count_queries(client, url: str) -> int:
    client.get(url)  # warm caches (content types, permissions) so only the page counts
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(queries)


@pytest.fixture
def two_sessions(published_version):
    return (
        big_session(published_version, "Small", 100),
        big_session(published_version, "Big", 10_000),
    )


@pytest.mark.parametrize("user", ["superuser", "member"])
def test_session_pages_query_count_does_not_grow_with_the_log(
    two_sessions, superuser, staff_member, client, user
):
    if user == "superuser":
        client.force_login(superuser)
    else:
        client.force_login(staff_member("carol", *Application.objects.all()))
    counts = {}
    for session, fold_id, snapshot in two_sessions:
        assert session.last_index >= 100
        for page in PAGES:
            tail = page.format(
                run=session.current_run_id.hex,
                run_id=session.current_run_id,
                fold=fold_id,
                snapshot=snapshot.pk,
            )
            url = f"/admin/sessions_app/session/{session.pk}/browse/{tail}"
            counts.setdefault(page, []).append(count_queries(client, url))
    for page, (small, big) in counts.items():
        assert small == big, f"{page or 'overview'}: {small} queries at 100, {big} at 10k"
        assert big <= 16, f"{page or 'overview'} issues {big} queries"


def test_changelists_of_huge_tables_do_not_count_or_grow(two_sessions, superuser, client):
    client.force_login(superuser)
    (small, *_), (big, *_) = two_sessions
    for model in ("message", "session", "kventry", "projectionsnapshot", "toolreceipt", "run"):
        url = f"/admin/sessions_app/{model}/"
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200
        for query in queries.captured_queries:
            sql = query["sql"].upper()
            # Only the capped count: SELECT COUNT(*) FROM (SELECT ... LIMIT 10001).
            if "COUNT(" in sql:
                assert "LIMIT 10001" in sql, sql
    with CaptureQueriesContext(connection) as small_queries:
        client.get(f"/admin/sessions_app/message/?session={small.pk}")
    with CaptureQueriesContext(connection) as big_queries:
        client.get(f"/admin/sessions_app/message/?session={big.pk}")
    assert len(small_queries) == len(big_queries)


def test_message_changelist_says_more_than_the_cap(superuser, client, published_version):
    session, *_ = build_session(published_version())
    bulk_messages(session, COUNT_CAP + 5)
    client.force_login(superuser)
    html = client.get("/admin/sessions_app/message/").content.decode()
    assert f"More than {COUNT_CAP} messages" in html


def test_agent_version_changelist_query_count_does_not_grow(published_version, superuser, client):
    client.force_login(superuser)

    def measure() -> int:
        return count_queries(client, "/admin/agents/agentversion/")

    version = published_version()
    few = measure()
    for _ in range(15):
        agent_version_duplicate(version=version)
    published_version("Other", agent_name="second")
    assert measure() == few


# The context viewer and the pages that link back into it, at 100 and 100k messages.
CONTEXT_PAGES = (
    "",
    "windows/",
    "messages/?before=60",
    "messages/{message}/",
    "folds/{fold}/",
    "snapshots/",
    "snapshots/{snapshot}/",
    "snapshots/{snapshot}/?raw_before=60&raw_limit=20",
    "snapshots/{snapshot}/?raw_window=1",
    "snapshots/{snapshot}/?raw_after=40",
    "snapshots/{snapshot}/diff/",
)


def context_session(published_version, app_name: str, size: int):
    """A built session, then `size` messages in other windows, then one more view.

    The bulk messages stay out of `main`, so the view stays small while the log and the
    turn's upper bound grow: what the pages read must not grow with them.
    """
    session, fold_id, _ = build_session(published_version(app_name, version=2))
    sql_bulk_messages(session, size)
    snapshot = projection_build(session_id=session.id)
    session.refresh_from_db()
    first = session.messages.get(index=1)
    return session, fold_id, snapshot, first


def test_context_viewer_query_count_is_the_same_at_100_and_100k_messages(
    published_version, superuser, client
):
    sessions = [
        context_session(published_version, "Small", 100),
        context_session(published_version, "Huge", 100_000),
    ]
    huge, _fold, huge_view, _first = sessions[1]
    assert huge.last_index > 100_000 and huge_view.upper_bound == huge.last_index
    assert huge.messages.count() == huge.last_index
    middle = huge.messages.get(index=50_000)
    assert middle.content == "note 50000" and middle.window_id in ("w1", "w2", "w3")
    client.force_login(superuser)
    html = client.get(
        f"/admin/sessions_app/session/{huge.pk}/browse/snapshots/{huge_view.pk}/?raw_after=49999"
    ).content.decode()
    assert 'id="r50000"' in html and "note 50000" in html
    counts: dict[str, list[int]] = {}
    for session, fold_id, snapshot, first in sessions:
        for page in CONTEXT_PAGES:
            tail = page.format(fold=fold_id, snapshot=snapshot.pk, message=first.pk)
            url = f"/admin/sessions_app/session/{session.pk}/browse/{tail}"
            counts.setdefault(page, []).append(count_queries(client, url))
    for page, (small, huge) in counts.items():
        assert small == huge, f"{page or 'overview'}: {small} queries at 100, {huge} at 100k"
        assert huge <= 16, f"{page or 'overview'} issues {huge} queries"
