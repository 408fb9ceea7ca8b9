"""MCP over HTTP, in process: the key gate and raw JSON bodies (issue 23, items 2 and 3).

The ASGI app of `mcp_http_app` (the one the production server mounts at /mcp/) is driven
with an HTTP client, so the requests cross the same JSON decoding and key check as in
production; tests/e2e/test_production_server.py repeats the key checks over uvicorn.
"""

from __future__ import annotations

import contextlib
import json
import time

import httpx2
import pytest
from django.conf import settings

from agents.models import ApiKey
from sessions_app.mcp_server import mcp_http_app
from sessions_app.models import Message, ToolReceipt
from tests.api.test_mcp import run

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "http://localhost"
# The last protocol version with a handshake (the SDK's legacy stateless transport, which
# decodes with pydantic) and the first without (its per-request entry, Python's json).
PROTOCOL_VERSIONS = ["2025-11-25", "2026-07-28"]


@contextlib.asynccontextmanager
async def served():
    """An HTTP client on a fresh MCP app with its lifespan (the SDK's session manager) up."""
    app = mcp_http_app(["localhost"], settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    inner = app.app
    async with inner.router.lifespan_context(inner):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE, timeout=5) as http:
            yield http


def headers(key: str | None, version: str = PROTOCOL_VERSIONS[0]) -> dict[str, str]:
    found = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }
    if key is not None:
        found["Authorization"] = f"Bearer {key}"
    return found


def request(method: str, path: str = "/mcp/", **kwargs) -> tuple[int, dict, dict, float]:
    """(status, headers, JSON body, seconds) of one request to a fresh app."""

    async def send():
        async with served() as http:
            started = time.monotonic()
            response = await http.request(method, path, **kwargs)
            took = time.monotonic() - started
            body = json.loads(response.content) if response.content else {}
            return response.status_code, dict(response.headers), body, took

    return run(send())


