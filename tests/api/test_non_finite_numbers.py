"""NaN, Infinity and 1e999 are refused by the one JSON parser, naming the field (issue 23.4).

Python's JSON decoder reads `NaN` and `Infinity` and turns an overflowing `1e999` into
infinity; PostgreSQL's jsonb cannot hold any of them (a 500 there), SQLite stored them. Every
endpoint answers 400 `non_finite_number` instead, with the JSON path, and writes nothing.
The bodies are sent as raw text: the test client's encoder would refuse them.
"""

from __future__ import annotations

import json

import pytest

from agents.models import AgentVersion
from sessions_app.models import Session

GOOD_VERSION = {
    "systemPrompt": "You help.\n{{context_protocol}}",
    "contextProtocolId": "unified",
    "contextProtocolVersion": 2,
    "options": {},
    "model": {"provider": "external", "name": "host", "maxInputTokens": 8000},
}
# Spellings Python's JSON decoder turns into a non-finite float.
NON_FINITE = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity"]


def post_text(client, path: str, text: str, method: str = "post"):
    send = getattr(client.client, method)
    return send("/api/v1/" + path, data=text, content_type="application/json")


def body_with(value: dict, placeholder: str, literal: str) -> str:
    """`value` as JSON text with the string `placeholder` replaced by a bare `literal`."""
    return json.dumps(value).replace(json.dumps(placeholder), literal)


def assert_refused(response, field: str) -> None:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "non_finite_number", error
    assert error["details"]["field"] == field
    assert field in error["message"]


@pytest.mark.parametrize("literal", NON_FINITE)
def test_session_inputs_with_a_non_finite_number_are_refused(tenant, make_version, literal):
    app, client = tenant()
    version = make_version(app)
    text = body_with({"agentVersionId": str(version.id), "inputs": {"k": "X"}}, "X", literal)
    assert_refused(post_text(client, "sessions/", text), "inputs.k")
    assert not Session.objects.filter(agent_version=version).exists()


def test_a_non_finite_number_deep_in_a_list_is_named_by_its_path(tenant, make_version):
    app, client = tenant()
    version = make_version(app)
    inputs = {"a": [1, {"b": [2.5, "X"]}]}
    text = body_with({"agentVersionId": str(version.id), "inputs": inputs}, "X", "1e999")
    assert_refused(post_text(client, "sessions/", text), "inputs.a[1].b[1]")


@pytest.mark.parametrize("literal", ["1e999", "NaN"])
def test_model_config_with_a_non_finite_number_is_refused_on_version_create(tenant, literal):
    _, client = tenant()
    agent_id = client.post("agents/", {"name": "writer"}).json()["id"]
    body = {**GOOD_VERSION, "model": {**GOOD_VERSION["model"], "config": {"temperature": "X"}}}
    response = post_text(client, f"agents/{agent_id}/versions/", body_with(body, "X", literal))
    assert_refused(response, "model.config.temperature")
    assert not AgentVersion.objects.filter(agent_id=agent_id).exists()


@pytest.mark.parametrize("literal", ["-Infinity", "1e999"])
def test_model_config_with_a_non_finite_number_is_refused_on_patch(tenant, literal):
    _, client = tenant()
    agent_id = client.post("agents/", {"name": "writer"}).json()["id"]
    draft = client.post(f"agents/{agent_id}/versions/", GOOD_VERSION).json()
    body = {"model": {**GOOD_VERSION["model"], "config": {"temperature": "X"}}}
    response = post_text(
        client, f"agent-versions/{draft['id']}/", body_with(body, "X", literal), method="patch"
    )
    assert_refused(response, "model.config.temperature")
    assert AgentVersion.objects.get(id=draft["id"]).model_config in ({}, None)


def test_a_non_finite_float_field_is_refused_before_its_serializer(tenant):
    # maintenanceTriggerRatio is a FloatField: the parser refuses Infinity before DRF's
    # field conversion sees it, with the same code as anywhere else.
    _, client = tenant()
    agent_id = client.post("agents/", {"name": "writer"}).json()["id"]
    body = {**GOOD_VERSION, "model": {**GOOD_VERSION["model"], "maintenanceTriggerRatio": "X"}}
    response = post_text(client, f"agents/{agent_id}/versions/", body_with(body, "X", "1e999"))
    assert_refused(response, "model.maintenanceTriggerRatio")


def test_finite_floats_and_large_exponents_within_range_still_pass(tenant, make_version):
    app, client = tenant()
    version = make_version(app)
    text = json.dumps({"agentVersionId": str(version.id), "inputs": {"k": 1.5e308, "z": -0.0}})
    response = post_text(client, "sessions/", text)
    assert response.status_code == 201, response.content
    assert response.json()["inputs"]["k"] == 1.5e308
