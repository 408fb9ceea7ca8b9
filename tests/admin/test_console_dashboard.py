"""The admin index is the operator dashboard (issue 27): branded, what runs and fails, what it
costs today, in a fixed number of queries whatever the number of sessions."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.services import application_create
from sessions_app import nodes
from sessions_app.models import (
    GatewayExchange,
    MaintenanceJob,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
)
from sessions_app.reads import console as console_reads
from tests.builders.bulk import bulk_console_data

PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}
DASHBOARD_MAX_QUERIES = 17  # login session, user, the dashboard's twelve reads, app list


def _session(version, key: str, age: timedelta) -> Session:
    session = Session.objects.create(
        application_id=version.agent.application_id, agent_version=version, session_key_hash=key
    )
    Session.objects.filter(pk=session.pk).update(created_at=timezone.now() - age)
    return session


def _run(session, status: str, age: timedelta, *, finished: timedelta | None = None, **fields):
    run = Run.objects.create(session=session, status=status, **fields)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        created_at=now - age, finished_at=None if finished is None else now - finished
    )
    return Run.objects.get(pk=run.pk)


def _turn(session, *, age: timedelta = timedelta(0), cost: str | None = "0.01"):
    snapshot = ProjectionSnapshot.objects.create(
        session=session,
        revision=0,
        upper_bound=1,
        window_id="main",
        protocol="unified@2",
        provider="external",
        input_tokens=2000,
        cache_read_input_tokens=500,
        output_tokens=150,
        cost=None if cost is None else Decimal(cost),
    )
    ProjectionSnapshot.objects.filter(pk=snapshot.pk).update(created_at=timezone.now() - age)
    return snapshot


@pytest.fixture
def scene(application, make_version):
    """Two Applications: Acme (priced) with recent work, Globex (unpriced) with old work."""
    acme = make_version(application, prices=PRICES, name="planner")
    globex_app, _ = application_create(name="Globex")
    globex = make_version(globex_app, name="writer")
    hour, minute = timedelta(hours=1), timedelta(minutes=1)
    fresh = _session(acme, "k1", 5 * minute)
    earlier = _session(acme, "k2", 3 * hour)
    old = _session(globex, "k3", timedelta(days=3))
    _run(fresh, "running", 4 * minute)
    failed = _run(
        earlier,
        "failed",
        3 * hour,
        finished=30 * minute,
        error={"code": "provider_unavailable", "message": "503 from the provider"},
    )
    _run(old, "completed", timedelta(days=3), finished=timedelta(days=3))
    _run(old, "queued", timedelta(days=2))  # in progress, though started long ago
    queued = MaintenanceJob.objects.create(session=fresh, window_id="main", status="queued")
    MaintenanceJob.objects.filter(pk=queued.pk).update(created_at=timezone.now() - 2 * hour)
    MaintenanceJob.objects.create(session=earlier, window_id="main", status="running")
    MaintenanceJob.objects.create(session=old, window_id="w1", status="failed")
    MaintenanceJob.objects.create(session=old, window_id="w2", status="committed")
    bad = ToolReceipt.objects.create(
        session=fresh,
        tool_call_id="call_9",
        tool_name="lookup_weather",
        result={"success": False, "error": {"code": "invalid_arguments"}},
        success=False,
        state_revision=1,
        result_message_id=uuid.uuid4(),
    )
    ToolReceipt.objects.create(
        session=fresh,
        tool_call_id="call_8",
        tool_name="lookup_ok",
        result={"success": True},
        success=True,
        state_revision=1,
        result_message_id=uuid.uuid4(),
    )
    _turn(fresh)
    _turn(fresh, cost="0.02")
    _turn(old)  # an unpriced version's turn today: tokens, no cost
    _turn(old, age=timedelta(days=3))  # not today
    return {
        "acme": acme,
        "globex": globex,
        "failed": failed,
        "receipt": bad,
        "fresh": fresh,
        "old": old,
        "queued_since": timezone.now() - 2 * hour,
    }


def test_the_admin_index_is_the_branded_dashboard_with_the_app_list(admin_client, scene):
    page = admin_client.get("/admin/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<title>Dashboard | contextproto console</title>" in html
    assert '<a href="/admin/">contextproto</a>' in html
    assert "Django administration" not in html and "Django site admin" not in html
    for href in (
        "/admin/agents/agentversion/catalog/",
        "/admin/sessions_app/session/experiments/",
        "/admin/sessions_app/session/search/",
    ):
        assert f'href="{href}"' in html, href
    assert "app-sessions_app" in html and "app-agents" in html  # the app list stays
    anonymous = Client().get("/admin/login/").content.decode()
    assert "Django administration" not in anonymous and "contextproto" in anonymous


def test_the_dashboard_counts_activity_queue_failures_and_todays_cost(admin_client, scene):
    html = admin_client.get("/admin/").content.decode()
    board = console_reads.dashboard(type("Root", (), {"is_superuser": True})())

    activity = board.activity
    assert (activity.sessions_created_hour, activity.sessions_created_day) == (1, 2)
    assert (activity.sessions_hour, activity.sessions_day) == (1, 2)
    by_status = {row["status"]: (row["hour"], row["day"]) for row in activity.by_status}
    assert by_status["running"] == (1, 1) and by_status["failed"] == (0, 1)
    assert by_status["completed"] == (0, 0) and by_status["queued"] == (0, 0)
    assert activity.in_progress == {"queued": 1, "running": 1, "waiting_for_host_tool": 0}

    queue = board.maintenance
    assert (queue.queued, queue.running, queue.failed_hour, queue.failed_day) == (1, 1, 1, 1)
    assert abs(queue.oldest_waiting - scene["queued_since"]) < timedelta(seconds=30)

    failed, receipt = scene["failed"], scene["receipt"]
    assert [r.pk for r in board.failures.runs] == [failed.pk]
    assert [r.pk for r in board.failures.receipts] == [receipt.pk]
    run_link = (
        f"/admin/sessions_app/session/{failed.session_id}/browse/messages/?run={failed.id.hex}"
    )
    assert f'href="{run_link}"' in html and "provider_unavailable" in html
    message_link = (
        f"/admin/sessions_app/session/{receipt.session_id}/browse/messages/"
        f"{receipt.result_message_id}/"
    )
    assert f'href="{message_link}"' in html and "invalid_arguments" in html
    assert "lookup_ok" not in html  # a successful receipt is no failure

    costs = {c.version.pk: c.totals for c in board.costs}
    acme, globex = costs[scene["acme"].pk], costs[scene["globex"].pk]
    assert (acme.turns, acme.tokens.input_tokens, acme.tokens.output_tokens) == (2, 4000, 300)
    assert acme.cost == Decimal("0.03")
    assert (globex.turns, globex.cost) == (1, None)  # no prices: tokens, and no cost
    assert board.costs[0].version.pk == scene["acme"].pk  # costliest first
    cost_table = html[html.index('id="dash-costs"') :]
    assert "Acme / planner v1" in cost_table and "0.0300" in cost_table
    assert "this version has no prices" in cost_table


def test_a_member_sees_only_their_applications_on_the_dashboard(
    client, staff_member, scene, application
):
    client.force_login(staff_member("carol", application))
    html = client.get("/admin/").content.decode()
    assert "lookup_weather" in html  # Acme's failure
    in_progress = dict(re.findall(r'data-in-progress="(\w+)">\w+ <strong>(\d+)</strong>', html))
    assert in_progress["queued"] == "0"  # Globex's queued run is not Carol's
    assert "Globex" not in html[html.index('id="dashboard"') : html.index('id="content-main"')]
    assert "writer" not in html[html.index('id="dash-costs"') :]


def test_a_staff_user_without_session_rights_sees_nodes_and_links_only(client, db):
    client.force_login(User.objects.create_user("visitor", password="pw", is_staff=True))
    html = client.get("/admin/").content.decode()
    assert 'id="dash-nodes"' in html and 'id="dash-activity"' not in html


def test_the_dashboard_links_the_catalog_experiments_and_search_in_that_order(admin_client):
    """Experiments is labs' link (labs/admin.py adds it); the console names only its own."""
    html = admin_client.get("/admin/").content.decode()
    links = re.findall(
        r'<li><a href="([^"]+)">(Protocol catalog|Experiments|Search sessions)<', html
    )
    assert links == [
        ("/admin/agents/agentversion/catalog/", "Protocol catalog"),
        ("/admin/sessions_app/session/experiments/", "Experiments"),
        ("/admin/sessions_app/session/search/", "Search sessions"),
    ]


