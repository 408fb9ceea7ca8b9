"""The OpenAPI schema declares the bearer scheme, every query parameter and unique ids."""

from __future__ import annotations

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from contextproto.errors import ERRORS

# The query parameters each operation reads (request.query_params in its view).
QUERY_PARAMETERS = {
    ("get", "/api/v1/sessions/{session_id}/messages/"): {"window", "afterIndex", "limit"},
    ("get", "/api/v1/sessions/{session_id}/windows/"): {"cursor", "limit"},
    ("get", "/api/v1/sessions/{session_id}/folds/"): {"cursor", "limit"},
    ("get", "/api/v1/sessions/{session_id}/snapshots/"): {"cursor", "limit"},
    ("get", "/api/v1/sessions/{session_id}/kv/"): {"cursor", "limit", "prefix", "revision"},
    ("get", "/api/v1/api-keys/"): {"cursor", "limit"},
    ("get", "/api/v1/tools/"): {"cursor", "limit", "name"},
}
# Answer without a credential.
PUBLIC = {
    ("get", "/api/v1/health/"),
    ("get", "/api/v1/health/live/"),
    ("get", "/api/v1/health/ready/"),
}


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_the_bearer_scheme_is_declared_and_required_everywhere_but_health(schema):
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for method, path, operation in operations(schema):
        expected = None if (method, path) in PUBLIC else [{"bearerAuth": []}]
        assert operation.get("security") == expected, (method, path)


def test_every_query_parameter_is_declared_where_it_is_read(schema):
    for method, path, operation in operations(schema):
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert declared == QUERY_PARAMETERS.get((method, path), set()), (method, path)


def test_operation_ids_are_unique_and_not_numbered(schema):
    ids = Counter(operation["operationId"] for _, _, operation in operations(schema))
    assert [name for name, count in ids.items() if count > 1] == []
    # contract §12: ids say what the operation does (they were drf-spectacular's path-derived
    # `protocols_list`, `protocols_retrieve`, `agents_retrieve` for a list, …).
    assert "protocol_list" in ids and "protocol_get" in ids and "agent_list" in ids


def test_schema_generation_warns_about_nothing():
    # --fail-on-warn turns any drf-spectacular warning (duplicate ids or component names,
    # an unresolved authenticator) into an error; --validate checks the OpenAPI document.
    call_command(
        "spectacular", "--fail-on-warn", "--validate", "--file", "/dev/null", stderr=StringIO()
    )


def test_every_operation_lists_its_error_codes_per_status(schema):
    for method, path, operation in operations(schema):
        refusals = {
            status: response["x-error-codes"]
            for status, response in operation["responses"].items()
            if "x-error-codes" in response
        }
        assert "4XX" not in operation["responses"], (method, path)
        assert refusals, (method, path)
        for status, codes in refusals.items():
            assert {ERRORS[code].status for code in codes} == {int(status)}, (path, status)
    dispatch = schema["paths"]["/api/v1/sessions/{session_id}/tool-calls/{tool_call_id}/dispatch/"]
    responses = dispatch["post"]["responses"]
    assert "not_a_protocol_tool" in responses["400"]["x-error-codes"]
    assert responses["404"]["x-error-codes"] == ["not_found"]
    # Tool-result codes arrive in a 200 receipt: no operation answers them as an HTTP error.
    answered = {
        code
        for _, _, operation in operations(schema)
        for response in operation["responses"].values()
        for code in response.get("x-error-codes", ())
    }
    assert "context_state_stale" not in answered and "invalid_arguments" not in answered


def test_role_kind_provider_and_error_codes_are_enums(schema):
    components = schema["components"]["schemas"]

    def enum_of(component: str, field: str) -> str:
        # A described enum field is `allOf: [{$ref}]` beside its description, a nullable one
        # `oneOf: [{$ref}, NullEnum]`.
        node = components[component]["properties"][field]
        refs = [node, *node.get("allOf", ()), *node.get("oneOf", ())]
        names = [n["$ref"].rsplit("/", 1)[1] for n in refs if "$ref" in n]
        return next(name for name in names if name != "NullEnum")

    assert enum_of("Message", "role") == "MessageRole"
    assert enum_of("Message", "kind") == "MessageKind"
    assert enum_of("ProjectionMessage", "kind") == "ViewMessageKind"
    assert enum_of("Snapshot", "provider") == "WireFormat"
    assert enum_of("ModelSettings", "provider") == "ModelProvider"
    assert enum_of("ErrorDetail", "code") == "ErrorCode"
    assert enum_of("ToolError", "code") == "ToolResultCode"
    assert "openai-chat" in components["WireFormat"]["enum"]
    assert "external" in components["ModelProvider"]["enum"]
    assert "context_state_stale" in components["ToolResultCode"]["enum"]
    assert "context_state_stale" not in components["ErrorCode"]["enum"]


def test_descriptions_carry_no_internal_notes(schema):
    # A base class's docstring ("Refuse unknown keys instead of dropping them silently
    # (DRF's default)") once showed on every input model; spec section numbers and source
    # paths are for the repository, not for API users.
    found = []

    def walk(node, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "description" and isinstance(value, str):
                    for needle in ("SPEC", "DRF", "docs/", ".py", "Refuse unknown keys"):
                        if needle in value:
                            found.append((where, needle))
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    walk(schema["paths"], "paths")
    walk(schema["components"], "components")
    assert found == []
