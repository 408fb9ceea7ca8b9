"""Runs as timelines, the snapshot list, live refresh and timestamps with seconds (issue 27)."""

from __future__ import annotations

import importlib
import re
import uuid
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Application
from sessions_app.admin_views import turns as turn_views
from sessions_app.admin_views.turns import HOST_IDLE_SECONDS, TIMELINE_TURNS
from sessions_app.models import ProjectionSnapshot, Run, ToolReceipt
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.services.runs import run_start
from sessions_app.services.runtime import run_advance
from sessions_app.services.sessions import session_create
from sessions_app.services.usage import snapshot_usage_report
from tests.builders.sessions import HostTurns

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}


def browse(session, tail: str = "") -> str:
    return f"/admin/sessions_app/session/{session.pk}/browse/{tail}"


def timeline_url(session, run) -> str:
    return browse(session, f"runs/{run.pk}/")


@pytest.fixture
def host_session(published_version):
    """A host-driven run: a host lookup, a protocol call, then a text answer."""
    version = published_version("Acme", prices=PRICES)
    session, _key = session_create(agent_version=version, inputs={})
    run, _ = run_start(session_id=session.id, content="Find the price.")
    turns = HostTurns(session)
    turns.host("price_lookup", "Laptop A: 1300 EUR.")
    turns.context(
        "context_window_open",
        expectedWindowId="main",
        windowId="research",
        goal="Research prices",
        input="Compare laptops.",
    )
    last = turns.project()
    message_write(
        session_id=session.id,
        message=NewMessage(
            role="assistant",
            kind="text",
            content="Laptop A costs 1300 EUR.",
            snapshot_id=str(last.id),
        ),
        host=True,
    )
    snapshot_usage_report(
        session_id=session.id,
        snapshot_id=str(turns.views[0].id),
        usage={"inputTokens": 5000, "outputTokens": 100, "cacheWriteInputTokens": 4000},
    )
    session.refresh_from_db()
    run.refresh_from_db()
    return session, run, turns


# ---------------------------------------------------------------- host-driven turns


def test_a_host_driven_run_counts_each_model_answer_as_a_turn(host_session):
    _session, run, _turns = host_session
    # Three answers: the lookup call, the window_open call, the final text.
    assert run.turns == 3


def test_text_and_calls_of_one_host_answer_count_once(published_version):
    session, _key = session_create(agent_version=published_version(), inputs={})
    run, _ = run_start(session_id=session.id, content="go")
    view = projection_build(session_id=session.id)
    message_write(
        session_id=session.id,
        message=NewMessage(role="assistant", kind="text", content="Looking it up."),
        host=True,
    )
    for call_id in ("a", "b"):
        message_write(
            session_id=session.id,
            message=NewMessage(
                role="assistant",
                kind="tool_call",
                content="",
                tool_call_id=call_id,
                tool_name="lookup",
                arguments={},
                snapshot_id=str(view.id),
            ),
            host=True,
        )
    run.refresh_from_db()
    assert run.turns == 1


def test_the_runs_table_shows_the_turns_of_a_host_driven_run(host_session, superuser, client):
    session, run, _turns = host_session
    client.force_login(superuser)
    html = client.get(browse(session)).content.decode()
    row = re.search(rf'<tr class="run-row">\s*<td><code>{run.id.hex}</code>.*?</tr>', html, re.S)
    row = row.group(0)
    cells = re.findall(r"<td>(.*?)</td>", row, re.S)
    assert cells[2] == "3", cells  # the RunId, the status badge, then the turns
    changelist = client.get("/admin/sessions_app/run/").content.decode()
    assert re.search(
        rf'{run.id.hex}</a></td><td class="field-session_link">.*?</td>'
        r'<td class="field-status">External</td><td class="field-turns">3</td>',
        changelist,
    ), re.search(r"<tr>.{0,2000}field-turns.{0,100}", changelist, re.S)


