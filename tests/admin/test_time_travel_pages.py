"""The session browser's time travel (contract §10): a turn's state, "fork from this turn", and
where a fork came from / which forks a session has."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import Application
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.services.projection import projection_build
from sessions_app.store.state import kv_commit
from tests.admin.test_session_browser import browse
from tests.builders.sessions import build_session


@pytest.fixture
def story(published_version):
    """A session whose task memory changed after its first turn."""
    session, _fold_id, _last = build_session(published_version(version=2))
    first = ProjectionSnapshot.objects.filter(session=session).order_by("created_at").first()
    kv_commit(session_id=session.id, writes={"taskMemory": "Then: budget 5000."})
    then = projection_build(session_id=session.id)
    kv_commit(session_id=session.id, writes={"taskMemory": "Now: budget 9000."})
    session.refresh_from_db()
    return session, first, then


def snapshot_page(client, session, snapshot) -> str:
    response = client.get(browse(session, f"snapshots/{snapshot.pk}/"))
    assert response.status_code == 200
    return response.content.decode()


def test_the_context_viewer_links_the_state_at_this_turn(superuser, admin_client_for, story):
    client = admin_client_for(superuser)
    session, _first, then = story
    html = snapshot_page(client, session, then)
    link = f"kv/?revision={then.revision}"
    assert 'id="state-at-turn"' in html and link in html
    state = client.get(browse(session, link)).content.decode()
    assert "Then: budget 5000." in state and "Now: budget 9000." not in state
    assert f"at revision <strong>{then.revision}</strong>" in state
    now = client.get(browse(session, "kv/")).content.decode()
    assert "Now: budget 9000." in now and "Then: budget 5000." not in now
    # A revision the history cannot answer says so instead of showing anything.
    later = client.get(browse(session, f"kv/?revision={session.state_revision + 1}"))
    assert later.status_code == 200
    assert 'id="state-refusal"' in later.content.decode()


def test_fork_from_this_turn_opens_the_fork_which_links_back(superuser, admin_client_for, story):
    client = admin_client_for(superuser)
    session, _first, then = story
    html = snapshot_page(client, session, then)
    assert 'id="fork-button"' in html
    assert client.get(browse(session, f"snapshots/{then.pk}/fork/")).status_code == 405

    response = client.post(browse(session, f"snapshots/{then.pk}/fork/"))
    fork = Session.objects.get(forked_from=session)
    assert response.status_code == 302 and response["Location"] == browse(fork)
    assert (fork.forked_through_index, fork.forked_revision) == (then.upper_bound, then.revision)
    overview = client.get(response["Location"]).content.decode()
    assert 'id="forked-from"' in overview and browse(session) in overview
    assert f"revision {then.revision}" in overview
    assert "Then: budget 5000." in overview  # the fork's task memory is the turn's
    assert "session key was not" in overview  # the flash message
    original = client.get(browse(session)).content.decode()
    assert 'id="forks"' in original and browse(fork) in original
    assert session.state_revision == Session.objects.get(pk=session.pk).state_revision


def test_only_staff_who_may_add_sessions_of_that_application_fork(
    published_version, staff_member, admin_client_for
):
    session, _fold, last = build_session(published_version("Acme", version=2))
    acme = Application.objects.get(name="Acme")
    viewer = staff_member("viewer", acme)
    client = admin_client_for(viewer)
    assert 'id="fork-button"' not in snapshot_page(client, session, last)
    assert client.post(browse(session, f"snapshots/{last.pk}/fork/")).status_code == 403

    forker = staff_member("forker", acme)
    forker.user_permissions.add(
        Permission.objects.get(codename="add_session", content_type__app_label="sessions_app")
    )
    client = admin_client_for(forker)
    assert 'id="fork-button"' in snapshot_page(client, session, last)
    assert client.post(browse(session, f"snapshots/{last.pk}/fork/")).status_code == 302

    stranger = staff_member("stranger", published_version("Other").agent.application)
    stranger.user_permissions.add(
        Permission.objects.get(codename="add_session", content_type__app_label="sessions_app")
    )
    client = admin_client_for(stranger)
    assert client.post(browse(session, f"snapshots/{last.pk}/fork/")).status_code == 404
    assert Session.objects.filter(forked_from=session).count() == 1


def test_a_refused_fork_says_why_on_the_turn(superuser, admin_client_for, story):
    client = admin_client_for(superuser)
    session, first, _then = story
    Session.objects.filter(pk=session.pk).update(kv_history_from=session.state_revision)
    response = client.post(browse(session, f"snapshots/{first.pk}/fork/"), follow=True)
    assert response.redirect_chain[-1][0] == browse(session, f"snapshots/{first.pk}/")
    assert "Not forked:" in response.content.decode()
    assert not Session.objects.filter(forked_from=session).exists()
