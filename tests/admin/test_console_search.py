"""Console search (issue 27): sessions by id prefix and filters, text within one session's
raw messages, with links into the log and the views; bad input answers 400 with a message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.models import Message, ProjectionSnapshot, Run, Session
from sessions_app.reads import search as search_reads
from sessions_app.services.archive import archive_session
from tests.builders.bulk import bulk_console_data, bulk_messages
from tests.builders.sessions import build_session

SEARCH = "/admin/sessions_app/session/search/"


def browse(session, page: str = "") -> str:
    return f"/admin/sessions_app/session/{session.pk}/browse/{page}"


def found_ids(response) -> set[str]:
    html = response.content.decode()
    table = html[html.index('id="search-sessions-table"') :]
    ids = set()
    for part in table.split('class="session-link"><code>')[1:]:
        ids.add(part.split("</code>")[0])
    return ids


@pytest.fixture
def sessions(published_version):
    """Three sessions: Acme's (run completed, then a second one failed), Acme's v2 of
    another agent (no run), Globex's (window w1, started 10 days ago)."""
    acme = published_version("Acme")
    other = published_version("Acme", agent_name="critic")
    globex = published_version("Globex")
    first, _fold, _snap = build_session(acme)
    second, _fold, _snap = build_session(other)
    third, _fold, _snap = build_session(globex)
    Run.objects.filter(session=first).update(status="failed")
    Session.objects.filter(pk=second.pk).update(current_run=None)
    Session.objects.filter(pk=third.pk).update(
        active_window="w1", created_at=timezone.now() - timedelta(days=10)
    )
    return {"acme": first, "critic": second, "globex": third, "versions": (acme, other, globex)}


def test_sessions_are_found_by_an_id_prefix_with_or_without_dashes(admin_client, sessions):
    target = sessions["critic"]
    text = str(target.pk)
    for prefix in (text[:6], text[:13], text[:13].upper(), text.replace("-", "")):
        assert found_ids(admin_client.get(SEARCH, {"id": prefix})) == {text}, prefix
    assert len(found_ids(admin_client.get(SEARCH))) == 3


def test_sessions_are_filtered_by_application_agent_version_status_dates_and_window(
    admin_client, sessions
):
    acme, critic, globex = (str(sessions[k].pk) for k in ("acme", "critic", "globex"))
    first_version, other_version, _ = sessions["versions"]
    cases = [
        ({"application": sessions["globex"].application_id}, {globex}),
        ({"agent": other_version.agent_id}, {critic}),
        ({"version": str(first_version.pk)}, {acme}),
        ({"status": "failed"}, {acme}),
        ({"status": "none"}, {critic}),
        ({"window": "w1"}, {globex}),
        ({"created_from": str(timezone.localdate() - timedelta(days=1))}, {acme, critic}),
        ({"created_to": str(timezone.localdate() - timedelta(days=5))}, {globex}),
        (
            {
                "created_from": str(timezone.localdate() - timedelta(days=11)),
                "created_to": str(timezone.localdate() - timedelta(days=9)),
            },
            {globex},
        ),
    ]
    for params, expected in cases:
        response = admin_client.get(SEARCH, params)
        assert response.status_code == 200, params
        assert found_ids(response) == expected, params


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"id": "not-hex!"}, "hexadecimal digits"),
        ({"id": "0" * 40}, "at most 36 characters"),
        ({"id": "0" * 33}, "1 to 32 hexadecimal digits"),
        ({"id": "1234567890abcdef1234567890abcdef0"}, "hexadecimal digits"),
        ({"created_from": "2026-13-45"}, "Enter a valid date"),
        ({"created_from": "2026-05-02", "created_to": "2026-05-01"}, "before the start date"),
        ({"status": "exploded"}, "Select a valid choice"),
        ({"application": "abc"}, "Select a valid choice"),
        ({"version": "not-a-uuid"}, "Select a valid choice"),
    ],
)
def test_bad_session_search_input_answers_400_with_a_message(admin_client, sessions, params, says):
    response = admin_client.get(SEARCH, params)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="search-error"' in html and says in html
    assert 'id="search-sessions-table"' not in html


def test_a_foreign_cursor_is_ignored_not_a_500(admin_client, sessions):
    response = admin_client.get(SEARCH, {"before": "yesterday|nonsense"})
    assert response.status_code == 200 and len(found_ids(response)) == 3


def test_a_member_finds_only_sessions_of_their_applications(client, staff_member, sessions):
    client.force_login(staff_member("carol", sessions["globex"].application))
    response = client.get(SEARCH)
    assert found_ids(response) == {str(sessions["globex"].pk)}
    assert ">Acme<" not in response.content.decode()  # not offered as a filter either
    other = client.get(SEARCH, {"id": str(sessions["acme"].pk)[:8]})
    assert found_ids(other) == set()
    assert client.get(browse(sessions["acme"], "search/"), {"q": "hello"}).status_code == 404
    assert client.get(browse(sessions["globex"], "search/"), {"q": "hello"}).status_code == 200


