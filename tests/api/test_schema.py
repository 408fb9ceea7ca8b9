"""The OpenAPI schema declares the bearer scheme, every query parameter and unique ids."""

from __future__ import annotations

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

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
    assert "protocols_list" in ids and "protocols_retrieve" in ids


def test_schema_generation_warns_about_nothing():
    # --fail-on-warn turns any drf-spectacular warning (duplicate ids or component names,
    # an unresolved authenticator) into an error; --validate checks the OpenAPI document.
    call_command(
        "spectacular", "--fail-on-warn", "--validate", "--file", "/dev/null", stderr=StringIO()
    )
