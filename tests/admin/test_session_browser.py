"""Session browser pages: what each shows, built on a session made through the services."""

from __future__ import annotations

import pytest
from django.utils import timezone

from contextproto.protocol.state import new_window_record
from sessions_app.models import MaintenanceJob, Message, ProjectionSnapshot
from sessions_app.services import archive
from sessions_app.services.runs import run_start
from sessions_app.store.state import kv_commit
from tests.builders.bulk import bulk_messages
from tests.builders.sessions import build_session


def browse(session, tail: str = "") -> str:
    return f"/admin/sessions_app/session/{session.pk}/browse/{tail}"


def row_of(html: str, marker: str) -> str:
    """The table row containing `marker`."""
    at = html.index(marker)
    return html[html.rfind("<tr", 0, at) : html.index("</tr>", at)]


@pytest.fixture
def operator(superuser, admin_client_for):
    return admin_client_for(superuser)


@pytest.fixture
def scenario(published_version):
    version = published_version(version=2)
    return build_session(version)


def test_overview_shows_active_window_revision_task_memory_and_runs(operator, scenario):
    session, _fold_id, _snapshot = scenario
    kv_commit(session_id=session.id, writes={"taskMemory": "Quote for ACME; budget 9000."})
    session.refresh_from_db()
    html = operator.get(browse(session)).content.decode()
    assert "Quote for ACME; budget 9000." in html
    assert f"<strong>{session.state_revision}</strong>" in html
    assert 'badge badge-active">main<' in html
    assert session.current_run.id.hex in html


def test_windows_table_marks_the_active_window_with_counts(operator, scenario):
    session, _fold_id, _snapshot = scenario
    kv_commit(
        session_id=session.id,
        writes={
            "window/research": new_window_record(goal="Find suppliers", opened_from="main"),
            "checkpoint/research": "Suppliers A and B compared.",
            "coveredThrough/research": 3,
        },
    )
    html = operator.get(browse(session, "windows/")).content.decode()
    main_row = row_of(html, 'data-window="main"')
    assert "active-window" in main_row
    message_count = Message.objects.filter(session=session, window_id="main").count()
    assert f">{message_count}</a>" in main_row and ">1</a>" in main_row  # messages, folds
    research = row_of(html, 'data-window="research"')
    assert "active-window" not in research
    assert "Find suppliers" in research and "#3" in research
    assert "Suppliers A and B compared." in research


def test_messages_are_keyset_paged_by_index(operator, scenario):
    session, _fold_id, _snapshot = scenario
    bulk_messages(session, 250)
    html = operator.get(browse(session, "messages/?limit=100")).content.decode()
    assert 'id="m1"' in html and 'id="m100"' in html and 'id="m101"' not in html
    assert "after=100" in html
    later = operator.get(browse(session, "messages/?limit=100&after=100")).content.decode()
    assert 'id="m101"' in later and 'id="m200"' in later and 'id="m100"' not in later
    earlier = operator.get(browse(session, "messages/?limit=100&before=101")).content.decode()
    assert 'id="m1"' in earlier and 'id="m100"' in earlier
    window = operator.get(browse(session, "messages/?window=w1&limit=500")).content.decode()
    indexes = set(
        Message.objects.filter(session=session, window_id="w1").values_list("index", flat=True)
    )
    assert all(f'id="m{i}"' in window for i in indexes)
    assert 'id="m1"' not in window  # #1 is main's input
    assert "raw JSON" in html and "<details>" in html


def test_messages_of_one_run(operator, scenario):
    session, _fold_id, _snapshot = scenario
    first_run = session.current_run
    run, message = run_start(session_id=session.id, content="second request")
    html = operator.get(browse(session, f"messages/?run={run.id.hex}")).content.decode()
    assert f'id="m{message.index}"' in html and 'id="m1"' not in html
    html = operator.get(browse(session, f"messages/?run={first_run.id.hex}")).content.decode()
    assert 'id="m1"' in html and f'id="m{message.index}"' not in html


def test_fold_shows_range_summary_compressed_flag_and_raw_read_back(operator, scenario):
    session, fold_id, _snapshot = scenario
    html = operator.get(browse(session, "folds/")).content.decode()
    assert fold_id in html and "Looked up the answer: 42." in html and "#2\u2013#3" in html
    assert "badge badge-fold" not in html  # not compressed yet
    detail = operator.get(browse(session, f"folds/{fold_id}/")).content.decode()
    assert 'id="m2"' in detail and 'id="m3"' in detail  # the folded call and result
    assert "fold-raw-text" in detail and "lookup" in detail and "42" in detail
    assert 'class="messagelist"' not in detail  # page context must not shadow `messages`
    kv_commit(session_id=session.id, writes={"coveredThrough/main": 3})
    html = operator.get(browse(session, "folds/")).content.decode()
    assert "compressed" in html and "covered through #3" in html
    # A compressed fold still reads back.
    assert 'id="m2"' in operator.get(browse(session, f"folds/{fold_id}/")).content.decode()


