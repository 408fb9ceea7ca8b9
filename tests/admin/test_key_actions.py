"""Admin actions: revoke selected API keys, revoke the session keys of selected sessions."""

from __future__ import annotations

from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission

from agents.models import ApiKey
from agents.services import application_create
from sessions_app.models import Session
from sessions_app.services.sessions import session_create
from tests.conftest import KeyClient


def test_revoke_selected_api_keys(admin_client_for, superuser):
    application, raw = application_create(name="Acme")
    key = application.api_keys.get()
    client = admin_client_for(superuser)
    page = client.get("/admin/agents/apikey/")
    assert b"revoke_selected" in page.content
    client.post(
        "/admin/agents/apikey/", {"action": "revoke_selected", "_selected_action": [key.pk]}
    )
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert KeyClient(raw).get("api-keys/").status_code == 401
    assert LogEntry.objects.filter(object_id=str(key.pk), change_message="Revoked.").exists()


def test_revoke_session_keys_of_selected_sessions(admin_client_for, superuser, published_version):
    version = published_version()
    session, raw = session_create(agent_version=version)
    client = admin_client_for(superuser)
    client.post(
        "/admin/sessions_app/session/",
        {"action": "revoke_session_keys", "_selected_action": [str(session.pk)]},
    )
    assert KeyClient(raw).get(f"sessions/{session.pk}/").status_code == 401
    assert Session.objects.get(pk=session.pk).state_revision == session.state_revision


def test_the_actions_need_change_permission_and_stay_in_the_members_applications(
    admin_client_for, staff_member, published_version
):
    version = published_version("Acme")
    other = published_version("Globex")
    mine, _ = session_create(agent_version=version)
    theirs, theirs_key = session_create(agent_version=other)
    viewer = staff_member("viewer", version.agent.application)
    client = admin_client_for(viewer)
    assert b"revoke_session_keys" not in client.get("/admin/sessions_app/session/").content
    viewer.user_permissions.add(
        Permission.objects.get(codename="change_session", content_type__app_label="sessions_app")
    )
    client = admin_client_for(type(viewer).objects.get(pk=viewer.pk))
    assert b"revoke_session_keys" in client.get("/admin/sessions_app/session/").content
    before = Session.objects.get(pk=mine.pk).session_key_hash
    client.post(
        "/admin/sessions_app/session/",
        {"action": "revoke_session_keys", "_selected_action": [str(mine.pk), str(theirs.pk)]},
    )
    assert Session.objects.get(pk=mine.pk).session_key_hash != before
    assert KeyClient(theirs_key).get(f"sessions/{theirs.pk}/").status_code == 200
