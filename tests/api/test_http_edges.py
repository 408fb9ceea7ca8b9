"""Requests Django refuses before any view runs still get the API's answers (issue 23, 8 and 11).

A Host header outside ALLOWED_HOSTS got Django's HTML 400; a POST without its trailing slash
a 301 HTML redirect that the client follows as a GET, without the body. The same over the
production server: tests/e2e/test_production_limits.py.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import DisallowedHost, RequestDataTooBig, SuspiciousOperation
from django.test import Client

from agents.models import Agent
from contextproto.middleware import api_bad_request


def test_a_wrong_host_under_api_is_the_json_error(db):
    response = Client().get("/api/v1/health/live/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "host_not_allowed"
    assert "'evil.example'" in error["message"] and error["details"] == {"field": "Host"}
    assert response.json()["status"] == 400
    assert response["X-Request-Id"]


def test_a_wrong_host_outside_the_api_keeps_djangos_page(db):
    response = Client().get("/admin/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_hostile_host_header_is_shown_escaped(db):
    response = Client().get("/api/v1/health/", HTTP_HOST="ev\u00efl.example:99999")
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "\\xef" in message and "\u00ef" not in message


def test_handler400_answers_json_under_the_api(rf):
    request = rf.get("/api/v1/agents/", HTTP_HOST="127.0.0.1")
    cases = [
        (DisallowedHost("x"), 400, "host_not_allowed"),
        (RequestDataTooBig("x"), 413, "request_too_large"),
        (SuspiciousOperation("x"), 400, "invalid_request"),
    ]
    for exception, status, code in cases:
        response = api_bad_request(request, exception)
        assert response.status_code == status
        assert response["Content-Type"] == "application/json"
        assert code in response.content.decode()


def test_a_post_without_its_trailing_slash_is_served_with_its_body(tenant):
    app, client = tenant()
    response = client.client.post("/api/v1/agents", {"name": "no-slash"}, format="json")
    assert response.status_code == 201, response.content
    assert Agent.objects.get(application=app, id=response.json()["id"]).name == "no-slash"


def test_every_method_on_an_api_path_without_its_slash_is_routed(api_session):
    s = api_session()
    base = f"/api/v1/sessions/{s.id}"
    assert s.client.client.get(base).status_code == 200
    written = s.client.client.post(f"{base}/inputs", {"content": "hi"}, format="json")
    assert written.status_code == 201, written.content
    messages = s.client.client.get(f"{base}/messages", {"limit": 5}).json()["messages"]
    assert [m["content"] for m in messages] == ["hi"]
    # A method the endpoint lacks is its 405, not a redirect.
    refused = s.client.client.delete(f"{base}/inputs")
    assert refused.status_code == 405
    assert refused.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/api/v1/nothing-here", "/api/v1/sessions", "/api/v1"])
def test_an_api_path_with_no_endpoint_either_way_is_the_json_404(db, path):
    response = Client().post(path, {}, content_type="application/json")
    if path == "/api/v1/sessions":  # an endpoint: 401 without a key, not a redirect
        assert response.status_code == 401
        return
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
