"""The application key rotates or revokes a session's key (sessions/{id}/session-key/…)."""

from __future__ import annotations

from agents.models import hash_key
from sessions_app.models import Session
from tests.conftest import KeyClient


def test_rotating_gives_a_new_key_and_the_old_one_gets_401_at_once(api_session):
    s = api_session()
    response = s.app_client.post(s.path("session-key/rotate/"))
    assert response.status_code == 200, response.content
    new_key = response.json()["sessionKey"]
    assert new_key.startswith("cps_") and new_key != s.client.key
    assert Session.objects.get(pk=s.id).session_key_hash == hash_key(new_key)
    refused = s.client.get(s.path())
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Bearer realm="api"'
    assert KeyClient(new_key).get(s.path()).status_code == 200


def test_revoking_locks_the_session_key_out_and_shows_no_key(api_session):
    s = api_session()
    before = Session.objects.get(pk=s.id).session_key_hash
    response = s.app_client.post(s.path("session-key/revoke/"))
    assert response.status_code == 200, response.content
    assert response.json() == {"sessionId": s.id, "revoked": True}
    after = Session.objects.get(pk=s.id)
    assert after.session_key_hash != before and len(after.session_key_hash) == 64
    assert s.client.get(s.path()).status_code == 401
    # The session itself is untouched and the application key still reaches it.
    assert s.app_client.get(s.path()).status_code == 200


def test_revoking_does_not_touch_the_sessions_state(api_session):
    s = api_session()
    s.input("hello")
    before = Session.objects.values("state_revision", "next_message_index", "active_window")
    snapshot = list(before.filter(pk=s.id))
    s.app_client.post(s.path("session-key/revoke/"))
    assert list(before.filter(pk=s.id)) == snapshot


def test_a_revoked_session_can_get_a_new_key(api_session):
    s = api_session()
    s.app_client.post(s.path("session-key/revoke/"))
    new_key = s.app_client.post(s.path("session-key/rotate/")).json()["sessionKey"]
    assert KeyClient(new_key).get(s.path()).status_code == 200


def test_a_session_key_cannot_rotate_or_revoke_itself(api_session):
    s = api_session()
    for tail in ("session-key/rotate/", "session-key/revoke/"):
        response = s.client.post(s.path(tail))
        assert response.status_code == 404, response.content
        assert response.json()["error"]["code"] == "not_found"
    assert s.client.get(s.path()).status_code == 200


def test_another_applications_key_gets_404_and_changes_nothing(api_session, tenant):
    s = api_session()
    _, stranger = tenant("Stranger")
    before = Session.objects.get(pk=s.id).session_key_hash
    for tail in ("session-key/rotate/", "session-key/revoke/"):
        response = stranger.post(s.path(tail))
        assert response.status_code == 404, response.content
    assert stranger.post("sessions/not-a-uuid/session-key/revoke/").status_code == 404
    assert Session.objects.get(pk=s.id).session_key_hash == before
