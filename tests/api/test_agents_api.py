"""Agents, versions, publish validation and the catalog over HTTP (contract §2.1, §12)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.models import Tool

GOOD_VERSION = {
    "systemPrompt": "You help.\n{{context_protocol}}",
    "contextProtocolId": "unified",
    "contextProtocolVersion": 3,
    "options": {},
    "model": {
        "provider": "scripted",
        "name": "script",
        "maxInputTokens": 8000,
        "config": {"steps": [{"text": "Done."}]},
    },
}


def new_agent(client, name="writer") -> str:
    response = client.post("agents/", {"name": name})
    assert response.status_code == 201, response.content
    assert set(response.json()) == {"id", "name"}
    return response.json()["id"]


def new_version(client, agent_id, **overrides) -> dict:
    body = {**GOOD_VERSION, **overrides}
    response = client.post(f"agents/{agent_id}/versions/", body)
    assert response.status_code == 201, response.content
    return response.json()


def test_create_publish_and_read_a_version(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    draft = new_version(client, agent_id)
    assert (draft["status"], draft["number"], draft["agentId"]) == ("draft", 1, agent_id)
    published = client.post(f"agent-versions/{draft['id']}/publish/")
    assert published.status_code == 200, published.content
    body = published.json()
    assert body["status"] == "published"
    # Normalized options: v3 defaults filled in.
    assert body["options"]["checkpointMaxCharacters"] == 3000
    assert body["options"]["stateMessagePlacement"] == "trailing_assistant"


def test_publish_lists_every_problem_at_once(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    draft = new_version(
        client,
        agent_id,
        systemPrompt="no placeholder here",
        options={"pageSize": 5, "stateMessagePlacement": "system", "bogus": 1},
        model={
            "provider": "scripted",
            "name": "",
            "maxInputTokens": 10,
            "maintenanceTriggerRatio": 1.5,
        },
    )
    response = client.post(f"agent-versions/{draft['id']}/publish/")
    assert response.status_code == 400
    errors = response.json()["error"]["details"]["errors"]
    fields = {(e["field"], e["code"]) for e in errors}
    assert ("options.pageSize", "option_out_of_range") in fields
    assert ("options.stateMessagePlacement", "option_bad_enum") in fields
    assert ("options.bogus", "option_unknown") in fields
    assert ("systemPrompt", "protocol_placeholder_missing") in fields
    assert ("model.name", "required") in fields
    assert ("model.maxInputTokens", "out_of_range") in fields
    assert ("model.maintenanceTriggerRatio", "out_of_range") in fields
    assert client.get(f"agent-versions/{draft['id']}/").json()["status"] == "draft"


def test_unknown_protocol_is_a_publish_error(tenant):
    _, client = tenant()
    draft = new_version(client, new_agent(client), contextProtocolVersion=9)
    response = client.post(f"agent-versions/{draft['id']}/publish/")
    codes = [e["code"] for e in response.json()["error"]["details"]["errors"]]
    assert "protocol_unknown" in codes


def test_published_version_is_immutable_and_can_be_duplicated(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    draft = new_version(client, agent_id)
    client.post(f"agent-versions/{draft['id']}/publish/")
    edit = client.patch(f"agent-versions/{draft['id']}/", {"systemPrompt": "x"})
    assert edit.status_code == 409
    assert edit.json()["error"]["code"] == "agent_version_immutable"
    copy = client.post(f"agent-versions/{draft['id']}/duplicate/")
    assert copy.status_code == 201
    assert (copy.json()["status"], copy.json()["number"]) == ("draft", 2)
    assert copy.json()["systemPrompt"] == GOOD_VERSION["systemPrompt"]
    patched = client.patch(f"agent-versions/{copy.json()['id']}/", {"systemPrompt": "y"})
    assert patched.status_code == 200 and patched.json()["systemPrompt"] == "y"


def test_cross_application_tools_and_maintainer_are_refused(tenant):
    _, client_a = tenant("A")
    app_b, client_b = tenant("B")
    foreign_tool = Tool.objects.create(application=app_b, name="search")
    foreign_agent = new_agent(client_b, "maintainer")
    agent_id = new_agent(client_a)
    response = client_a.post(
        f"agents/{agent_id}/versions/",
        {**GOOD_VERSION, "tools": [str(foreign_tool.id)], "maintainerAgentId": foreign_agent},
    )
    assert response.status_code == 400
    codes = {e["code"] for e in response.json()["error"]["details"]["errors"]}
    assert codes == {"cross_application_tool_forbidden"}


def test_unknown_body_keys_are_refused(tenant):
    _, client = tenant()
    response = client.post("agents/", {"name": "x", "colour": "blue"})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["errors"][0]["field"] == "colour"
    agent_id = new_agent(client)
    response = client.post(f"agents/{agent_id}/versions/", {**GOOD_VERSION, "temperature": 1})
    assert response.status_code == 400


def test_catalog_endpoints(tenant):
    _, client = tenant()
    listing = client.get("protocols/").json()
    assert [p["key"] for p in listing["protocols"]] == [
        "prefix@2",
        "unified@1",
        "unified@2",
        "unified@3",
        "unified@4",
    ]
    detail = client.get("protocols/unified/2/").json()
    assert detail["defaults"]["checkpointMaxCharacters"] == 3000
    assert client.get("protocols/unified/7/").status_code == 404
    valid = client.post("protocols/unified/1/validate/", {"options": {}}).json()
    assert valid["valid"] and valid["normalized"]["checkpointMaxCharacters"] == 12000
    invalid = client.post(
        "protocols/unified/3/validate/", {"options": {"stateMessagePlacement": "user"}}
    ).json()
    assert not invalid["valid"]
    assert invalid["errors"][0]["code"] == "option_bad_enum"


@pytest.mark.parametrize("header", ["", "Bearer nope", "Basic abc"])
def test_requests_without_a_valid_key_are_401(db, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/protocols/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("version", ["²", "1.0", "-1", "x"])
def test_non_numeric_protocol_versions_are_404(tenant, version):
    _, client = tenant()
    assert client.get(f"protocols/unified/{version}/").status_code == 404
    response = client.post(f"protocols/unified/{version}/validate/", {"options": {}})
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"contextProtocolVersion": 2**31}, "contextProtocolVersion"),
        ({"contextProtocolVersion": 10**30}, "contextProtocolVersion"),
        (
            {"model": {**GOOD_VERSION["model"], "maxInputTokens": 2**31}},
            "model.maxInputTokens",
        ),
        ({"maxTurnsPerRun": 2**63}, "maxTurnsPerRun"),
    ],
)
def test_integers_beyond_the_column_range_are_a_400_naming_the_field(tenant, overrides, field):
    _, client = tenant()
    agent_id = new_agent(client)
    response = client.post(f"agents/{agent_id}/versions/", {**GOOD_VERSION, **overrides})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["errors"][0]["field"] == field
    draft = new_version(client, agent_id)
    patched = client.patch(f"agent-versions/{draft['id']}/", overrides)
    assert patched.status_code == 400, patched.content
