"""Everything under /api/ answers the one JSON error shape, crashes included (contract §12)."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError
from django.test import Client, RequestFactory

from contextproto.middleware import api_server_error
from sessions_app.api import views as apis


@pytest.mark.parametrize(
    "path", ["/api/v1/nope/", "/api/v1/sessions/x/y/z/", "/api/v2/sessions/", "/api/"]
)
def test_an_unrouted_api_path_is_a_json_404(db, path):
    response = Client().get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_found"


def test_outside_the_api_a_404_stays_html(db):
    response = Client().get("/nowhere/")
    assert response.status_code == 404
    assert "application/json" not in response["Content-Type"]


def test_a_crash_in_a_view_is_a_json_500_carrying_the_request_id(api_session, monkeypatch):
    s = api_session()

    def broken(**_kwargs):
        raise RuntimeError("a defect")

    monkeypatch.setattr(apis.lists, "session_get", broken)
    response = s.client.get(s.path())
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["code"] == "internal_error"
    assert body["error"]["details"]["requestId"] == response["X-Request-Id"]
    assert response["X-Request-Id"] in body["error"]["message"]


def test_a_callers_request_id_is_kept(api_session):
    s = api_session()
    response = s.client.client.get("/api/v1/" + s.path(), HTTP_X_REQUEST_ID="host-turn-0001")
    assert response["X-Request-Id"] == "host-turn-0001"
    odd = s.client.client.get("/api/v1/" + s.path(), HTTP_X_REQUEST_ID="<script>")
    assert odd["X-Request-Id"] != "<script>" and len(odd["X-Request-Id"]) == 32


def test_handler500_answers_json_under_the_api_and_html_elsewhere():
    api = api_server_error(RequestFactory().get("/api/v1/sessions/"))
    assert api.status_code == 500
    assert api["Content-Type"] == "application/json"
    assert json.loads(api.content)["error"]["code"] == "internal_error"
    page = api_server_error(RequestFactory().get("/admin/"))
    assert page.status_code == 500 and "application/json" not in page["Content-Type"]


def test_a_lost_database_connection_is_a_503_dependency_unavailable(api_session, monkeypatch):
    s = api_session()

    def unreachable(**_kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(apis.lists, "session_get", unreachable)
    response = s.client.get(s.path())
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "dependency_unavailable"
