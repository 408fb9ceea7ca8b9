"""Schemathesis over what the OpenAPI schema cannot describe: tool-call arguments and cursors.

Tool arguments are free JSON on `POST messages/` and only meet their schema at dispatch; list
cursors are opaque strings. A small WSGI front (in this test only) publishes one operation per
protocol tool, whose body is that tool's input schema, and one per list endpoint, whose query
`cursor` is any JSON object. Each generated case is carried through the real API as a host
would: fresh projection → tool_call written with those arguments → dispatch; or the JSON
object base64-encoded as the cursor. Schemathesis generates schema-valid and schema-violating
values; the front answers the worst status the real API gave, and no case may see a 5xx.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from urllib.parse import parse_qs

import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from contextproto.protocol import catalog

PROTOCOL = catalog.get_version("unified", 2)
LIST_ENDPOINTS = ("windows", "folds", "snapshots", "kv")


def fuzz_document() -> dict:
    paths: dict = {}
    for name, tool in sorted(PROTOCOL.tools.items()):
        paths[f"/fuzz/tools/{name}"] = {
            "post": {
                "operationId": f"fuzz_{name}",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": tool["inputSchema"]}},
                },
                "responses": {"200": {"description": "receipt"}},
            }
        }
    for endpoint in LIST_ENDPOINTS:
        paths[f"/fuzz/cursor/{endpoint}"] = {
            "get": {
                "operationId": f"fuzz_cursor_{endpoint}",
                "parameters": [
                    {
                        "name": "cursor",
                        "in": "query",
                        "required": True,
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                ],
                "responses": {"200": {"description": "page"}, "400": {"description": "refused"}},
            }
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": "tool arguments and cursors", "version": "1"},
        "paths": paths,
    }


class ToolFront:
    """WSGI app: the fuzz document, and each case replayed through the real API."""

    def __init__(self) -> None:
        self.session: dict | None = None
        self.ids = itertools.count(1)

    def __call__(self, environ, start_response):
        path = environ["PATH_INFO"]
        if environ["REQUEST_METHOD"] not in ("GET", "POST"):
            return self._reply(start_response, 405, {"error": "method"})
        if path == "/fuzz/openapi.json":
            return self._reply(start_response, 200, fuzz_document())
        if path.startswith("/fuzz/tools/"):
            size = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(size) if size else b""
            status, body = self._tool_case(path.rsplit("/", 1)[1], raw)
            return self._reply(start_response, status, body)
        if path.startswith("/fuzz/cursor/"):
            raw = parse_qs(environ.get("QUERY_STRING", "")).get("cursor", [""])[0]
            status, body = self._cursor_case(path.rsplit("/", 1)[1], raw)
            return self._reply(start_response, status, body)
        return self._reply(start_response, 404, {"error": "unknown fuzz route"})

    @staticmethod
    def _reply(start_response, status: int, body: object):
        start_response(f"{status} X", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    def _client(self) -> tuple[Client, str]:
        assert self.session is not None
        return (
            Client(HTTP_AUTHORIZATION=f"Bearer {self.session['sessionKey']}"),
            f"/api/v1/sessions/{self.session['id']}/",
        )

    def _tool_case(self, tool: str, raw: bytes) -> tuple[int, dict]:
        client, base = self._client()
        view = client.post(base + "projection/", {}, content_type="application/json")
        if view.status_code >= 500:
            return view.status_code, {"step": "projection"}
        assert view.status_code == 201, view.content  # every earlier call was answered
        try:
            arguments = json.loads(raw) if raw else None
        except ValueError:
            return 400, {"step": "body"}
        call_id = f"fuzz_{next(self.ids)}"
        written = client.post(
            base + "messages/",
            {
                "role": "assistant",
                "kind": "tool_call",
                "content": "",
                "toolCallId": call_id,
                "toolName": tool,
                "arguments": arguments,
                "snapshotId": view.json()["snapshotId"],
            },
            content_type="application/json",
        )
        if written.status_code != 201:
            return written.status_code, {"step": "write", "body": written.json()}
        receipt = client.post(
            base + f"tool-calls/{call_id}/dispatch/", {}, content_type="application/json"
        )
        # Once the call is in the log, it must get its receipt: an open call blocks the session.
        assert receipt.status_code == 200, receipt.content
        return receipt.status_code, {"step": "dispatch", "receipt": receipt.json()}

    def _cursor_case(self, endpoint: str, raw: str) -> tuple[int, dict]:
        client, base = self._client()
        try:
            value = json.loads(raw)
        except ValueError:
            return 400, {"step": "query"}
        cursor = base64.urlsafe_b64encode(json.dumps(value).encode()).decode()
        page = client.get(base + f"{endpoint}/", {"cursor": cursor, "limit": 1})
        return page.status_code, {"step": "list"}


front = ToolFront()
schema = schemathesis.openapi.from_wsgi("/fuzz/openapi.json", front)


@pytest.fixture
def host_session(api_session):
    handle = api_session(version=2)
    handle.input("hello")
    created = handle.app_client.post(
        "sessions/", {"agentVersionId": str(handle.agent_version.id), "inputs": {}}
    ).json()
    front.session = created
    Client(HTTP_AUTHORIZATION=f"Bearer {created['sessionKey']}").post(
        f"/api/v1/sessions/{created['id']}/inputs/",
        {"content": "start"},
        content_type="application/json",
    )
    yield created
    front.session = None


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "15")),
    derandomize=os.environ.get("FUZZ_RANDOM") != "1",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_tool_argument_or_cursor_answers_5xx(case, host_session):
    case.call_and_validate(checks=[not_a_server_error])


def test_the_fuzz_front_covers_every_protocol_tool():
    operations = {
        result.ok().label for result in schema.get_all_operations() if result.ok() is not None
    }
    assert {f"POST /fuzz/tools/{name}" for name in PROTOCOL.tools} <= operations