def test_session_search_pages_newest_first_in_a_fixed_number_of_queries(
    admin_client, published_version
):
    version = published_version("Acme")
    bulk_console_data(version, 60)

    def queries(params) -> tuple[int, set[str]]:
        admin_client.get(SEARCH, params)
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(SEARCH, params)
        assert response.status_code == 200
        return len(captured), found_ids(response)

    small, first_page = queries({})
    assert len(first_page) == 50
    html = admin_client.get(SEARCH).content.decode()
    older = html.split('id="sessions-older"')[0].rsplit('href="', 1)[1].split('"')[0]
    rest = found_ids(admin_client.get(SEARCH + older.replace("&amp;", "&")))
    assert len(rest) == 10 and not rest & first_page
    newest = {
        str(pk)
        for pk in Session.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)[:50]
    }
    assert first_page == newest

    bulk_console_data(version, 1500)
    large, _ = queries({})
    filtered, _ = queries({"status": "running", "window": "main", "agent": version.agent_id})
    assert large == small and filtered == small


# ---------------------------------------------------------------- within a session


@pytest.fixture
def logged(published_version):
    """A session whose log has an input "hello", a tool call with arguments {"q": "answer"},
    its result "42", then 300 bulk notes ("note N")."""
    session, _fold, _last = build_session(published_version("Acme"))
    bulk_messages(session, 300)
    session.refresh_from_db()
    return session


def test_text_search_finds_content_and_tool_arguments_with_links_to_log_and_views(
    admin_client, logged
):
    response = admin_client.get(browse(logged, "search/"), {"q": "answer"})
    assert response.status_code == 200
    html = response.content.decode()
    call = Message.objects.get(session=logged, kind="tool_call", tool_name="lookup")
    assert f'href="{browse(logged, f"messages/{call.pk}/")}"' in html
    assert f'href="{browse(logged, "messages/")}?after={call.index - 1}"' in html
    first_view = (
        ProjectionSnapshot.objects.filter(session=logged, upper_bound__gte=call.index)
        .order_by("upper_bound", "created_at")
        .first()
    )
    assert f'href="{browse(logged, f"snapshots/{first_view.pk}/")}"' in html
    # The lookup call's arguments, and the fold whose summary says "the answer".
    assert html.count('class="result-message"') == 2
    fold = Message.objects.get(session=logged, kind="tool_call", tool_name="context_fold_create")
    assert f'href="{browse(logged, f"messages/{fold.pk}/")}"' in html

    hello = admin_client.get(browse(logged, "search/"), {"q": "HELLO"}).content.decode()
    first_input = Message.objects.get(session=logged, kind="input", content="hello")
    assert f'href="{browse(logged, f"messages/{first_input.pk}/")}"' in hello

    nothing = admin_client.get(browse(logged, "search/"), {"q": "zebra"}).content.decode()
    assert "No message matches." in nothing
    assert 'class="current"' in nothing and ">Search<" in nothing  # the browser's tab


def test_text_search_pages_newest_first_without_overlap(admin_client, logged):
    first = admin_client.get(browse(logged, "search/"), {"q": "note"}).content.decode()
    assert first.count('class="result-message"') == search_reads.RESULTS_PER_PAGE
    newest = logged.last_index
    assert f">#{newest}</a>" in first and f">#{newest - 49}</a>" in first
    older = first.split('id="search-older"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = admin_client.get(browse(logged, "search/") + older.replace("&amp;", "&"))
    html = second.content.decode()
    assert f">#{newest - 50}</a>" in html and f">#{newest - 49}</a>" not in html


@pytest.mark.parametrize(
    ("q", "says"),
    [
        ("x" * 201, "at most 200 characters"),
        ("   ", None),  # blank: the form, no search
        ("bad\x00byte", "NUL"),
    ],
)
def test_bad_text_queries_answer_400_with_a_message(admin_client, logged, q, says):
    response = admin_client.get(browse(logged, "search/"), {"q": q})
    html = response.content.decode()
    if says is None:
        assert response.status_code == 400 and "Type one or more words" in html
    else:
        assert response.status_code == 400 and says in html
    assert 'id="search-results"' not in html


def test_a_bad_before_index_searches_from_the_newest(admin_client, logged):
    for before in ("abc", "99999999999999999999999", "-5"):
        response = admin_client.get(browse(logged, "search/"), {"q": "note", "before": before})
        assert response.status_code == 200, before


def test_archived_messages_are_named_as_not_searched(admin_client, logged):
    chunks = archive_session(session_id=logged.pk, keep_last=50, chunk_size=100)
    assert chunks
    html = admin_client.get(browse(logged, "search/"), {"q": "hello"}).content.decode()
    last = chunks[-1].last_index
    assert f"Archived messages #1\u2013#{last}" in html and "are not searched" in html
    assert "No message matches." in html  # the input "hello" is cold now


def test_text_search_query_count_does_not_grow_with_the_log(admin_client, published_version):
    small, _f, _l = build_session(published_version("Small"))
    big, _f, _l = build_session(published_version("Big"))
    bulk_messages(small, 100)
    bulk_messages(big, 10_000)

    def queries(session, q: str) -> int:
        admin_client.get(browse(session, "search/"), {"q": q})
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(browse(session, "search/"), {"q": q}).status_code == 200
        return len(captured)

    # A page with hits reads their views (one query more than a page without).
    for q in ("note", "absent"):
        assert queries(big, q) == queries(small, q), q
    assert queries(big, "answer") <= queries(small, "answer")


@pytest.mark.postgres
def test_postgres_text_search_uses_the_gin_index(logged):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM sessions_app_message WHERE ({search_reads.MESSAGE_TSVECTOR})"
            " @@ websearch_to_tsquery('simple'::regconfig, %s)",
            ["answer"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "message_text_search" in plan, plan
    page = search_reads.message_search(logged, "answer", before=None)
    names = [h.message.tool_name for h in page.hits]  # newest first: the fold says "answer" too
    assert page.full_text and names == ["context_fold_create", "lookup"]
