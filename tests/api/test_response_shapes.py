"""Every operation answers in the shape the OpenAPI schema states for its status.

One walk through the API, as a host, an operator and a load balancer use it, calls every
operation of the schema (a test fails on one the walk misses) and checks each answer, errors
included, against the schema: every field the schema requires is there with its type, and
no field is on the wire that the schema does not name. Schemathesis checks the same on what
it generates (test_schema_fuzz.py), but its random paths rarely reach a real session.
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

import jsonschema
import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from agents.models import Tool
from sessions_app.models import GatewayConversation
from tests.conftest import KeyClient

# Like tests/maintenance: a small uncompressed tail, so a dozen tool results can be planned.
MAX_INPUT_TOKENS = 4000


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def strict(node: Any, components: dict) -> Any:
    """The OpenAPI 3.0 schema `node` as plain JSON Schema: refs inlined, `nullable` as a
    null type, and objects with named properties closed to any other property."""
    if isinstance(node, list):
        return [strict(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return strict(components[node["$ref"].rsplit("/", 1)[1]], components)
    out = {key: strict(value, components) for key, value in node.items()}
    if out.pop("nullable", False):
        if "type" in out:
            out["type"] = [out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        elif "allOf" in out or "oneOf" in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def operation_of(schema: dict, response) -> tuple[str, str]:
    """(method, path template) of the operation that answered `response`."""
    request = response.wsgi_request
    route = resolve(request.path).route
    return request.method.lower(), "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def check_shape(schema: dict, response) -> tuple[str, str]:
    method, path = operation_of(schema, response)
    responses = schema["paths"][path][method]["responses"]
    status = str(response.status_code)
    documented = responses.get(status) or responses.get(f"{status[0]}XX")
    assert documented is not None, f"{method} {path}: {status} is not documented"
    if response.status_code == 204:
        assert "content" not in documented and response.content == b""
        return method, path
    body_schema = strict(
        copy.deepcopy(documented["content"]["application/json"]["schema"]),
        schema["components"]["schemas"],
    )
    jsonschema.validate(
        response.json(), body_schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    return method, path


@pytest.fixture
def walk(schema):
    """check(response, status): validate the answer's shape and note its operation."""
    seen: set[tuple[str, str]] = set()

    def check(response, status: int | None = None) -> Any:
        if status is not None:
            assert response.status_code == status, response.content
        seen.add(check_shape(schema, response))
        return response.json() if response.content else None

    check.seen = seen
    return check


