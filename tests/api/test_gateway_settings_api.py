"""`GET|PUT gateway-settings/`, `GET gateway-conversations/{id}/` and what publish checks and
reports (contract §2.1, §14), over HTTP with the application key."""

from __future__ import annotations

import uuid

import pytest

from agents.models import AgentVersion
from contextproto.protocol.gateway.model_names import DEFAULT_SIDE_MODELS
from sessions_app.models import GatewayConversation
from sessions_app.services.sessions import session_create
from tests.conftest import KeyClient

UNSET_VARIABLE = "CONTEXTPROTO_TEST_KEY_THAT_IS_NOT_SET"


@pytest.fixture
def app(tenant, make_version):
    application, client = tenant()
    make_version(application, name="helper", provider="scripted")
    return application, client


def test_get_answers_the_defaults_before_anything_is_set(app):
    _, client = app
    response = client.get("gateway-settings/")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "modelAliases": [],
        "sideModels": list(DEFAULT_SIDE_MODELS),
        "sideModelsDefault": True,
    }


def test_put_replaces_the_settings_and_get_reads_them_back(app):
    _, client = app
    body = {
        "modelAliases": [
            {"pattern": "claude-*", "agentVersion": "helper@1"},
            {"pattern": "gpt-5*", "agentVersion": "helper"},
        ],
        "sideModels": ["*-mini"],
    }
    put = client.put("gateway-settings/", body)
    assert put.status_code == 200, put.content
    assert put.json() == {**body, "sideModelsDefault": False}
    assert client.get("gateway-settings/").json() == put.json()
    # PUT replaces: what the body leaves out is gone (absent sideModels: the default).
    again = client.put("gateway-settings/", {"modelAliases": body["modelAliases"][:1]})
    assert again.json() == {
        "modelAliases": body["modelAliases"][:1],
        "sideModels": list(DEFAULT_SIDE_MODELS),
        "sideModelsDefault": True,
    }
    assert client.put("gateway-settings/", {"sideModels": None}).json()["modelAliases"] == []


