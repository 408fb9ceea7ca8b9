"""Host tools through the API (contract §11): `tools/` per Application, bound to versions by id."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import Tool
from contextproto.protocol import catalog
from tests.conftest import KeyClient

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city"],
    "additionalProperties": False,
}
VERSION_BODY = {
    "systemPrompt": "You help.\n{{context_protocol}}",
    "contextProtocolId": "unified",
    "contextProtocolVersion": 2,
    "options": {},
    "model": {"provider": "external", "name": "m", "maxInputTokens": 8000},
}


def tool_body(name: str = "get_weather", **overrides) -> dict:
    return {
        "name": name,
        "description": "Weather forecast for a city.",
        "inputSchema": WEATHER_SCHEMA,
        **overrides,
    }


@pytest.fixture
def acme(tenant):
    return tenant("Acme")


def register(client, name: str = "get_weather", **overrides) -> dict:
    response = client.post("tools/", tool_body(name, **overrides))
    assert response.status_code == 201, response.content
    return response.json()


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    return response.json()["error"]


def draft_binding(client, tool_ids: list[str], agent_name: str = "assistant") -> dict:
    agent = client.post("agents/", {"name": agent_name}).json()
    response = client.post(f"agents/{agent['id']}/versions/", {**VERSION_BODY, "tools": tool_ids})
    assert response.status_code == 201, response.content
    return response.json()


# ---------------------------------------------------------------- register, read, list


def test_a_registered_tool_is_answered_as_sent_and_read_back(acme):
    _, client = acme
    created = register(client)
    assert set(created) == {"id", "name", "description", "inputSchema", "createdAt"}
    assert created["name"] == "get_weather"
    assert created["description"] == "Weather forecast for a city."
    assert created["inputSchema"] == WEATHER_SCHEMA
    assert client.get(f"tools/{created['id']}/").json() == created


def test_the_description_is_optional(acme):
    _, client = acme
    response = client.post("tools/", {"name": "ping", "inputSchema": {"type": "object"}})
    assert response.status_code == 201 and response.json()["description"] == ""


def test_the_list_pages_by_name_with_a_cursor(acme):
    _, client = acme
    for name in ("charlie", "alpha", "bravo"):
        register(client, name)
    first = client.get("tools/", limit=2).json()
    assert [t["name"] for t in first["tools"]] == ["alpha", "bravo"]
    second = client.get("tools/", limit=2, cursor=first["nextCursor"]).json()
    assert [t["name"] for t in second["tools"]] == ["charlie"]
    assert second["nextCursor"] is None
    assert error_of(client.get("tools/", cursor="garbage"), 400)["code"] == "invalid_cursor"


def test_unknown_fields_are_refused(acme):
    _, client = acme
    error = error_of(client.post("tools/", {**tool_body(), "parameters": {}}), 400)
    assert error["code"] == "invalid_request"
    assert not Tool.objects.exists()


# ---------------------------------------------------------------- refusals


def test_a_name_taken_with_another_definition_is_a_409_naming_the_tool(acme, tenant):
    # contract §11: the same name and definition answer the tool (see test_registration_is_
    # idempotent); only another definition is refused, with the existing tool's id.
    _, client = acme
    existing = register(client)
    changed = {**tool_body(), "description": "Another description."}
    error = error_of(client.post("tools/", changed), 409)
    assert error["code"] == "tool_name_taken" and error["details"]["field"] == "name"
    assert error["details"]["id"] == existing["id"]
    # Names are per Application: another one may use it.
    _, other = tenant("Other")
    register(other)
    assert Tool.objects.filter(name="get_weather").count() == 2


@pytest.mark.parametrize(
    "name", sorted({name for version in catalog.all_versions() for name in version.tools})
)
def test_the_name_of_any_catalog_protocol_tool_is_reserved(acme, name):
    _, client = acme
    error = error_of(client.post("tools/", tool_body(name)), 400)
    assert error["code"] == "tool_name_reserved" and error["details"]["field"] == "name"
    assert not Tool.objects.exists()


@pytest.mark.parametrize("name", ["", "has space", "a" * 65, "dot.name", "naïve"])
def test_a_name_providers_would_refuse_is_a_400(acme, name):
    _, client = acme
    error = error_of(client.post("tools/", tool_body(name)), 400)
    assert error["code"] == "tool_name_invalid" and error["details"]["field"] == "name"
    assert "1-64 characters" in error["message"]


@pytest.mark.parametrize(
    ("schema", "path", "says"),
    [
        (["type", "object"], "$", "must be a JSON object"),
        ({"type": "array"}, "$.type", 'must say "type": "object"'),
        ({"properties": {}}, "$.type", 'must say "type": "object"'),
        (
            {"type": "object", "properties": {"q": {"type": "string", "maxLength": "9"}}},
            "$.properties.q.maxLength",
            "non-negative integer",
        ),
        (
            {"type": "object", "properties": {"q": {"type": "strng"}}},
            "$.properties.q.type",
            "one of",
        ),
        ({"type": "object", "required": "q"}, "$.required", "array of property names"),
        (
            {"type": "object", "properties": {"q": {"$ref": "https://example.com/q.json"}}},
            '$.properties.q["$ref"]',
            "never fetched",
        ),
        (
            {"type": "object", "properties": {"q": {"$ref": "other.json#/x"}}},
            '$.properties.q["$ref"]',
            "never fetched",
        ),
        (
            {"type": "object", "properties": {"q": {"$ref": "#/$defs/Missing"}}},
            '$.properties.q["$ref"]',
            "points to nothing",
        ),
    ],
)
def test_an_input_schema_the_runtime_cannot_check_is_a_400_with_its_path(acme, schema, path, says):
    _, client = acme
    error = error_of(client.post("tools/", tool_body(inputSchema=schema)), 400)
    assert error["code"] == "invalid_input_schema"
    assert error["details"]["field"] == "inputSchema"
    assert error["details"]["path"] == path
    assert f"inputSchema at {path}: " in error["message"] and says in error["message"]
    assert not Tool.objects.exists()


def test_an_input_schema_beyond_64_kib_is_refused(acme):
    _, client = acme
    huge = {"type": "object", "description": "x" * 70_000}
    error = error_of(client.post("tools/", tool_body(inputSchema=huge)), 400)
    assert error["code"] == "invalid_input_schema" and "bytes" in error["message"]


# ---------------------------------------------------------------- credentials


def test_another_applications_tool_is_404_everywhere(acme, tenant):
    _, client = acme
    tool = register(client)
    _, other = tenant("Other")
    path = f"tools/{tool['id']}/"
    assert error_of(other.get(path), 404)["code"] == "not_found"
    assert error_of(other.patch(path, {"description": "mine"}), 404)["code"] == "not_found"
    assert error_of(other.delete(path), 404)["code"] == "not_found"
    assert other.get("tools/").json()["tools"] == []
    assert Tool.objects.get(pk=tool["id"]).description == "Weather forecast for a city."


def test_another_applications_tool_cannot_be_bound(acme, tenant):
    _, client = acme
    tool = register(client)
    _, other = tenant("Other")
    agent = other.post("agents/", {"name": "a"}).json()
    body = {**VERSION_BODY, "tools": [tool["id"]]}
    error = error_of(other.post(f"agents/{agent['id']}/versions/", body), 400)
    assert error["code"] == "cross_application_tool_forbidden"


def test_a_session_key_reaches_no_tool_endpoint(api_session):
    s = api_session()
    tool = register(s.app_client)
    host = s.client
    assert error_of(host.get("tools/"), 404)["code"] == "not_found"
    assert error_of(host.post("tools/", tool_body("other")), 404)["code"] == "not_found"
    assert error_of(host.get(f"tools/{tool['id']}/"), 404)["code"] == "not_found"
    assert error_of(host.patch(f"tools/{tool['id']}/", {"description": "x"}), 404)
    assert error_of(host.delete(f"tools/{tool['id']}/"), 404)["code"] == "not_found"
    assert Tool.objects.filter(application=s.app).count() == 1


def test_a_malformed_or_unknown_id_is_404(acme):
    _, client = acme
    assert error_of(client.get("tools/not-a-uuid/"), 404)["code"] == "not_found"
    missing = "00000000-0000-0000-0000-000000000000"
    assert error_of(client.delete(f"tools/{missing}/"), 404)["code"] == "not_found"


# ---------------------------------------------------------------- delete and change


def test_deleting_a_tool_bound_only_to_drafts_unbinds_it(acme):
    _, client = acme
    tool = register(client)
    kept = register(client, "kept")
    draft = draft_binding(client, [tool["id"], kept["id"]])
    response = client.delete(f"tools/{tool['id']}/")
    assert response.status_code == 204 and response.content == b""
    assert client.get(f"agent-versions/{draft['id']}/").json()["tools"] == [kept["id"]]
    assert error_of(client.get(f"tools/{tool['id']}/"), 404)["code"] == "not_found"


@pytest.mark.parametrize("archived", [False, True])
def test_deleting_a_tool_a_published_version_uses_is_a_409_listing_the_versions(acme, archived):
    _, client = acme
    tool = register(client)
    version = draft_binding(client, [tool["id"]])
    assert client.post(f"agent-versions/{version['id']}/publish/").status_code == 200
    if archived:
        assert client.post(f"agent-versions/{version['id']}/archive/").status_code == 200
    draft = client.post(f"agent-versions/{version['id']}/duplicate/").json()
    error = error_of(client.delete(f"tools/{tool['id']}/"), 409)
    assert error["code"] == "tool_in_use"
    status = "archived" if archived else "published"
    assert error["details"]["versions"] == [
        {
            "id": version["id"],
            "agentId": version["agentId"],
            "agent": "assistant",
            "number": 1,
            "status": status,
        }
    ]
    assert "assistant v1" in error["message"]
    # Nothing changed: the tool and both bindings stay.
    assert client.get(f"tools/{tool['id']}/").status_code == 200
    assert client.get(f"agent-versions/{version['id']}/").json()["tools"] == [tool["id"]]
    assert client.get(f"agent-versions/{draft['id']}/").json()["tools"] == [tool["id"]]


def test_a_tool_only_drafts_use_can_be_changed(acme):
    _, client = acme
    tool = register(client)
    draft_binding(client, [tool["id"]])
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    response = client.patch(
        f"tools/{tool['id']}/", {"name": "forecast", "description": "New.", "inputSchema": schema}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["description"], body["inputSchema"]) == ("forecast", "New.", schema)
    assert body["createdAt"] == tool["createdAt"]
    partial = client.patch(f"tools/{tool['id']}/", {"description": "Only this."}).json()
    assert (partial["name"], partial["description"]) == ("forecast", "Only this.")


def test_a_change_is_checked_like_a_registration_and_writes_nothing_when_refused(acme):
    _, client = acme
    tool = register(client)
    register(client, "taken")
    path = f"tools/{tool['id']}/"
    assert error_of(client.patch(path, {"name": "taken"}), 409)["code"] == "tool_name_taken"
    assert error_of(client.patch(path, {"name": "context_fold_create"}), 400)["code"] == (
        "tool_name_reserved"
    )
    error = error_of(client.patch(path, {"inputSchema": {"type": "object", "required": "x"}}), 400)
    assert (error["code"], error["details"]["path"]) == ("invalid_input_schema", "$.required")
    assert client.get(path).json() == tool


def test_a_tool_a_published_version_uses_cannot_change(acme):
    _, client = acme
    tool = register(client)
    version = draft_binding(client, [tool["id"]])
    client.post(f"agent-versions/{version['id']}/publish/")
    error = error_of(client.patch(f"tools/{tool['id']}/", {"description": "changed"}), 409)
    assert error["code"] == "tool_in_use"
    assert [v["id"] for v in error["details"]["versions"]] == [version["id"]]
    assert client.get(f"tools/{tool['id']}/").json() == tool


def test_a_bound_tool_reaches_the_models_view(acme):
    _, client = acme
    tool = register(client)
    version = draft_binding(client, [tool["id"]])
    assert client.post(f"agent-versions/{version['id']}/publish/").status_code == 200
    session = client.post("sessions/", {"agentVersionId": version["id"]}).json()
    host = KeyClient(session["sessionKey"])
    host.post(f"sessions/{session['id']}/inputs/", {"content": "weather in Oslo?"})
    view = host.post(f"sessions/{session['id']}/projection/", {"provider": "openai-chat"}).json()
    functions = {t["function"]["name"]: t["function"] for t in view["request"]["tools"]}
    assert functions["get_weather"]["parameters"] == WEATHER_SCHEMA
    assert functions["get_weather"]["description"] == "Weather forecast for a city."


# ---------------------------------------------------------------- concurrency (PostgreSQL)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("same_definition", [True, False])
def test_concurrent_registrations_of_one_name_create_one_tool(tenant, same_definition):
    # contract §11: the same definition registered at once by several deploys is one tool and
    # a 200 for every loser of the race; other definitions lose with 409 tool_name_taken.
    _, client = tenant("Racers")
    workers = 6
    barrier = threading.Barrier(workers)
    statuses, codes, errors = [], [], []

    def worker(n: int) -> None:
        try:
            body = tool_body("racy")
            if not same_definition:
                body = {**body, "description": f"variant {n}"}
            barrier.wait()
            response = client.post("tools/", body)
            statuses.append(response.status_code)
            if response.status_code >= 400:
                codes.append(response.json()["error"]["code"])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    loser = 200 if same_definition else 409
    assert sorted(statuses) == sorted([201] + [loser] * (workers - 1))
    assert codes == ([] if same_definition else ["tool_name_taken"] * (workers - 1))
    assert Tool.objects.filter(name="racy").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(3))
def test_a_delete_racing_a_publish_never_leaves_a_published_version_without_its_tool(
    tenant, attempt
):
    _, client = tenant(f"Race {attempt}")
    tool = register(client)
    version = draft_binding(client, [tool["id"]])
    barrier = threading.Barrier(2)
    answers: dict[str, int] = {}
    errors = []

    def run(label: str, call) -> None:
        try:
            barrier.wait()
            answers[label] = call().status_code
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(
            target=run,
            args=("publish", lambda: client.post(f"agent-versions/{version['id']}/publish/")),
        ),
        threading.Thread(
            target=run, args=("delete", lambda: client.delete(f"tools/{tool['id']}/"))
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert answers["publish"] == 200
    bound = client.get(f"agent-versions/{version['id']}/").json()["tools"]
    if answers["delete"] == 204:  # the delete went first: the version published without it
        assert bound == [] and not Tool.objects.filter(pk=tool["id"]).exists()
    else:  # the publish went first: the delete was refused and the tool stays bound
        assert answers["delete"] == 409
        assert bound == [tool["id"]] and Tool.objects.filter(pk=tool["id"]).exists()


# ---------------------------------------------------------------- idempotent registration


def test_registration_is_idempotent_for_the_same_definition(acme):
    # contract §11: a deploy that registers its tools every time gets the same tool back.
    _, client = acme
    first = client.post("tools/", tool_body())
    assert first.status_code == 201
    reordered = {**tool_body(), "inputSchema": dict(reversed(list(WEATHER_SCHEMA.items())))}
    again = client.post("tools/", reordered)
    assert again.status_code == 200, again.content
    assert again.json() == first.json()
    assert Tool.objects.filter(name="get_weather").count() == 1


def test_a_registration_with_the_default_description_matches_only_an_empty_one(acme):
    _, client = acme
    body = {"name": "ping", "inputSchema": {"type": "object"}}
    created = client.post("tools/", body).json()
    assert client.post("tools/", {**body, "description": ""}).json()["id"] == created["id"]
    error = error_of(client.post("tools/", {**body, "description": "Pings."}), 409)
    assert error["details"]["id"] == created["id"]


def test_tools_are_found_by_name(acme, tenant):
    _, client = acme
    for name in ("alpha", "bravo"):
        client.post("tools/", {"name": name, "inputSchema": {"type": "object"}})
    found = client.get("tools/", name="bravo").json()
    assert [t["name"] for t in found["tools"]] == ["bravo"] and found["nextCursor"] is None
    assert client.get("tools/", name="charlie").json() == {"tools": [], "nextCursor": None}
    # Another Application's tool of that name is not found.
    _, other = tenant("Other")
    assert other.get("tools/", name="alpha").json()["tools"] == []
