"""Every endpoint refuses other tenants' keys and other sessions' keys with 404; nothing changes."""

from __future__ import annotations

import pytest

from sessions_app.models import KVEntry, Message, Session


def snapshot_of_db():
    return (
        Message.objects.count(),
        KVEntry.objects.count(),
        sorted(Session.objects.values_list("state_revision", flat=True)),
    )


@pytest.fixture
def victim(api_session):
    s = api_session(version=1)
    s.input("secret")
    a1, a2 = s.host_tool_work()
    call = s.call("context_fold_create", fromIndex=a1, throughIndex=a2, summary="x")
    assert s.dispatch(call)["result"]["success"]
    return s, call


def endpoints(s, call):
    agent_id = s.agent_version.agent_id
    version_id = s.agent_version.id
    return [
        ("get", f"sessions/{s.id}/", None),
        ("post", f"sessions/{s.id}/inputs/", {"content": "hi"}),
        ("get", f"sessions/{s.id}/messages/", None),
        (
            "post",
            f"sessions/{s.id}/messages/",
            {"role": "assistant", "kind": "text", "content": "x"},
        ),
        ("post", f"sessions/{s.id}/projection/", {"provider": "neutral"}),
        ("get", f"sessions/{s.id}/tools/", None),
        ("post", f"sessions/{s.id}/tool-calls/{call}/dispatch/", None),
        ("get", f"sessions/{s.id}/windows/", None),
        ("get", f"sessions/{s.id}/folds/", None),
        ("get", f"sessions/{s.id}/snapshots/", None),
        ("get", f"sessions/{s.id}/kv/", None),
        (
            "post",
            f"agents/{agent_id}/versions/",
            {
                "systemPrompt": "x",
                "contextProtocolId": "unified",
                "contextProtocolVersion": 1,
                "model": {"provider": "external"},
            },
        ),
        ("get", f"agent-versions/{version_id}/", None),
        ("patch", f"agent-versions/{version_id}/", {"systemPrompt": "x"}),
        ("post", f"agent-versions/{version_id}/publish/", None),
        ("post", f"agent-versions/{version_id}/duplicate/", None),
    ]


def call_endpoint(client, method, path, body):
    if method == "get":
        return client.get(path)
    if method == "patch":
        return client.patch(path, body)
    return client.post(path, body)


def test_another_applications_key_gets_404_everywhere(victim, tenant):
    s, call = victim
    _, stranger = tenant("Stranger")
    before = snapshot_of_db()
    for method, path, body in endpoints(s, call):
        response = call_endpoint(stranger, method, path, body)
        assert response.status_code == 404, (method, path, response.content)
        assert response.json()["error"]["code"] == "not_found"
    assert snapshot_of_db() == before


def test_another_sessions_key_gets_404_everywhere(victim, api_session):
    s, call = victim
    other = api_session(version=2)
    before = snapshot_of_db()
    for method, path, body in endpoints(s, call):
        response = call_endpoint(other.client, method, path, body)
        assert response.status_code == 404, (method, path, response.content)
    assert snapshot_of_db() == before


def test_the_session_key_reaches_its_own_session(victim):
    s, _ = victim
    assert s.client.get(s.path()).status_code == 200
    assert s.client.get(s.path("kv/")).status_code == 200