def _dashboard_queries(client) -> int:
    client.get("/admin/")  # warm per-process caches (content types, permissions)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/admin/").status_code == 200
    return len(queries)


@pytest.mark.parametrize("user", ["superuser", "member"])
def test_the_dashboard_query_count_does_not_grow_with_sessions_runs_and_jobs(
    client, superuser, staff_member, application, make_version, user, django_assert_max_num_queries
):
    version = make_version(application, prices=PRICES)
    client.force_login(superuser if user == "superuser" else staff_member("carol", application))
    bulk_console_data(version, 30)
    small = _dashboard_queries(client)
    bulk_console_data(version, 1500)
    assert Session.objects.count() == 1530 and Run.objects.count() == 1530
    large = _dashboard_queries(client)
    assert large == small, (small, large)
    with django_assert_max_num_queries(DASHBOARD_MAX_QUERIES):
        page = client.get("/admin/")
    html = page.content.decode()
    # 153 sessions of the 1530 started in the last hour; the lists stop at LIST_LIMIT.
    assert '<td class="num">153</td>' in html
    assert html.count('class="error-receipt"') == console_reads.LIST_LIMIT


def test_the_dashboard_lists_each_node_with_role_build_and_fingerprint(admin_client, monkeypatch):
    records = [
        {
            "role": "api",
            "host": "web-1",
            "pid": 11,
            "codeVersion": "v1.4.0",
            "catalogFingerprint": "a" * 64,
            "protocols": ["unified@2"],
        },
        {
            "role": "worker",
            "host": "<b>w</b>",
            "pid": 12,
            "codeVersion": "v1.3.9",
            "catalogFingerprint": "a" * 64,
            "protocols": ["unified@2"],
        },
    ]
    monkeypatch.setattr(nodes, "live_nodes", lambda: records)
    html = admin_client.get("/admin/").content.decode()
    table = html[html.index('id="dash-nodes"') : html.index('id="dash-activity"')]
    assert "<td>api</td>" in table and "<td>web-1:11</td>" in table
    assert "<code>v1.4.0</code>" in table and "<code>v1.3.9</code>" in table
    assert f'title="{"a" * 64}"' in table
    assert "&lt;b&gt;w&lt;/b&gt;:12" in table  # node names are escaped
    assert "The nodes run different builds." in table