def test_a_refused_put_lists_every_problem_and_changes_nothing(app):
    _, client = app
    client.put("gateway-settings/", {"modelAliases": [{"pattern": "a*", "agentVersion": "helper"}]})
    refused = client.put(
        "gateway-settings/",
        {
            "modelAliases": [
                {"pattern": "claude *", "agentVersion": "helper@9"},
                {"pattern": "gpt-*"},
            ],
            "sideModels": "*haiku*",
        },
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "gateway_settings_invalid"
    assert [(e["field"], e["code"]) for e in error["details"]["errors"]] == [
        ("modelAliases[0].pattern", "pattern_invalid"),
        ("modelAliases[0].agentVersion", "gateway_model_not_found"),
        ("modelAliases[1].agentVersion", "required"),
        ("sideModels", "not_a_list"),
    ]
    assert refused.headers["Content-Type"].startswith("application/json")
    assert client.get("gateway-settings/").json()["modelAliases"] == [
        {"pattern": "a*", "agentVersion": "helper"}
    ]
    unknown = client.put("gateway-settings/", {"aliases": []})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (400, "invalid_request")


def test_settings_are_the_key_applications_own_and_no_session_key_reaches_them(app, tenant):
    application, client = app
    client.put("gateway-settings/", {"modelAliases": [{"pattern": "c*", "agentVersion": "helper"}]})
    _, other = tenant("Other")
    assert other.get("gateway-settings/").json()["modelAliases"] == []
    # Another Application's version names nothing here.
    mine = AgentVersion.objects.get(agent__application=application)
    refused = other.put(
        "gateway-settings/", {"modelAliases": [{"pattern": "c*", "agentVersion": str(mine.id)}]}
    )
    assert refused.json()["error"]["details"]["errors"][0]["code"] == "gateway_model_not_found"
    session, session_key = session_create(agent_version=mine, inputs={})
    assert session.application_id == application.id
    host = KeyClient(session_key)
    assert host.get("gateway-settings/").status_code == 404
    assert host.put("gateway-settings/", {"modelAliases": []}).status_code == 404


# ---------------------------------------------------------------- publish


def draft(client, **model):
    agent = client.post("agents/", {"name": f"publisher-{uuid.uuid4().hex[:8]}"}).json()
    body = {
        "systemPrompt": "You help.\n{{context_protocol}}",
        "contextProtocolId": "unified",
        "contextProtocolVersion": 2,
        "model": {"name": "m", "maxInputTokens": 8000, **model},
    }
    created = client.post(f"agents/{agent['id']}/versions/", body)
    assert created.status_code == 201, created.content
    return created.json()["id"]


def test_publish_warns_of_an_api_key_variable_unset_on_this_node(app, monkeypatch):
    _, client = app
    monkeypatch.delenv(UNSET_VARIABLE, raising=False)
    config = {"apiKeyEnv": UNSET_VARIABLE}
    published = client.post(
        f"agent-versions/{draft(client, provider='openai', config=config)}/publish/"
    )
    assert published.status_code == 200, published.content
    body = published.json()
    assert body["status"] == "published"  # not refused: a request may bring its own key
    [warning] = body["warnings"]
    assert (warning["field"], warning["code"]) == ("model.config.apiKeyEnv", "api_key_env_unset")
    assert UNSET_VARIABLE in warning["message"]
    assert "X-Contextproto-Upstream-Key" in warning["message"]
    # Set (and not empty) on the node: no warning.
    monkeypatch.setenv(UNSET_VARIABLE, "sk-test")
    quiet = client.post(
        f"agent-versions/{draft(client, provider='anthropic', config=config)}/publish/"
    )
    assert quiet.json()["warnings"] == []


def test_publish_refuses_a_script_the_runtime_would_refuse_in_its_words(app):
    _, client = app
    script = {"steps": [{"text": "Hi."}, {"repeatLast": True}]}
    version_id = draft(client, provider="scripted", config=script)
    refused = client.post(f"agent-versions/{version_id}/publish/")
    assert refused.status_code == 400
    [problem] = refused.json()["error"]["details"]["errors"]
    assert problem == {
        "field": "model.config.steps[1]",
        "code": "script_invalid",
        "message": "scripted model: steps[1]: unknown key(s) repeatLast; allowed: comment, "
        "delaySeconds, expect, reasoning, text, toolCalls, usage",
    }
    # A script without steps: the runtime answers every turn with the same refusal.
    empty = client.post(f"agent-versions/{draft(client, provider='scripted')}/publish/")
    [problem] = empty.json()["error"]["details"]["errors"]
    assert problem["field"] == "model.config.steps"
    assert problem["message"] == "scripted model: script.steps: must be a non-empty list of steps"


# ---------------------------------------------------------------- conversations


def test_a_conversation_answers_its_session_and_its_sub_agents_sessions(app, tenant):
    application, client = app
    version = AgentVersion.objects.get(agent__application=application)
    main, _ = session_create(agent_version=version, inputs={})
    first, _ = session_create(agent_version=version, inputs={})
    second, _ = session_create(agent_version=version, inputs={})
    conversation = "5f0c7a52-claude/session"  # a client's own string, / included
    row = {"application": application, "conversation_id": conversation}
    GatewayConversation.objects.create(**row, agent_id="a2", session=second, parent=main)
    GatewayConversation.objects.create(**row, session=main)
    GatewayConversation.objects.create(**row, agent_id="a1", session=first, parent=main)
    GatewayConversation.objects.filter(agent_id="a1").update(created_at="2020-01-01T00:00Z")
    response = client.get(f"gateway-conversations/{conversation}/")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "conversationId": conversation,
        "sessionId": str(main.id),
        "childSessions": [
            {"agentId": "a1", "sessionId": str(first.id)},
            {"agentId": "a2", "sessionId": str(second.id)},
        ],
    }
    # Unknown here, another Application's, or asked with a session key: 404.
    missing = client.get("gateway-conversations/nope/")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    _, other = tenant("Other")
    assert other.get(f"gateway-conversations/{conversation}/").status_code == 404
    _, session_key = session_create(agent_version=version, inputs={})
    assert KeyClient(session_key).get(f"gateway-conversations/{conversation}/").status_code == 404


def test_reading_a_conversation_is_one_query(app, django_assert_max_num_queries):
    application, client = app
    version = AgentVersion.objects.get(agent__application=application)
    main, _ = session_create(agent_version=version, inputs={})
    GatewayConversation.objects.create(application=application, conversation_id="c", session=main)
    for n in range(5):
        child, _ = session_create(agent_version=version, inputs={})
        GatewayConversation.objects.create(
            application=application, conversation_id="c", agent_id=f"a{n}", session=child,
            parent=main,
        )  # fmt: skip
    # The key's lookup, then the conversation's one query, whatever its number of children.
    with django_assert_max_num_queries(2) as counted:
        assert len(client.get("gateway-conversations/c/").json()["childSessions"]) == 5
    reads = [q["sql"] for q in counted.captured_queries if "gatewayconversation" in q["sql"]]
    assert len(reads) == 1