def call_body(
    version: str, tool: str, arguments: dict, meta: dict, literal: str | None = None
) -> str:
    """A tools/call request as JSON text; the string "LITERAL" becomes `literal`, unquoted."""
    if version >= "2026":
        # The per-request protocol carries in _meta what a handshake used to settle.
        meta = {
            **meta,
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    return text if literal is None else text.replace('"LITERAL"', literal)


def tool_result(status: int, body: dict) -> dict:
    assert status == 200, body
    return body["result"]["structuredContent"]


# ---------------------------------------------------------------- the key gate (issue 23.3)


@pytest.mark.parametrize("method", ["POST", "GET"])
@pytest.mark.parametrize(
    ("authorization", "challenge"),
    [
        (None, 'Bearer realm="mcp"'),
        ("Basic dXNlcjpwYXNz", 'Bearer realm="mcp"'),
        ("Bearer", 'Bearer realm="mcp"'),
        ("Bearer not-a-key", 'error="invalid_token"'),
    ],
)
def test_no_key_another_scheme_or_an_unknown_key_is_a_401_with_a_bearer_challenge(
    db, method, authorization, challenge
):
    sent = headers(None)
    if authorization is not None:
        sent["Authorization"] = authorization
    body = call_body(PROTOCOL_VERSIONS[0], "context_task_memory_get", {"purpose": "p"}, {})
    status, answer_headers, answer, took = request(
        method, content=body if method == "POST" else None, headers=sent
    )
    assert status == 401
    assert answer_headers["www-authenticate"].startswith("Bearer ")
    assert challenge in answer_headers["www-authenticate"]
    assert answer["error"]["code"] == "not_authenticated"
    assert "Bearer" in answer["error"]["message"]
    assert took < 2


def test_a_revoked_key_is_a_401(tenant):
    app, client = tenant()
    ApiKey.objects.filter(application=app).update(revoked_at="2020-01-01T00:00:00Z")
    body = '{"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {}}'
    status, answer_headers, _answer, _took = request(
        "POST", content=body, headers=headers(client.key)
    )
    assert status == 401
    assert 'error="invalid_token"' in answer_headers["www-authenticate"]


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
def test_an_authenticated_get_is_a_405_at_once_instead_of_an_open_stream(api_session, version):
    s = api_session(version=2)
    sent = {**headers(s.client.key, version), "Accept": "text/event-stream"}
    status, answer_headers, answer, took = request("GET", headers=sent)
    assert (status, answer_headers["allow"]) == (405, "POST")
    assert answer["error"]["code"] == "method_not_allowed"
    assert took < 2


def test_keys_still_see_what_they_may_over_http(api_session):
    s = api_session(version=2)
    listing = '{"jsonrpc": "2.0", "id": 1, "method": "METHOD", "params": {}}'

    def listed(key: str, method: str, field: str) -> list:
        body = listing.replace("METHOD", method)
        status, _headers, answer, _took = request("POST", content=body, headers=headers(key))
        assert status == 200, answer
        return answer["result"][field]

    assert listed(s.app_client.key, "tools/list", "tools") == []
    assert any(
        r["uri"] == "contextproto://catalog"
        for r in listed(s.app_client.key, "resources/list", "resources")
    )
    assert {p["name"] for p in listed(s.app_client.key, "prompts/list", "prompts")} >= {"unified@2"}
    tools = {t["name"] for t in listed(s.client.key, "tools/list", "tools")}
    assert "context_task_memory_set" in tools


# ---------------------------------------------------------------- raw JSON (issue 23.2)


def deep_text(levels: int) -> str:
    return "[" * levels + '"x"' + "]" * levels


STORABILITY = [
    # (where the literal goes, the literal as JSON text, code, field)
    ("arguments", "1e999", "non_finite_number", "arguments.memory"),
    ("arguments", "-1e999", "non_finite_number", "arguments.memory"),
    ("arguments", "NaN", "non_finite_number", "arguments.memory"),
    ("arguments", '"a\\u0000b"', "unsupported_character", "arguments.memory"),
    ("arguments", deep_text(80), "body_too_deep", "arguments.memory" + "[0]" * 62),
    ("toolCallId", "1e999", "non_finite_number", "_meta.toolCallId"),
    ("toolCallId", "Infinity", "non_finite_number", "_meta.toolCallId"),
    ("toolCallId", '"id\\u0000"', "unsupported_character", "_meta.toolCallId"),
    ("toolCallId", deep_text(80), "body_too_deep", "_meta.toolCallId" + "[0]" * 62),
    ("stateRevision", "1e999", "non_finite_number", "_meta.stateRevision"),
    ("stateRevision", "-Infinity", "non_finite_number", "_meta.stateRevision"),
    ("stateRevision", deep_text(80), "body_too_deep", "_meta.stateRevision" + "[0]" * 62),
]


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
@pytest.mark.parametrize(("where", "literal", "code", "field"), STORABILITY)
def test_unstorable_json_in_a_call_is_a_tool_error_and_never_reaches_the_database(
    api_session, version, where, literal, code, field
):
    s = api_session(version=2)
    s.input("start")
    before = s.client.get(s.path()).json()["lastIndex"]
    arguments = {"purpose": "p", "memory": "LITERAL" if where == "arguments" else "m"}
    meta = {"toolCallId": "LITERAL" if where == "toolCallId" else "raw-1"}
    if where == "stateRevision":
        meta["stateRevision"] = "LITERAL"
    body = call_body(version, "context_task_memory_set", arguments, meta, literal)
    # The per-request protocol also routes by headers that repeat the method and tool.
    sent = {**headers(s.client.key, version), "Mcp-Method": "tools/call"}
    sent["Mcp-Name"] = "context_task_memory_set"
    status, _headers, answer, _took = request("POST", content=body, headers=sent)
    result = tool_result(status, answer)
    assert result["success"] is False
    assert (result["error"]["code"], result["error"]["field"]) == (code, field)
    assert s.client.get(s.path()).json()["lastIndex"] == before
    assert not ToolReceipt.objects.filter(session_id=s.id).exists()
    assert not Message.objects.filter(session_id=s.id, kind="tool_call").exists()