def test_the_migration_counts_the_turns_host_driven_runs_had_before(host_session):
    """Migration 0013's backfill, run on runs left at 0 the way earlier code left them."""
    migration = importlib.import_module("sessions_app.migrations.0013_turn_timings_and_host_turns")
    _session, run, _turns = host_session
    Run.objects.filter(pk=run.pk).update(turns=0)
    migration.count_host_turns(apps, None)
    run.refresh_from_db()
    assert run.turns == 3


# ---------------------------------------------------------------- the timeline page


def test_the_timeline_shows_each_turn_with_its_projection_tokens_cost_and_calls(
    host_session, superuser, client
):
    session, run, turns = host_session
    client.force_login(superuser)
    response = client.get(timeline_url(session, run))
    assert response.status_code == 200
    html = response.content.decode()
    rows = re.findall(r'<tr class="timeline-turn".*?</tr>', html, re.S)
    assert len(rows) == 3
    first, second, third = rows
    # Each turn links to its view and its diff.
    assert f"/browse/snapshots/{turns.views[0].pk}/" in first
    assert f"/browse/snapshots/{turns.views[0].pk}/diff/" in first
    # Host-driven: no model latency is known, and the page says so.
    assert ">host<" in first
    assert "5000 / 0 / 4000 / 100" in first
    assert "0.0195" in first  # (1000 * 3 + 4000 * 3.75 + 100 * 15) / 1e6
    assert "price_lookup" in first and ">success<" in first and "host, call to result" in first
    assert "context_window_open" in second and "(dispatch)" in second
    assert "not reported" in second
    receipt = ToolReceipt.objects.get(session=session)
    assert receipt.duration_ms is not None
    assert "Laptop A costs 1300 EUR." in third and "<strong>answer</strong>" in third
    assert "Find the price." in html  # the run's input heads the timeline


def test_a_run_of_another_session_is_not_found(host_session, published_version, superuser, client):
    session, _run, _turns = host_session
    other, _ = session_create(agent_version=published_version("Other"), inputs={})
    foreign, _ = run_start(session_id=other.id, content="hi")
    client.force_login(superuser)
    assert client.get(timeline_url(session, foreign)).status_code == 404
    assert client.get(browse(session, f"runs/{uuid.uuid4()}/")).status_code == 404


@pytest.fixture
def scripted_session(application, make_version):
    steps = [
        {
            "toolCalls": [
                {
                    "name": "context_window_open",
                    "arguments": {
                        "purpose": "quote task",
                        "windowId": "alpha",
                        "goal": "quote",
                        "input": "prepare a quote",
                        "expectedWindowId": "main",
                    },
                }
            ]
        },
        {"text": "Quote: 5000."},
    ]
    version = make_version(
        application, provider="scripted", model_config={"steps": steps}, prices=PRICES
    )
    session, _ = session_create(agent_version=version)
    return session


def test_the_runtime_records_model_latency_and_dispatch_duration(
    scripted_session, superuser, client
):
    run, _ = run_start(session_id=scripted_session.id, content="please quote")
    assert run_advance(run_id=run.id) == "completed"
    snapshots = list(ProjectionSnapshot.objects.filter(run=run).order_by("created_at", "pk"))
    assert len(snapshots) == 2
    assert all(s.model_latency_ms is not None for s in snapshots)
    assert ToolReceipt.objects.get(session=scripted_session).duration_ms is not None
    client.force_login(superuser)
    html = client.get(timeline_url(scripted_session, run)).content.decode()
    rows = re.findall(r'<tr class="timeline-turn".*?</tr>', html, re.S)
    assert len(rows) == 2
    latency = re.search(r'class="turn-latency">(.*?)<br>', rows[0], re.S).group(1)
    assert re.fullmatch(r"\d+ ms|\d+\.\d{3} s", latency), latency
    assert "context_window_open" in rows[0] and "(dispatch)" in rows[0]
    # The runtime's text answer names its view, so the snapshot list finds it.
    assert "Quote: 5000." in rows[1]
    snapshots_html = client.get(browse(scripted_session, "snapshots/")).content.decode()
    assert re.findall(r'class="snapshot-did">(?:<a [^>]*>)?(.*?)<', snapshots_html) == [
        "answer",
        "context_window_open",
    ]
    latencies = re.findall(r'class="snapshot-latency">(.*?)<', snapshots_html)
    assert len(latencies) == 2
    for latency in latencies:
        assert re.fullmatch(r"\d+ ms|\d+\.\d{3} s", latency), latency


