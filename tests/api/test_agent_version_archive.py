"""AgentVersion archive (contract §2.1: draft → published → archived) over HTTP."""

from __future__ import annotations

import pytest

from agents.models import AgentVersion
from agents.services import agent_version_archive
from contextproto.errors import ApplicationError
from tests.api.test_agents_api import new_agent, new_version
from tests.conftest import KeyClient


def published(client) -> dict:
    draft = new_version(client, new_agent(client), model={**_MODEL})
    response = client.post(f"agent-versions/{draft['id']}/publish/")
    assert response.status_code == 200, response.content
    return response.json()


_MODEL = {"provider": "external", "name": "host-model", "maxInputTokens": 8000}


def test_archive_refuses_new_sessions_and_keeps_existing_ones_running(tenant):
    _, client = tenant()
    version = published(client)
    started = client.post("sessions/", {"agentVersionId": version["id"]})
    assert started.status_code == 201, started.content
    session_id, session_key = started.json()["id"], started.json()["sessionKey"]

    archived = client.post(f"agent-versions/{version['id']}/archive/")
    assert archived.status_code == 200, archived.content
    assert archived.json()["status"] == "archived"
    assert client.get(f"agent-versions/{version['id']}/").json()["status"] == "archived"

    refused = client.post("sessions/", {"agentVersionId": version["id"]})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "agent_version_archived"

    # The session started before the archive still reads, takes input and projects.
    session = KeyClient(session_key)
    assert session.get(f"sessions/{session_id}/").status_code == 200
    assert session.post(f"sessions/{session_id}/inputs/", {"content": "go on"}).status_code == 201
    view = session.post(f"sessions/{session_id}/projection/", {"provider": "neutral"})
    assert view.status_code == 201, view.content
    assert session.get(f"sessions/{session_id}/messages/").status_code == 200


def test_archive_is_idempotent(tenant):
    _, client = tenant()
    version = published(client)
    first = client.post(f"agent-versions/{version['id']}/archive/")
    again = client.post(f"agent-versions/{version['id']}/archive/")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["status"] == "archived"


def test_a_draft_cannot_be_archived(tenant):
    _, client = tenant()
    draft = new_version(client, new_agent(client))
    refused = client.post(f"agent-versions/{draft['id']}/archive/")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "agent_version_not_published"
    assert AgentVersion.objects.get(pk=draft["id"]).status == "draft"


def test_an_archived_version_stays_immutable_and_can_be_duplicated(tenant):
    _, client = tenant()
    version = published(client)
    client.post(f"agent-versions/{version['id']}/archive/")
    edit = client.patch(f"agent-versions/{version['id']}/", {"systemPrompt": "changed"})
    assert edit.status_code == 409
    assert edit.json()["error"]["code"] == "agent_version_immutable"
    copy = client.post(f"agent-versions/{version['id']}/duplicate/")
    assert copy.status_code == 201 and copy.json()["status"] == "draft"


def test_another_applications_version_and_a_session_key_get_404(tenant):
    _, owner = tenant("owner")
    _, other = tenant("other")
    version = published(owner)
    assert other.post(f"agent-versions/{version['id']}/archive/").status_code == 404

    key = owner.post("sessions/", {"agentVersionId": version["id"]}).json()["sessionKey"]
    assert KeyClient(key).post(f"agent-versions/{version['id']}/archive/").status_code == 404
    assert AgentVersion.objects.get(pk=version["id"]).status == "published"


def test_archive_refuses_unknown_body_keys(tenant):
    _, client = tenant()
    version = published(client)
    refused = client.post(f"agent-versions/{version['id']}/archive/", {"reason": "old"})
    assert refused.status_code == 400
    assert AgentVersion.objects.get(pk=version["id"]).status == "published"


def test_the_service_refuses_drafts_keyword_only(application, make_version):
    version = make_version(application)
    version.status = AgentVersion.Status.DRAFT
    version.save(update_fields=["status"])
    with pytest.raises(TypeError):
        agent_version_archive(version)  # type: ignore[misc]
    with pytest.raises(ApplicationError) as refused:
        agent_version_archive(version=version)
    assert refused.value.code == "agent_version_not_published"
