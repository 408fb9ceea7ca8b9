"""AgentVersion admin: the archive action goes through the service."""

from __future__ import annotations

from django.contrib.auth.models import Permission

from agents.models import AgentVersion
from agents.services import agent_version_duplicate

CHANGELIST = "/admin/agents/agentversion/"


def test_archive_action_archives_published_versions_and_skips_drafts(
    superuser, admin_client_for, published_version
):
    version = published_version()
    draft = agent_version_duplicate(version=version)
    client = admin_client_for(superuser)
    response = client.post(
        CHANGELIST,
        {"action": "archive_selected", "_selected_action": [str(version.pk), str(draft.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert AgentVersion.objects.get(pk=version.pk).status == "archived"
    assert AgentVersion.objects.get(pk=draft.pk).status == "draft"
    text = response.content.decode()
    assert "Archived 1 version(s)" in text and "Skipped 1" in text


def test_archive_action_needs_the_change_permission(
    staff_member, admin_client_for, published_version
):
    version = published_version()
    user = staff_member("viewer", version.agent.application)
    user.user_permissions.remove(Permission.objects.get(codename="change_agentversion"))
    client = admin_client_for(user)
    page = client.get(CHANGELIST).content.decode()
    assert "archive_selected" not in page
    client.post(CHANGELIST, {"action": "archive_selected", "_selected_action": [str(version.pk)]})
    assert AgentVersion.objects.get(pk=version.pk).status == "published"