def test_the_timeline_pages_by_turns(host_session, superuser, client):
    session, run, _turns = host_session
    client.force_login(superuser)
    html = client.get(timeline_url(session, run) + "?limit=2").content.decode()
    assert len(re.findall(r'<tr class="timeline-turn"', html)) == 2
    later = re.search(r'href="([^"]+)" id="later-turns"', html).group(1).replace("&amp;", "&")
    page_two = client.get(timeline_url(session, run) + later).content.decode()
    numbers = re.findall(r'<tr class="timeline-turn" id="turn-(\d+)"', page_two)
    assert numbers == ["3"]
    assert "Laptop A costs 1300 EUR." in page_two
    assert "later turns" not in page_two


# ---------------------------------------------------------------- query counts


def _host_run(version, answers: int):
    session, _key = session_create(agent_version=version, inputs={})
    run, _ = run_start(session_id=session.id, content="go")
    turns = HostTurns(session)
    for n in range(answers):
        turns.host("lookup", f"result {n}")
    turns.context("context_window_open", expectedWindowId="main", windowId="w", goal="g", input="i")
    return session, run


def _queries(client, url: str) -> int:
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_timeline_and_snapshot_list_queries_do_not_grow_with_the_turns(
    published_version, superuser, client
):
    version = published_version("Acme")
    small = _host_run(version, 3)
    big = _host_run(version, 60)
    client.force_login(superuser)
    counts = {}
    for session, run in (small, big):
        for name, url in (
            ("timeline", timeline_url(session, run)),
            ("snapshots", browse(session, "snapshots/")),
        ):
            counts.setdefault(name, []).append(_queries(client, url))
    assert counts["timeline"][0] == counts["timeline"][1], counts
    assert counts["snapshots"][0] == counts["snapshots"][1], counts
    assert max(counts["timeline"] + counts["snapshots"]) <= 14, counts
    # The big run fills more than one page; the page says how to go on.
    session, run = big
    html = client.get(timeline_url(session, run)).content.decode()
    assert len(re.findall(r'<tr class="timeline-turn"', html)) == TIMELINE_TURNS
    assert 'id="later-turns"' in html


def test_the_snapshot_list_numbers_turns_and_says_what_the_model_did(
    host_session, superuser, client
):
    session, _run, _turns = host_session
    client.force_login(superuser)
    html = client.get(browse(session, "snapshots/")).content.decode()
    assert re.findall(r'class="num snapshot-turn"><strong>(\d+)<', html) == ["3", "2", "1"]
    assert re.findall(r'class="snapshot-did">(?:<a [^>]*>)?(.*?)<', html) == [
        "answer",
        "context_window_open",
        "price_lookup",
    ]
    assert "5000 / 0 / 4000 / 100" in html and "0.0195" in html
    assert re.findall(r'class="snapshot-latency">(.*?)<', html) == ["host"] * 3
    assert html.count('class="diff-link"') == 3
    older = client.get(browse(session, "snapshots/?limit=2")).content.decode()
    cursor = re.search(r'href="(\?[^"]+)">older', older).group(1).replace("&amp;", "&")
    last_page = client.get(browse(session, "snapshots/") + cursor).content.decode()
    assert re.findall(r'class="num snapshot-turn"><strong>(\d+)<', last_page) == ["1"]


# ---------------------------------------------------------------- live refresh


def _live(html: str) -> str:
    return re.search(r'id="live-state" data-live="(\d)"', html).group(1)