def test_every_operation_answers_in_its_documented_shape(schema, walk, api_session, settings):
    settings.MAINTENANCE_TAIL_SHARE = 250 / MAX_INPUT_TOKENS
    check = walk
    s = api_session(version=2, options={"pageSize": 10}, max_input_tokens=MAX_INPUT_TOKENS)
    app, host = s.app_client, s.client

    # The catalog.
    check(app.get("protocols/"), 200)
    check(app.get("protocols/unified/2/"), 200)
    check(app.get("protocols/unified/99/"), 404)
    check(app.post("protocols/unified/2/validate/", {"options": {}}), 200)
    check(app.post("protocols/unified/2/validate/", {"options": {"nope": 1}}), 200)
    check(app.post("protocols/unified/2/validate/", {"options": []}), 200)

    # Host tools.
    tool_body = {"name": "lookup", "description": "d", "inputSchema": {"type": "object"}}
    tool = check(app.post("tools/", tool_body), 201)
    # contract §11: the same definition again is the tool (200); another one is the 409.
    check(app.post("tools/", tool_body), 200)
    check(app.post("tools/", {**tool_body, "description": "other"}), 409)
    check(app.get("tools/", name="lookup"), 200)
    check(app.post("tools/", {**tool_body, "inputSchema": {"type": "array"}}), 400)
    check(app.get("tools/", limit=1), 200)
    check(app.get(f"tools/{tool['id']}/"), 200)
    check(app.patch(f"tools/{tool['id']}/", {"description": "looks things up"}), 200)
    spare = check(app.post("tools/", {**tool_body, "name": "spare"}), 201)
    check(app.delete(f"tools/{spare['id']}/"), 204)
    check(host.get("tools/"), 404)

    # Agents and their versions.
    agent = check(app.post("agents/", {"name": "shapes"}), 201)
    check(app.get("agents/"), 200)
    check(app.post("agents/", {"name": "shapes"}), 409)
    body = {
        "systemPrompt": "You help.\n{{context_protocol}}",
        "contextProtocolId": "unified",
        "contextProtocolVersion": 2,
        "options": {},
        "model": {"provider": "external", "name": "m", "maxInputTokens": 8000},
        "tools": [tool["id"]],
    }
    version = check(app.post(f"agents/{agent['id']}/versions/", body), 201)
    check(app.post(f"agents/{agent['id']}/versions/", {**body, "bogus": 1}), 400)
    v = f"agent-versions/{version['id']}/"
    check(app.get(v), 200)
    check(app.patch(v, {"systemPrompt": "You help more.\n{{context_protocol}}"}), 200)
    check(app.post(v + "publish/"), 200)
    check(app.patch(v, {"systemPrompt": "too late"}), 409)
    check(app.post(v + "duplicate/"), 201)
    check(app.post(v + "archive/"), 200)
    check(app.delete(f"tools/{tool['id']}/"), 409)

    # Gateway settings: the defaults, a replacement, a refusal.
    check(app.get("gateway-settings/"), 200)
    check(app.put("gateway-settings/", {"sideModels": ["*mini*"]}), 200)
    check(
        app.put("gateway-settings/", {"modelAliases": [{"pattern": "x", "agentVersion": ""}]}), 400
    )

    # API keys.
    created = check(app.post("api-keys/"), 201)
    page = check(app.get("api-keys/", limit=1), 200)
    assert page["nextCursor"]
    check(app.get("api-keys/", cursor=page["nextCursor"]), 200)
    check(app.post(f"api-keys/{created['id']}/revoke/"), 200)

    # A session, driven by its host.
    check(app.post("sessions/", {"agentVersionId": str(s.agent_version.id)}), 201)
    check(app.get(s.path()), 200)
    check(host.get(s.path()), 200)
    check(host.post(s.path("inputs/"), {"content": "prepare the quote"}), 201)
    first = {"content": [{"type": "text", "text": "and ship it"}], "clientMessageId": "c-1"}
    check(host.post(s.path("inputs/"), first), 201)
    check(host.post(s.path("inputs/"), first), 200)
    check(host.post(s.path("inputs/"), {"content": []}), 400)
    check(host.get(s.path("tools/")), 200)
    view = check(host.post(s.path("projection/"), {"provider": "openai-chat"}), 201)
    check(host.post(s.path("projection/"), {"runId": "nope"}), 400)
    call = {
        "role": "assistant",
        "kind": "tool_call",
        "content": "",
        "toolCallId": "open_a",
        "toolName": "context_window_open",
        "arguments": {
            "windowId": "a",
            "goal": "g",
            "input": "i",
            "expectedWindowId": "main",
            "purpose": "test",
        },
        "snapshotId": view["snapshotId"],
    }
    check(host.post(s.path("messages/"), call), 201)
    check(host.post(s.path("tool-calls/open_a/dispatch/")), 200)
    check(host.post(s.path("tool-calls/open_a/dispatch/")), 200)
    check(host.post(s.path("tool-calls/missing/dispatch/")), 404)
    check(host.post(s.path("tool-calls/dispatch/"), {"toolCallId": "open_a"}), 200)
    check(host.post(s.path("tool-calls/dispatch/"), {}), 400)
    check(host.post(s.path("tool-calls/open_a/abandon/"), {}), 409)
    check(host.post(s.path("tool-calls/abandon/"), {"toolCallId": "missing"}), 404)
    check(host.post(s.path("messages/"), {**call, "toolCallId": "x", "snapshotId": None}), 400)
    s.tool("context_window_open", windowId="main", resume=True, input="back", expectedWindowId="a")
    lost = s.project()
    lost_call = {**call, "toolCallId": "lost/1", "toolName": "lookup", "arguments": "{"}
    check(host.post(s.path("messages/"), {**lost_call, "snapshotId": lost["snapshotId"]}), 201)
    check(host.post(s.path("tool-calls/lost%2F1/abandon/"), {"reason": "lost"}), 200)
    check(host.post(s.path("tool-calls/abandon/"), {"toolCallId": "lost/1"}), 409)
    for n in range(12):
        s.host_tool_work(f"lookup{n}", "x" * 400)
    a1, a2 = s.host_tool_work("to-fold", "y")
    folded = s.tool(
        "context_fold_create", fromIndex=a1, throughIndex=a2, summary="s", expectedWindowId="main"
    )
    assert folded["success"], folded
    # A whole model answer in one call: a protocol call (receipt), a host call (hostCall).
    answered = s.project()
    memory = {"purpose": "p", "memory": "quote"}
    reply = {
        "content": "Noted.",
        "toolCalls": [{"id": "t/1", "name": "context_task_memory_set", "arguments": memory}],
    }
    recorded = {"snapshotId": answered["snapshotId"], "answer": reply}
    check(host.post(s.path("turns/"), recorded), 201)
    check(host.post(s.path("turns/"), recorded), 200)
    other_answer = {**recorded, "answer": {"content": "Other."}}
    check(host.post(s.path("turns/"), other_answer), 409)
    check(host.post(s.path("turns/"), {**recorded, "answer": {"text": "?"}}), 400)
    s.agent_version.tools.add(Tool.objects.get(id=tool["id"]))
    lookup = {"content": None, "toolCalls": [{"id": "t2", "name": "lookup", "arguments": {}}]}
    handed = check(
        host.post(s.path("turns/"), {"snapshotId": s.project()["snapshotId"], "answer": lookup}),
        201,
    )
    assert handed["hostCall"]["toolCallId"] == "t2"
    s.write(role="tool", kind="tool_result", content="found", toolCallId="t2")
    view = s.project()
    check(host.get(s.path("messages/"), limit=2), 200)
    check(host.get(s.path("messages/"), afterIndex="x"), 400)
    check(host.get(s.path("windows/"), limit=1), 200)
    check(host.get(s.path("folds/")), 200)
    check(host.get(s.path("snapshots/"), limit=1), 200)
    check(host.get(s.path(f"snapshots/{view['snapshotId']}/")), 200)
    check(host.get(s.path(f"snapshots/{uuid.uuid4()}/")), 404)
    check(host.get(s.path("kv/"), limit=2), 200)
    check(host.get(s.path("kv/"), cursor="garbage"), 400)
    check(host.get(s.path("kv/"), revision=1, limit=2), 200)
    check(host.get(s.path("kv/"), revision=10**6), 400)
    fork = check(app.post(s.path("fork/"), {"snapshotId": view["snapshotId"]}), 201)
    assert fork["forkedFrom"]["throughIndex"] == view["upperBound"]
    check(app.post(s.path("fork/"), {"throughIndex": 10**6}), 400)
    usage = {"inputTokens": 10, "outputTokens": 2}
    check(host.post(s.path(f"snapshots/{view['snapshotId']}/usage/"), usage), 200)
    native = {"usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    check(host.post(s.path(f"snapshots/{view['snapshotId']}/usage/"), native), 200)
    check(host.post(s.path(f"snapshots/{view['snapshotId']}/usage/"), {"usage": {}}), 400)

    # Maintenance: no maintainer is bound, so an external one plans, pages and commits.
    check(host.post(s.path("windows/main/maintenance/")), 400)
    check(host.post(s.path("windows/nope/maintenance/plan/"), {}), 404)
    job = check(host.post(s.path("windows/main/maintenance/plan/"), {}), 201)
    pages = s.path(f"windows/main/maintenance/{job['jobId']}/pages/")
    check(host.get(pages + "0/"), 200)
    check(host.get(pages + f"{job['pageCount']}/"), 404)
    commit = s.path(f"windows/main/maintenance/{job['jobId']}/commit/")
    check(host.post(commit, {"checkpoint": "Quote in progress."}), 200)
    check(host.get(s.path("maintenance/")), 200)

    # A gateway conversation (the gateway records them; here the row is made directly).
    GatewayConversation.objects.create(application=s.app, conversation_id="conv-1", session_id=s.id)
    check(app.get("gateway-conversations/conv-1/"), 200)
    check(app.get("gateway-conversations/conv-2/"), 404)

    # The application key rotates and revokes the session key.
    check(app.post(s.path("session-key/rotate/")), 200)
    check(app.post(s.path("session-key/revoke/")), 200)
    check(host.get(s.path()), 401)
    check(KeyClient("cpa_unknown").get("agents/"), 401)

    # Probes.
    probe = APIClient()
    for tail in ("health/", "health/live/", "health/ready/"):
        check(probe.get("/api/v1/" + tail))

    documented = {(method, path) for path, item in schema["paths"].items() for method in item} - {
        ("get", "/api/v1/schema/")
    }
    assert documented - check.seen == set()
