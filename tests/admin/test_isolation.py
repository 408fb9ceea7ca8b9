"""A staff user of Application A cannot see or reach Application B's agents or sessions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.builders.sessions import build_session


@pytest.fixture
def tenants(published_version, staff_member):
    version_a = published_version("Alpha", agent_name="alpha-agent")
    version_b = published_version("Bravo", agent_name="bravo-agent")
    session_a, fold_a, snapshot_a = build_session(version_a, input_text="alpha input")
    session_b, fold_b, snapshot_b = build_session(version_b, input_text="bravo secret input")
    alice = staff_member("alice", version_a.agent.application)
    return {
        "alice": alice,
        "a": (version_a, session_a, fold_a, snapshot_a),
        "b": (version_b, session_b, fold_b, snapshot_b),
    }


def browser_urls(session, fold_id, snapshot) -> list[str]:
    base = f"/admin/sessions_app/session/{session.pk}/browse/"
    first_message = session.messages.order_by("index").first()
    return [
        base,
        base + "windows/",
        base + "messages/",
        base + f"messages/{first_message.pk}/",
        base + "folds/",
        base + f"folds/{fold_id}/",
        base + "snapshots/",
        base + f"snapshots/{snapshot.pk}/",
        base + "kv/",
        base + "receipts/",
        base + "maintenance/",
    ]


def test_changelists_show_only_the_members_applications(client, tenants):
    client.force_login(tenants["alice"])
    _version_a, session_a, *_ = tenants["a"]
    _version_b, session_b, *_ = tenants["b"]
    pages = {
        "/admin/agents/agent/": ("alpha-agent", "bravo-agent"),
        "/admin/agents/agentversion/": ("alpha-agent", "bravo-agent"),
        "/admin/agents/application/": ("Alpha", "Bravo"),
        "/admin/sessions_app/session/": (str(session_a.pk), str(session_b.pk)),
        "/admin/sessions_app/message/": (str(session_a.pk)[:8], str(session_b.pk)[:8]),
        "/admin/sessions_app/projectionsnapshot/": (str(session_a.pk)[:8], str(session_b.pk)[:8]),
        "/admin/sessions_app/kventry/": (str(session_a.pk)[:8], str(session_b.pk)[:8]),
        "/admin/sessions_app/toolreceipt/": (str(session_a.pk)[:8], str(session_b.pk)[:8]),
    }
    for url, (mine, theirs) in pages.items():
        html = client.get(url).content.decode()
        assert mine in html, url
        assert theirs not in html, url


def test_change_pages_of_another_application_are_unreachable(client, tenants):
    client.force_login(tenants["alice"])
    version_b, *_ = tenants["b"]
    for url in (
        f"/admin/agents/agent/{version_b.agent.pk}/change/",
        f"/admin/agents/agentversion/{version_b.pk}/change/",
        f"/admin/agents/application/{version_b.agent.application.pk}/change/",
    ):
        response = client.get(url, follow=True)
        # Django's admin answers a missing object with a redirect home and "doesn't exist".
        assert response.redirect_chain and response.redirect_chain[-1][0] == "/admin/", url
        assert "bravo" not in response.content.decode().lower(), url
    for action in ("publish", "duplicate"):
        response = client.post(f"/admin/agents/agentversion/{version_b.pk}/{action}/")
        assert response.status_code == 404
    assert version_b.agent.versions.count() == 1


def test_session_browser_404s_for_another_applications_session(client, tenants):
    client.force_login(tenants["alice"])
    for url in browser_urls(*tenants["a"][1:]):
        assert client.get(url).status_code == 200, url
    for url in browser_urls(*tenants["b"][1:]):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "bravo secret input" not in response.content.decode()
    _version_b, session_b, *_ = tenants["b"]
    redirect = client.get(f"/admin/sessions_app/session/{session_b.pk}/change/")
    assert client.get(redirect["Location"]).status_code == 404


def test_add_form_offers_only_the_members_agents(client, tenants):
    client.force_login(tenants["alice"])
    version_b = tenants["b"][0]
    html = client.get("/admin/agents/agentversion/add/").content.decode()
    assert "alpha-agent" in html and "bravo-agent" not in html
    response = client.post(
        "/admin/agents/agentversion/add/",
        {
            "agent": str(version_b.agent.pk),
            "protocol": "unified@2",
            "options_protocol": "unified@2",
            "max_turns_per_run": "50",
            "maintenance_trigger_ratio": "0.75",
            "model_config_extra": "{}",
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert version_b.agent.versions.count() == 1


def test_staff_without_view_permission_gets_403_on_the_browser(client, tenants):
    bob = User.objects.create_user("bob", "b@example.com", "pw", is_staff=True)
    tenants["a"][1].application.members.add(bob)
    client.force_login(bob)
    session_a = tenants["a"][1]
    response = client.get(f"/admin/sessions_app/session/{session_a.pk}/browse/")
    assert response.status_code == 403