def test_pages_refresh_while_a_run_is_in_progress_and_stop_after(host_session, superuser, client):
    session, run, _turns = host_session
    client.force_login(superuser)
    assert _live(client.get(browse(session)).content.decode()) == "1"
    assert _live(client.get(timeline_url(session, run)).content.decode()) == "1"
    assert "<script>" in client.get(timeline_url(session, run)).content.decode()
    # A host that stopped projecting is not "in progress" forever.
    idle = timezone.now() - timedelta(seconds=HOST_IDLE_SECONDS + 5)
    ProjectionSnapshot.objects.filter(session=session).update(created_at=idle)
    Run.objects.filter(pk=run.pk).update(created_at=idle)
    assert _live(client.get(timeline_url(session, run)).content.decode()) == "0"
    # The next input ends the run: its timeline stops refreshing.
    run_start(session_id=session.id, content="next")
    html = client.get(timeline_url(session, run)).content.decode()
    assert _live(html) == "0" and "<script>" not in html


def test_a_finished_runtime_run_does_not_refresh(scripted_session, superuser, client):
    run, _ = run_start(session_id=scripted_session.id, content="please quote")
    client.force_login(superuser)
    assert _live(client.get(timeline_url(scripted_session, run)).content.decode()) == "1"
    run_advance(run_id=run.id)
    assert _live(client.get(timeline_url(scripted_session, run)).content.decode()) == "0"
    assert _live(client.get(browse(scripted_session)).content.decode()) == "0"


# ---------------------------------------------------------------- timestamps


SECONDS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC"


def test_timestamps_show_seconds_in_the_browser_and_the_changelists(
    host_session, superuser, client
):
    session, run, _turns = host_session
    client.force_login(superuser)
    stamp = timezone.localtime(run.created_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    overview = client.get(browse(session)).content.decode()
    assert stamp in overview
    timeline = client.get(timeline_url(session, run)).content.decode()
    assert stamp in timeline
    for page in ("snapshots/", "receipts/"):
        assert re.search(SECONDS, client.get(browse(session, page)).content.decode()), page
    message = re.search(r'href="([^"]+/browse/messages/[0-9a-f-]+/)"', timeline)
    assert message is not None
    assert re.search(SECONDS, client.get(message.group(1)).content.decode())
    for changelist in ("run", "toolreceipt", "projectionsnapshot", "session"):
        html = client.get(f"/admin/sessions_app/{changelist}/").content.decode()
        assert re.search(SECONDS, html), changelist


def test_a_turn_followed_by_more_messages_than_a_page_reads_says_so(
    host_session, superuser, client, monkeypatch
):
    session, run, _turns = host_session
    client.force_login(superuser)
    full = client.get(timeline_url(session, run)).content.decode()
    assert 'id="timeline-truncated"' not in full
    monkeypatch.setattr(turn_views, "TIMELINE_MESSAGES", 4)
    cut = client.get(timeline_url(session, run)).content.decode()
    assert 'id="timeline-truncated"' in cut
    # The first messages are still placed in their turns; the rest are not invented.
    assert "price_lookup" in cut and "Laptop A costs 1300 EUR." not in cut


def test_the_receipts_page_says_how_long_each_dispatch_took(host_session, superuser, client):
    session, _run, _turns = host_session
    client.force_login(superuser)
    html = client.get(browse(session, "receipts/")).content.decode()
    receipt = ToolReceipt.objects.get(session=session)
    assert f"<td>{receipt.duration_ms} ms</td>" in html


def test_the_timeline_is_scoped_to_the_users_applications(
    host_session, published_version, staff_member, client
):
    session, run, _turns = host_session
    outsider = staff_member("mallory", Application.objects.create(name="Elsewhere"))
    client.force_login(outsider)
    assert client.get(timeline_url(session, run)).status_code == 404
    member = staff_member("carol", session.application)
    client.force_login(member)
    assert client.get(timeline_url(session, run)).status_code == 200


@pytest.mark.parametrize("cursor", ["junk", "junk|junk", "2026-01-01T00:00:00|nope", "|"])
def test_a_malformed_timeline_cursor_shows_the_first_turns(host_session, superuser, client, cursor):
    session, run, _turns = host_session
    client.force_login(superuser)
    response = client.get(timeline_url(session, run), {"after": cursor})
    assert response.status_code == 200
    numbers = re.findall(r'<tr class="timeline-turn" id="turn-(\d+)"', response.content.decode())
    assert numbers == ["1", "2", "3"]