def test_snapshot_detail_shows_each_message_beside_its_source(operator, scenario):
    session, fold_id, snapshot = scenario
    html = operator.get(browse(session, f"snapshots/{snapshot.pk}/")).content.decode()
    kinds = [m["kind"] for m in snapshot.messages]
    assert kinds[0] == "system" and "context_state" in kinds and "context_fold" in kinds
    assert html.count('class="projection-row') == len(snapshot.messages)
    assert all(f"badge badge-{t}" in html for t in ("state", "fold", "raw", "header", "system"))
    assert f"/browse/folds/{fold_id}/" in html  # the fold source links to its fold
    raw_source = next(s for s in snapshot.sources if s["derivedType"] == "raw")
    assert f"/browse/messages/{raw_source['messageIds'][0]}/" in html
    assert 'id="provider-request"' in html
    listing = operator.get(browse(session, "snapshots/")).content.decode()
    assert str(snapshot.pk) in listing


def test_kv_receipts_and_maintenance_pages(operator, scenario):
    session, fold_id, _snapshot = scenario
    kv = operator.get(browse(session, "kv/?prefix=fold/")).content.decode()
    assert f"fold/{fold_id}" in kv and "activeWindow" not in kv
    receipts = operator.get(browse(session, "receipts/")).content.decode()
    assert (
        "fold_1" in receipts and "context_fold_create" in receipts and "badge badge-ok" in receipts
    )
    MaintenanceJob.objects.create(
        session=session,
        window_id="main",
        status="rejected",
        frozen_revision=3,
        from_index=0,
        through_index=3,
        source_hash="ab" * 32,
        attempts=2,
        reason="state moved from revision 3 to 4 during page 1",
    )
    jobs = operator.get(browse(session, "maintenance/")).content.decode()
    assert "state moved from revision 3 to 4 during page 1" in jobs
    assert "(#0, #3]" in jobs and "abababab" in jobs and ">2<" in jobs


def test_chart_plots_input_tokens_with_maintenance_and_fold_markers(operator, scenario):
    session, _fold_id, _snapshot = scenario
    snapshots = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at"))
    for n, snapshot in enumerate(snapshots):
        ProjectionSnapshot.objects.filter(pk=snapshot.pk).update(
            usage={"inputTokens": 1000 + 500 * n, "outputTokens": 20},
            input_tokens=1000 + 500 * n,
            output_tokens=20,
        )
    MaintenanceJob.objects.create(
        session=session,
        window_id="main",
        status="committed",
        through_index=3,
        finished_at=timezone.now(),
    )
    html = operator.get(browse(session)).content.decode()
    svg = html[html.index("<svg xmlns") : html.index("</svg>", html.index("<svg xmlns"))]
    assert svg.count('class="turn"') == len(snapshots)
    assert "marker-maintenance" in svg and "marker-fold" in svg
    assert 'class="threshold"' in svg  # 0.75 * 8000
    assert "<script" not in svg and "http://" not in svg.replace("http://www.w3.org/2000/svg", "")


def test_admin_tables_of_the_log_are_read_only(operator, scenario):
    session, _fold_id, _snapshot = scenario
    message = Message.objects.filter(session=session).first()
    for model in ("message", "toolreceipt", "projectionsnapshot", "kventry", "session"):
        assert operator.get(f"/admin/sessions_app/{model}/add/").status_code == 403
    response = operator.post(f"/admin/sessions_app/message/{message.pk}/delete/")
    assert response.status_code == 403
    listing = operator.get("/admin/sessions_app/message/").content.decode()
    assert "/admin/sessions_app/message/add/" not in listing  # no add button
    assert "action-select" not in listing  # no bulk actions (delete)
    # The message's admin page is the browser's message page.
    response = operator.get(f"/admin/sessions_app/message/{message.pk}/change/")
    assert response["Location"] == browse(session, f"messages/{message.pk}/")


def test_browser_merges_the_cold_archive(operator, scenario):
    session, fold_id, _snapshot = scenario
    bulk_messages(session, 300)
    first = Message.objects.get(session=session, index=1)
    chunks = archive.archive_session(session_id=session.id, keep_last=50, chunk_size=100)
    assert chunks and not Message.objects.filter(session=session, index=1).exists()
    page = operator.get(browse(session, "messages/?limit=100")).content.decode()
    assert 'id="m1"' in page and "Quote" not in page and "hello" in page
    assert operator.get(browse(session, f"messages/{first.pk}/")).status_code == 200
    fold = operator.get(browse(session, f"folds/{fold_id}/")).content.decode()
    assert 'id="m2"' in fold and 'id="m3"' in fold and "not in the hot log" not in fold
    windows = operator.get(browse(session, "windows/")).content.decode()
    assert "are in the cold archive" in windows
