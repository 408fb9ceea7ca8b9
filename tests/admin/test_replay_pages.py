"""The admin's "replay under…" pages (contract §10): a session's turns, an AgentVersion's
sessions."""

from __future__ import annotations

import json
import re
from html import unescape

from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions_app.models import ProjectionSnapshot
from tests.builders.sessions import flavour, recorded_session


def session_page(session_id, **params) -> str:
    return reverse("admin:sessions_app_session_replay", args=[session_id])


def version_page(version_id) -> str:
    return reverse("admin:sessions_app_agentversion_replay", args=[version_id])


def get(client, url: str, **params):
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def turn_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="replay-turn[^"]*" data-turn="(\d+)"', html)


def short_session(api_session, turns: int, version: int = 2):
    """unified@`version` with `turns` neutral views, each after a host lookup (one session per
    version: each gets an Application of its own)."""
    s = api_session(version=version)
    s.input("prepare the quote")
    for _ in range(turns - 1):
        s.host_tool_work("lookup", "price 1300")
    s.project()
    return s


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._default_manager.count()
        for label in ("sessions_app", "agents")
        for model in apps.get_app_config(label).get_models()
    }


def test_the_session_page_replays_every_turn_under_the_chosen_version(
    api_session, superuser, admin_client_for
):
    client = admin_client_for(superuser)
    s = recorded_session(api_session, flavour("unified@2"))
    snapshots = ProjectionSnapshot.objects.filter(session_id=s.id).count()
    overview = get(client, reverse("admin:sessions_app_session_browse_overview", args=[s.id]))
    assert f'href="{session_page(s.id)}" id="replay-link"' in overview

    form = get(client, session_page(s.id))
    assert 'id="replay-form"' in form and 'id="replay-result"' not in form
    for key in ("unified@1", "unified@2", "unified@3", "unified@4"):
        assert f'<option value="{key}">' in form
    assert "prefix@2" not in form  # not state-compatible: not offered

    before = row_counts()
    html = get(
        client, session_page(s.id), protocol="unified@4", options='{"maskStep": 2}', replay="1"
    )
    assert row_counts() == before
    assert "Replayed under unified@4" in html
    used = unescape(re.search(r'id="replay-options-used">([^<]*)<', html).group(1))
    assert json.loads(used)["maskStep"] == 2 and json.loads(used)["maskKeepRecent"] == 6
    assert len(turn_rows(html)) == snapshots
    assert "Estimates: tokens counted with cl100k_base" in html
    for label in ("OpenAI: cache hit ratio", "Anthropic: effective cost", "request tokens"):
        assert label in html
    assert "identical requests: 0 of" in html
    # A note is numbered on every turn it applies to and stated once below the table.
    assert html.count(f'href="#replay-note-{s.id}-1"') == snapshots
    legend = re.search(rf'id="replay-note-{s.id}-1">([^<]*)<', html).group(1)
    assert unescape(legend).startswith("maintenancePending estimated from the maintenance jobs")
    # Each turn links to its recorded view.
    first = ProjectionSnapshot.objects.filter(session_id=s.id).order_by("created_at").first()
    assert reverse("admin:sessions_app_session_browse_snapshot", args=[s.id, first.pk]) in html

    recorded = get(client, session_page(s.id), protocol="", replay="1")
    assert "Replayed as recorded" in recorded
    assert recorded.count('<span class="badge badge-ok">same</span>') == snapshots
    assert f"identical requests: {snapshots} of {snapshots}" in recorded


def test_refusals_are_shown_on_the_form(api_session, superuser, admin_client_for):
    client = admin_client_for(superuser)
    s = short_session(api_session, 2)
    html = get(
        client,
        session_page(s.id),
        protocol="unified@4",
        options='{"maskStep": 0, "colour": "red"}',
        replay="1",
    )
    assert 'id="replay-error"' in html and 'id="replay-result"' not in html
    assert "<code>options.maskStep</code>" in html and "option_out_of_range" in html
    assert "<code>options.colour</code>" in html and "option_unknown" in html
    html = get(client, session_page(s.id), protocol="prefix@2", replay="1")
    assert "unified@2 sessions cannot be replayed under prefix@2" in html
    html = get(client, session_page(s.id), options="{not json", replay="1")
    assert "Options are not JSON" in html


def test_the_session_page_issues_as_many_queries_for_many_turns_as_for_few(
    api_session, superuser, admin_client_for
):
    client = admin_client_for(superuser)
    few, many = short_session(api_session, 2), short_session(api_session, 9, version=3)
    counts = []
    for s in (few, many):
        with CaptureQueriesContext(connection) as queries:
            html = get(client, session_page(s.id), protocol="unified@4", replay="1")
        assert len(turn_rows(html)) in (2, 9)
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    assert counts[1] <= 12, counts


def test_the_agent_version_page_replays_its_newest_sessions(
    api_session, superuser, admin_client_for
):
    client = admin_client_for(superuser)
    s = short_session(api_session, 3)
    created = s.app_client.post("sessions/", {"agentVersionId": str(s.agent_version.id)})
    assert created.status_code == 201
    change = get(client, reverse("admin:agents_agentversion_change", args=[s.agent_version.id]))
    assert f'href="{version_page(s.agent_version.id)}" id="replay-link"' in change

    form = get(client, version_page(s.agent_version.id))
    assert 'id="replay-form"' in form and 'id="replay-all-totals"' not in form
    html = get(client, version_page(s.agent_version.id), protocol="unified@3", replay="1")
    assert "All 2 sessions" in html
    assert html.count('class="module replay-session"') == 2
    assert len(turn_rows(html)) == 3  # the second session has no turn yet
    one = get(
        client, version_page(s.agent_version.id), protocol="unified@3", sessions="1", replay="1"
    )
    assert one.count('class="module replay-session"') == 1


def test_replay_pages_keep_to_the_users_applications(api_session, staff_member, admin_client_for):
    s = short_session(api_session, 2)
    stranger = admin_client_for(staff_member("stranger"))
    assert stranger.get(session_page(s.id)).status_code == 404
    assert stranger.get(version_page(s.agent_version.id)).status_code == 404
    member = admin_client_for(staff_member("member", s.app))
    assert member.get(session_page(s.id), {"replay": "1"}).status_code == 200
    assert member.get(version_page(s.agent_version.id)).status_code == 200
    member.logout()
    assert member.get(session_page(s.id)).status_code == 302  # to the login page