def test_the_dashboard_counts_gateway_requests_and_links_the_latest_sessions(
    admin_client, application, make_version
):
    version = make_version(application)
    via_api = _session(version, "k-api", timedelta(minutes=5))
    via_gateway = _session(version, "k-gw", timedelta(minutes=1))
    Session.objects.filter(pk=via_gateway.pk).update(via_gateway=True)
    for status, replayed, age in (
        (200, False, timedelta(minutes=1)),
        (200, True, timedelta(minutes=2)),
        (409, False, timedelta(minutes=3)),
        (502, False, timedelta(hours=3)),
    ):
        exchange = GatewayExchange.objects.create(
            application=application,
            session=via_gateway,
            client_format="openai",
            request_hash="h",
            http_status=status,
            replayed=replayed,
        )
        GatewayExchange.objects.filter(pk=exchange.pk).update(created_at=timezone.now() - age)
    page = admin_client.get("/admin/").content.decode()
    cells = dict(re.findall(r'data-gateway="(\w+)">(\d+)<', page))
    assert cells == {"requests": "3", "errors": "1", "replays": "1", "unnamed": "0"}
    # The day's answers by client API, status and code.
    answers = re.findall(
        r'<tr class="gateway-answer"><td>(\w+)</td><td class="num">(\d+)</td>', page
    )
    assert sorted(answers) == [("openai", "200"), ("openai", "409"), ("openai", "502")]
    rows = re.findall(r'<tr class="latest-session">(.*?)</tr>', page, re.S)
    assert len(rows) == 2
    assert "/browse/" in rows[0] and str(via_gateway.pk)[:8] in rows[0]
    assert "gateway-mark" in rows[0] and "gateway-mark" not in rows[1]
    assert str(via_api.pk)[:8] in rows[1]
